"""The course's exercises at their public face, ``exercises.check``: every worked solution is a
``✓``, every shipped skeleton (the exact text of its notebook cell) a ``✗`` with its hint, each
kind of fault one line naming it, never a traceback, and a ``✗`` is never ``ok``.

Without a GPU the kernels run in Triton's interpreter at small odd sizes and the predictions are
settled from ``data/records.csv``; on a GPU (``-m gpu``) the kernels run at the problem's sizes.
The wgmma descriptor has its own file (``test_exercise_wgmma_desc.py``).
"""

import inspect
import itertools
import json
import linecache
import math
import re
from pathlib import Path

import pandas as pd
import pytest
import torch

from fusedkit import exercises, problems, records, results
from fusedkit.exercises import p12_fp16_split as fp16_split
from fusedkit.exercises import p12_predict_speedup as speedup
from fusedkit.exercises import p12_predict_stream as stream
from fusedkit.exercises._predict import PredictionExercise
from fusedkit.exercises._protocol import dims, source_of
from fusedkit.exercises._triton import Probe, TritonExercise, _draw
from fusedkit.problems.base import nearby_odd

ROOT = Path(__file__).resolve().parent.parent
KERNELS = [n for n in exercises.NAMES if isinstance(exercises.get(n), TritonExercise)]
PREDICTIONS = [n for n in exercises.NAMES if isinstance(exercises.get(n), PredictionExercise)]
CPU = torch.device("cpu")
_cells = itertools.count(1)


def exec_source(source: str, label: str) -> dict:
    """Execute ``source`` as a notebook cell would, in a fresh namespace, under a file name
    registered with :mod:`linecache` (Triton reads a kernel's source through :mod:`inspect`)."""
    filename = f"<fusedkit exercise {label} #{next(_cells)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict = {"__name__": f"fusedkit_exercise_{label}"}
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - our own skeleton text
    return namespace


def shipped_cell(name: str):
    """What the notebook's cell of exercise ``name`` defines, run as the notebook runs it."""
    ex = exercises.get(name)
    return exec_source(ex.skeleton, name).get(ex.answer)


def with_slip(name: str, slip):
    """The worked solution with one change (old, new), or a list of them, executed like a
    notebook cell."""
    ex = exercises.get(name)
    src = source_of(ex.solution)
    for old, new in [slip] if isinstance(slip[0], str) else slip:
        assert src.count(old) == 1, f"{name}: {old!r} is not in the solution exactly once"
        src = src.replace(old, new)
    head = ex.imports + "\n\n\n" if ex.imports else ""
    return exec_source(head + src, name)[ex.answer]


def run(name, answer, capsys, **kw):
    """``exercises.check`` of ``answer`` as exercise ``name`` on the CPU: exactly one printed
    line, no traceback, and ok exactly when the line is a ✓."""
    ex = exercises.get(name)
    v = exercises.check(problems.get(ex.problem_key), name, answer, device="cpu", **kw)
    out, err = capsys.readouterr()
    assert out.splitlines() == [v.message] and "Traceback" not in out + err, out + err
    assert v.message[:1] in "✓✗" and v.ok == v.message.startswith("✓"), v.message
    assert v.ok or "Hint: " in v.message, v.message
    return v


# -- the course: one protocol, an exercise in every notebook, its cells there -------------------

@pytest.mark.parametrize("name", exercises.NAMES)
def test_its_notebook_holds_the_skeleton_the_check_and_the_solution(name):
    ex = exercises.get(name)
    (path,) = sorted((ROOT / "notebooks").glob(f"{ex.notebook}_*.ipynb"))
    cells = json.loads(path.read_text())["cells"]
    start = max(i for i, c in enumerate(cells) if c["cell_type"] == "markdown" and any(
        line.startswith("## ") and "Your turn" in line for line in "".join(c["source"]).splitlines()))
    code = ["".join(c["source"]).rstrip("\n") for c in cells[start:] if c["cell_type"] == "code"]
    assert ex.skeleton.rstrip("\n") in code, f"{path.name}: no cell holds the skeleton of {name} exactly"
    assert any(re.search(rf'exercises\.check\(problem, "{name}", {ex.answer}\)', s) for s in code)
    assert any(f'exercises.show_solution("{name}")' in s for s in code)
    if isinstance(ex, PredictionExercise):   # the facts come before the prediction's cell
        assert min(i for i, s in enumerate(code) if f'exercises.given("{name}")' in s) < code.index(
            ex.skeleton.rstrip("\n"))


