"""Exercise p12_predict_speedup: predict first, then read the results: how much faster than eager fp32
is step ``wgmma_fp16x3``, fp32-faithful on fp16 tensor cores (the fp16x3 split: three fp16 products), from
the facts ``exercises.given`` prints (the FLOPs, eager's and cuBLAS's fp16 GEMM's times of one run, the
datasheet)."""

from __future__ import annotations

import math

import torch

from fusedkit import present, records, results
from fusedkit.exercises._predict import Fact, Model, Outcome, PredictionExercise
from fusedkit.harness import measure, plan
from fusedkit.hardware import GpuSpec, detect_gpu, match_device_name
from fusedkit.problems import get as get_problem

SLUG = "wgmma_fp16x3"
ONE_PRODUCT = "cublas_fp16_epilogue"   # cuBLAS's fp16 GEMM and the float4 epilogue: one fp16 product
PRODUCTS, BAND = 3, 1.25                 # ✓ when the measured speed-up is within BAND of the prediction
P12 = get_problem("p12")
STEP = P12.variant(SLUG).number


def facts_for(eager_ms: float, fp16_ms: float, source: str, spec: GpuSpec) -> dict[str, Fact]:
    """p12's FLOPs (counted), eager's and the one-product GEMM's times (of one run, ``source``),
    and ``spec``'s datasheet rates."""
    sheet = f"{spec.name} datasheet"
    return dict(
        flops=Fact("FLOPs of one call at KernelBench's sizes", P12.flops(P12.defaults) / 1e9, "GFLOP",
                   "counted from the sizes"),
        eager_ms=Fact("eager fp32 (PyTorch, TF32 off)", eager_ms, "ms", source),
        fp16_ms=Fact(f"{ONE_PRODUCT}: cuBLAS's fp16 GEMM, fp32 accumulation, + the float4 epilogue (one fp16 "
                     "product)", fp16_ms, "ms", f"{source}, the same run"),
        fp32_tflops=Fact("FP32 rate (CUDA cores)", spec.fp32_tflops, "TFLOP/s", sheet),
        tf32_tflops=Fact("TF32 tensor-core rate", spec.tf32_tflops, "TFLOP/s", sheet),
        fp16_tflops=Fact("fp16 tensor-core rate (fp32 accumulation)", spec.peak_tflops("fp16"), "TFLOP/s", sheet))


def predict(facts: dict[str, Fact]) -> float:
    """The worked prediction, as a speed-up. p12 is compute-bound at these sizes and the
    fp16x3 split needs three fp16 products (hi·hi, hi·lo, lo·hi), each about as costly as
    cuBLAS's own fp16 GEMM: eager's time over three of those."""
    return facts["eager_ms"].value / (3 * facts["fp16_ms"].value)


