"""The "Your turn" exercises: every worked solution passes the ladder's checks, every blank
skeleton (the exact text of its notebook cell) fails with one helpful line, a kernel, split
or prediction with one slip gets the hint for that slip, never a traceback, and a ``✗`` is
never ``ok``.

Without a GPU the kernels run in Triton's interpreter at small odd sizes and the predictions
are settled from ``data/records.csv``; on a GPU (``-m gpu``) at the problem's sizes, timed,
and the predictions are measured.
"""

import inspect
import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest
import torch

from fusedkit import check, exercises, problems, records, results
from fusedkit.check import nearby_odd
from fusedkit.measure import Measurement
from fusedkit.exercises import p12_fp16_split as fp16_split
from fusedkit.exercises import p12_predict_speedup as speedup
from fusedkit.exercises import p12_predict_stream as stream
from fusedkit.exercises._common import Exercise, dims, exec_source, interpreting, source_of
from fusedkit.exercises._predict import PredictionExercise

ROOT = Path(__file__).resolve().parent.parent
HEAD = "import triton\nimport triton.language as tl\n\n\n"
HOPPER_EXERCISE = "p12_wgmma_desc"
"""Notebook 02's exercise, written on another branch with its own tests (merged separately):
the tests here count it for its notebook, and leave its checks to its own tests."""
KERNELS = [n for n, ex in exercises.EXERCISES.items() if isinstance(ex, Exercise) and n != HOPPER_EXERCISE]
PREDICTIONS = [n for n, ex in exercises.EXERCISES.items() if isinstance(ex, PredictionExercise)]

DEVICES = [
    pytest.param("cpu", marks=pytest.mark.skipif(not interpreting(),
                                                 reason="CPU runs need Triton's interpreter"),
                 id="cpu"),
    pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(),
                                                                    reason="needs a CUDA GPU")],
                 id="cuda"),
]


# The Triton kernels; p12_wgmma_desc, a Python descriptor built into a CUDA kernel, checks
# itself (tests/test_exercise_wgmma_desc.py) and shares only the blank-skeleton, slip and
# notebook tests below.
TRITON_NAMES = [n for n in exercises.NAMES if not hasattr(exercises.get(n), "check")]


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


def with_slip(name: str, old: str, new: str):
    """The worked solution with one change, executed like a notebook cell."""
    ex = exercises.get(name)
    src = inspect.getsource(getattr(ex.solution, "fn", ex.solution))
    assert src.count(old) == 1, f"{name}: {old!r} is not in the solution exactly once"
    head = HEAD if hasattr(ex.solution, "fn") else "import torch\n\nLO_SCALE = 2048.0\n\n\n"
    return exec_source(head + src.replace(old, new), name)[ex.kernel_name]


def run(name, answer, device, capsys, **kw):
    """Check ``answer`` as exercise ``name``: exactly one printed line, no traceback, and a ✗
    that is never ok."""
    ex = exercises.get(name)
    m = exercises.check(problems.get(ex.problem_key), name, answer, device=device, **kw)
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines == [m.message], f"expected one printed line, got {out!r}"
    assert "Traceback" not in out + err
    assert m.message[:1] in "✓✗"
    assert m.ok == m.message.startswith("✓"), f"ok={m.ok} for {m.message!r}"
    print(m.message)   # shown by pytest -rP
    return m


# -- the course: how many, and where ----------------------------------------------------------

def test_at_least_eight_exercises_and_one_per_notebook():
    assert len(exercises.NAMES) >= 8
    assert all(exercises.get(n).notebook in exercises.COURSE for n in exercises.NAMES)
    missing = [nb for nb in exercises.COURSE if not exercises.for_notebook(nb)]
    if missing == ["02"] and HOPPER_EXERCISE not in exercises.NAMES:
        pytest.xfail(f"notebook 02's exercise {HOPPER_EXERCISE} comes from another branch")
    assert not missing, f"notebooks without an exercise: {missing}"


def test_each_kind_is_there():
    assert {"p12_fp16_split"} <= set(exercises.NAMES)            # precision
    assert len(PREDICTIONS) >= 2                                 # a prediction first
    assert {exercises.get(n).problem_key for n in exercises.NAMES} == {"p12", "p45"}
    with pytest.raises(ValueError, match="not a notebook of the course"):
        exercises.for_notebook("07")


# -- worked solutions ------------------------------------------------------------------------