def test_every_notebook_has_an_exercise():
    assert sorted({exercises.get(n).notebook for n in exercises.NAMES}) == list(exercises.COURSE)


@pytest.mark.parametrize("name", [n for n in exercises.NAMES if n not in PREDICTIONS])
def test_the_solution_is_the_skeleton_completed(name):
    ex = exercises.get(name)
    skeleton = ex.skeleton.splitlines()
    start = next(i for i, ln in enumerate(skeleton) if ln.startswith(("@", "def ")))
    head = [ln for ln in skeleton[:start] if ln.strip()]
    namespace = exec_source("\n".join(head) + "\n", name)   # the constants the module defines alike
    module = inspect.getmodule(getattr(ex.solution, "fn", ex.solution))
    assert all(namespace[ln.split("=")[0].strip()] == getattr(module, ln.split("=")[0].strip())
               for ln in head if not ln.startswith("import "))
    given = [ln.replace("# TODO ", "# ") for ln in skeleton[start:] if ln.strip()]
    solved = [ln for ln in source_of(ex.solution).splitlines() if ln.strip()]
    it = iter(solved)   # every skeleton line appears in the solution, in order
    assert all(any(g == s for s in it) for g in given), name
    assert 1 <= sum("# TODO" in ln for ln in skeleton) <= 6 and 2 <= len(solved) - len(given) <= 8


def test_show_solution_and_about_print_what_the_code_holds(capsys):
    exercises.show_solution("p45_online_lse")
    assert "def online_lse_kernel(" in capsys.readouterr().out
    exercises.show_solution("p12_predict_stream")
    value = stream.predict(stream.EXERCISE.outcome(CPU).facts)
    assert f"# from the facts above: {value:.3g} ms" in capsys.readouterr().out
    exercises.about("p45_sigmoid_gemm")
    p45 = problems.get("p45")
    small = p45.sizes(exercises.get("p45_sigmoid_gemm").cpu_sizes)
    assert f"at {dims(small)} and the nearby odd shape {dims(nearby_odd(p45, small))}" in capsys.readouterr().out


def test_wrong_arguments_raise_one_line_errors():
    with pytest.raises(ValueError, match="not known; valid: p12_epilogue"):
        exercises.get("p12_epilog")
    with pytest.raises(ValueError, match="belongs to problem p12, not p45"):
        exercises.check("p45", "p12_epilogue", None)
    with pytest.raises(ValueError, match="takes no sizes"):
        exercises.check("p12", "p12_predict_stream", 0.1, sizes=dict(batch_size=1))
    with pytest.raises(ValueError, match="takes no time_it"):
        exercises.check("p12", "p12_fp16_split", fp16_split.split, time_it=False)
    with pytest.raises(ValueError, match="device='tpu'"):
        exercises.check("p12", "p12_predict_stream", 0.1, device="tpu")
    with pytest.raises(ValueError, match="is not a prediction"):
        exercises.given("p12_epilogue")


# -- the Triton kernels ----------------------------------------------------------------------------

@pytest.mark.parametrize("name", KERNELS)
def test_the_worked_kernel_passes_and_the_shipped_cell_fails_with_its_hint(name, capsys):
    ex = exercises.get(name)
    timed = name == "p12_epilogue"   # one timed (the cheapest): the line quotes its time
    v = run(name, ex.solution, capsys, time_it=timed)
    sizes, m = ex.problem.sizes(ex.cpu_sizes), v.measurement
    assert v.ok and m.tier == "fp32-faithful" and m.timed == timed, v.message
    assert v.message.endswith(f"at {dims(sizes)} and {dims(nearby_odd(ex.problem, sizes))}")
    assert (" ms per call in Triton's CPU interpreter" in v.message) == timed
    blank = run(name, shipped_cell(name), capsys)
    hint = ex.hints.get("nothing_stored") or "the accumulator was never updated"
    assert not blank.ok and hint in blank.message and "result reuse" not in blank.message, blank.message


