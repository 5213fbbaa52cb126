"""Exercise p12_predict_stream: predict first, then measure: p12's weight stream at one row.

At 1 row, ``y = x @ W.T`` is a matrix-vector product: each weight of W is used once, for 2
FLOPs per 4 bytes, far below any GPU's ridge point, so a kernel that does it well (step
``small_batch_stream``) takes about as long as reading W once at the rate memory gives a
stream. The learner writes a prediction in ms from the facts :meth:`given` prints (W's
bytes, the FLOPs, the copy bandwidth measured in the same run, the datasheet rates); the
check measures the step through :func:`fusedkit.measure.measure` on a GPU, or reads its
newest record at 1 row from ``data/records.csv`` (labelled recorded, with device and date),
prints how far off the prediction was and which model the number matches.
"""

from __future__ import annotations

import math

import torch

from fusedkit import bench, present, records, results
from fusedkit.exercises._predict import (Fact, Model, Outcome, PredictionExercise, skeleton_text,
                                         times_phrase)
from fusedkit.hardware import GpuSpec, detect_gpu, match_device_name
from fusedkit.measure import measure
from fusedkit.problems import fmt_sizes
from fusedkit.problems import get as get_problem
from fusedkit.roofline import ridge_point

SLUG = "small_batch_stream"
ROWS = 1
BAND = 1.5
"""✓ when the measured time is within this factor of the prediction: bytes over a rate is a
floor, which a streaming kernel approaches but does not reach."""
FP32_BYTES = torch.finfo(torch.float32).bits // 8


def _sizes() -> dict[str, int]:
    return get_problem("p12").sizes(batch_size=ROWS)


def facts_for(copy_gbps: float, copy_source: str, spec: GpuSpec) -> dict[str, Fact]:
    """The numbers a prediction may use: W's bytes, the FLOPs (counted from the sizes), the
    copy bandwidth (measured, from ``copy_source``) and ``spec``'s datasheet rates."""
    p12, sizes = get_problem("p12"), _sizes()
    n, k = sizes["out_features"], sizes["in_features"]
    w_bytes = n * k * FP32_BYTES
    return {
        "weight_bytes": Fact(f"W, {n} x {k} fp32 ({FP32_BYTES} bytes a weight), read once per call",
                             w_bytes / 1e6, "MB", "counted from the sizes", present.mb(w_bytes / 1e6)),
        "other_bytes": Fact("x, b and y together", (p12.min_bytes(sizes) - w_bytes) / 1e3, "kB",
                            "counted from the sizes", present.mb((p12.min_bytes(sizes) - w_bytes) / 1e3)),
        "flops": Fact(f"FLOPs of one call at {ROWS} row (2 per weight)", p12.flops(sizes) / 1e9,
                      "GFLOP", "counted from the sizes"),
        "default_flops": Fact(f"FLOPs of one call at KernelBench's {p12.defaults['batch_size']} rows",
                              p12.flops(p12.defaults) / 1e9, "GFLOP", "counted from the sizes"),
        "copy_gbps": Fact("copy bandwidth: a device-to-device copy, bytes read plus bytes written",
                          copy_gbps, "GB/s", copy_source, present.gbps(copy_gbps)),
        "mem_gbps": Fact("memory bandwidth", spec.mem_gbps, "GB/s", f"{spec.name} datasheet",
                         present.gbps(spec.mem_gbps)),
        "fp32_tflops": Fact("FP32 rate (CUDA cores)", spec.fp32_tflops, "TFLOP/s",
                            f"{spec.name} datasheet", present.tflops(spec.fp32_tflops)),
    }


def predict(facts: dict[str, Fact]) -> float:
    """The worked prediction, in ms. At 1 row each weight is used once, 2 FLOPs for its 4 bytes:
    far below the ridge point, so the step is bound by reading W once, and a copy shows the
    rate memory gives a kernel that streams."""
    weight_bytes = facts["weight_bytes"].value * 1e6     # MB -> bytes
    copy_rate = facts["copy_gbps"].value * 1e9            # GB/s -> bytes per second
    return weight_bytes / copy_rate * 1e3                 # seconds -> ms


