"""``fusedkit.export``: every kernel as one KernelBench solution file that needs no fusedkit.

CPU part: every file ``fusedkit export --all`` writes is run the way KernelBench runs a solution
(its text exec'd, the reference Model and ModelNew built with the same constructor arguments and
seed) in a fresh process where importing fusedkit fails; the Triton ones run there in Triton's
interpreter at small odd sizes, right against float64 and bit for bit the registered variant.
The CUDA ones construct, load the reference's state_dict, and their sources compile: the .cu
translation unit to PTX (sm_90a for the Hopper ones, with every kernel), binding.cpp token for
token the repository's. The Python module that makes the Hopper and operands steps' operands runs
here and hands the kernels exactly the operands the registered variant hands them.
GPU part (marked ``gpu``): every export checked on the GPU (the Hopper ones on a Hopper GPU only),
and the best export of each tier timed at KernelBench's sizes beside its registered variant
(within 5%).
"""

from __future__ import annotations

import ast
import copy
import importlib.util
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
from operator import attrgetter
from pathlib import Path

import pytest
import torch

from fusedkit import build, export, problems, records
from fusedkit.cli import main
from fusedkit.harness import eager32, measure, reference64, rel_error
from fusedkit.harness.judge import faithful_bound
from fusedkit.precision import EPS32, KERNEL_TIERS
from kernel_helpers import gpu_test, needs_nvcc

PROBLEMS = [problems.get(k) for k in problems.names()]
# Small odd sizes: every dimension off the kernels' tile multiples, cheap in the interpreter.
SMALL = {"p12": {"batch_size": 17, "in_features": 33, "out_features": 65},
         "p45": {"batch_size": 17, "input_size": 33, "hidden_size": 65, "output_size": 19}}
EXPORTABLE = [(p.key, s) for p in PROBLEMS for s in export.exportable(p)]
TRITON = [(k, s) for k, s in EXPORTABLE if problems.get(k).variant(s).triton]
CUDA = [(k, s) for k, s in EXPORTABLE if not problems.get(k).variant(s).triton]
HOPPER = [(k, s) for k, s in CUDA if export.step_call(k, s).kind == "hopper"]
# Steps fed by a Python operands module (fp16 casts, fp16x3 splits, W transposed), embedded as source.
OPERANDS = [(k, s) for k, s in CUDA if export.step_call(k, s).kind in ("hopper", "cuda_operands")]
HOPPER_KEYS = sorted({k for k, _ in HOPPER})
HOPPER_GPU = torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9
# Unit roundoff of the precisions with one 16-bit product per term (fp16: 11 bits, bf16: 8).
ONE_16BIT_PRODUCT = {"fp16": 2.0**-11, "bf16": 2.0**-8}
IMPORTS_FUSEDKIT = re.compile(r"^\s*(from|import)\s+fusedkit\b", re.M)
ids = "{0[0]}-{0[1]}".format