@pytest.mark.parametrize("name", KERNELS)
def test_the_worked_kernel_passes(name, device, capsys):
    m = run(name, exercises.solution(name), device, capsys)
    assert m.ok and m.timed, m.message
    assert m.tier == "fp32-faithful", m.message
    assert m.message.startswith("✓ right (fp32-faithful), ") and " ms per call " in m.message
    assert f"at {dims(m.sizes)} and {dims(m.check.odd_sizes)}" in m.message
    if device == "cuda":     # the problem's own sizes, on the GPU
        assert m.sizes == m.problem.defaults and m.timing.timer == "cuda-events"
        assert torch.cuda.get_device_name() in m.message


@pytest.mark.parametrize("name", KERNELS + ["p12_fp16_split"])
def test_about_names_both_sizes_the_check_prints(name, capsys):
    """What about() says before the check and what the check's line prints agree (both from
    the code): the sizes and the nearby odd shape."""
    m = run(name, exercises.solution(name), "cpu", capsys)
    odd = nearby_odd(m.problem, m.sizes)
    assert f"at {dims(m.sizes)} and {dims(odd)}" in m.message
    capsys.readouterr()
    exercises.about(name)
    line = capsys.readouterr().out.strip()
    assert line == exercises.get(name).about()
    assert f"at {dims(m.sizes)} and the nearby odd shape {dims(odd)}" in line
    big = m.problem.defaults
    assert f"on a GPU at {dims(big)} and {dims(nearby_odd(m.problem, big))}" in line


def test_the_worked_split_passes(device, capsys):
    m = run("p12_fp16_split", exercises.solution("p12_fp16_split"), device, capsys)
    assert m.ok and m.tier == "fp32-faithful" and not m.timed, m.message
    assert m.message.startswith("✓ right (fp32-faithful): the fp16x3 linear built from your split")
    assert f"at {dims(m.sizes)} and {dims(nearby_odd(m.problem, m.sizes))}" in m.message
    worst = float(re.search(r"within (\S+) of t \* scale", m.message)[1])
    assert worst <= fp16_split.SPLIT_BOUND


@pytest.mark.parametrize("name", PREDICTIONS)
def test_the_worked_prediction_passes(name, capsys):
    ex = exercises.get(name)
    predicted = ex.solution(ex.outcome("cpu").facts)
    m = run(name, predicted, "cpu", capsys)
    assert m.ok and m.predicted == predicted and "recorded: " in m.message, m.message
    assert m.model == ex.models(ex.outcome("cpu"))[0].label


# -- blank skeletons -------------------------------------------------------------------------

BLANK_HINTS = {
    "p12_epilogue": "the store is still a TODO",
    "p12_gemm_tile": "the accumulator was never updated",
    "p12_coalesced_tile": "the accumulator was never updated",
    "p45_online_lse": "the store is still a TODO",
    "p45_sigmoid_gemm": "the store is still a TODO",
    "p12_fp16_split": "TODO 1-3 are still to write",
    "p12_predict_stream": "predicted_ms is still None",
    "p12_predict_speedup": "predicted_speedup is still None",
    "p12_wgmma_desc": "name 'start' is not defined",
}


@pytest.mark.parametrize("name", [n for n in exercises.NAMES if n in BLANK_HINTS])
def test_the_blank_skeleton_fails_with_a_hint(name, device, capsys):
    if name in PREDICTIONS and device == "cuda":
        pytest.skip("a blank prediction is refused before anything is measured")
    m = run(name, exercises.load_skeleton(name), device, capsys)
    assert not m.ok
    assert m.message.startswith("✗ ") and "Hint: " in m.message
    assert BLANK_HINTS[name] in m.message
    assert "\n" not in m.message
    # the check's own names for its guards stay out of a learner's line (audit #29)
    assert "result reuse" not in m.message and "the check found" not in m.message


def test_every_exercise_has_a_blank_hint():
    assert set(BLANK_HINTS) >= set(exercises.NAMES) - {HOPPER_EXERCISE}


# -- one slip each -----------------------------------------------------------------------------