def models(out: Outcome) -> list[Model]:
    """Ways of predicting the step's time, each from the facts: two right, the rest what a
    prediction typically forgets."""
    f = out.facts
    w, copy, mem = f["weight_bytes"].value * 1e6, f["copy_gbps"].value * 1e9, f["mem_gbps"].value * 1e9
    fp32 = f["fp32_tflops"].value * 1e12
    right = predict(f)
    mb = present.mb(w / 1e6)
    spec_ridge = out.detail.get("ridge", math.nan)
    return [
        Model("W's fp32 bytes over the measured copy rate", right, True),
        Model("W's fp32 bytes over the datasheet bandwidth", w / mem * 1e3, True),
        Model("W counted at 2 bytes a weight (fp16) over the copy rate", w / 2 / copy * 1e3, False,
              f"W is fp32: {FP32_BYTES} bytes a weight, {mb} MB to read"),
        Model("W counted at 1 byte a weight over the copy rate", w / FP32_BYTES / copy * 1e3, False,
              f"W is fp32: {FP32_BYTES} bytes a weight, {mb} MB to read"),
        Model("W's bytes counted twice (read and written) over the copy rate", 2 * w / copy * 1e3, False,
              "the copy rate already counts bytes read plus bytes written; the stream only reads W, "
              "once: W's bytes over that rate"),
        Model(f"the FLOPs of {ROWS} row at the FP32 rate", f["flops"].value * 1e9 / fp32 * 1e3, False,
              f"at {ROWS} row each weight does 2 FLOPs for its {FP32_BYTES} bytes, {2 / FP32_BYTES:g} "
              f"FLOP per byte, far below the FP32 ridge point ({spec_ridge:.0f} FLOP per byte): the "
              "time is W's bytes over memory's rate, not the FLOPs"),
        Model("the FLOP time of KernelBench's full batch at the FP32 rate",
              f["default_flops"].value * 1e9 / fp32 * 1e3, False,
              f"that is the full batch; at {ROWS} row the FLOPs shrink with the rows, W's bytes do not"),
        Model("the bytes-over-copy-rate time written in µs", right * 1e3, False,
              "the check takes milliseconds: your number looks like microseconds"),
        Model("the bytes-over-copy-rate time written in seconds", right / 1e3, False,
              "the check takes milliseconds: your number looks like seconds"),
    ]


def settle(device: torch.device) -> Outcome:
    """The step's time at 1 row: measured now on a GPU (with the copy rate), else its newest
    record at 1 row and the copy rate of that same run."""
    p12, sizes = get_problem("p12"), _sizes()
    if device.type == "cuda":
        spec = detect_gpu().spec
        name = torch.cuda.get_device_name(device)
        copy = bench.copy_bandwidth_gbps(device=device)
        facts = facts_for(copy, f"measured now on {name}", spec)
        m = measure(p12, SLUG, sizes, device=device)
        detail = {"ridge": ridge_point(spec, "fp32")}
        if not m.timed:
            return Outcome(math.nan, f"measured now on {name}", facts, m,
                           error=f"the step itself failed on this GPU: {m.failure}", detail=detail)
        return Outcome(m.timing.median_ms, f"measured now on {name}", facts, m, detail=detail)
    run = results.latest_run(p12, sizes, having=(SLUG,), newest=True)
    spec = detect_gpu().spec
    if run.empty:
        return Outcome(math.nan, "", facts_for(math.nan, "no record", spec),
                       detail={"ridge": ridge_point(spec, "fp32")},
                       error=f"no recorded run of {SLUG} at {fmt_sizes(sizes)} in {records.default_path()}")
    row = run[run["variant"] == SLUG].iloc[0]
    spec = match_device_name(str(row["device"])) or spec
    label = f"recorded: {results.run_label(row)}"
    copy = results.run_ceilings(run).get("copy_gbps", math.nan)
    facts = facts_for(copy, f"{label}, the same run", spec)
    detail = {"ridge": ridge_point(spec, "fp32")}
    if not math.isfinite(copy):
        return Outcome(math.nan, label, facts, detail=detail,
                       error=f"the run that recorded {SLUG} recorded no copy bandwidth")
    return Outcome(float(row["median_ms"]), label, facts, detail=detail)


def remark(out: Outcome) -> str:
    """After a ✓: the rate the step streams W at, against the copy rate."""
    w = out.facts["weight_bytes"].value * 1e6
    rate = w / (out.value * 1e-3) / 1e9
    of_copy = present.share(rate / out.facts["copy_gbps"].value)
    return f"The step reads W at {present.gbps(rate)} GB/s, {of_copy} of the copy rate."


_STEP = get_problem("p12").variant(SLUG)

EXERCISE = PredictionExercise(
    name="p12_predict_stream", problem_key="p12",
    title=f"predict first: step {_STEP.number} ({SLUG}) at {ROWS} row, then measure it",
    notebook="04", kernel_name="predicted_ms",
    skeleton=skeleton_text(
        [f"Predict first: how long does step {_STEP.number}, {SLUG}, take at {ROWS} row of p12?",
         "The cell above printed what you may use (exercises.given): W's bytes, the FLOPs, the rates."],
        "predicted_ms", "your prediction in milliseconds, a number"),
    solution=predict, settle=settle, models=models,
    quantity=f"the time of step {_STEP.number} ({SLUG}) at {ROWS} row of p12",
    unit="ms", band=BAND, show=lambda v: f"{present.ms(v)} ms", compare=times_phrase,
    fallback_hint=(f"at {ROWS} row each weight is used once: count W's bytes and divide by the copy "
                   "rate (exercises.given prints both)"),
    about_text=(f"Settled by measuring step {_STEP.number} ({SLUG}) at "
                f"{'x'.join(str(v) for v in _sizes().values())} through fusedkit.measure on a GPU, "
                f"or, without one, by its newest record in data/records.csv; ✓ within {BAND:g}x."),
    remark=remark,
)
