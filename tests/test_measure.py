"""The one measuring path, tried against the deliberately bad kernels in tests/adversarial.py:
every class of fault is caught, named in one line, and never timed or recorded as a result."""

import math
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import adversarial as bad
from fusedkit import bench, check, measure, problems
from fusedkit.bench import Timing

P12 = problems.get("p12")
# 32 rows: a multiple of 16, so the whole-tiles kernel is right here and wrong at the odd shape.
SMALL = P12.sizes(batch_size=32, in_features=48, out_features=40)
GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
DEVICES = ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, GPU])]
FAST = dict(seeds=2, warmup_ms=2, rep_ms=10)


def run(builder, device="cpu", sizes=SMALL, **kw):
    return measure.measure(P12, builder, sizes, device=device, name=builder.__name__,
                           **{**FAST, **kw})


def caught(m: measure.Measurement, fault: str) -> str:
    """Assert that ``m`` failed with ``fault`` in one line and was not timed; return the line."""
    assert not m.ok and not m.timed, m.summary()
    line = m.failure
    assert line.startswith(fault), line
    assert "\n" not in line and "Traceback" not in line
    with pytest.raises(ValueError, match="not recorded"):
        m.record_fields()
    return line


def test_an_honest_variant_passes_and_is_timed():
    m = measure.measure(P12, "addmm_alpha_beta", SMALL, device="cpu", **FAST)
    assert m.ok and m.timed and m.tier == "fp32-faithful", m.summary()
    assert m.check.calls == 2 * 2 + 2 and m.check.odd_sizes == P12.sizes(
        batch_size=27, in_features=41, out_features=35)
    row = m.record_fields()
    assert row["timer"] == "cpu-wall" and row["median_ms"] > 0 and row["tier"] == "fp32-faithful"


def test_nearby_odd_changes_every_dimension_to_odd():
    for sizes in (P12.defaults, SMALL, P12.sizes(batch_size=1, in_features=2, out_features=3)):
        odd = check.nearby_odd(P12, sizes)
        for name, v in odd.items():
            assert v != sizes[name] and v % 2 == 1 and abs(v - sizes[name]) <= sizes[name] // 8 + 2
    assert check.nearby_odd(P12, P12.defaults) == P12.sizes(batch_size=895, in_features=7167,
                                                            out_features=7167)


@pytest.mark.parametrize("device", DEVICES)
def test_result_reuse_is_caught(device):
    line = caught(run(bad.caching, device), check.REUSE)
    assert "cached result" in line


def test_memo_by_pointer_is_caught_when_timed():
    # Right on two distinct input tensors (the check), wrong once the timing loop refills the
    # same buffer: the verified timed outputs catch it.
    m = run(bad.memo_by_pointer)
    assert m.check.ok
    caught(m, measure.TIMED_DIFFER)


CATCH_TRIALS = 20
"""Measurements per kernel in the catch-rate tests (the README's table quotes their result)."""


@pytest.mark.parametrize("n", [5, 50])
def test_a_kernel_wrong_on_one_call_in_n_is_caught_every_time(n, tmp_path):
    """Every call made while timing (warm-up included) is verified on random rows of its own
    fresh input, so a kernel that is right on the check's calls and then wrong on one call in n
    (the previous answer again) is caught in exactly the measurements in which it was wrong at
    all: for one in 5 that is every one, for one in 50 most (a timing makes 46 to 117 calls on
    this CPU; tests/catch_rates.py counts the rates of the README's table)."""
    tally = bad.Tally(tmp_path / "tally")
    builder = bad.wrong_one_call_in(n, tally)
    lines, wrong_in = [], 0
    for _ in range(CATCH_TRIALS):
        tally.reset()
        m = run(builder)
        wrong = tally.counts().get("wrong", 0) > 0
        assert m.check.ok, m.summary()
        assert m.failure.startswith(measure.TIMED_DIFFER) == wrong, (wrong, m.summary())
        wrong_in += wrong
        if wrong:
            lines.append(m.failure)
    print(f"wrong_one_call_in({n}): wrong while timed in {wrong_in} of {CATCH_TRIALS} measurements, "
          f"caught in all {wrong_in}")
    assert wrong_in == CATCH_TRIALS if n == 5 else wrong_in >= CATCH_TRIALS // 2
    assert re.search(rf"^timed calls differ from checked ones: \d+ of \d+ calls made while timed gave "
                     r"outputs beyond what fp32 explains and 4x the checked calls' error \(call \d+: "
                     r"rel\. error [\d.e-]+ on 8 random rows of its own fresh input, allowed "
                     r"[\d.e-]+\); a kernel must not change what it computes when it is timed$", lines[0])


