"""``fusedkit.problems.base``'s registry as data: what each variant declares (its architecture)
agrees with its source, so nothing on the run path needs to read a kernel file."""

import subprocess
import sys

import pytest
import torch

from fusedkit import build, check, problems
from fusedkit.kernels import KERNELS
from fusedkit.problems.base import StepCall, Variant, Weights

PROBLEMS = [problems.get(k) for k in problems.names()]
VARIANTS = [(p, v) for p in PROBLEMS for v in p.ladder()]
ids = [f"{p.key}-{v.slug}" for p, v in VARIANTS]


@pytest.mark.parametrize("p,v", VARIANTS, ids=ids)
def test_declared_arch_agrees_with_the_source(p, v):
    """A step declares arch="sm_90a" exactly when its .cu file includes common/hopper.cuh (the
    build's own test of it, which puts the file in the problem's Hopper extension)."""
    from_source = v.source.endswith(".cu") and KERNELS / v.source in build.hopper_sources(p.key)
    assert v.hopper == from_source, f"{v.slug}: declared arch={v.arch!r}, source {v.source!r}"
    assert check.needs_hopper(v) == from_source


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


def test_the_registry_does_not_import_the_check():
    """problems.base -> check -> problems was a circle (by_batch's deferred import): the registry
    now refuses a device from its own declarations."""
    code = ("import sys; from fusedkit import problems; [problems.get(k) for k in problems.names()]; "
            "print(sorted(m for m in sys.modules if m in ('fusedkit.check', 'fusedkit.interpreter_cost')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


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