SLIPS = [
    # (exercise, what the slip is, text in the solution, its replacement, words the line must hold)
    ("p12_epilogue", "no bias", "v = (acc + bias[None, :]) * multiplier", "v = acc * multiplier",
     "the bias is missing"),
    ("p12_epilogue", "ReLU", "v = tl.where(v > 0, v, v * negative_slope)", "v = tl.where(v > 0, v, 0.0)",
     "that is ReLU, not LeakyReLU"),
    ("p12_epilogue", "store without its mask", "v, mask=mask)", "v)", "stored outside y"),
    ("p12_epilogue", "last row never stored", "v, mask=mask)", "v, mask=mask & (rows[:, None] < M - 1))",
     "check the store's offsets and its mask"),
    ("p12_epilogue", "a misspelt name", "v = (acc + bias[None, :]) * multiplier",
     "v = (acc + bias_[None, :]) * multiplier",
     # Python's wording in the interpreter, Triton's compiler's on a GPU (seen with Triton 3.6)
     ("name 'bias_' is not defined", "bias_ is not defined")),
    ("p12_epilogue", "no @triton.jit", "@triton.jit\n", "", "keep the @triton.jit line"),
    ("p12_gemm_tile", "acc replaced", '        acc = tl.dot(a, w, acc, input_precision="ieee")\n',
     '        acc = tl.dot(a, w, input_precision="ieee")\n', "acc was replaced, not added to"),
    ("p12_gemm_tile", "W read as (K, N)", "w = tl.load(w_ptr + cols[None, :] * stride_wn + ks[:, None],",
     "w = tl.load(w_ptr + cols[None, :] + ks[:, None] * stride_wn,", "as if W were (K, N)"),
    ("p12_coalesced_tile", "strides swapped", "w_ptr + cols[:, None] * stride_wn + ks[None, :]",
     "w_ptr + cols[:, None] + ks[None, :] * stride_wn", "the strides are swapped"),
    ("p12_coalesced_tile", "no K mask", "mask=(cols[:, None] < N) & (ks[None, :] < K), other=0.0)",
     "mask=cols[:, None] < N, other=0.0)", "read past the end of W"),
    ("p12_coalesced_tile", "no mask at all", "mask=(cols[:, None] < N) & (ks[None, :] < K), other=0.0)",
     ")", "mask the K edge too"),
    ("p12_coalesced_tile", "acc replaced", "acc += tl.sum(", "acc = tl.sum(", "acc was replaced"),
    ("p12_coalesced_tile", "summed over the wrong axis", "xk[None, :], axis=1)", "xk[None, :], axis=0)",
     "so tl.sum(w * xk[None, :], axis=1) gives one value per column of y"),
    ("p45_online_lse", "sum not rescaled", "s = s * tl.exp(m - m_new) + ", "s = s + ",
     "the running sum was not rescaled"),
    ("p45_online_lse", "m never updated", "        m = m_new\n", "        pass\n", "m never left -inf"),
    ("p45_online_lse", "store without its mask", "mask=rows < M)", ")", "stored outside out"),
    ("p45_sigmoid_gemm", "no bias", "v = acc + bias[None, :]", "v = acc", "the bias is missing"),
    ("p45_sigmoid_gemm", "no sigmoid", "h = 1.0 / (1.0 + tl.exp(-v))", "h = v", "the sigmoid is missing"),
    ("p45_sigmoid_gemm", "store without the column mask",
     "mask=(rows[:, None] < M) & (cols[None, :] < H))", "mask=(rows[:, None] < M))", "stored outside h"),
    ("p12_wgmma_desc", "start not shifted", "start = (smem_byte_addr & 0x3FFFF) >> 4",
     "start = smem_byte_addr & 0x3FFFF", "it was not shifted by 4"),
    ("p12_wgmma_desc", "64-byte swizzle", "    swizzle = 1\n", "    swizzle = 2\n", "is 2 (64-byte swizzle)"),
]


# A merge slip of problem 45 that only shows when a row's running maximum grows (the sum not
# rescaled) goes unseen on draws where every row's largest logit sits in its first chunk (with
# nn.Linear's own biases, about 1 draw in 10). The model cannot be tweaked from a test to avoid
# that: the kernel runs in a worker process, which draws its own. So those slips get a few draws.
SOMETIMES_UNSEEN = {("p45_online_lse", "sum not rescaled")}
DRAWS = 5


@pytest.mark.parametrize("name,slip,old,new,words", SLIPS, ids=[f"{s[0]}-{s[1]}" for s in SLIPS])
def test_a_slip_gets_its_own_hint(name, slip, old, new, words, device, capsys):
    for _ in range(DRAWS if (name, slip) in SOMETIMES_UNSEEN else 1):
        m = run(name, with_slip(name, old, new), device, capsys)
        if not m.ok:
            break
    assert m.message.startswith("✗ ") and "Hint: " in m.message and not m.ok
    assert any(w in m.message for w in ((words,) if isinstance(words, str) else words)), m.message


def test_every_kernel_exercise_has_slips():
    assert {s[0] for s in SLIPS} == set(KERNELS) | {HOPPER_EXERCISE}   # its slips are Python, run alike