def test_a_content_memo_is_timed_on_inputs_it_never_saw(tmp_path):
    """A kernel that keeps answers by a fingerprint of its input's bytes: every timed call gets
    fresh random values (not a rotation of a few inputs, which it would have answered from
    memory, timed at the speed of a lookup), so it never finds one and is timed computing."""
    tally = bad.Tally(tmp_path / "tally")
    m = run(bad.memo_by_content(tally))
    counts = tally.counts()
    assert m.timed and m.timing.repeats >= 3, m.summary()
    assert counts.get("hit", 0) == 0 and counts["call"] >= m.timing.repeats + 3


@pytest.mark.parametrize("device", DEVICES)
def test_fresh_inputs_are_kernelbench_draws_never_repeated(device):
    """Problem.refill_inputs, the timing's refill: uniform in [0, 1) as get_inputs draws, new
    values on every call, from numpy's PCG64 on a CPU and the device's own generator on a GPU."""
    import numpy as np

    inputs = P12.get_inputs(SMALL, device=device)
    rng = torch.Generator(device).manual_seed(1) if device == "cuda" else np.random.default_rng(1)
    draws = []
    for _ in range(3):
        P12.refill_inputs(inputs, rng)
        draws.append(inputs[0].clone())
    for a in draws:
        assert a.dtype == torch.float32 and 0 <= a.min() and a.max() < 1
        assert abs(a.double().mean().item() - 0.5) < 0.05
    assert not any(torch.equal(a, b) for i, a in enumerate(draws) for b in draws[:i])


def test_shape_specialisation_is_caught():
    line = caught(run(bad.whole_tiles_only), check.SPECIALISED)
    assert "batch_size=27" in line


@pytest.mark.parametrize("builder,what", [(bad.writes_its_input, "input x"),
                                          (bad.writes_its_weights, "gemm.bias")])
def test_mutation_is_caught_and_named(builder, what):
    line = caught(run(builder), check.MUTATION)
    assert what in line


@pytest.mark.parametrize("device", DEVICES)
def test_reused_output_buffer_is_aliasing(device):
    line = caught(run(bad.reused_output_buffer, device), check.ALIASING)
    assert "previous call's output" in line


def test_output_that_is_an_input_is_aliasing():
    square = P12.sizes(batch_size=24, in_features=24, out_features=24)

    def returns_input(model):
        return lambda x: x
    line = caught(run(returns_input, sizes=square), check.ALIASING)
    assert "input x" in line


def test_subclass_output_is_refused():
    line = caught(run(bad.returns_a_subclass), check.NOT_PLAIN)
    assert "LazyTensor" in line


def test_warmup_detection_is_caught():
    m = run(bad.counts_calls)
    assert m.check.ok
    caught(m, measure.TIMED_DIFFER)


def test_patched_clock_does_not_decide_the_time():
    saved = time.perf_counter, torch.cuda.Event
    try:
        m = run(bad.patches_the_clock, rep_ms=20)
    finally:
        time.perf_counter, torch.cuda.Event = saved
    assert m.ok and m.timing.median_ms > 0 and m.timing.repeats >= 3


def test_patching_linear_is_caught_named_and_undone():
    """A build that replaces torch.nn.functional.linear (with a bf16 one, which the float64
    reference would call too) fails in one line naming it, and F.linear is the original again."""
    original = torch.nn.functional.linear
    line = caught(run(bad.patches_linear), check.PATCHED)
    assert line == ("patched torch.nn.functional.linear during the build: a kernel must not "
                    "replace library functions")
    assert torch.nn.functional.linear is original
    def honest(model):
        return lambda x: model(x)
    m = run(honest)
    assert m.ok and m.tier == "fp32-faithful", m.summary()   # what comes after is unpatched


def test_patching_a_tensor_method_in_a_call_is_caught_named_and_undone():
    line = caught(run(bad.patches_a_tensor_method), check.PATCHED)
    assert line == ("patched torch.Tensor.double during call 1 at batch_size=32,in_features=48,"
                    "out_features=40: a kernel must not replace library functions")
    assert "double" not in vars(torch.Tensor)
    assert torch.Tensor.double is torch._C.TensorBase.double


