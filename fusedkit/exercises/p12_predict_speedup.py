"""Exercise p12_predict_speedup: predict first, then read the results: how much faster than
eager fp32 can an fp32-faithful p12 be on fp16 tensor cores?

fp32-faithful on fp16 tensor cores takes the fp16x3 split: x and W each as fp16 hi + lo, and
three products per tile, hi·hi + hi·lo + lo·hi (lo·lo, near fp32's own rounding, is dropped).
At KernelBench's sizes p12 is compute-bound, so the three products cost about three times one
fp16 GEMM. The learner predicts the speed-up over eager fp32 of step ``wgmma_fp16x3`` (the
fp16x3 GEMM on Hopper's wgmma) from the facts :meth:`given` prints (the FLOPs, eager's time
and cuBLAS's one-product fp16 GEMM measured in one run, the datasheet rates). The check
settles it with that step's speed-up in the newest recorded run that timed it (on a CPU;
labelled recorded, with device and date), or measures eager and the step through
:func:`fusedkit.measure.measure` on a Hopper GPU.
"""

from __future__ import annotations

import math

import torch

from fusedkit import present, records, results
from fusedkit.check import device_refusal
from fusedkit.exercises._predict import (Fact, Model, Outcome, PredictionExercise, ratio_phrase,
                                         skeleton_text)
from fusedkit.hardware import GpuSpec, detect_gpu, match_device_name
from fusedkit.measure import measure
from fusedkit.problems import get as get_problem

SLUG = "wgmma_fp16x3"
ONE_PRODUCT = "cublas_fp16_epilogue"
"""cuBLAS's fp16 GEMM (fp32 accumulation) with the float4 epilogue: one fp16 product."""
PRODUCTS = 3
BAND = 1.25
"""✓ when the measured speed-up is within this factor of the prediction."""


def facts_for(eager_ms: float, fp16_ms: float, source: str, spec: GpuSpec) -> dict[str, Fact]:
    """The numbers a prediction may use: p12's FLOPs (counted), eager's and the one-product
    fp16 GEMM's times (measured in one run, ``source``), and ``spec``'s datasheet rates."""
    p12 = get_problem("p12")
    return {
        "flops": Fact("FLOPs of one call at KernelBench's sizes", p12.flops(p12.defaults) / 1e9,
                      "GFLOP", "counted from the sizes", present.gb(p12.flops(p12.defaults) / 1e9)),
        "eager_ms": Fact("eager fp32 (PyTorch, TF32 off)", eager_ms, "ms", source, present.ms(eager_ms)),
        "fp16_ms": Fact(f"{ONE_PRODUCT}: cuBLAS's fp16 GEMM, fp32 accumulation, + the float4 "
                        "epilogue (one fp16 product)", fp16_ms, "ms", f"{source}, the same run",
                        present.ms(fp16_ms)),
        "fp32_tflops": Fact("FP32 rate (CUDA cores)", spec.fp32_tflops, "TFLOP/s",
                            f"{spec.name} datasheet", present.tflops(spec.fp32_tflops)),
        "tf32_tflops": Fact("TF32 tensor-core rate", spec.tf32_tflops, "TFLOP/s",
                            f"{spec.name} datasheet", present.tflops(spec.tf32_tflops)),
        "fp16_tflops": Fact("fp16 tensor-core rate (fp32 accumulation)", spec.peak_tflops("fp16"),
                            "TFLOP/s", f"{spec.name} datasheet", present.tflops(spec.peak_tflops("fp16"))),
    }


def predict(facts: dict[str, Fact]) -> float:
    """The worked prediction, as a speed-up. p12 is compute-bound at these sizes and the
    fp16x3 split needs three fp16 products (hi·hi, hi·lo, lo·hi), each about as costly as
    cuBLAS's own fp16 GEMM: eager's time over three of those."""
    return facts["eager_ms"].value / (3 * facts["fp16_ms"].value)


def models(out: Outcome) -> list[Model]:
    """Ways of predicting the speed-up, each from the facts: two right, the rest what a
    prediction typically forgets."""
    f = out.facts
    eager, one = f["eager_ms"].value, f["fp16_ms"].value
    flops = f["flops"].value * 1e9
    fp32, tf32, fp16 = (f[k].value * 1e12 for k in ("fp32_tflops", "tf32_tflops", "fp16_tflops"))
    at_peak = flops / fp16 * 1e3            # one fp16 product at the datasheet rate, ms
    reached = present.share(at_peak / one)
    three = "fp32-faithful needs three products, hi·hi, hi·lo and lo·hi"
    one_error = out.detail.get("fp16_rel", math.nan)
    return [
        Model(f"three fp16 products at cuBLAS's measured fp16 time", predict(f), True),
        Model(f"the datasheet's fp16 rate over {PRODUCTS} passes, against FP32's rate",
              fp16 / PRODUCTS / fp32, True),
        Model(f"{PRODUCTS} fp16 products at the datasheet's fp16 rate", eager / (PRODUCTS * at_peak), False,
              f"no GEMM runs at the datasheet rate: the whole cuBLAS fp16 call (cast of x, GEMM, epilogue) "
              f"ran at {reached} of it "
              f"here; price each product at its measured time ({ONE_PRODUCT})"),
        Model("one fp16 product at cuBLAS's time", eager / one, False,
              f"one fp16 product is the fast tier (rel. error {present.err(one_error)} against float64 "
              f"in that run, eager fp32's {present.err(out.detail.get('eager_rel', math.nan))}); {three}"),
        Model("the ratio of the fp16 and FP32 datasheet rates", fp16 / fp32, False,
              f"that is one fp16 product, the fast tier; {three}"),
        Model("four fp16 products at cuBLAS's time", eager / (4 * one), False,
              "the fourth, lo·lo, is at most 2^-22 of the product, near fp32's own rounding: the split "
              f"drops it; {PRODUCTS} products"),
        Model("three TF32 products (tf32x3) at the datasheet's TF32 rate", eager / (3 * flops / tf32 * 1e3),
              False, f"that is tf32x3; fp16 tensor cores run at {fp16 / tf32:.0f}x TF32's rate (datasheet), "
                     "and fp16's 11-bit halves split fp32's 24 bits just as well"),
        Model("no speed-up", 1.0, False,
              "fp32-faithful is an accuracy tier, not fp32 arithmetic: three fp16 products on tensor "
              "cores reach it"),
        Model("three times eager's work at eager's rate", 1 / PRODUCTS, False,
              "the three products run on tensor cores, each many times faster than eager's FP32 "
              "CUDA cores"),
    ]


