"""Exercise p12_predict_stream: predict first, then measure: the time of p12's weight stream (step
``small_batch_stream``) at one row, in ms, from the facts ``exercises.given`` prints (W's bytes, the FLOPs,
the copy bandwidth of the same run, the datasheet rates)."""

from __future__ import annotations

import math

import torch

from fusedkit import present, records, results
from fusedkit.ceilings import COPY_BYTES
from fusedkit.exercises._predict import Fact, Model, Outcome, PredictionExercise
from fusedkit.hardware import GpuSpec, detect_gpu, match_device_name
from fusedkit.harness import measure
from fusedkit.device import time_copy
from fusedkit.problems import fmt_sizes
from fusedkit.problems import get as get_problem

SLUG, ROWS, BAND = "small_batch_stream", 1, 1.5
"""✓ within BAND of the measured time: bytes over a rate is a floor, which a stream approaches."""
FP32_BYTES = torch.finfo(torch.float32).bits // 8
P12 = get_problem("p12")
SIZES = P12.sizes(batch_size=ROWS)
STEP = P12.variant(SLUG).number


def facts_for(copy_gbps: float, copy_source: str, spec: GpuSpec) -> dict[str, Fact]:
    """W's bytes and the FLOPs (counted), the copy bandwidth (from ``copy_source``), ``spec``'s rates."""
    n, k = SIZES["out_features"], SIZES["in_features"]
    w_bytes, counted, sheet = n * k * FP32_BYTES, "counted from the sizes", f"{spec.name} datasheet"
    return dict(
        weight_bytes=Fact(f"W, {n} x {k} fp32 ({FP32_BYTES} bytes a weight), read once per call",
                          w_bytes / 1e6, "MB", counted),
        other_bytes=Fact("x, b and y together", (P12.min_bytes(SIZES) - w_bytes) / 1e3, "kB", counted),
        flops=Fact(f"FLOPs of one call at {ROWS} row (2 per weight)", P12.flops(SIZES) / 1e9, "GFLOP", counted),
        default_flops=Fact(f"FLOPs of one call at KernelBench's {P12.defaults['batch_size']} rows",
                           P12.flops(P12.defaults) / 1e9, "GFLOP", counted),
        copy_gbps=Fact("copy bandwidth: a device-to-device copy, bytes read plus bytes written", copy_gbps,
                       "GB/s", copy_source),
        mem_gbps=Fact("memory bandwidth", spec.mem_gbps, "GB/s", sheet),
        fp32_tflops=Fact("FP32 rate (CUDA cores)", spec.fp32_tflops, "TFLOP/s", sheet))


def predict(facts: dict[str, Fact]) -> float:
    """The worked prediction, in ms. At 1 row each weight is used once, 2 FLOPs for its 4 bytes:
    far below the ridge point, so the step is bound by reading W once, and a copy shows the
    rate memory gives a kernel that streams."""
    weight_bytes = facts["weight_bytes"].value * 1e6     # MB -> bytes
    copy_rate = facts["copy_gbps"].value * 1e9            # GB/s -> bytes per second
    return weight_bytes / copy_rate * 1e3                 # seconds -> ms