def test_patching_the_harness_while_timed_is_refused_and_undone():
    from fusedkit import precision

    original = precision.error_bound
    m = run(bad.patches_the_harness_when_timed)
    assert m.check.ok
    line = caught(m, check.PATCHED)
    assert re.fullmatch(r"patched fusedkit\.precision\.error_bound during timed call 3: a kernel "
                        r"must not replace library functions", line), line   # its 3rd call
    assert precision.error_bound is original


def test_a_snapshot_sees_no_patch_in_honest_work():
    """Nothing the workbook itself does between a build and a call (PyTorch's eager path, a
    Triton kernel in the interpreter, the references) changes a watched name."""
    from fusedkit.guard import Snapshot

    snap = Snapshot(P12, P12.make_model(SMALL))
    for slug in ("eager", "addmm_alpha_beta", "triton_fp16x3"):
        m = measure.measure(P12, slug, P12.sizes(batch_size=17, in_features=33, out_features=65),
                            device="cpu", seeds=1, warmup_ms=0, rep_ms=1)
        assert m.ok, m.summary()
    assert snap.changed() == []


def test_patched_statistics_do_not_decide_the_time():
    import numpy as np

    saved = np.median, np.percentile
    try:
        m = run(bad.patches_the_statistics, rep_ms=20)
    finally:
        np.median, np.percentile = saved
    assert m.ok and m.timing.median_ms > 1e-6 and m.timing.p90_ms >= m.timing.p10_ms > 1e-6


def test_a_raising_kernel_is_one_line():
    line = caught(run(bad.raises), check.RAISED)
    assert "RuntimeError" in line


def test_impossible_speed_is_refused(monkeypatch):
    # The refusal itself, on any machine: a time below the datasheet floor of the declared
    # precision is not a result.
    def instant(m, seed, warmup_ms, rep_ms, *limits):
        m.timing = Timing(1e-6, 1e-6, 1e-6, 10, "cuda-events")
    monkeypatch.setattr(measure, "_time", instant)
    m = run(bad.tf32_declared_fp32, sizes=P12.sizes(batch_size=64, in_features=64, out_features=64))
    line = caught(m, measure.IMPOSSIBLE)
    assert "fp32 floor" in line and "datasheet" in line


def test_unwritten_and_imprecise_keep_their_tests():
    caught(run(bad.leaves_a_hole), check.UNWRITTEN)
    m = run(bad.slightly_noisy)
    assert m.ok and m.tier == "kb-pass"


def test_a_learners_kernel_gets_the_same_path():
    def mine(model):
        w, b = model.gemm.weight, model.gemm.bias
        return lambda x: torch.nn.functional.leaky_relu((x @ w.T + b) * 2.0, 0.1)
    m = measure.measure(P12, mine, SMALL, device="cpu", **FAST)
    assert m.ok and m.variant.slug == "mine" and m.tier == "fp32-faithful"
    with pytest.raises(ValueError, match="registered variant"):
        measure.measure(P12, mine, SMALL, device="cpu", name="eager", **FAST)
    with pytest.raises(TypeError, match="builder"):
        measure.measure(P12, 42, SMALL, device="cpu", **FAST)


def test_interpreter_rows_say_so_and_do_not_judge_tf32():
    s = P12.sizes(batch_size=17, in_features=33, out_features=65)
    m = measure.measure(P12, "triton_tf32", s, device="cpu", seeds=1, warmup_ms=0, rep_ms=1)
    if torch.cuda.is_available():
        pytest.skip("interpreter rows exist only without a GPU")
    assert m.ok and m.interpreter and m.tier == ""
    row = m.record_fields()
    assert row["tier"] == "" and "interpreter" in row["notes"]


def test_timing_loop_keeps_and_refreshes():
    seen, after = [], []
    t = bench.time_calls(lambda: torch.ones(3) * len(seen), prepare=seen.append,
                         after=lambda i, out: after.append((i, out[0].item())), warmup_ms=1,
                         rep_ms=5, device="cpu", keep=2)
    assert len(t.kept) == 2 and all(i >= 3 for i, _ in t.kept)
    assert len({i % 2 for i, _ in t.kept}) == 2          # one per residue
    assert seen == list(range(len(seen))) and t.timing.repeats >= 3
    assert after == [(i, i + 1) for i in seen]           # every call, right after it, its output
    with pytest.raises(ValueError, match="finite"):
        bench.time_calls(lambda: None, rep_ms=math.nan, device="cpu")


# -- on the GPU only ---------------------------------------------------------------------------