class PredictSpeedup(PredictionExercise):
    name, problem_key, notebook, answer = "p12_predict_speedup", "p12", "06", "predicted_speedup"
    solution = staticmethod(predict)
    prompt = (f"Predict first: how many times faster than eager fp32 is step {STEP}, {SLUG}",
              "(fp32-faithful: three fp16 products on split operands) at KernelBench's sizes?",
              "The cell above printed what you may use (exercises.given): FLOPs, measured times, rates.")
    todo = "your prediction, eager's time over the step's, a number"
    quantity, unit, band = f"the speed-up of step {STEP} ({SLUG}) over eager fp32 on p12", "x", BAND
    fallback_hint = ("the split needs three fp16 products, and p12 is compute-bound: price each at "
                     f"the measured time of one ({ONE_PRODUCT}) and compare with eager's")
    about_text = (f"Settled by step {STEP} ({SLUG})'s speed-up over eager in the newest recorded run "
                  f"that timed it and {ONE_PRODUCT} (data/records.csv), or by measuring them through "
                  f"fusedkit.harness on a Hopper GPU; ✓ within {BAND:g}x.")

    def models(self, out: Outcome) -> list[Model]:
        f, d = out.facts, out.detail
        eager, one, flops = f["eager_ms"].value, f["fp16_ms"].value, f["flops"].value * 1e9
        fp32, tf32, fp16 = (f[k].value * 1e12 for k in ("fp32_tflops", "tf32_tflops", "fp16_tflops"))
        at_peak = flops / fp16 * 1e3            # one fp16 product at the datasheet rate, ms
        three = "fp32-faithful needs three products, hi·hi, hi·lo and lo·hi"
        return [
            Model("three fp16 products at cuBLAS's measured fp16 time", predict(f), True),
            Model(f"the datasheet's fp16 rate over {PRODUCTS} passes, against FP32's rate",
                  fp16 / PRODUCTS / fp32, True),
            Model(f"{PRODUCTS} fp16 products at the datasheet's fp16 rate", eager / (PRODUCTS * at_peak), False,
                  "no GEMM runs at the datasheet rate: the whole cuBLAS fp16 call (cast of x, GEMM, "
                  f"epilogue) ran at {present.share(at_peak / one)} of it here; price each product at "
                  f"its measured time ({ONE_PRODUCT})"),
            Model("one fp16 product at cuBLAS's time", eager / one, False,
                  f"one fp16 product is the fast tier (rel. error {present.err(d['fp16_rel'])} against "
                  f"float64 in that run, eager fp32's {present.err(d['eager_rel'])}); {three}"),
            Model("the ratio of the fp16 and FP32 datasheet rates", fp16 / fp32, False,
                  f"that is one fp16 product, the fast tier; {three}"),
            Model("four fp16 products at cuBLAS's time", eager / (4 * one), False,
                  "the fourth, lo·lo, is at most 2^-22 of the product, near fp32's own rounding: the split "
                  f"drops it; {PRODUCTS} products"),
            Model("three TF32 products (tf32x3) at the datasheet's TF32 rate", eager / (3 * flops / tf32 * 1e3),
                  False, f"that is tf32x3; fp16 tensor cores run at {fp16 / tf32:.0f}x TF32's rate "
                         "(datasheet), and fp16's 11-bit halves split fp32's 24 bits just as well"),
            Model("no speed-up", 1.0, False, "fp32-faithful is an accuracy tier, not fp32 arithmetic: "
                  "three fp16 products on tensor cores reach it"),
            Model("three times eager's work at eager's rate", 1 / PRODUCTS, False,
                  "the three products run on tensor cores, each many times faster than eager's FP32 CUDA cores"),
        ]

    def settle(self, device: torch.device) -> Outcome:
        """The step's speed-up over eager and the facts, from one run: measured now on a Hopper
        GPU, else the newest recorded run that timed eager, the one-product GEMM and the step."""
        slugs, sizes = ("eager", ONE_PRODUCT, SLUG), P12.defaults
        if device.type == "cuda" and not plan(P12, SLUG, sizes, device=device).refusal:
            name = torch.cuda.get_device_name(device)
            label = f"measured now on {name}"
            timed = {s: measure(P12, s, sizes, device=device) for s in slugs}
            ms = {s: m.timing.median_ms if m.timed else math.nan for s, m in timed.items()}
            rel = {s: m.check.rel_error for s, m in timed.items()}
            eager_rel = timed[ONE_PRODUCT].check.eager_rel_error
            spec = match_device_name(name) or detect_gpu().spec
            bad = next((f"{s}: {m.failure}" for s, m in timed.items() if not m.timed), "")
            error = f"a step failed on this GPU: {bad}" if bad else ""
        else:
            run = results.same_run(P12, ["eager", ONE_PRODUCT, SLUG], device="")
            if run.empty:
                return Outcome(math.nan, "", facts_for(math.nan, math.nan, "no record", detect_gpu().spec),
                               error=f"no recorded run of {ONE_PRODUCT} and {SLUG} (with eager) at "
                                     f"KernelBench's sizes in {records.default_path()}")
            by = run.set_index("variant")
            ms, rel = by["median_ms"].astype(float).to_dict(), by["rel_error"].astype(float).to_dict()
            eager_rel, label, error = rel["eager"], f"recorded: {results.run_label(run)}", ""
            spec = match_device_name(str(run["device"].iloc[0])) or detect_gpu().spec
            timed = {SLUG: None}
        return Outcome(ms["eager"] / ms[SLUG], label, facts_for(ms["eager"], ms[ONE_PRODUCT], label, spec),
                       timed[SLUG], error, {"step_ms": ms[SLUG], "fp16_rel": rel[ONE_PRODUCT],
                                            "eager_rel": eager_rel})

    def remark(self, out: Outcome) -> str:
        one = out.facts["eager_ms"].value / out.facts["fp16_ms"].value
        return (f"{SLUG} took {present.ms(out.detail['step_ms'])} ms against eager's "
                f"{present.ms(out.facts['eager_ms'].value)} ms in that run: the faithful tier pays three "
                f"products, where one (the fast tier) gives {present.speedup(one)}.")


EXERCISE = PredictSpeedup()