# A kernel whose numbers are wrong: the output scaled by 1.001, still following its input. More
# than the fp32 an exercise declares can explain, so the check itself fails it (a wrong result,
# not the "fast" tier it was once given), the line is a ✗ and the Measurement is not ok either.
P12_V = "v = (acc + bias[None, :]) * multiplier"
WRONG_NUMBERS = {
    "p12_epilogue": (P12_V, P12_V + " * 1.001"),
    "p12_gemm_tile": (P12_V, P12_V + " * 1.001"),
    "p12_coalesced_tile": ("v = (acc + bias) * multiplier", "v = (acc + bias) * multiplier * 1.001"),
    "p45_online_lse": ("m + tl.log(s)", "(m + tl.log(s)) * 1.001"),
    # h 10% too large: the logsumexp averages its error down (h 0.1% or 1% too large passes
    # KernelBench's allclose on some draws)
    "p45_sigmoid_gemm": ("h = 1.0 / (1.0 + tl.exp(-v))", "h = 1.1 / (1.0 + tl.exp(-v))"),
}
# The same places with 1 added: whichever guard sees it first (the numbers, or a second input
# whose answer came out nearer the first's), the line is a ✗ and the result not ok.
PLUS_ONE = {
    "p12_epilogue": (P12_V, P12_V + " + 1.0"),
    "p12_gemm_tile": (P12_V, P12_V + " + 1.0"),
    "p12_coalesced_tile": ("v = (acc + bias) * multiplier", "v = (acc + bias) * multiplier + 1.0"),
    "p45_online_lse": ("m + tl.log(s)", "m + tl.log(s) + 1.0"),
    "p45_sigmoid_gemm": ("h = 1.0 / (1.0 + tl.exp(-v))", "h = 1.0 / (1.0 + tl.exp(-v)) + 1.0"),
}


@pytest.mark.parametrize("name", KERNELS)
def test_wrong_numbers_are_a_failure_not_a_tier(name, capsys):
    old, new = WRONG_NUMBERS[name]
    m = run(name, with_slip(name, old, new), "cpu", capsys)
    assert not m.check.ok and m.check.fault_classes == [check.WRONG], m.check.failures
    assert "more than fp32 arithmetic can explain" in m.check.failures[0]
    assert Measurement.ok.fget(m) is False and not m.tier   # the Measurement agrees with the ✗
    assert not m.ok and not m.timed and m.message.startswith("✗ wrong numbers (rel. error ")
    assert "Hint: " in m.message and "wrong result" not in m.message   # the learner's words
    with pytest.raises(ValueError, match="not recorded"):
        m.record_fields()


@pytest.mark.parametrize("name", KERNELS)
def test_adding_one_is_a_failure(name, capsys):
    old, new = PLUS_ONE[name]
    m = run(name, with_slip(name, old, new), "cpu", capsys)
    assert not m.ok and m.message.startswith("✗ ") and "Hint: " in m.message


def test_every_kernel_exercise_has_wrong_numbers():
    assert set(WRONG_NUMBERS) == set(PLUS_ONE) == set(KERNELS)


def test_a_compile_error_is_one_line_quoting_the_kernel(capsys):
    kernel = with_slip("p12_epilogue", "v = tl.where(v > 0, v, v * negative_slope)",
                       "v = tl.where(v > 0, v, v * undefined_slope)")
    m = exercises.check("p12", "p12_epilogue", kernel, time_it=False)
    assert not m.ok and m.message.startswith("✗ your kernel raised an error: in `v = tl.where(")
    assert "undefined_slope" in m.message and "Hint: check the kernel's signature" in m.message
    assert "Traceback" not in "".join(capsys.readouterr())


# -- the split: each fault gets its hint, found by probing the split ---------------------------

LO = fp16_split.LO_SCALE


def _row_scale(t, amax=None, target=15):
    amax = t.abs().amax(dim=1, keepdim=True) if amax is None else amax
    return torch.ldexp(torch.ones_like(amax), target - torch.frexp(amax).exponent)


def _parts(t, s):
    hi = (t * s).half()
    return hi, ((t * s - hi.float()) * LO).half(), s


def no_row_scale(t):
    hi = t.half()
    return hi, ((t - hi.float()) * LO).half(), torch.ones(t.shape[0], 1)


def one_scale_per_tensor(t):
    return _parts(t, _row_scale(t, t.abs().amax().reshape(1, 1)).expand(t.shape[0], 1))


def residual_in_fp16(t):
    hi, _, s = _parts(t, _row_scale(t))
    return hi, (t * s).half() - hi, s


def residual_not_lifted(t):
    s = _row_scale(t)
    hi = (t * s).half()
    return hi, (t * s - hi.float()).half(), s