def _spec(device_name: str) -> GpuSpec:
    return match_device_name(device_name) or detect_gpu().spec


def settle(device: torch.device) -> Outcome:
    """The step's speed-up over eager: measured now on a Hopper GPU (with eager and the
    one-product GEMM for the facts), else from the records (the newest run that timed it;
    the facts from the newest run that timed the one-product GEMM)."""
    p12 = get_problem("p12")
    sizes = p12.defaults
    if device.type == "cuda" and not device_refusal(p12, p12.variant(SLUG), sizes, device):
        name = torch.cuda.get_device_name(device)
        label = f"measured now on {name}"
        timed = {slug: measure(p12, slug, sizes, device=device) for slug in ("eager", ONE_PRODUCT, SLUG)}
        facts = facts_for(*(timed[s].timing.median_ms if timed[s].timed else math.nan
                            for s in ("eager", ONE_PRODUCT)), label, _spec(name))
        bad = [f"{s}: {m.failure}" for s, m in timed.items() if not m.timed]
        if bad:
            return Outcome(math.nan, label, facts, timed[SLUG], error=f"a step failed on this GPU: {bad[0]}")
        ms = {s: m.timing.median_ms for s, m in timed.items()}
        return Outcome(ms["eager"] / ms[SLUG], label, facts, timed[SLUG],
                       detail={"eager_ms": ms["eager"], "step_ms": ms[SLUG],
                               "fp16_rel": timed[ONE_PRODUCT].check.rel_error,
                               "eager_rel": timed[ONE_PRODUCT].check.eager_rel_error})
    base = results.latest_run(p12, having=(ONE_PRODUCT,), newest=True)
    answer = results.latest_run(p12, having=(SLUG,), newest=True)
    if base.empty or answer.empty:
        missing = ONE_PRODUCT if base.empty else SLUG
        return Outcome(math.nan, "", facts_for(math.nan, math.nan, "no record", detect_gpu().spec),
                       error=f"no recorded run of {missing} (with eager) at KernelBench's sizes in "
                             f"{records.default_path()}")
    time = {s: float(base.loc[base["variant"] == s, "median_ms"].iloc[0]) for s in ("eager", ONE_PRODUCT)}
    facts = facts_for(time["eager"], time[ONE_PRODUCT], f"recorded: {results.run_label(base)}",
                      _spec(str(base["device"].iloc[0])))
    row = answer[answer["variant"] == SLUG].iloc[0]
    eager_ms = float(answer.loc[answer["variant"] == "eager", "median_ms"].iloc[0])
    rel = {s: float(base.loc[base["variant"] == s, "rel_error"].iloc[0]) for s in ("eager", ONE_PRODUCT)}
    return Outcome(float(row["speedup"]), f"recorded: {results.run_label(row)}", facts,
                   detail={"eager_ms": eager_ms, "step_ms": float(row["median_ms"]),
                           "fp16_rel": rel[ONE_PRODUCT], "eager_rel": rel["eager"]})


def remark(out: Outcome) -> str:
    """After a ✓: the step's and eager's times, and what one product would give."""
    one = out.facts["eager_ms"].value / out.facts["fp16_ms"].value
    return (f"{SLUG} took {present.ms(out.detail['step_ms'])} ms against eager's "
            f"{present.ms(out.detail['eager_ms'])} ms in that run: the faithful tier pays three "
            f"products, where one (the fast tier) gives {present.speedup(one)}.")


_STEP = get_problem("p12").variant(SLUG)

EXERCISE = PredictionExercise(
    name="p12_predict_speedup", problem_key="p12",
    title=f"predict first: the speed-up of fp32-faithful step {_STEP.number} ({SLUG}) over eager fp32",
    notebook="06", kernel_name="predicted_speedup",
    skeleton=skeleton_text(
        [f"Predict first: how many times faster than eager fp32 is step {_STEP.number}, {SLUG}",
         "(fp32-faithful: three fp16 products on split operands) at KernelBench's sizes?",
         "The cell above printed what you may use (exercises.given): FLOPs, measured times, rates."],
        "predicted_speedup", "your prediction, eager's time over the step's, a number"),
    solution=predict, settle=settle, models=models,
    quantity=f"the speed-up of step {_STEP.number} ({SLUG}) over eager fp32 on p12",
    unit="x", band=BAND, show=present.speedup, compare=ratio_phrase,
    fallback_hint=("the split needs three fp16 products, and p12 is compute-bound: price each at "
                   f"the measured time of one ({ONE_PRODUCT}) and compare with eager's"),
    about_text=(f"Settled by step {_STEP.number} ({SLUG})'s speed-up over eager in the newest "
                "recorded run that timed it (data/records.csv), or by measuring both through "
                f"fusedkit.measure on a Hopper GPU; ✓ within {BAND:g}x."),
    remark=remark,
)