P12_V = "v = (acc + bias[None, :]) * multiplier"
MASKED_STORE = "tl.store(y_ptr + rows[:, None] * stride_ym + cols[None, :], v, mask=mask)"
FAULTS = [
    # (exercise, slip: (text in the solution, its replacement), words the line must hold)
    ("p12_epilogue", ("v = (acc + bias[None, :]) * multiplier", "v = acc * multiplier + bias[None, :]"),
     "✗ wrong numbers (rel. error ", "at 17x33x65): y is LeakyReLU(acc * multiplier + b): the multiply "
     "came before the bias. Hint: TODO 2: add the bias first"),
    ("p12_epilogue", ("v, mask=mask)", "v)"),
     "✗ stored outside y: ", "elements past its end were written at 15x29x57, the nearby odd shape "
     "checked after your 17x33x65. Hint: the store needs mask=mask"),
    ("p12_epilogue", ("v, mask=mask)", "v, mask=mask & (rows[:, None] < M - 1))"),
     "✗ unwritten output: ", "elements of y are NaN/Inf at 15x29x57, the nearby odd shape checked after "
     "your 17x33x65, the first at y[14, 0]. Hint: check the store's offsets and its mask"),
    ("p12_epilogue", (P12_V, "v = (acc + bias_[None, :]) * multiplier"),
     "✗ your kernel raised an error: in `v = (acc + bias_[None, :]) * multiplier`: ",
     "bias_' is not defined. Hint: check the kernel's signature"),
    ("p12_epilogue", ("@triton.jit\n", ""), "✗ your kernel raised an error: got function",
     "not a Triton kernel: keep the @triton.jit line above its def"),
    ("p12_epilogue", (P12_V, P12_V + " * 1.001"), "✗ wrong numbers (rel. error ",
     "Hint: check the bias (b[cols], one per column)"),
    ("p12_epilogue", (P12_V, P12_V + " * (1.0 + 1e-5)"), "✗ close but not fp32-faithful (",
     "KernelBench's 1e-4 would pass). Hint: compute in fp32 throughout"),
    ("p12_epilogue", (MASKED_STORE, MASKED_STORE + "\n    tl.store(b_ptr + cols, bias * 2.0, mask=cols < N)"),
     "✗ input or weight mutation", "Hint: store only into y_ptr"),
    ("p12_epilogue", ("rows[:, None] * stride_am", "rows[:, None] * 64"),   # right only where N = 64
     "✗ shape specialisation: right at 17x33x64 but not at the nearby odd shape 15x29x55",
     "Hint: nothing may assume M or N is a multiple of the block"),
    ("p45_online_lse", ("        m = m_new\n", "        pass\n"),
     "✗ wrong output at 15x29x57x17, the nearby odd shape checked after your 17x33x65x19: every result "
     "is -inf", "Hint: TODO 3: m = m_new"),
]


@pytest.mark.parametrize("name,slip,starts,words", FAULTS, ids=[f"{f[0]}-{i}" for i, f in enumerate(FAULTS)])
def test_a_fault_is_one_line_naming_it(name, slip, starts, words, capsys):
    sizes = dict(batch_size=17, in_features=33, out_features=64) if "shape specialisation" in starts else None
    v = run(name, with_slip(name, slip), capsys, **({"sizes": sizes} if sizes else {}))
    assert v.message.startswith(starts) and words in v.message, v.message


def test_output_plus_one_is_a_failure(capsys):
    v = run("p45_sigmoid_gemm", with_slip("p45_sigmoid_gemm", ("h = 1.0 / (1.0 + tl.exp(-v))",
                                                               "h = 1.0 / (1.0 + tl.exp(-v)) + 1.0")), capsys)
    assert not v.ok and not v.measurement.ok and not v.measurement.timed