def residual_of_unscaled_t(t):
    s = _row_scale(t)
    hi = (t * s).half()
    return hi, ((t - hi.float()) * LO).half(), s


def scale_not_returned(t):
    hi, lo, s = _parts(t, _row_scale(t))
    return hi, lo, torch.ones_like(s)


def scale_inverted(t):
    hi, lo, s = _parts(t, _row_scale(t))
    return hi, lo, 1 / s


def scale_from_log2(t):
    return _parts(t, 2.0 ** (14 - torch.floor(torch.log2(t.abs().amax(dim=1, keepdim=True)))))


def scale_aimed_too_high(t):
    return _parts(t, _row_scale(t, target=16))


def writes_into_t(t):
    s = _row_scale(t)
    t.mul_(s)
    hi = t.half()
    return hi, ((t - hi.float()) * LO).half(), s


def hi_in_fp32(t):
    hi, lo, s = _parts(t, _row_scale(t))
    return hi.float(), lo, s


def hi_in_bf16(t):
    hi, lo, s = _parts(t, _row_scale(t))
    return hi.bfloat16(), lo, s


def two_parts(t):
    return _parts(t, _row_scale(t))[:2]


SPLIT_FAULTS = [
    # (the split, words its line must hold, whether the fp16x3 linear itself still passes)
    (no_row_scale, "no row scale: hi overflows fp16", True),
    (one_scale_per_tensor, "the scale is one for the whole tensor, not one per row", True),
    (residual_in_fp16, "lo is zero everywhere", False),
    (residual_not_lifted, "lo is the residual itself, not 2048 times it", False),
    (residual_of_unscaled_t, "the residual of t, not of t * scale", False),
    (scale_not_returned, "the scale returned is not the one applied", False),
    (scale_inverted, "scale is inverted", False),
    (scale_from_log2, "a row of zeros gets scale inf", True),
    (scale_aimed_too_high, "fp16 overflows", False),
    (writes_into_t, "split changed its input t in place", False),
    (hi_in_fp32, "hi is torch.float32, not torch.float16", False),
    (hi_in_bf16, "bf16 keeps 8 significant bits", False),
    (two_parts, "returned a tuple of 2; expected (hi, lo, scale)", False),
]


@pytest.mark.parametrize("split,words,linear_passes", SPLIT_FAULTS, ids=[f[0].__name__ for f in SPLIT_FAULTS])
def test_a_split_fault_gets_its_own_hint(split, words, linear_passes, capsys):
    m = run("p12_fp16_split", split, "cpu", capsys)
    assert m.message.startswith("✗ ") and "Hint: " in m.message and not m.ok, m.message
    assert words in m.message, m.message
    # Faults only rows of unusual range show: the linear on KernelBench's inputs is faithful,
    # and the line says so (the probe, not the tier, found them).
    assert (m.tier == "fp32-faithful") == linear_passes, m.message
    if linear_passes:
        assert "the fp16x3 linear built from it is fp32-faithful" in m.message


def test_a_split_in_the_solution_with_one_slip(capsys):
    split = with_slip("p12_fp16_split", "lo = ((t * scale - hi.float()) * LO_SCALE).half()",
                      "lo = (t * scale - hi.float()).half()")
    m = run("p12_fp16_split", split, "cpu", capsys)
    assert "lo is the residual itself" in m.message


def test_the_probe_matrix_spans_the_ranges_it_claims():
    t = fp16_split.probe_matrix()
    amax = t.abs().amax(dim=1)
    assert amax[-1] == 0 and amax.max() > 2.0**max(fp16_split.PROBE_EXPONENTS)
    assert amax[:-1].min() < 2.0**(min(fp16_split.PROBE_EXPONENTS) + 2)
    assert torch.equal(t, fp16_split.probe_matrix())       # the same every time
    hi, lo, scale = fp16_split.split(t)
    # the worked split: scale a power of two, max |t| * scale in [2^14, 2^15) for every non-zero row
    live = amax > 0
    top = (amax[live] * scale[live, 0])
    assert bool(((top >= 2.0**14) & (top < 2.0**15)).all())
    assert fp16_split.diagnose(fp16_split.split).seen == ""


# -- predictions: settled from the records, never from typed numbers ---------------------------