@pytest.mark.gpu
@GPU
def test_side_stream_output_is_caught():
    line = caught(run(bad.side_stream_output, "cuda"), check.STREAM)
    assert "side stream" in line


@pytest.mark.gpu
@GPU
def test_side_stream_busywork_is_refused_when_timed():
    m = run(bad.side_stream_busywork, "cuda", rep_ms=50)
    assert m.check.ok
    line = caught(m, measure.HIDDEN_WORK)
    assert "busy" in line


@pytest.mark.gpu
@GPU
def test_tf32_declared_fp32_is_a_wrong_result_and_timed_when_declared_tf32():
    """TF32's error (about 3e-4 here, not within allclose) is more than fp32 arithmetic can
    explain: the check fails it before its speed is looked at (it was once checked "fast" and then
    refused as faster than fp32 allows); declared tf32 it is within the bound, and timed."""
    s = P12.sizes(batch_size=2048, in_features=4096, out_features=4096)
    line = caught(run(bad.tf32_declared_fp32, "cuda", sizes=s, rep_ms=50), check.WRONG)
    assert "more than fp32 arithmetic can explain" in line
    honest = measure.measure(P12, bad.tf32_declared_fp32, s, device="cuda", name="tf32_declared",
                             precision="tf32", **{**FAST, "rep_ms": 50})
    assert honest.timed and honest.tier == "fast", honest.summary()


@pytest.mark.gpu
@GPU
@pytest.mark.parametrize("key", ["p12", "p45"])
def test_every_registered_kernel_passes_the_honest_harness(key):
    # The PyTorch and CUDA steps of both ladders at small odd sizes, through the whole path,
    # timing included: no honest kernel trips a guard (streams, aliasing, timed outputs, the
    # floor). The Triton steps go through the same path in the ladder run at the default sizes
    # (here each new shape would autotune every config: minutes of GPU time).
    p = problems.get(key)
    s = p.sizes({d.name: [67, 1000, 333, 65][i] for i, d in enumerate(p.dims)})
    for v in [v for v in p.ladder() if not v.triton]:
        m = measure.measure(p, v, s, device="cuda", seeds=2, warmup_ms=5, rep_ms=20)
        print(m.summary())
        assert m.timed, m.summary()


# --- arguments: each refused before anything runs, never reported as the kernel's failure -----

@pytest.fixture
def nothing_runs(monkeypatch):
    """Fail the test if measure gets as far as checking or timing anything."""
    def ran(*args, **kwargs):
        raise AssertionError("measure started before refusing its arguments")
    monkeypatch.setattr(measure, "check_variant", ran)
    monkeypatch.setattr(measure, "_time", ran)


@pytest.mark.parametrize("kw,error,phrase", [
    (dict(rep_ms=0), ValueError, "rep_ms=0 is out of range; allowed: a finite number > 0"),
    (dict(rep_ms=float("nan")), ValueError, "rep_ms=nan is out of range"),
    (dict(rep_ms="5"), TypeError, "rep_ms='5' is not a number"),
    (dict(warmup_ms=-1.0), ValueError, "warmup_ms=-1.0 is out of range; allowed: a finite number >= 0"),
    (dict(seeds=0), ValueError, "seeds=0 is out of range; allowed: an integer from 1 to 1000"),
    (dict(seeds=10**9), ValueError, "seeds=1000000000 is out of range"),
    (dict(seeds=True), TypeError, "seeds=True is not a count"),
    (dict(device="tpu"), ValueError, "device='tpu' is not a device; allowed: 'cpu'"),
    # Each of these below ran, or raised a traceback from deep inside, at b60d11b.
    (dict(gpu="H200"), TypeError, "gpu='H200' is not a GpuSpec"),
    (dict(warmup_ms=1e12), ValueError, "warmup_ms=1000000000000.0 is out of range"),
    (dict(rep_ms=1e9), ValueError, "at most 60000"),
    (dict(triton="no"), TypeError, "triton='no' is not True or False"),
    (dict(time_it=1), TypeError, "time_it=1 is not True or False"),
    (dict(precision="fp8"), ValueError, "precision='fp8' is not a precision"),
    (dict(build_timeout_s=float("nan")), ValueError, "build_timeout_s=nan is out of range"),
    (dict(call_timeout_s=0), ValueError, "call_timeout_s=0 is out of range"),
])
def test_bad_arguments_are_one_clear_error(kw, error, phrase, nothing_runs):
    """A bad rep_ms was reported as the kernel's failure ("raised an error while timed")."""
    with pytest.raises(error) as e:
        measure.measure(P12, "eager", SMALL, **{**dict(device="cpu"), **kw})
    assert phrase in str(e.value) and "\n" not in str(e.value)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a CUDA GPU")
