"""``fusedkit.problems.base``'s registry as data: every kernel step is discovered from its step
file and sidecar (its number and source are the file's, its architecture the file's includes), and
what each variant then holds agrees with its source, so nothing on the run path reads a kernel
file again."""

import inspect
import sys

import pytest
import torch

import fusedkit.kernels
from fusedkit import build, problems
from fusedkit.kernels import KERNELS
from fusedkit.problems.base import StepCall, Variant, Weights, discover_steps

PROBLEMS = [problems.get(k) for k in problems.names()]
VARIANTS = [(p, v) for p in PROBLEMS for v in p.ladder()]
ids = [f"{p.key}-{v.slug}" for p, v in VARIANTS]


@pytest.mark.parametrize("p,v", VARIANTS, ids=ids)
def test_declared_arch_agrees_with_the_source(p, v):
    """A step is arch="sm_90a" exactly when its .cu file is in the problem's Hopper extension (the
    build puts a file there when it includes common/hopper.cuh)."""
    from_source = v.source.endswith(".cu") and KERNELS / v.source in build.hopper_sources(p.key)
    assert v.hopper == from_source, f"{v.slug}: declared arch={v.arch!r}, source {v.source!r}"


def test_every_hopper_source_has_a_declared_step():
    declared = {KERNELS / v.source for _, v in VARIANTS if v.hopper}
    assert declared == {s for p in PROBLEMS for s in build.hopper_sources(p.key)}


def test_a_bad_arch_is_refused_in_one_line():
    with pytest.raises(ValueError, match=r"arch='sm_80' is not known; valid: any, sm_90a"):
        Variant(1, "x", "x", "x", lambda m: m, arch="sm_80")
    with pytest.raises(ValueError, match="needs needs_gpu=True"):
        Variant(1, "x", "x", "x", lambda m: m, arch="sm_90a")


def test_refusal_reads_the_declaration_only():
    cpu = torch.device("cpu")
    p12 = problems.get("p12")
    assert p12.variant("wgmma_tma").refusal(cpu).startswith("needs a Hopper (sm_90) GPU")
    assert p12.variant("naive").refusal(cpu).startswith("needs a CUDA GPU")
    assert p12.variant("eager").refusal(cpu) == "" and p12.variant("triton_ieee").refusal(cpu) == ""


def test_a_kernel_step_is_data_that_agrees_with_its_variant():
    """Each kernel step's build is a StepCall: the weights are attribute paths bound to the
    model's own tensors, a Triton call names the variant's source, a Hopper call is sm_90a."""
    for p, v in VARIANTS:
        if v.baseline or v.routes:
            assert v.call is None, v.slug
            continue
        call = v.call
        assert call is not None and call.problem == p.key, v.slug
        assert (call.kind == "hopper") == v.hopper and (call.kind == "triton") == v.triton, v.slug
        if v.triton:
            assert v.source == f"{p.key}/{call.filename}", v.slug
        model = p.make_model({d.name: 3 for d in p.dims})
        own = [t.data_ptr() for t in model.parameters()]
        assert [t.data_ptr() for t in call.weights(model)[:len(call.weights.tensors)]] == own


def test_a_step_call_or_variant_that_contradicts_itself_is_refused():
    w = Weights(("gemm.weight",))
    with pytest.raises(ValueError, match="kind='cublas' is not known"):
        StepCall("cublas", "p12", "naive", w)
    with pytest.raises(ValueError, match="kind='triton' takes a filename"):
        StepCall("triton", "p12", "linear_leakyrelu", w)
    with pytest.raises(ValueError, match="only an operands step chains several"):
        StepCall("cuda", "p12", ("a", "b"), w)
    hopper = StepCall("hopper", "p12", "wgmma_tma", w, "fp16_operands.py", operands="call_fp16")
    with pytest.raises(ValueError, match="a hopper step declared arch='any'"):
        Variant(1, "x", "x", "x", hopper, needs_gpu=True)


def _step(folder, stem, suffix, text, sidecar):
    (folder / f"{stem}{suffix}").write_text(text)
    (folder / f"{stem}.step").write_text(sidecar)