MISTAKES = {
    # exercise: the slip that makes each of its known mistakes, in their order
    "p12_epilogue": [(P12_V, "v = acc * multiplier"),
                     [("bias = tl.load(b_ptr + cols, mask=cols < N", "bias = tl.load(b_ptr + rows, mask=rows < M"),
                      ("(acc + bias[None, :])", "(acc + bias[:, None])")],
                     (P12_V, "v = acc + bias[None, :]"),
                     (P12_V, "v = acc * multiplier + bias[None, :]"),
                     ("v = tl.where(v > 0, v, v * negative_slope)", "v = v"),
                     ("v = tl.where(v > 0, v, v * negative_slope)", "v = tl.where(v > 0, v, 0.0)"),
                     ("v = tl.where(v > 0, v, v * negative_slope)", "v = tl.where(v > 0, v * negative_slope, v)")],
    "p12_gemm_tile": [('        acc = tl.dot(a, w, acc, input_precision="ieee")\n', ""),
                      ('        acc = tl.dot(a, w, acc, input_precision="ieee")\n',
                       '        acc = tl.dot(a, w, input_precision="ieee")\n'),
                      ("w_ptr + cols[None, :] * stride_wn + ks[:, None],", "w_ptr + cols[None, :] + ks[:, None] * stride_wn,")],
    "p12_coalesced_tile": [("        acc += tl.sum(w * xk[None, :], axis=1)\n", ""),
                           ("acc += tl.sum(", "acc = tl.sum("),
                           ("w_ptr + cols[:, None] * stride_wn + ks[None, :]", "w_ptr + cols[:, None] + ks[None, :] * stride_wn"),
                           ("mask=(cols[:, None] < N) & (ks[None, :] < K), other=0.0)", "mask=cols[:, None] < N, other=0.0)")],
    "p45_sigmoid_gemm": [('        acc = tl.dot(a, w, acc, input_precision="ieee")\n', ""),
                         ('acc = tl.dot(a, w, acc, input_precision="ieee")', 'acc = tl.dot(a, w, input_precision="ieee")'),
                         ("v = acc + bias[None, :]", "v = acc"),
                         ("h = 1.0 / (1.0 + tl.exp(-v))", "h = v"),
                         ("h = 1.0 / (1.0 + tl.exp(-v))", "h = 1.0 / (1.0 + tl.exp(v))")],
    "p45_online_lse": [("        m = m_new\n", "        pass\n"),
                       ("s = s * tl.exp(m - m_new) + ", "s = s + "),
                       ("s = s * tl.exp(m - m_new) + ", "s = "),
                       ("m + tl.log(s), mask", "tl.log(s), mask"),
                       ("m + tl.log(s), mask", "m + s, mask")],
}


@pytest.mark.parametrize("name", KERNELS)
def test_each_known_mistake_is_named_by_its_slip(name):
    """Each mistake's float64 model equals the output of the kernel that makes it (the slipped
    solution, called once as the check's probe calls it), and no earlier model does; the line
    that names a matched mistake is shown above, at the public face."""
    ex = exercises.get(name)
    assert len(MISTAKES[name]) == len(ex.mistakes)
    sizes = nearby_odd(ex.problem, ex.problem.sizes(ex.cpu_sizes))
    model, x = _draw(ex.problem, sizes, CPU)
    parts = ex.parts(model, x)
    for mistake, slip in zip(ex.mistakes, MISTAKES[name]):
        out = ex.launcher(with_slip(name, slip), model)(x).out
        if name == "p45_online_lse" and "rescaled" in mistake.seen:   # shows only if a row's max grows
            assert (parts["z"][:, ex.cpu_blocks["BLOCK_N"]:].amax(1) > parts["z"][:, :ex.cpu_blocks["BLOCK_N"]].amax(1)).any()
        assert ex.matched(Probe(out, parts=parts)) == mistake, (name, mistake.seen)


# -- the split: each fault gets its hint, found by probing the split ------------------------------

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


def residual_in_fp16(t):
    hi, _, s = _parts(t, _row_scale(t))
    return hi, (t * s).half() - hi, s


def writes_into_t(t):
    s = _row_scale(t)
    t.mul_(s)
    hi = t.half()
    return hi, ((t - hi.float()) * LO).half(), s