def test_cuda_without_a_gpu_is_one_clear_error(nothing_runs):
    """device="cuda" without a GPU ended in a traceback from deep inside torch."""
    with pytest.raises(ValueError, match=r"^device='cuda': no CUDA GPU is visible here; allowed: 'cpu'$"):
        measure.measure(P12, "eager", SMALL, device="cuda")


def test_a_problem_is_given_by_name_or_refused_in_one_line():
    """measure("p12", ...) ended in an AttributeError traceback."""
    m = measure.measure("p12", "eager", SMALL, device="cpu", **FAST)
    assert m.ok and m.problem is P12
    with pytest.raises(ValueError, match="problem='p99' is not known; valid: p12, p45"):
        measure.measure("p99", "eager", SMALL)
    with pytest.raises(TypeError, match="problem=None is not a problem; allowed: a Problem or one of p12"):
        measure.measure(None, "eager", SMALL)


# --- the memory the harness holds ------------------------------------------------------------

def test_harness_bytes_counts_every_copy_of_x_w_and_y():
    """The issue's case: x is 4 GiB, W and y 128 KiB. The kernel's worker holds four fp32 copies
    of x (two draws and their pristine copies): 16 GiB, where eager's own peak said 4; this
    process, after it, two regenerated copies and the float64 reference's own peak (its float64
    x, 8 GiB): 16 GiB too, and never at the same time as the worker's."""
    sizes = P12.sizes(batch_size=32768, in_features=32768, out_features=1)
    x, w, y = 4 * 32768 * 32768, 4 * (32768 + 1), 4 * 32768
    reference = P12.memory_counter(sizes, 8)
    assert reference == pytest.approx(2 * x, rel=1e-3)
    worker, judge = 2 * w + 4 * x + 6 * y, w + 2 * x + 2 * y + 2 * y + reference
    assert measure.harness_bytes(P12, sizes) == max(worker, judge)
    assert measure.harness_bytes(P12, sizes) / 2**30 == pytest.approx(16.0, abs=0.01)
    assert P12.memory_counter(sizes, 4) / 2**30 == pytest.approx(4.0, abs=0.01)   # what was counted
    # On a GPU the worker's outputs are copied on the caller's stream instead of sent as bytes.
    assert measure.harness_bytes(P12, sizes, "cuda") == max(worker - 2 * y, judge)


def test_the_cpu_budget_refuses_what_the_harness_cannot_hold_and_says_what_fits():
    big = P12.sizes(batch_size=32768, in_features=32768, out_features=1)
    with pytest.raises(problems.SizeError) as e:
        P12.check_runnable(big, "cpu")
    line = str(e.value)
    assert "need 16.0 GiB while checked and timed; allowed: at most 8.0 GiB in a CPU run" in line
    fits = dict(part.split("<=") for part in line.split("e.g. ")[1].split(" or "))
    assert set(fits) == {"batch_size", "in_features"}   # out_features is 1 already
    for name, value in fits.items():
        assert measure.harness_bytes(P12, {**big, name: int(value)}) <= 8 * 2**30
        assert measure.harness_bytes(P12, {**big, name: int(value) + 1}) > 8 * 2**30
    for p in (P12, problems.get("p45")):
        p.check_runnable(p.defaults, "cpu")   # KernelBench's sizes still run on a CPU