def _load(path: Path, name: str = "solution"):
    """The exported file imported as a module of its own (the other way to load a solution)."""
    spec = importlib.util.spec_from_file_location(f"{name}_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _size_slots(problem) -> dict[str, tuple[str, int]]:
    """Which parameter axis carries each size: read off a model built with distinct sizes."""
    probe = {d.name: 3 + 2 * i for i, d in enumerate(problem.dims)}
    by_value = {v: k for k, v in probe.items()}
    slots: dict[str, tuple[str, int]] = {}
    for name, p in problem.make_model(probe).named_parameters():
        for axis, n in enumerate(p.shape):
            slots.setdefault(by_value[n], (name, axis))
    return slots


def _init_args(problem, model) -> list:
    """The constructor arguments of the reference ``model`` (KernelBench's get_init_inputs())."""
    params = dict(model.named_parameters())
    sizes = {dim: params[name].shape[axis] for dim, (name, axis) in _size_slots(problem).items()}
    sizes[problem.dims[0].name] = 1            # the batch is no constructor argument
    return export.init_inputs(problem, sizes)


def _builder(problem, path: Path):
    """A fusedkit build of an exported file: ModelNew with the reference's constructor arguments,
    the reference's weights loaded, called as KernelBench calls it."""
    module = _load(path, "built")

    def build_export(model):
        new = module.ModelNew(*_init_args(problem, model)).to(next(model.parameters()).device)
        new.load_state_dict(model.state_dict())
        return new
    return build_export


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict[tuple[str, str], Path]:
    """Every kernel of both problems, exported by ``fusedkit export --all``."""
    folder = tmp_path_factory.mktemp("kernelbench")
    for p in PROBLEMS:
        assert main(["export", "--problem", p.key, "--all", str(folder / p.key)]) == 0
    out = {(p.key, path.stem.split("_", 1)[1]): path for p in PROBLEMS for path in (folder / p.key).iterdir()}
    assert sorted(out) == sorted(EXPORTABLE)
    return out


# --- what is exported ---------------------------------------------------------------------


def test_every_kernel_and_no_baseline_is_exportable():
    """The export reads each variant's registration (no table to drift): every non-baseline
    variant of both problems has a step call, and the Triton ones name their source file."""
    for p in PROBLEMS:
        assert export.exportable(p) == [v.slug for v in p.ladder() if not v.baseline and not v.routes]
        for v in p.variants.values():
            if v.routes:  # a choice among exported steps by batch size: one line naming them
                with pytest.raises(ValueError, match="chooses among other steps by batch size"):
                    export.render(p, v.slug)
        for slug in export.exportable(p):
            call = export.step_call(p, slug)
            v = p.variant(slug)
            hopper = v.hopper
            plain = "cuda_operands" if call.operands else "cuda"
            assert call.kind == ("triton" if v.triton else "hopper" if hopper else plain), slug
            assert call.problem == p.key and call.function, slug
            if v.triton:
                assert v.source == f"{call.problem}/{call.filename}"
        for v in p.variants.values():
            if v.baseline:
                with pytest.raises(ValueError, match="baseline"):
                    export.render(p, v.slug)


def test_the_export_writes_from_data():
    """The file is written from the registry's data (StepCall, Weights): each weight is an
    attribute path of the model."""
    for p in PROBLEMS:
        model = p.make_model(SMALL[p.key])
        for slug in export.exportable(p):
            w = export.step_call(p, slug).weights
            assert all(isinstance(model.get_parameter(t), torch.nn.Parameter) for t in w.tensors)
            assert all(isinstance(attrgetter(n)(model), (int, float)) for n in w.numbers)


def test_embedded_literals_read_back_exactly():
    """Each embedded source reads back as itself: raw where that is exact, else its repr."""
    raw = ["plain", "tab\t, \\n and \\' escaped", "unicode \u00e9 \u2028", '"""double"""', ""]
    not_raw = ["ends in '", "ends in \\", "has ''' inside", "cr\r\nlf", "nul\0", "\\'''"]
    for text in raw + not_raw:
        lit = export._literal(text)
        assert ast.literal_eval(lit) == text, text
        assert lit.startswith("r'''") == (text in raw), text


@pytest.mark.parametrize("case", EXPORTABLE, ids=ids)
def test_the_file_never_imports_fusedkit_and_says_what_it_is(case, exported):
    text = exported[case].read_text()
    assert text == export.render(*case)
    assert "from fusedkit" not in text and not IMPORTS_FUSEDKIT.search(text)
    head = text.split('"""', 1)[0]
    assert all(line.startswith("# ") for line in head.strip().splitlines())
    problem, v = problems.get(case[0]), problems.get(case[0]).variant(case[1])
    assert f"problem {problem.kernelbench_id}" in head and f"`{v.slug}`" in head
    tree = ast.parse(text)
    # No future import: KernelBench may exec the text with lines of its own in front.
    assert not any(isinstance(n, ast.ImportFrom) and n.module == "__future__" for n in tree.body)
    # torch, triton and the standard library (ninja: only to find its binary, as torch needs it).
    allowed = {"torch", "triton", "ninja", *sys.stdlib_module_names}
    sources = [tree] + [ast.parse(src) for src in getattr(_load(exported[case]), "_SOURCES", {}).values()]
    used = {name.split(".")[0] for t in sources for n in ast.walk(t)
            for name in ([a.name for a in n.names] if isinstance(n, ast.Import) else
                         [n.module or ""] if isinstance(n, ast.ImportFrom) and not n.level else [])}
    assert used <= allowed, used - allowed


def test_the_header_gives_tier_speedup_device_and_commit_of_the_recorded_row():
    from fusedkit import results

    for p in PROBLEMS:
        rec = results.recorded(p)
        rows = rec[rec["variant"].isin(export.exportable(p))]
        if rows.empty:
            pytest.skip(f"{p.key}: nothing recorded")
        for _, r in rows.iterrows():       # each its newest clean measurement, "last recorded"
            head = export.render(p, r["variant"]).split('"""', 1)[0]
            assert f"Tier {r['tier']}" in head and f"{r['speedup']:.2f}x" in head
            assert r["device"] in head and str(r["commit"]) in head


def test_a_step_the_full_run_lacks_names_the_newest_run_that_timed_it(tmp_path, monkeypatch):
    """An older, fuller run (a sweep) timed the step before its kernel changed; the header names
    the newer run, the code the file holds."""
    path = tmp_path / "records.csv"
    monkeypatch.setenv("FUSEDKIT_RECORDS", str(path))
    p = problems.get("p45")
    sizes = problems.fmt_sizes(p.defaults)
    for run_id, stamp, commit, extra, ms in (
            ("20261130T144059Z-aaaaaa", "2026-11-30T14:40:59Z", "1111111", ["cublas_epilogues_vec4"], 2.4),
            ("20261130T144907Z-bbbbbb", "2026-11-30T14:49:07Z", "2222222", [], 2.2)):
        ctx = records.RunContext(run_id=run_id, timestamp=stamp, commit=commit, device="NVIDIA H200",
                                 driver="", cuda="", torch="2.11.0", triton="3.6.0")
        rows = [("eager", "reference", 8.4), ("wgmma_fp16x3_lse", "fp32-faithful", ms),
                *((v, "fp32-faithful", 5.0) for v in extra)]
        records.append_rows(path, [records.make_row(ctx, problem="p45", sizes=sizes, variant=v, tier=t,
                                                    timer="cuda-events", median_ms=m) for v, t, m in rows])
    head = export.render(p, "wgmma_fp16x3_lse").split('"""', 1)[0]
    assert "2222222" in head and "2.2 ms" in head and f"{8.4 / 2.2:.2f}x" in head


def test_the_header_says_so_when_nothing_is_recorded(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSEDKIT_RECORDS", str(tmp_path / "records.csv"))
    head = export.render("p12", "triton_fp16x3").split('"""', 1)[0]
    assert "nothing recorded" in head
    assert export.best_per_tier("p12") == {}


def test_best_per_tier_is_the_fastest_kernel_that_meets_each_tier(tmp_path, monkeypatch):
    path = tmp_path / "records.csv"
    ctx = records.RunContext(run_id="20261129T091500Z-abcdef", timestamp="2026-11-29T09:15:00Z",
                             commit="1a2b3c4", device="NVIDIA H200", driver="", cuda="",
                             torch="2.13.0", triton="3.6.0")
    sizes = problems.fmt_sizes(problems.get("p45").defaults)
    timed = [("eager", "reference", 8.0), ("compile", "fp32-faithful", 1.0),  # a baseline: never
             ("triton_fused_lse_fp16x3", "fp32-faithful", 3.0),
             ("triton_fused_lse_tf32x3", "fp32-faithful", 5.0),
             ("cublas_tf32_epilogues_vec4", "kb-pass", 1.5), ("triton_fused_lse_tf32", "fast", 1.4)]
    records.append_rows(path, [records.make_row(ctx, problem="p45", sizes=sizes, variant=v, tier=t,
                                                timer="cuda-events", median_ms=ms) for v, t, ms in timed])
    monkeypatch.setenv("FUSEDKIT_RECORDS", str(path))
    assert export.best_per_tier("p45") == {"fp32-faithful": "triton_fused_lse_fp16x3",
                                           "kb-pass": "triton_fused_lse_fp16x3",   # cuBLAS's GEMM: a reference (audit L9)
                                           "fast": "triton_fused_lse_tf32"}
    head = export.render("p45", "triton_fused_lse_fp16x3").split('"""', 1)[0]
    assert "Tier fp32-faithful; last recorded 3 ms, 2.67x" in head and "commit 1a2b3c4" in head


def test_the_recorded_best_kernels_meet_their_tiers():
    from fusedkit import results

    for p in PROBLEMS:
        rec = results.recorded(p).set_index("variant")
        best = export.best_per_tier(p)
        for tier, slug in best.items():
            rank = KERNEL_TIERS.index(tier)
            assert rec.loc[slug, "tier"] in KERNEL_TIERS[:rank + 1]
            assert not p.variant(slug).baseline
            # the highest same-run speed-up of the exportable kernels meeting the tier
            meets = rec[rec.index.isin(export.exportable(p))
                        & rec["tier"].isin(KERNEL_TIERS[:rank + 1])]
            assert rec.loc[slug, "speedup"] == meets["speedup"].max()
    assert export.best_per_tier("p12").get("fp32-faithful") == "wgmma_fp16x3"
    assert export.best_per_tier("p45").get("kb-pass") == "triton_fused_lse_fp16"   # the 2026-12-04 run


def test_init_inputs_are_the_reference_constructor_arguments():
    assert export.init_inputs("p12", SMALL["p12"]) == [33, 65, 2.0, 0.1]
    assert export.init_inputs("p45", SMALL["p45"]) == [33, 65, 19]
    for p in PROBLEMS:
        model = p.make_model(SMALL[p.key])
        assert _init_args(p, model) == export.init_inputs(p, SMALL[p.key])


# --- KernelBench's way, without fusedkit ----------------------------------------------------

RUNNER = r'''
"""Run exported solutions as KernelBench does, in a process where fusedkit cannot be imported."""
import importlib.abc
import json
import sys


class NoFusedkit(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "fusedkit" or name.startswith("fusedkit."):
            raise ModuleNotFoundError(f"No module named {name!r} (blocked: a solution must not need it)")
        return None


sys.meta_path.insert(0, NoFusedkit())
try:
    import fusedkit  # noqa: F401
except ImportError:
    pass
else:
    sys.exit("fusedkit is importable in the runner")

import torch

spec = json.load(open(sys.argv[1]))
results = {}
for case in spec["cases"]:
    problem_ns = {}
    exec(case["reference"], problem_ns)  # KernelBench's problem file: the reference Model
    Model = problem_ns["Model"]
    # KernelBench's load_custom_model: the solution's text exec'd, its own lines in front.
    text = "import os\nos.environ['TORCH_EXTENSIONS_DIR'] = %r\n" % spec["build_dir"]
    context = {}
    exec(compile(text + open(case["file"]).read(), "<string>", "exec"), context)
    ModelNew = context["ModelNew"]
    torch.manual_seed(case["seed"])
    ref = Model(*case["init"])
    torch.manual_seed(case["seed"])
    new = ModelNew(*case["init"])
    a, b = ref.state_dict(), new.state_dict()
    res = {"names": list(a) == list(b),
           "same_weights": list(a) == list(b) and all(torch.equal(a[k], b[k]) for k in a)}
    new.load_state_dict(ref.state_dict())
    x = torch.rand(*case["input_shape"])
    if case["run"]:
        with torch.no_grad():
            out, expect = new(x), ref(x)
        res["allclose"] = bool(torch.allclose(out, expect, atol=1e-4, rtol=1e-4))
        torch.save({"x": x, "state": ref.state_dict(), "out": out}, case["save"])
    elif spec["probe_cuda_forward"]:   # without a GPU: what does the first call say?
        try:
            new(x)
            res["forward"] = "ran"
        except RuntimeError as e:
            res["forward"] = str(e)
    results[case["file"]] = res
leaked = sorted(m for m in sys.modules if m == "fusedkit" or m.startswith("fusedkit."))
json.dump({"results": results, "fusedkit_modules": leaked}, open(sys.argv[2], "w"))
'''


@pytest.fixture(scope="module")
def kernelbench_run(exported, tmp_path_factory) -> dict:
    """Every exported file in one fresh process without fusedkit: Triton ones run in Triton's
    interpreter on CPU at small odd sizes, CUDA ones constructed and loaded only."""
    tmp = tmp_path_factory.mktemp("runner")
    cases = []
    for (key, slug), path in exported.items():
        p, sizes = problems.get(key), SMALL[key]
        model_cls = type(p.make_model(sizes))
        cases.append({"file": str(path), "seed": 1234, "init": export.init_inputs(p, sizes),
                      "reference": "import torch\nfrom torch import nn\n\n" + inspect.getsource(model_cls),
                      "input_shape": [sizes[d.name] for d in p.dims[:2]],
                      "run": p.variant(slug).triton, "save": str(tmp / f"{key}_{slug}.pt")})
    (tmp / "spec.json").write_text(json.dumps({"cases": cases, "build_dir": str(tmp / "ext"),
                                               "probe_cuda_forward": not torch.cuda.is_available()}))
    (tmp / "runner.py").write_text(RUNNER)
    # -I: no PYTHONPATH, no user site, not even the script's folder; the runner blocks the
    # editable install of fusedkit itself (its finder sits in site-packages).
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "FUSEDKIT"))}
    env["TRITON_INTERPRET"] = "1"
    proc = subprocess.run([sys.executable, "-I", "runner.py", "spec.json", "out.json"], cwd=tmp,
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads((tmp / "out.json").read_text())
    assert out["fusedkit_modules"] == []
    return {(key, slug): (out["results"][str(path)], Path(tmp / f"{key}_{slug}.pt"))
            for (key, slug), path in exported.items()}


@pytest.mark.parametrize("case", EXPORTABLE, ids=ids)
def test_modelnew_draws_the_reference_weights_and_loads_its_state_dict(case, kernelbench_run):
    res, _ = kernelbench_run[case]
    assert res["names"] and res["same_weights"], res


@pytest.mark.parametrize("case", TRITON, ids=ids)
def test_triton_export_runs_without_fusedkit_and_is_right(case, kernelbench_run):
    """The output of the fusedkit-free run, judged here against fusedkit's float64 reference."""
    res, saved = kernelbench_run[case]
    assert res["allclose"], res
    p = problems.get(case[0])
    got = torch.load(saved)
    model = p.make_model(SMALL[p.key])
    model.load_state_dict(got["state"])
    ref, eager = reference64(model, [got["x"]]), eager32(model, [got["x"]])
    err = rel_error(got["out"], ref)
    if p.variant(case[1]).precision in ONE_16BIT_PRODUCT:
        # Its operands are rounded to 16 bits in the interpreter too: within their unit roundoff.
        assert err <= ONE_16BIT_PRODUCT[p.variant(case[1]).precision], err
    else:
        # The interpreter computes every other dot in fp32: those kernels are fp32-faithful there.
        assert err <= faithful_bound(rel_error(eager, ref))
    # and bit for bit the registered variant's output (one kernel config in the interpreter, so
    # the very same arithmetic), here where fusedkit computes it
    with torch.no_grad():
        assert torch.equal(got["out"], p.variant(case[1]).build(model)(got["x"]))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message seen without a GPU")
@pytest.mark.parametrize("case", CUDA, ids=ids)
def test_cuda_export_without_a_gpu_says_it_needs_one(case, kernelbench_run):
    res, _ = kernelbench_run[case]
    assert "need a CUDA GPU" in res["forward"], res


def test_fp16x3_weight_split_lives_in_the_model_and_follows_its_weights(exported):
    """What the kernel keeps between calls belongs to the ModelNew instance: two models do not
    share a split, a copy starts empty, and changed weights are split again."""
    p = problems.get("p12")
    module = _load(exported[("p12", "triton_fp16x3")])
    sizes, device = SMALL["p12"], "cuda" if torch.cuda.is_available() else "cpu"
    a, b = p.make_model(sizes, seed=1, device=device), p.make_model(sizes, seed=2, device=device)
    new_a = module.ModelNew(*export.init_inputs(p, sizes)).to(device)
    new_b = module.ModelNew(*export.init_inputs(p, sizes)).to(device)
    new_a.load_state_dict(a.state_dict())
    new_b.load_state_dict(b.state_dict())
    (x,) = p.get_inputs(sizes, seed=3, device=device)
    with torch.no_grad():
        torch.testing.assert_close(new_a(x), a(x), atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(new_b(x), b(x), atol=1e-4, rtol=1e-4)
        cache_a = new_a._kernel.load_step("common", "weight_cache.py")._cache
        cache_b = new_b._kernel.load_step("common", "weight_cache.py")._cache
        assert cache_a is not cache_b and len(cache_a) == len(cache_b) == 1
        new_a.load_state_dict(b.state_dict())       # new weights, in place: a new split
        torch.testing.assert_close(new_a(x), b(x), atol=1e-4, rtol=1e-4)
        assert len(cache_a) == 1
    twin = copy.deepcopy(new_a)
    assert twin._kernel._modules == {} and new_a._kernel._modules
    assert not [n for n, v in vars(module).items() if isinstance(v, dict) and n != "_SOURCES"
                and not n.startswith("__")], "module-level state"


# --- the CUDA sources, compiled without a GPU ------------------------------------------------

def _cuda_texts(exported, key, hopper=False) -> tuple[str, str]:
    """The C++ and CUDA sources of the problem's CUDA exports (one extension: the same in each),
    or of its Hopper exports (the Hopper extension)."""
    texts = {(m._CPP_SOURCE, m._CUDA_SOURCE)
             for m in (_load(exported[c]) for c in CUDA if c[0] == key and (c in HOPPER) == hopper)}
    assert len(texts) == 1
    return texts.pop()


@needs_nvcc
@pytest.mark.parametrize("key", [p.key for p in PROBLEMS])
def test_cuda_translation_unit_compiles_to_ptx_with_every_kernel(key, exported, tmp_path):
    _, cu = _cuda_texts(exported, key)
    src = tmp_path / "cuda.cu"
    src.write_text(cu)
    proc = subprocess.run([build._nvcc_path(), "-arch=sm_90a", "-ptx", *build.NVCC_FLAGS, "-std=c++17",
                           "-o", str(tmp_path / "cuda.ptx"), str(src)], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    entries = set(re.findall(r"\.entry (\w+)\(", (tmp_path / "cuda.ptx").read_text()))
    for step in build.kernel_sources(key):   # the same kernels as the steps compiled one by one
        assert set(re.findall(r"\.entry (\w+)\(", build.ptx(step, "sm_90a"))) <= entries, step.name


@needs_nvcc
@pytest.mark.parametrize("key", HOPPER_KEYS)
def test_hopper_translation_unit_compiles_to_ptx_for_sm90a_with_every_kernel(key, exported, tmp_path):
    """As the build does (fusedkit.build._target_flags: the -gencode form for sm_90a)."""
    _, cu = _cuda_texts(exported, key, hopper=True)
    src = tmp_path / "hopper.cu"
    src.write_text(cu)
    proc = subprocess.run([build._nvcc_path(), *build._target_flags("sm_90a", "ptx"), "-ptx",
                           *build.NVCC_FLAGS, "-std=c++17", "-o", str(tmp_path / "hopper.ptx"), str(src)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = (tmp_path / "hopper.ptx").read_text()
    assert ".target sm_90a" in text
    entries = set(re.findall(r"\.entry (\w+)\(", text))
    for step in build.hopper_sources(key):   # e.g. both GEMMs of p45's step 07
        own = set(re.findall(r"\.entry (\w+)\(", build.ptx(step)))
        assert own and own <= entries, step.name
    for case in HOPPER:
        if case[0] == key:   # the file asks for the same target
            assert _load(exported[case])._ARCH == "90a"


@pytest.mark.parametrize("case", OPERANDS, ids=ids)
def test_operands_export_hands_the_kernels_the_variants_operands(case, exported):
    """The embedded operands module (W transposed, fp16 casts, or the fp16x3 splits in Triton's
    interpreter here; for a step of several launches also their chain and the combine) gives each
    compiled function exactly what fusedkit's own gives it, W's form made once per weight version.
    Kernel stand-ins record their arguments and return fixed (M, 3) pairs, which a chain passes on."""
    from fusedkit.kernels import load_step

    p = problems.get(case[0])
    call = export.step_call(p, case[1])
    step = _load(exported[case])._OperandsStep(call.function, call.filename, call.operands)
    theirs = getattr(load_step("common", call.filename), call.operands)
    mine = getattr(step.load_step("common", call.filename), call.operands)
    assert mine is not theirs
    model = p.make_model(SMALL[p.key], seed=3)
    (x,) = p.get_inputs(SMALL[p.key], seed=3)
    bound = call.weights(model)   # held, as the variant's build and ModelNew hold them
    g = torch.Generator().manual_seed(3)
    returns = [(torch.rand(len(x), 3, generator=g), torch.rand(len(x), 3, generator=g))
               for _ in step.kernels]

    def run(operands):
        """The arguments each stand-in got, in launch order, and what ``operands`` returned."""
        calls = []

        def stand_in(result):
            return lambda *args: calls.append(args) or result
        return calls, operands(*map(stand_in, returns), x, *bound)

    (got, out), (want, out_theirs), (again, _) = run(mine), run(theirs), run(mine)
    # p12's step 15 falls back to step 14's kernel alone (its last) for an x TMA cannot load as
    # it is, any CPU tensor included; every other step calls each of its kernels once.
    calls = 1 if case[1] == "wgmma_fp16x3_fused_split" else len(step.kernels)
    assert len(got) == len(want) == calls
    for mine_args, their_args in zip(got, want):
        assert len(mine_args) == len(their_args)
        for a, b in zip(mine_args, their_args):
            assert (torch.equal(a, b) and a.dtype == b.dtype) if isinstance(b, torch.Tensor) else a == b
    torch.testing.assert_close(out, out_theirs, rtol=0, atol=0)
    # SMALL's batch differs from every weight's dimensions: a matrix argument whose rows are not
    # the batch's is W's form (its 16-bit copy or split, or its transpose).
    w_parts = [(k, i) for k, args in enumerate(got) for i, a in enumerate(args)
               if isinstance(a, torch.Tensor) and a.dim() == 2 and a.shape[0] != len(x)]
    assert w_parts and all(again[k][i] is got[k][i] for k, i in w_parts), "W's form made once"


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_binding_translation_unit_is_the_repository_binding_token_for_token(exported, tmp_path):
    """binding.cpp (and binding_hopper.cpp) with its local headers inlined preprocesses to the
    very tokens of the repository's binding, which tests/test_binding_syntax.py puts through g++'s
    front end, but for the names __FILE__ gives: its compile is that one's. Every <system> header
    is an empty stand-in on both sides (the same #include lines, so the same headers in a build)."""
    stubs = tmp_path / "system"
    for header in {m for f in build.KERNELS_DIR.rglob("*") if f.suffix in (".cpp", ".h", ".cuh")
                   for m in re.findall(r"#\s*include\s*<([^>]+)>", f.read_text())}:
        (stubs / header).parent.mkdir(parents=True, exist_ok=True)
        (stubs / header).touch()
    flags = ["g++", "-E", "-P", "-x", "c++", "-nostdinc", "-nostdinc++", f"-I{stubs}"]
    for key, hopper in [(p.key, False) for p in PROBLEMS] + [(key, True) for key in HOPPER_KEYS]:
        cpp, _ = _cuda_texts(exported, key, hopper)
        unit = tmp_path / f"{key}{'_hopper' if hopper else ''}.cpp"
        unit.write_text(cpp)
        binding = build.extension_sources(key, hopper)[-1]
        tokens = []
        for extra, src in (([], unit), ([f"-I{binding.parent}"], binding)):
            proc = subprocess.run([*flags, *extra, str(src)], capture_output=True, text=True, timeout=60)
            assert proc.returncode == 0, f"{src.name}: {proc.stderr[-2000:]}"
            tokens.append([ln for ln in re.sub(r'"[^"\n]*\.(?:h|cuh|cpp)"', '"FILE"', proc.stdout).splitlines()
                           if ln.strip()])
        assert tokens[0] == tokens[1] and len(tokens[0]) > 50, unit.name


# --- on the GPU ------------------------------------------------------------------------------

@gpu_test
@pytest.mark.parametrize("case", EXPORTABLE, ids=ids)
def test_export_passes_fusedkit_check_on_the_gpu(case, exported):
    """Every export (CUDA ones built through load_inline) at small odd sizes, against the
    registered variant checked the same way."""
    if case in HOPPER and not HOPPER_GPU:
        pytest.skip("a Hopper (sm_90a) step: needs a Hopper GPU")
    p, v = problems.get(case[0]), problems.get(case[0]).variant(case[1])
    mine = measure(p, _builder(p, exported[case]), SMALL[p.key], device="cuda", name=f"export_{v.slug}",
                   precision=v.precision, triton=v.triton, seeds=1, time_it=False)
    theirs = measure(p, v, SMALL[p.key], device="cuda", seeds=1, time_it=False)
    assert mine.ok, mine.failure
    assert theirs.ok, theirs.failure
    assert mine.check.rel_error <= max(4 * theirs.check.rel_error, 4 * EPS32)


@gpu_test
@pytest.mark.parametrize("key", [p.key for p in PROBLEMS])
def test_best_exports_time_as_the_ladder_at_kernelbench_sizes(key, tmp_path):
    """The fastest recorded kernel of the fp32-faithful and kb-pass tiers, exported and measured
    through the ladder's path beside its registered variant, in the same process: within 5%.
    With FUSEDKIT_RECORD_EXPORTS=1 both rows go to the records (variant ``export:<slug>``)."""
    p = problems.get(key)
    best = export.best_per_tier(p)
    slugs = list(dict.fromkeys(best[t] for t in ("fp32-faithful", "kb-pass") if t in best))
    if not slugs:
        pytest.skip(f"{key}: nothing recorded to pick the best kernels from")
    rows = []
    for slug in slugs:
        v = p.variant(slug)
        if (key, slug) in HOPPER and not HOPPER_GPU:
            continue
        path = export.export_variant(p, slug, tmp_path / export.file_name(p, slug))
        theirs = measure(p, v, p.defaults, device="cuda", seeds=2)
        mine = measure(p, _builder(p, path), p.defaults, device="cuda", name=f"export:{slug}",
                       precision=v.precision, triton=v.triton, seeds=2)
        assert theirs.timed, theirs.failure
        assert mine.timed, mine.failure
        ratio = mine.timing.median_ms / theirs.timing.median_ms
        print(f"{key} {slug}: ladder {theirs.timing.median_ms:.4f} ms, export {mine.timing.median_ms:.4f} ms "
              f"({ratio - 1:+.1%}); tiers {theirs.tier} / {mine.tier}")
        assert abs(ratio - 1) <= 0.05, f"{slug}: the export takes {ratio:.3f}x the ladder's time"
        rows += [theirs.record_fields(), mine.record_fields()]
    if os.environ.get("FUSEDKIT_RECORD_EXPORTS") == "1":
        ctx = records.RunContext.collect()
        records.append_rows(records.default_path(), [records.make_row(ctx, **f) for f in rows])