class PredictStream(PredictionExercise):
    name, problem_key, notebook, answer = "p12_predict_stream", "p12", "04", "predicted_ms"
    solution = staticmethod(predict)
    prompt = (f"Predict first: how long does step {STEP}, {SLUG}, take at {ROWS} row of p12?",
              "The cell above printed what you may use (exercises.given): W's bytes, the FLOPs, the rates.")
    todo = "your prediction in milliseconds, a number"
    quantity, unit, band = f"the time of step {STEP} ({SLUG}) at {ROWS} row of p12", "ms", BAND
    fallback_hint = (f"at {ROWS} row each weight is used once: count W's bytes and divide by the copy "
                     "rate (exercises.given prints both)")
    about_text = (f"Settled by measuring step {STEP} ({SLUG}) at {'x'.join(map(str, SIZES.values()))} "
                  "through fusedkit.harness on a GPU, or, without one, by its newest record in "
                  f"data/records.csv; ✓ within {BAND:g}x.")

    def models(self, out: Outcome) -> list[Model]:
        f = out.facts
        w, copy, mem = f["weight_bytes"].value * 1e6, f["copy_gbps"].value * 1e9, f["mem_gbps"].value * 1e9
        fp32, right = f["fp32_tflops"].value * 1e12, predict(f)
        fp32_only = f"W is fp32: {FP32_BYTES} bytes a weight, {present.mb(w / 1e6)} MB to read"
        return [
            Model("W's fp32 bytes over the measured copy rate", right, True),
            Model("W's fp32 bytes over the datasheet bandwidth", w / mem * 1e3, True),
            Model("W counted at 2 bytes a weight (fp16) over the copy rate", w / 2 / copy * 1e3, False, fp32_only),
            Model("W counted at 1 byte a weight over the copy rate", w / FP32_BYTES / copy * 1e3, False, fp32_only),
            Model("W's bytes counted twice (read and written) over the copy rate", 2 * w / copy * 1e3, False,
                  "the copy rate already counts bytes read plus bytes written; the stream only reads W, "
                  "once: W's bytes over that rate"),
            Model(f"the FLOPs of {ROWS} row at the FP32 rate", f["flops"].value * 1e9 / fp32 * 1e3, False,
                  f"at {ROWS} row each weight does 2 FLOPs for its {FP32_BYTES} bytes, {2 / FP32_BYTES:g} "
                  f"FLOP per byte, far below the FP32 ridge point ({fp32 / mem:.0f} FLOP per "
                  "byte): the time is W's bytes over memory's rate, not the FLOPs"),
            Model("the FLOP time of KernelBench's full batch at the FP32 rate",
                  f["default_flops"].value * 1e9 / fp32 * 1e3, False,
                  f"that is the full batch; at {ROWS} row the FLOPs shrink with the rows, W's bytes do not"),
            Model("the bytes-over-copy-rate time written in µs", right * 1e3, False,
                  "the check takes milliseconds: your number looks like microseconds"),
            Model("the bytes-over-copy-rate time written in seconds", right / 1e3, False,
                  "the check takes milliseconds: your number looks like seconds"),
        ]

    def settle(self, device: torch.device) -> Outcome:
        """The step's time at 1 row and the copy rate: measured now on a GPU, else its newest
        record at 1 row and the copy rate of that same run."""
        if device.type == "cuda":
            label = f"measured now on {torch.cuda.get_device_name(device)}"
            copy = 2 * COPY_BYTES / (time_copy(2 * COPY_BYTES, device).median_ms * 1e6)
            m, facts = measure(P12, SLUG, SIZES, device=device), facts_for(copy, label, detect_gpu().spec)
            return Outcome(m.timing.median_ms if m.timed else math.nan, label, facts, m,
                           "" if m.timed else f"the step itself failed on this GPU: {m.failure}")
        run = results.same_run(P12, ["eager", SLUG], SIZES, device="")
        if run.empty:
            return Outcome(math.nan, "", facts_for(math.nan, "no record", detect_gpu().spec),
                           error=f"no recorded run of {SLUG} at {fmt_sizes(SIZES)} in {records.default_path()}")
        row = run[run["variant"] == SLUG].iloc[0]
        spec = match_device_name(str(row["device"])) or detect_gpu().spec
        label, copy = f"recorded: {results.run_label(row)}", results.run_ceilings(run).get("copy_gbps", math.nan)
        return Outcome(float(row["median_ms"]), label, facts_for(copy, f"{label}, the same run", spec), None,
                       "" if math.isfinite(copy) else f"the run that recorded {SLUG} recorded no copy bandwidth")

    def remark(self, out: Outcome) -> str:
        rate = out.facts["weight_bytes"].value * 1e6 / (out.value * 1e-3) / 1e9
        return (f"The step reads W at {present.gbps(rate)} GB/s, "
                f"{present.share(rate / out.facts['copy_gbps'].value)} of the copy rate.")


EXERCISE = PredictStream()
