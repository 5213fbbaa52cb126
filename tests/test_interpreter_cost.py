"""The interpreter cost model: launch geometry, calibration and refusals (fast: a few seconds).

Runs only where Triton's CPU interpreter is the mode (no GPU): the model describes it.
"""

from __future__ import annotations

import re
from functools import partial

import pytest
import torch

from fusedkit.mode import ensure_triton_mode

ensure_triton_mode()  # before anything imports triton

pytest.importorskip("triton")
if torch.cuda.is_available():
    pytest.skip("the interpreter cost model is for CPU runs of Triton kernels", allow_module_level=True)

from fusedkit import interpreter_cost as ic  # noqa: E402
from fusedkit.kernels import KERNELS  # noqa: E402
from fusedkit.problems import get, parse_sizes  # noqa: E402
from fusedkit.mode import triton_interprets

P12, P45 = get("p12"), get("p45")
SMALL = {"p12": dict(batch_size=17, in_features=33, out_features=65),
         "p45": dict(batch_size=17, input_size=33, hidden_size=65, output_size=19)}


def triton_variants(problem):
    return [v for v in problem.variants.values() if v.triton]


ALL_TRITON = [(p, v) for p in (P12, P45) for v in triton_variants(p)]
IDS = [f"{p.key}-{v.slug}" for p, v in ALL_TRITON]


def test_every_problem_has_triton_variants():
    assert len(triton_variants(P12)) == 5 and len(triton_variants(P45)) == 6


@pytest.mark.parametrize("problem,variant", ALL_TRITON, ids=IDS)
def test_small_odd_sizes_are_allowed(problem, variant):
    sizes = problem.sizes(**SMALL[problem.key])
    assert 0 < ic.estimate_seconds(problem, variant, sizes) < 2.0
    assert ic.refusal(problem, variant, sizes, seeds=3, time_it=True) == ""


@pytest.mark.parametrize("problem,variant", ALL_TRITON, ids=IDS)
def test_default_sizes_are_refused(problem, variant):
    reason = ic.refusal(problem, variant, problem.defaults, seeds=3, time_it=True)
    assert "would take about" in reason and f"allowed: {ic.RUN_SECONDS_BUDGET:.0f} s" in reason
    assert "pick smaller sizes" in reason and "\n" not in reason


@pytest.mark.parametrize("slug", [v.slug for v in triton_variants(P12)])
def test_padding_counts_not_useful_flops(slug):
    # One row of x fills a 32-row tile (16 for the persistent kernel): the interpreter's
    # work is that of batch_size=16, though the useful FLOPs are 16 times fewer.
    one = P12.sizes(batch_size=1)
    assert P12.flops(one) <= 2e8   # what the old budget of useful FLOPs allowed
    assert ic.run_seconds(P12, slug, one, seeds=1, time_it=False) > ic.RUN_SECONDS_BUDGET
    assert ic.refusal(P12, slug, one, seeds=1, time_it=False)
    sixteen = P12.sizes(batch_size=16)
    assert ic.estimate_seconds(P12, slug, one) == pytest.approx(ic.estimate_seconds(P12, slug, sixteen))
    # One more row than a tile holds: a second row of tiles, twice the work.
    bm = ic.launches(P12, slug, one)[-1].block[0]
    assert ic.estimate_seconds(P12, slug, P12.sizes(batch_size=bm + 1)) > \
        1.8 * ic.estimate_seconds(P12, slug, P12.sizes(batch_size=bm))


def test_launch_geometry_of_step08_at_one_row():
    (ln,) = ic.launches(P12, "triton_ieee", P12.sizes(batch_size=1))
    assert (ln.block, ln.programs, ln.iterations, ln.masked) == ((32, 32, 32), 256, 256 * 256, 0)
    assert ln.flops == 256 * 256 * 2 * 32**3
    (ln,) = ic.launches(P12, "triton_ieee", P12.sizes(batch_size=1, in_features=33, out_features=64))
    assert ln.masked == ln.iterations == 2 * 2  # K=33: two masked K-steps in each of 2 programs