PEAK_SCRIPT = """
import os, sys, threading, time
import torch
from fusedkit import isolation, measure, problems
torch.set_num_threads(1)
p = problems.get(sys.argv[1])
sizes = p.sizes({k: int(v) for k, v in (kv.split("=") for kv in sys.argv[2].split(","))})
measure.measure(p, "eager", {d.name: 8 for d in p.dims}, device="cpu", seeds=1, warmup_ms=1, rep_ms=2)
# The next candidate's worker is the spare started meanwhile, once it has started: this
# process and it.
isolation._spares["cpu"].wait_ready()
pids = [os.getpid(), isolation._spares["cpu"].process.pid]
def rss(pid):   # anonymous memory, where tensors live (pages of libraries read from files are not)
    with open(f"/proc/{pid}/status") as f:
        return next(int(ln.split()[1]) * 1024 for ln in f if ln.startswith("RssAnon:"))
base = [rss(pid) for pid in pids]
peak, done = [0], [False]
def sample():   # both processes' memory at once, every half millisecond
    while not done[0]:
        peak[0] = max(peak[0], sum(rss(pid) - b for pid, b in zip(pids, base)))
        time.sleep(0.0005)
watch = threading.Thread(target=sample)
watch.start()
measure.measure(p, "eager", sizes, device="cpu", seeds=1, warmup_ms=1, rep_ms=2)
done[0] = True
watch.join()
print(peak[0])
"""


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads /proc (Linux)")
@pytest.mark.parametrize("key,sizes", [
    ("p12", "batch_size=4096,in_features=8192,out_features=1"),     # x dominates
    ("p12", "batch_size=1,in_features=8192,out_features=4096"),     # W dominates
    ("p12", "batch_size=4096,in_features=1,out_features=8192"),     # y dominates
    ("p45", "batch_size=8192,input_size=1024,hidden_size=2048,output_size=512"),
])
def test_harness_bytes_is_what_a_measurement_really_holds(key, sizes):
    """The count against the peak memory of a real measurement (the big tensors here are 32 MiB
    or more, so the allocator maps and returns each: the high-water mark sees the tensors). The
    count may be up to a tenth more (p45's eager peak, its memory_counter, adds up intermediates
    that eager frees one after another) and a few percent less (the allocator's own pages)."""
    out = subprocess.run([sys.executable, "-c", PEAK_SCRIPT, key, sizes], capture_output=True,
                         text=True, timeout=300, cwd=Path(__file__).resolve().parent.parent)
    assert out.returncode == 0, out.stderr
    held = int(out.stdout.split()[-1])
    p = problems.get(key)
    predicted = measure.harness_bytes(p, p.sizes(problems.parse_sizes(sizes)))
    assert 0.9 * predicted <= held <= 1.05 * predicted, (held / 2**20, predicted / 2**20)


@pytest.mark.parametrize("variable,value", [("FUSEDKIT_CALL_TIMEOUT_S", "abc"),
                                            ("FUSEDKIT_BUILD_TIMEOUT_S", "nan"),
                                            ("FUSEDKIT_CALL_TIMEOUT_S", "0")])
def test_a_bad_limit_in_the_environment_is_named_before_anything_runs(variable, value):
    # At b60d11b "abc" was a traceback at import, "nan" was taken, and "0" was refused under
    # the name call_timeout_s, which the learner never typed.
    import os
    import subprocess
    import sys

    code = ("import fusedkit.measure as m\n"
            "try:\n    m.measure('p12', 'eager', {'batch_size': 4, 'in_features': 8, 'out_features': 8},"
            " device='cpu', seeds=1)\nexcept ValueError as e:\n    print('refused:', e)")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, variable: value})
    assert got.returncode == 0 and not got.stderr.strip(), got.stderr[-2000:]
    assert got.stdout.strip() == (f"refused: {variable}={value!r} is not a number of seconds; "
                                  "allowed: a finite number > 0"), got.stdout


def test_sizes_that_are_not_a_mapping_are_one_clear_error(nothing_runs):
    # At b60d11b: "dictionary update sequence element #0 has length 1; 2 is required".
    with pytest.raises(TypeError) as e:
        measure.measure(P12, "eager", "batch_size=8", device="cpu")
    assert "sizes='batch_size=8' is not a mapping of sizes" in str(e.value)


def test_a_variant_that_cannot_run_here_is_a_verdict_not_an_exception(nothing_runs):
    # At b60d11b measure raised ValueError, and every caller had to ask device_refusal first.
    m = measure.measure(P12, "cublas_fp16_epilogue", SMALL, device="cpu")
    assert m.skipped and not m.ok and not m.timed
    assert m.failure.startswith("cannot run here: variant='cublas_fp16_epilogue' on cpu needs a CUDA GPU")
    assert m.summary().startswith("cublas_fp16_epilogue: not run — cannot run here")


def test_a_plan_is_checked_once_and_measured_as_it_is():
    p = measure.plan(P12, "eager", SMALL, device="cpu", seeds=1, warmup_ms=1, rep_ms=5)
    assert p.refusal == "" and p.sizes == SMALL and p.device == torch.device("cpu")
    with pytest.raises(AttributeError):
        p.rep_ms = 1e12                       # frozen: what was checked is what runs
    m = measure.measure(p)
    assert m.timed and m.variant.slug == "eager"
    with pytest.raises(TypeError, match="takes the plan alone"):
        measure.measure(p, "eager")