def _newest(df: pd.DataFrame, problem: str, sizes: str, variant: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The newest run that recorded ``variant`` and eager at ``sizes``: its rows at those
    sizes, and all its rows (the device's ceilings included)."""
    at = df[(df["problem"] == problem) & (df["sizes"] == sizes)]
    runs = set(at.loc[at["variant"] == variant, "run_id"]) & set(at.loc[at["variant"] == "eager", "run_id"])
    run_id = at[at["run_id"].isin(runs)].sort_values("timestamp")["run_id"].iloc[-1]
    return at[at["run_id"] == run_id], df[df["run_id"] == run_id]


def test_the_stream_prediction_is_settled_by_the_newest_record():
    df = records.read_records(records.default_path())
    p12 = problems.get("p12")
    run_rows, whole_run = _newest(df, "p12", problems.fmt_sizes(p12.sizes(batch_size=1)), stream.SLUG)
    row = run_rows[(run_rows["variant"] == stream.SLUG)].iloc[0]
    out = stream.EXERCISE.outcome("cpu")
    assert out.value == row["median_ms"] and not out.error
    assert results.run_label(row) in out.source and out.source.startswith("recorded: ")
    copy = whole_run.loc[whole_run["variant"] == "d2d_copy", "gbps"].iloc[0]   # the same run's copy rate
    assert out.facts["copy_gbps"].value == copy
    n, k = p12.defaults["out_features"], p12.defaults["in_features"]
    assert out.facts["weight_bytes"].value == n * k * 4 / 1e6
    assert stream.predict(out.facts) == pytest.approx(n * k * 4 / (copy * 1e9) * 1e3)


def test_the_speedup_prediction_is_settled_by_the_newest_record():
    df = records.read_records(records.default_path())
    p12 = problems.get("p12")
    at = problems.fmt_sizes(p12.defaults)
    run_rows, _ = _newest(df, "p12", at, speedup.SLUG)
    eager = run_rows.loc[run_rows["variant"] == "eager", "median_ms"].iloc[0]
    step = run_rows.loc[run_rows["variant"] == speedup.SLUG, "median_ms"].iloc[0]
    out = speedup.EXERCISE.outcome("cpu")
    assert out.value == pytest.approx(eager / step) and out.source.startswith("recorded: ")
    base, _ = _newest(df, "p12", at, speedup.ONE_PRODUCT)
    one = base.loc[base["variant"] == speedup.ONE_PRODUCT, "median_ms"].iloc[0]
    base_eager = base.loc[base["variant"] == "eager", "median_ms"].iloc[0]
    assert out.facts["fp16_ms"].value == one and out.facts["eager_ms"].value == base_eager
    assert speedup.predict(out.facts) == pytest.approx(base_eager / (3 * one))


def test_a_changed_record_changes_the_answer(tmp_path, monkeypatch, capsys):
    """The measured value is read from the records file in use: doubling the step's recorded
    time doubles it (nothing in the exercise holds the number)."""
    raw = pd.read_csv(records.default_path(), dtype=str, keep_default_na=False)
    before = stream.EXERCISE.outcome("cpu").value
    hit = (raw["variant"] == stream.SLUG) & (raw["sizes"] == problems.fmt_sizes(
        problems.get("p12").sizes(batch_size=1)))
    for col in ("median_ms", "p10_ms", "p90_ms"):
        raw.loc[hit, col] = [repr(2 * float(v)) if v else v for v in raw.loc[hit, col]]
    path = tmp_path / "records.csv"
    raw.to_csv(path, index=False)
    monkeypatch.setenv("FUSEDKIT_RECORDS", str(path))
    assert stream.EXERCISE.outcome("cpu").value == pytest.approx(2 * before)
    m = run("p12_predict_stream", 2 * before, "cpu", capsys)
    assert m.ok and m.ratio == pytest.approx(1.0)


@pytest.mark.parametrize("name", PREDICTIONS)
def test_no_record_is_one_line(name, tmp_path, monkeypatch, capsys):
    path = tmp_path / "records.csv"
    path.write_text(",".join(records.COLUMNS) + "\n")
    monkeypatch.setenv("FUSEDKIT_RECORDS", str(path))
    m = run(name, 1.0, "cpu", capsys)
    assert not m.ok and "nothing to compare with: no recorded run" in m.message


def _facts(ex):
    return ex.outcome("cpu").facts


STREAM_MISSES = [
    # (what the learner did, the prediction it gives from the facts, words the line must hold)
    ("W in fp16 bytes", lambda f: f["weight_bytes"].value * 1e6 / 2 / (f["copy_gbps"].value * 1e9) * 1e3,
     "W is fp32: 4 bytes a weight"),
    ("W read and written", lambda f: 2 * stream.predict(f), "the copy rate already counts bytes read plus"),
    ("the FLOPs at the FP32 rate", lambda f: f["flops"].value * 1e9 / (f["fp32_tflops"].value * 1e12) * 1e3,
     "the time is W's bytes over memory's rate, not the FLOPs"),
    ("the full batch", lambda f: f["default_flops"].value * 1e9 / (f["fp32_tflops"].value * 1e12) * 1e3,
     "that is the full batch"),
    ("microseconds", lambda f: 1e3 * stream.predict(f), "your number looks like microseconds"),
    ("seconds", lambda f: stream.predict(f) / 1e3, "your number looks like seconds"),
    ("a guess", lambda f: 40 * stream.predict(f) * 1.37, "count W's bytes and divide by the copy rate"),
]

SPEEDUP_MISSES = [
    ("one fp16 product", lambda f: f["eager_ms"].value / f["fp16_ms"].value, "fp32-faithful needs three"),
    ("the datasheet's fp16 rate", lambda f: f["eager_ms"].value / (3 * f["flops"].value * 1e9
                                                                   / (f["fp16_tflops"].value * 1e12) * 1e3),
     "no GEMM runs at the datasheet rate"),
    ("four products", lambda f: f["eager_ms"].value / (4 * f["fp16_ms"].value), "the fourth, lo·lo"),
    ("tf32x3", lambda f: f["eager_ms"].value / (3 * f["flops"].value * 1e9
                                                / (f["tf32_tflops"].value * 1e12) * 1e3),
     "that is tf32x3"),
    ("no speed-up", lambda f: 1.0, "fp32-faithful is an accuracy tier, not fp32 arithmetic"),
]


@pytest.mark.parametrize("name,miss,value,words",
                         [("p12_predict_stream", *m) for m in STREAM_MISSES]
                         + [("p12_predict_speedup", *m) for m in SPEEDUP_MISSES],
                         ids=[f"stream-{m[0]}" for m in STREAM_MISSES]
                         + [f"speedup-{m[0]}" for m in SPEEDUP_MISSES])
def test_a_missed_prediction_names_its_model(name, miss, value, words, capsys):
    ex = exercises.get(name)
    predicted = value(_facts(ex))
    m = run(name, predicted, "cpu", capsys)
    assert not m.ok and m.message.startswith(f"✗ predicted {ex.with_unit(predicted)}; measured "), m.message
    assert words in m.message and "recorded: " in m.message, m.message
    assert m.ratio == pytest.approx(ex.outcome("cpu").value / predicted)


@pytest.mark.parametrize("name", PREDICTIONS)
@pytest.mark.parametrize("bad", [None, "0.06", -1.0, 0, math.nan, math.inf, True, [0.1]],
                         ids=["None", "str", "negative", "zero", "nan", "inf", "bool", "list"])
def test_a_bad_prediction_is_one_line(name, bad, capsys):
    m = run(name, bad, "cpu", capsys)
    assert not m.ok and m.message.startswith("✗ no prediction yet: ") and m.predicted is None
    assert exercises.get(name).kernel_name in m.message


@pytest.mark.parametrize("name", PREDICTIONS)
def test_given_prints_the_facts_and_their_sources(name, capsys):
    exercises.given(name, device="cpu")
    out = capsys.readouterr().out
    facts = exercises.get(name).outcome("cpu").facts
    assert len(out.splitlines()) == len(facts) + 1
    assert all(f.source in out for f in facts.values()) and "recorded: " in out and "datasheet" in out


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("name", PREDICTIONS)
def test_a_prediction_is_measured_on_a_gpu(name, capsys):
    ex = exercises.get(name)
    out = ex.outcome("cuda")
    assert not out.error or "Hopper" in out.error, out.error
    m = run(name, ex.solution(out.facts), "cuda", capsys)
    assert "measured now on " in m.message or "recorded: " in m.message
    print(m.message)


# -- the skeletons, the solutions and the notebooks agree -------------------------------------

@pytest.mark.parametrize("name", KERNELS + ["p12_fp16_split"])
def test_the_solution_is_the_skeleton_completed(name):
    ex = exercises.get(name)
    skeleton = ex.skeleton.splitlines()
    start = next(i for i, ln in enumerate(skeleton) if ln.startswith(("@", "def ")))
    head = [ln for ln in skeleton[:start] if ln.strip()]
    # Before the function: imports, and constants the solution's module defines alike.
    namespace = exec_source("\n".join(head) + "\n", name)
    module = inspect.getmodule(getattr(ex.solution, "fn", ex.solution))
    for ln in head:
        if not ln.startswith("import "):
            const = ln.split("=")[0].strip()
            assert namespace[const] == getattr(module, const), f"{name}: {const} differs from the solution's"
    if name in KERNELS:
        assert head == ["import triton", "import triton.language as tl"]
    todos = [ln for ln in skeleton if "# TODO" in ln]
    assert 1 <= len(todos) <= 6
    given = [ln.replace("# TODO ", "# ") for ln in skeleton[start:] if ln.strip()]
    solved = [ln for ln in source_of(ex.solution).splitlines() if ln.strip()]
    it = iter(solved)   # every skeleton line appears in the solution, in order
    missing = [ln for ln in given if not any(ln == s for s in it)]
    assert not missing, f"{name}: skeleton lines not in the solution: {missing}"
    written = len(solved) - len(given)
    assert 2 <= written <= 8, f"{name}: the learner writes {written} lines"
    assert ex.kernel_name in ex.skeleton and f"def {ex.kernel_name}(" in ex.skeleton


@pytest.mark.parametrize("name", PREDICTIONS)
def test_a_prediction_skeleton_is_one_number_to_write(name):
    ex = exercises.get(name)
    code = [ln for ln in ex.skeleton.splitlines() if ln.strip() and not ln.startswith("#")]
    assert code == [f"{ex.kernel_name} = None   # TODO: " + code[0].split("# TODO: ")[1]]
    assert exercises.load_skeleton(name) is None
    assert not re.search(r"\d\.\d|\d{3}", ex.skeleton), "no measured number in the skeleton"


def test_show_solution_prints_the_worked_answer(capsys):
    exercises.show_solution("p45_online_lse")
    out = capsys.readouterr().out
    assert "@triton.jit" in out and "def online_lse_kernel(" in out and "tl.log(s)" in out
    exercises.show_solution("p12_fp16_split")
    out = capsys.readouterr().out
    assert "def split(t" in out and "torch.frexp" in out
    exercises.show_solution("p12_predict_stream")
    out = capsys.readouterr().out
    value = stream.predict(_facts(stream.EXERCISE))
    assert "def predict(facts" in out and f"{value:.3g} ms" in out


def test_wrong_arguments_raise_one_line_errors():
    with pytest.raises(ValueError, match="not known; valid: p12_epilogue"):
        exercises.get("p12_epilog")
    with pytest.raises(ValueError, match="belongs to problem p12, not p45"):
        exercises.check("p45", "p12_epilogue", exercises.solution("p12_epilogue"))
    with pytest.raises(ValueError, match="belongs to problem p12, not p45"):
        exercises.check("p45", "p12_predict_stream", 0.1)
    with pytest.raises(ValueError, match="takes no sizes"):
        exercises.check("p12", "p12_predict_stream", 0.1, sizes=dict(batch_size=1))
    with pytest.raises(ValueError, match="is not a prediction"):
        exercises.given("p12_epilogue")
    with pytest.raises(ValueError, match="is a prediction"):
        exercises.builder("p12_predict_speedup", None)


# Exercises whose cells are not yet in their course notebook. Strict: once a name's cells are
# in its notebook, this test fails until the name leaves the set.
AWAITING_NOTEBOOK: set[str] = set()


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def _notebook_test_params():
    for name in exercises.NAMES:
        marks = [pytest.mark.xfail(strict=True, reason="cells drafted, not yet in the notebook")] \
            if name in AWAITING_NOTEBOOK else []
        yield pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("name", list(_notebook_test_params()))
def test_its_notebook_holds_the_exercise(name):
    ex = exercises.get(name)
    found = sorted((ROOT / "notebooks").glob(f"{ex.notebook}_*.ipynb"))
    assert len(found) == 1, f"no single notebook numbered {ex.notebook}: {found}"
    cells = _cells(found[0])
    sources = ["".join(c["source"]) for c in cells]
    start = max(i for i, s in enumerate(sources) if s.startswith("## ") and "Your turn" in s)
    tail = cells[start:]
    code = ["".join(c["source"]) for c in tail if c["cell_type"] == "code"]
    assert ex.skeleton.rstrip("\n") in [s.rstrip("\n") for s in code], \
        f"{found[0].name}: no cell holds the skeleton of {name} exactly"
    checks = [s for s in code if re.search(rf'exercises\.check\(problem, "{name}", {ex.kernel_name}\)', s)]
    assert checks, f"{found[0].name}: no cell checks {name}"
    assert any(f'exercises.show_solution("{name}")' in s for s in code)
    if isinstance(ex, PredictionExercise):   # the facts come before the prediction's cell
        first_given = next(i for i, s in enumerate(code) if f'exercises.given("{name}")' in s)
        assert first_given < code.index(next(s for s in code if s.rstrip("\n") == ex.skeleton.rstrip("\n")))
    assert all(not c.get("outputs") and not c.get("execution_count")
               for c in tail if c["cell_type"] == "code")