def test_fp16x3_does_three_dots_and_pays_the_weight_split_once():
    sizes = P12.sizes(batch_size=64, in_features=256, out_features=256)
    ieee = ic.launches(P12, "triton_ieee", sizes)[-1]
    split, gemm = ic.launches(P12, "triton_fp16x3", sizes)
    assert split.kernel == "split_x" and gemm.flops == 3 * ieee.flops
    first = ic.launches(P12, "triton_fp16x3", sizes, first_call=True)
    assert [ln.kernel for ln in first] == ["split_w", "split_x", gemm.kernel]
    assert ic.estimate_seconds(P12, "triton_fp16x3", sizes, first_call=True) > \
        ic.estimate_seconds(P12, "triton_fp16x3", sizes)
    p45 = [ln.kernel for ln in ic.launches(P45, "triton_fused_lse_fp16x3", P45.sizes(**SMALL["p45"]),
                                           first_call=True)]
    assert p45[:3] == ["split_w1", "split_w2", "split_x"] and p45[-1] == "combine_lse"


def test_persistent_walks_tiles_or_falls_back_to_step08():
    (ln,) = ic.launches(P12, "triton_tf32_persistent", P12.sizes(batch_size=64, in_features=256,
                                                                 out_features=256))
    assert ln.kernel == "persistent" and ln.programs == 3 and ln.tiles == 4 * 16
    # K=33 breaks TMA's alignment rule: the wrapper calls step 08's kernel instead.
    (ln,) = ic.launches(P12, "triton_tf32_persistent", P12.sizes(**SMALL["p12"]))
    assert ln.kernel == "linear_leakyrelu"


def test_every_autotuned_kernel_runs_one_config_in_the_interpreter():
    # A single config is never benchmarked; were there several, the first call would run
    # each ~8 times and the model would multiply (Launch.runs).
    for problem, variant in ALL_TRITON:
        for ln in ic.launches(problem, variant, problem.sizes(**SMALL[problem.key]), first_call=True):
            assert ln.runs == 1, (variant.slug, ln.kernel)


def test_block_sizes_kept_here_match_the_step_files():
    # SPLIT_BLOCK and COMBINE_BLOCK mirror constants inside the wrappers' bodies.
    split = (KERNELS / "common" / "fp16x3_split.py").read_text()
    combine = (KERNELS / "common" / "lse.py").read_text()
    m = re.search(r"block_r, block_c = \((\d+), (\d+)\) if INTERPRET", split)
    assert m and tuple(map(int, m.groups())) == ic.SPLIT_BLOCK
    m = re.search(r"block_r, block_t = \((\d+), (\d+)\) if INTERPRET", combine)
    assert m and tuple(map(int, m.groups())) == ic.COMBINE_BLOCK


@pytest.mark.parametrize("call", [ic.estimate_seconds, ic.launches,
                                  partial(ic.refusal, seeds=1, time_it=False),
                                  partial(ic.run_seconds, seeds=1, time_it=False)])
def test_non_triton_variant_is_a_value_error(call):
    with pytest.raises(ValueError, match="'eager'.*not a Triton kernel"):
        call(P12, P12.variants["eager"], P12.sizes(**SMALL["p12"]))
    with pytest.raises(ValueError, match="'cublas_epilogues'"):
        call(P45, "cublas_epilogues", P45.sizes(**SMALL["p45"]))


def test_refusal_names_the_dominant_dimension_and_a_size_that_fits():
    sizes = P12.sizes(batch_size=1)
    reason = ic.refusal(P12, "triton_ieee", sizes, seeds=2, time_it=False)
    m = re.search(r"(\w+) dominates \(\1 <= (\d+) fits\)", reason)
    assert m, reason
    smaller = dict(sizes, **{m.group(1): int(m.group(2))})
    assert ic.run_seconds(P12, "triton_ieee", smaller, seeds=2, time_it=False) <= ic.RUN_SECONDS_BUDGET
    assert ic.refusal(P12, "triton_ieee", smaller, seeds=2, time_it=False) == ""
    # one value more no longer fits: the size named is the largest that does
    larger = dict(sizes, **{m.group(1): int(m.group(2)) + 1})
    assert ic.run_seconds(P12, "triton_ieee", larger, seeds=2, time_it=False) > ic.RUN_SECONDS_BUDGET


