"""The correctness harness must catch wrong, incomplete and imprecise variants."""

import pytest
import torch

import adversarial as bad
from fusedkit import check, problems
from fusedkit.problems import p12_gemm_multiply_leakyrelu as p12mod

P12 = problems.get("p12")
P45 = problems.get("p45")
SMALL12 = P12.sizes(batch_size=9, in_features=200, out_features=31)
SMALL45 = P45.sizes(batch_size=9, input_size=40, hidden_size=33, output_size=50)


def test_eager_is_the_reference_and_faithful_variant_classified():
    r = check.check_variant(P12, "eager", SMALL12, seeds=3)
    assert r.ok and r.tier == "reference" and r.rel_error < 1e-6 and len(set(r.seeds)) == 3
    a = check.check_variant(P12, "addmm_alpha_beta", SMALL12, seeds=3)
    assert a.ok and a.tier == "fp32-faithful", a.summary()


def test_fresh_seeds_each_check():
    a = check.check_variant(P45, "eager", SMALL45, seeds=2)
    b = check.check_variant(P45, "eager", SMALL45, seeds=2)
    assert a.seeds != b.seeds


def test_wrong_answer_is_fast_tier():
    wrong = lambda m: (lambda x: m(x) * (1 + 1e-3))  # noqa: E731
    r = check.check_variant(P12, "eager", SMALL12, seeds=2, build=wrong)
    assert r.ok and r.tier == "fast" and r.rel_error > 5e-4 and not r.allclose


def test_slightly_worse_than_eager_is_kb_pass():
    # Noise of ~2e-6: inside allclose but more than 2x eager's error.
    r = check.check_variant(P12, "eager", SMALL12, seeds=2, build=bad.slightly_noisy)
    assert r.tier == "kb-pass", r.summary()


def test_nan_and_unwritten_outputs_fail():
    r = check.check_variant(P12, "eager", SMALL12, seeds=2, build=bad.leaves_a_hole)
    assert not r.ok and "NaN/Inf" in r.failures[0] and "FAILED" in r.summary()


def test_wrong_shape_fails():
    r = check.check_variant(P12, "eager", SMALL12, seeds=1, build=lambda m: (lambda x: m(x).T))
    assert not r.ok and "expected (9, 31)" in r.failures[0]


def test_gpu_only_variant_on_cpu_is_a_clear_error():
    if torch.cuda.is_available():
        pytest.skip("checks the CPU refusal")
    with pytest.raises(ValueError, match="needs a CUDA GPU"):
        check.check_variant(P12, "eager_tf32", SMALL12)


# Every sm_90a step of p12 (08-10 and the fp16x3 ones on wgmma), as the registry groups them; the
# cuBLAS fp16 bar in that group runs on any GPU.
HOPPER_STEPS = {v.slug for v in p12mod.HOPPER_VARIANTS if not v.baseline}


@pytest.mark.parametrize("capability,name", [((8, 0), "NVIDIA A100-SXM4-80GB"),
                                             ((10, 0), "NVIDIA B200"), ((9, 0), "NVIDIA H200")])
def test_hopper_steps_are_refused_on_any_other_gpu_in_one_line(capability, name, monkeypatch):
    """sm_90a code runs on sm_90 only: elsewhere each Hopper step gets one line saying so (the
    runner skips it, measure refuses it) and every other step runs."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
    gpu = torch.device("cuda")
    refused = {v.slug: check.device_refusal(P12, v, P12.defaults, gpu) for v in P12.ladder()}
    assert {s for s, r in refused.items() if r} == (set() if capability[0] == 9 else HOPPER_STEPS)
    assert {s for s in HOPPER_STEPS if check.needs_hopper(P12.variant(s))} == HOPPER_STEPS
    for slug in HOPPER_STEPS & {s for s, r in refused.items() if r}:
        assert refused[slug] == (f"needs a Hopper (sm_90) GPU (wgmma and TMA, built for sm_90a); "
                                 f"this one, {name}, is sm_{capability[0]}{capability[1]}")
        with pytest.raises(ValueError, match=r"needs a Hopper \(sm_90\) GPU"):
            check.check_variant(P12, slug, SMALL12, device="cuda")


def test_hopper_steps_on_cpu_say_which_gpu_they_need():
    cpu = torch.device("cpu")
    assert "needs a Hopper (sm_90) GPU" in check.device_refusal(P12, P12.variant("wgmma_tma"), SMALL12, cpu)
    assert "needs a CUDA GPU" in check.device_refusal(P12, P12.variant("cublas_fp16_epilogue"), SMALL12, cpu)


def test_classify_rules():
    assert check.classify(1e-6, 1e-6, True) == "fp32-faithful"
    assert check.classify(3e-6, 1e-6, True) == "kb-pass"
    assert check.classify(1e-9, 0.0, True) == "fp32-faithful"   # exact eager: floor applies
    assert check.classify(1e-6, 1e-6, False) == "fast"
    assert check.classify(float("nan"), 1e-6, True) == "fast"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_poisoning_catches_an_unwritten_element_on_gpu():
    def partial(m):
        def run(x):
            y = torch.empty(x.shape[0], m.gemm.out_features, device=x.device)
            y[1:] = m(x)[1:]   # row 0 never written
            return y
        return run
    r = check.check_variant(P12, "eager", SMALL12, device="cuda", seeds=1, build=partial)
    assert not r.ok and "unwritten" in r.failures[0]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("key", ["p12", "p45"])
def test_baselines_on_gpu(key):
    # PyTorch's own variants only: every kernel step has its own GPU tests, and checking them all
    # here cost 337 s of the H200's time (autotuning every Triton config at a new shape).
    p = problems.get(key)
    s = p.sizes({d.name: [17, 1000, 333, 65][i] for i, d in enumerate(p.dims)})
    for v in [v for v in p.ladder() if v.baseline]:
        r = check.check_variant(p, v, s, device="cuda", seeds=2)
        print(check.describe(r))
        assert r.ok