def test_a_new_step_is_its_file_and_its_sidecar(tmp_path, monkeypatch):
    """A problem's steps are found from its kernels folder: each NN_slug.cu / .py with its
    NN_slug.step. Number and source come from the file name, Triton from .py, sm_90a from the
    include of common/hopper.cuh, the call from the sidecar; nothing else is typed."""
    folder = tmp_path / "p99"
    folder.mkdir()
    _step(folder, "01_plain", ".cu", "// a\n", "slug: plain\ntitle: t1\nsummary: s1\nfunction: plain\n")
    _step(folder, "02_tri", ".py", "# b\n",
          "# two variants of one file\nslug: tri_a\ntitle: t2\nsummary: one\n  line\n"
          "function: f\noptions: precision=tf32, x=y\nprecision: tf32\n\n"
          "slug: tri_b\ntitle: t3\nsummary: s3\nfunction: f\n")
    _step(folder, "03_hop", ".cu", '#include "../common/hopper.cuh"\n',
          "slug: hop\ntitle: t4\nsummary: s4\nfunction: a, b\nprecision: fp16\n"
          "operands: fp16_operands.py:call_fp16\n")
    (folder / "helper.cuh").write_text("// not a step\n")
    monkeypatch.setattr(fusedkit.kernels, "KERNELS", tmp_path)
    w = Weights(("gemm.weight",))
    plain, tri_a, tri_b, hop = discover_steps("p99", w)
    assert [v.number for v in (plain, tri_a, tri_b, hop)] == [1, 2, 2, 3]
    assert plain.source == "p99/01_plain.cu" and plain.needs_gpu and plain.arch == "any"
    assert (plain.call.kind, plain.call.function, plain.call.weights) == ("cuda", "plain", w)
    assert tri_a.triton and not tri_a.needs_gpu and tri_a.summary == "one line"
    assert tri_a.precision == "tf32" and tri_b.precision == "fp32"
    assert (tri_a.call.kind, tri_a.call.filename) == ("triton", "02_tri.py")
    assert dict(tri_a.call.options) == {"precision": "tf32", "x": "y"} and not tri_b.call.options
    assert hop.hopper and hop.call.kind == "hopper" and hop.call.function == ("a", "b")
    assert (hop.call.filename, hop.call.operands) == ("fp16_operands.py", "call_fp16")


@pytest.mark.parametrize("files,phrase", [
    ({"01_a.cu": "", "01_a.step": "slug: a\ntitle: t\nsummary: s\n"}, r"lacks function"),
    ({"01_a.cu": "", "01_a.step": "slug: a\ntitle: t\nsummary: s\nfunction: f\ncolour: red\n"},
     r"'colour: red' is not a field line"),
    ({"01_a.cu": "", "01_a.step": "slug: a\nslug: b\n"}, r"slug is given twice"),
    ({"01_a.cu": "", "02_b.py": "", "01_a.step": "slug: a\ntitle: t\nsummary: s\nfunction: f\n"},
     r"02_b.py have no sidecar"),
    ({"01_a.step": "slug: a\ntitle: t\nsummary: s\nfunction: f\n"}, r"exactly one step file"),
    ({"01_a.cu": '#include "../common/hopper.cuh"\n',
      "01_a.step": "slug: a\ntitle: t\nsummary: s\nfunction: f\n"}, r"01_a.step \(a\): a Hopper step .* needs operands"),
    ({"01_a.py": "", "01_a.step": "slug: a\ntitle: t\nsummary: s\nfunction: f\noperands: x.py:g\n"},
     r"a Triton step makes its own operands"),
    ({"01_a.cu": "", "01_a.step": "slug: a\ntitle: t\nsummary: s\nfunction: f\noptions: p=1\n"},
     r"only a Triton step takes options"),
], ids=["missing", "unknown", "twice", "no-sidecar", "no-source", "hopper-without-operands",
        "triton-operands", "cuda-options"])
def test_a_step_that_contradicts_itself_is_refused_naming_its_file(tmp_path, monkeypatch, files, phrase):
    folder = tmp_path / "p99"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    monkeypatch.setattr(fusedkit.kernels, "KERNELS", tmp_path)
    with pytest.raises(ValueError, match=phrase):
        discover_steps("p99", Weights(("gemm.weight",)))


@pytest.mark.parametrize("p", PROBLEMS, ids=lambda p: p.key)
def test_the_problem_module_types_no_step(p):
    """Every variant with a kernel source comes from a step file's sidecar; the problem module
    only puts the discovered steps in order beside its baselines and by-batch choices."""
    module = inspect.getsource(sys.modules[p.model_factory.__module__])
    assert "source=" not in module
    found = {v.slug for v in discover_steps(p.key, Weights(()))}
    assert found == {v.slug for v in p.ladder() if v.source}