def test_a_refusal_quotes_the_whole_run_it_refuses():
    # The explorer announces run_seconds before it starts; a refusal of the same run must
    # name the same figure (it once quoted one call: 23 s refused, then 61 s announced).
    sizes = P12.sizes(batch_size=1)
    for seeds, time_it in ((2, False), (3, True)):
        est = ic.run_seconds(P12, "triton_ieee", sizes, seeds=seeds, time_it=time_it)
        assert f"about {est:.0f} s" in ic.refusal(P12, "triton_ieee", sizes, seeds=seeds, time_it=time_it)
    one_call = ic.estimate_seconds(P12, "triton_ieee", sizes, first_call=True)
    assert ic.run_seconds(P12, "triton_ieee", sizes, seeds=2, time_it=False) > 5 * one_call


def test_calibration_reproduces_the_constants_and_the_measurements():
    assert len(ic.CALIBRATION) >= 20
    fitted = ic.calibrate(ic.CALIBRATION)
    for name, got, want in zip(ic.Costs._fields, fitted, ic.COSTS):
        assert got == pytest.approx(want, rel=0.02, abs=1e-12), name
    for pt in ic.CALIBRATION:
        est = ic.estimate_seconds(get(pt.problem), pt.variant, parse_sizes(pt.sizes),
                                  first_call=pt.first_call)
        assert 0.6 * pt.wall_s <= est <= 3.5 * pt.wall_s, pt


@pytest.mark.skipif(not triton_interprets(), reason="runs Triton on CPU tensors: the interpreter only")
@pytest.mark.parametrize("problem,slug,sizes", [
    (P12, "triton_ieee", dict(batch_size=64, in_features=256, out_features=256)),
    (P45, "triton_fused_lse_fp16x3", dict(batch_size=64, input_size=256, hidden_size=256,
                                          output_size=128)),
], ids=["p12", "p45"])
def test_estimate_is_within_3x_of_a_measured_call(problem, slug, sizes):
    # The model is calibrated on one 2-core machine (an AMD EPYC); another CPU runs the
    # interpreter at another speed (an Intel Xeon of this workplace: 2.2-3.4x faster). Time
    # one calibration point here first and judge the estimate at this machine's speed, so
    # the test checks the model, not the CPU it happens to run on.
    ref = next(pt for pt in ic.CALIBRATION   # a point of another shape than either below
               if pt.sizes == "batch_size=1,in_features=1024,out_features=1024")
    ref_wall, _ = ic.time_one_call(get(ref.problem), ref.variant, parse_sizes(ref.sizes))
    speed = ref.wall_s / ref_wall
    wall, _ = ic.time_one_call(problem, slug, problem.sizes(**sizes))
    est = ic.estimate_seconds(problem, slug, problem.sizes(**sizes)) / speed
    assert wall / 3 <= est <= 3 * wall, (est, wall, speed)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter runs only without a GPU")
def test_a_sweep_over_padded_sizes_is_refused_at_once(capsys):
    # `bench --sweep batch_size=1,2` at the default features once ran past five minutes.
    import time

    from fusedkit.cli import main

    t0 = time.perf_counter()
    assert main(["bench", "--problem", "p12", "--sweep", "batch_size=1,2", "--variants",
                 "triton_ieee", "--records", "/tmp/never-written.csv"]) == 2
    err = capsys.readouterr().err.strip()
    assert time.perf_counter() - t0 < 30 and len(err.splitlines()) == 1
    assert "would take about" in err and "interpreter" in err