SPLIT_FAULTS = [
    # (the split, words its line must hold)
    (no_row_scale, "no row scale: hi overflows fp16"),
    (lambda t: _parts(t, _row_scale(t, t.abs().amax().reshape(1, 1)).expand(t.shape[0], 1)),
     "the scale is one for the whole tensor, not one per row"),
    (residual_in_fp16, "lo is zero everywhere"),
    (lambda t: (lambda hi, s: (hi, (t * s - hi.float()).half(), s))((t * _row_scale(t)).half(), _row_scale(t)),
     "lo is the residual itself, not 2048 times it"),
    (lambda t: (lambda hi, s: (hi, ((t - hi.float()) * LO).half(), s))((t * _row_scale(t)).half(), _row_scale(t)),
     "the residual of t, not of t * scale"),
    (lambda t: _parts(t, _row_scale(t))[:2] + (torch.ones(t.shape[0], 1),), "the scale returned is not the one applied"),
    (lambda t: _parts(t, _row_scale(t))[:2] + (1 / _row_scale(t),), "scale is inverted"),
    (lambda t: _parts(t, 2.0 ** (14 - torch.floor(torch.log2(t.abs().amax(dim=1, keepdim=True))))),
     "a row of zeros gets scale inf"),
    (lambda t: _parts(t, _row_scale(t, target=16)), "fp16 overflows"),
    (writes_into_t, "split changed its input t in place"),
    (lambda t: (lambda hi, lo, s: (hi.float(), lo, s))(*_parts(t, _row_scale(t))), "hi is torch.float32, not torch.float16"),
    (lambda t: (lambda hi, lo, s: (hi.bfloat16(), lo, s))(*_parts(t, _row_scale(t))), "bf16 keeps 8 significant bits"),
    (lambda t: _parts(t, _row_scale(t))[:2], "returned a tuple of 2; expected (hi, lo, scale)"),
]


@pytest.mark.parametrize("split,words", SPLIT_FAULTS, ids=[f[1][:30] for f in SPLIT_FAULTS])
def test_a_split_fault_is_named_by_the_probe(split, words):
    try:
        seen, hint, *_ = fp16_split.diagnose(split)
    except fp16_split.SplitError as e:
        seen, hint = str(e), "(returned before any probe)"
    assert words in seen and hint, seen


def test_the_split_check_names_the_probe_fault_and_the_linear_tier(capsys):
    v = run("p12_fp16_split", fp16_split.split, capsys)
    assert v.ok and v.measurement.tier == "fp32-faithful" and not v.measurement.timed, v.message
    assert v.message.startswith("✓ right (fp32-faithful): the fp16x3 linear built from your split")
    assert float(re.search(r"within (\S+) of t \* scale", v.message)[1]) <= fp16_split.SPLIT_BOUND
    v = run("p12_fp16_split", no_row_scale, capsys)   # only the probe's rows show it
    assert "no row scale" in v.message and "the fp16x3 linear built from it is fp32-faithful" in v.message
    v = run("p12_fp16_split", residual_in_fp16, capsys)   # the linear's numbers show it too
    assert "lo is zero everywhere" in v.message and v.measurement.tier != "fp32-faithful", v.message
    v = run("p12_fp16_split", shipped_cell("p12_fp16_split"), capsys)
    assert "TODO 1-3 are still to write" in v.message and v.measurement is None
    amax = fp16_split.probe_matrix().abs().amax(dim=1)   # the rows the line says it probed
    assert amax[-1] == 0 and amax.max() > 2.0**max(fp16_split.PROBE_EXPONENTS)
    assert amax[:-1].min() < 2.0**(min(fp16_split.PROBE_EXPONENTS) + 2)


# -- predictions: settled from the records, never from typed numbers ------------------------------

def _run_rows(problem, sizes, *slugs):
    """The rows at ``sizes`` of the newest clean run that timed eager and every one of ``slugs``."""
    df = results.clean_rows(records.read_records(records.default_path()))
    at = df[(df["problem"] == problem) & (df["sizes"] == sizes)]
    runs = set(at["run_id"])
    for slug in ("eager", *slugs):
        runs &= set(at.loc[at["variant"] == slug, "run_id"])
    rows = at[at["run_id"].isin(runs)].sort_values("timestamp")
    return rows[rows["run_id"] == rows["run_id"].iloc[-1]].set_index("variant")


def test_the_predictions_are_settled_by_one_recorded_run():
    p12 = problems.get("p12")
    rows = _run_rows("p12", problems.fmt_sizes(p12.sizes(batch_size=1)), stream.SLUG)
    out = stream.EXERCISE.outcome(CPU)
    assert out.value == rows.loc[stream.SLUG, "median_ms"] and out.source.startswith("recorded: ")
    assert out.facts["weight_bytes"].value == p12.defaults["out_features"] * p12.defaults["in_features"] * 4 / 1e6
    rows = _run_rows("p12", problems.fmt_sizes(p12.defaults), speedup.SLUG, speedup.ONE_PRODUCT)
    out = speedup.EXERCISE.outcome(CPU)
    assert out.value == pytest.approx(rows.loc["eager", "median_ms"] / rows.loc[speedup.SLUG, "median_ms"])
    assert out.facts["fp16_ms"].value == rows.loc[speedup.ONE_PRODUCT, "median_ms"]
    assert rows.loc[speedup.SLUG, "device"] in out.source      # facts and answer: one run, one device


