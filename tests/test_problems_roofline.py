"""Problems, sizes and roofline numbers, checked against arithmetic done by hand."""

import math

import pytest
import torch

from fusedkit import hardware, problems, roofline
from fusedkit.problems import SizeError

H200 = hardware.spec("H200 SXM")


def test_registry_lists_and_resolves_problems():
    assert problems.names() == ["p12", "p45"]
    assert problems.get("12") is problems.get("p12") is problems.get("gemm_multiply_leakyrelu")
    with pytest.raises(ValueError, match="valid: p12, p45"):
        problems.get("p99")


def test_p12_defaults_match_kernelbench():
    p = problems.get("p12")
    assert p.defaults == {"batch_size": 1024, "in_features": 8192, "out_features": 8192}
    assert p.constants == {"multiplier": 2.0, "negative_slope": 0.1}


def test_p12_counts_by_hand():
    p = problems.get("p12")
    # GEMM 2*M*N*K, plus bias, multiply and LeakyReLU at one FLOP per element each.
    assert p.flops(p.defaults) == 2 * 1024 * 8192 * 8192 + 3 * 1024 * 8192 == 137_464_119_296
    # x + W + b read once, y written once, 4 bytes each.
    assert p.min_bytes(p.defaults) == 335_577_088


def test_p12_floors_on_h200_by_hand():
    p = problems.get("p12")
    fp32 = roofline.fused_floor(p, p.defaults, H200, "fp32")
    assert fp32.compute_ms == pytest.approx(137_464_119_296 / 67e12 * 1e3, rel=1e-12)  # 2.0517 ms
    assert fp32.memory_ms == pytest.approx(335_577_088 / 4.8e12 * 1e3, rel=1e-12)      # 0.0699 ms
    assert fp32.bound == "compute"
    assert fp32.intensity == pytest.approx(137_464_119_296 / 335_577_088)              # ~409.6
    # tf32x3: the GEMM at a third of 494.7 TFLOP/s, the elementwise tail on fp32 cores.
    gemm = 2 * 1024 * 8192 * 8192 + 1024 * 8192
    x3 = roofline.fused_floor(p, p.defaults, H200, "tf32x3")
    assert x3.floor_ms == pytest.approx((gemm / (494.7e12 / 3) + 2 * 1024 * 8192 / 67e12) * 1e3)


def test_p45_counts_by_hand():
    q = problems.get("p45")
    m, k, h, n = 16384, 2048, 4096, 1024
    expect = (2 * m * h * k + m * h) + 4 * m * h + (2 * m * n * h + m * n) + (4 * m * n + 2 * m)
    assert q.flops(q.defaults) == expect == 412_736_323_584
    assert q.min_bytes(q.defaults) == 4 * (m * k + h * k + h + n * h + n + m) == 184_635_392
    t = roofline.table(q, q.defaults, H200, "fp32").set_index("stage")
    # the intermediate: GEMM1 writes 4*M*H bytes, the sigmoid reads and writes them
    assert t.loc["sigmoid", "MB"] == pytest.approx(2 * 4 * m * h / 1e6)
    assert t.loc["total, fused (fewest bytes)", "compute ms"] == pytest.approx(
        ((2 * m * h * k + m * h + 2 * m * n * h + m * n) / 67e12
         + (4 * m * h + 4 * m * n + 2 * m) / 67e12) * 1e3)


def test_unfused_never_beats_fused():
    for p in (problems.get("p12"), problems.get("p45")):
        for prec in ("fp32", "tf32", "tf32x3"):
            t = roofline.table(p, p.defaults, H200, prec).set_index("stage")["floor ms"]
            assert t["total, unfused (sum of stages)"] >= t["total, fused (fewest bytes)"]


@pytest.mark.parametrize("value,msg", [(0, "out of range"), (-3, "out of range"),
                                       (2.5, "not an integer"), ("8", "not an integer"),
                                       (True, "not an integer"), (10**6, "out of range")])
def test_bad_sizes_name_the_parameter(value, msg):
    p = problems.get("p12")
    with pytest.raises(SizeError, match=f"batch_size=.*{msg}.*1 to 65536"):
        p.sizes(batch_size=value)


def test_unknown_size_name_lists_valid_ones():
    with pytest.raises(SizeError, match="valid: batch_size, in_features, out_features"):
        problems.get("p12").sizes(batch=4)


def test_cpu_budget_refuses_huge_runs_with_a_reason():
    p = problems.get("p12")
    big = p.sizes(batch_size=65536)
    with pytest.raises(SizeError, match="GiB while checked and timed; allowed: at most 8.0 GiB in a CPU run, e.g. batch_size<="):
        p.check_runnable(big, "cpu")
    p.check_runnable(p.defaults, "cpu")   # the KernelBench sizes do run on a CPU


def test_int32_limit():
    p = problems.get("p12")
    with pytest.raises(SizeError, match="int32"):
        p.check_runnable(p.sizes(batch_size=65536, out_features=65536), "cpu")


def test_unknown_variant_lists_valid_ones():
    with pytest.raises(ValueError, match="valid: eager, eager_tf32, compile, addmm_alpha_beta"):
        problems.get("p12").variant("nope")


def test_sizes_round_trip_through_text():
    p = problems.get("p45")
    s = p.sizes(batch_size=3, hidden_size=17)
    assert p.sizes(problems.parse_sizes(problems.fmt_sizes(s))) == s
    with pytest.raises(SizeError, match="name=value"):
        problems.parse_sizes("batch_size")


@pytest.mark.parametrize("key", ["p12", "p45"])
def test_models_are_seeded_and_inputs_are_fresh_uniform(key):
    p = problems.get(key)
    small = p.sizes({d.name: 3 + i for i, d in enumerate(p.dims)})
    a, b = p.make_model(small, seed=5), p.make_model(small, seed=5)
    c = p.make_model(small, seed=6)
    for pa, pb, pc in zip(a.parameters(), b.parameters(), c.parameters()):
        assert torch.equal(pa, pb) and not torch.equal(pa, pc)
    (x1,), (x2,) = p.get_inputs(small, seed=1), p.get_inputs(small, seed=2)
    assert not torch.equal(x1, x2)
    assert 0 <= x1.min() and x1.max() < 1 and x1.std() > 0.1   # torch.rand, never zeros
    out = a(x1)
    assert tuple(out.shape) == p.output_shape(small)


def test_hand_formula_matches_model_p12():
    p = problems.get("p12")
    s = p.sizes(batch_size=7, in_features=13, out_features=5)
    m = p.make_model(s, seed=3).double()
    (x,) = p.get_inputs(s, seed=3)
    x = x.double()
    y = (x @ m.gemm.weight.T + m.gemm.bias) * 2.0
    assert torch.allclose(m(x), torch.where(y > 0, y, 0.1 * y))


def test_achieved_rejects_nonpositive_time():
    with pytest.raises(ValueError, match="ms=0"):
        roofline.achieved(1.0, 1.0, 0)
    tf, gb = roofline.achieved(2e12, 1e9, 1000.0)
    assert math.isclose(tf, 2.0) and math.isclose(gb, 1.0)


def test_a_third_problem_is_one_new_module(tmp_path):
    for name in ("p12_gemm_multiply_leakyrelu.py", "p7_new_thing.py", "base.py", "helpers.py"):
        (tmp_path / name).write_text("PROBLEM = None\n")
    assert problems.discover([str(tmp_path)], "pkg") == {
        "p7": "pkg.p7_new_thing", "p12": "pkg.p12_gemm_multiply_leakyrelu"}


def test_model_with_sets_the_parameters_in_order_and_refuses_a_wrong_count():
    import torch

    from fusedkit.problems import get

    p45 = get("p45")
    sizes = p45.sizes(batch_size=2, input_size=3, hidden_size=5, output_size=7)
    params = [torch.randn(5, 3), torch.randn(5), torch.randn(7, 5), torch.randn(7)]
    model = p45.model_with(sizes, *params)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), params))
    assert torch.equal(model.linear2.bias, params[3])
    with pytest.raises(ValueError, match="has 4 parameters, got 2"):
        p45.model_with(sizes, *params[:2])