@pytest.mark.parametrize("name", PREDICTIONS)
def test_the_worked_prediction_passes_and_given_prints_its_facts(name, capsys):
    ex = exercises.get(name)
    exercises.given(name, device="cpu")
    shown, facts = capsys.readouterr().out, ex.outcome(CPU).facts
    assert len(shown.splitlines()) == len(facts) + 1 and all(f.source in shown for f in facts.values())
    v = run(name, ex.solution(facts), capsys)
    assert v.ok and v.values["model"] == ex.models(ex.outcome(CPU))[0].label, v.message
    assert shipped_cell(name) is None and not re.search(r"\d\.\d|\d{3}", ex.skeleton)   # no number given away


def test_a_changed_record_changes_the_answer(tmp_path, monkeypatch, capsys):
    raw = pd.read_csv(records.default_path(), dtype=str, keep_default_na=False)
    before = stream.EXERCISE.outcome(CPU).value
    hit = (raw["variant"] == stream.SLUG) & (raw["sizes"] == problems.fmt_sizes(stream.SIZES))
    for col in ("median_ms", "p10_ms", "p90_ms"):
        raw.loc[hit, col] = [repr(2 * float(v)) if v else v for v in raw.loc[hit, col]]
    raw.to_csv(tmp_path / "records.csv", index=False)
    monkeypatch.setenv("FUSEDKIT_RECORDS", str(tmp_path / "records.csv"))
    v = run("p12_predict_stream", 2 * before, capsys)
    assert v.ok and v.values["ratio"] == pytest.approx(1.0)
    (tmp_path / "records.csv").write_text(",".join(records.COLUMNS) + "\n")   # no record at all
    assert "nothing to compare with: no recorded run" in run("p12_predict_speedup", 1.0, capsys).message


MISSES = [
    # (exercise, what the learner did, the prediction it gives from the facts, words the line must hold)
    ("p12_predict_stream", "W in fp16 bytes", lambda f: stream.predict(f) / 2, "W is fp32: 4 bytes a weight"),
    ("p12_predict_stream", "microseconds", lambda f: 1e3 * stream.predict(f), "looks like microseconds"),
    ("p12_predict_stream", "a guess", lambda f: 54.8 * stream.predict(f), "count W's bytes and divide"),
    ("p12_predict_speedup", "one product", lambda f: f["eager_ms"].value / f["fp16_ms"].value, "needs three"),
    ("p12_predict_speedup", "four products", lambda f: f["eager_ms"].value / (4 * f["fp16_ms"].value),
     "the fourth, lo·lo"),
]


@pytest.mark.parametrize("name,miss,value,words", MISSES, ids=[m[1] for m in MISSES])
def test_a_missed_prediction_names_its_model(name, miss, value, words, capsys):
    ex = exercises.get(name)
    predicted = value(ex.outcome(CPU).facts)
    v = run(name, predicted, capsys)
    assert not v.ok and v.message.startswith(f"✗ predicted {ex.with_unit(predicted)}; measured ")
    assert words in v.message and "recorded: " in v.message, v.message


@pytest.mark.parametrize("bad", [None, "0.06", -1.0, math.nan, True, [0.1]])
def test_a_bad_prediction_is_one_line(bad, capsys):
    v = run("p12_predict_speedup", bad, capsys)
    assert v.message.startswith("✗ no prediction yet: predicted_speedup") and v.measurement is None


# -- on a GPU --------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("name", KERNELS + PREDICTIONS)
def test_on_a_gpu_the_solution_is_measured_at_the_problem_sizes(name, capsys):
    ex = exercises.get(name)
    answer = ex.solution(ex.outcome(torch.device("cuda")).facts) if name in PREDICTIONS else ex.solution
    v = exercises.check(ex.problem_key, name, answer)
    print(capsys.readouterr().out)
    if name in PREDICTIONS:
        assert "measured now on " in v.message or "recorded: " in v.message, v.message   # not a Hopper GPU
    else:
        assert v.ok and v.measurement.timing.timer == "cuda-events", v.message
        assert v.measurement.sizes == ex.problem.defaults and torch.cuda.get_device_name() in v.message
