"""Measured ceilings: the floor they give against hand-computed values, the % of measured ceiling
with and without ceilings, the command line's refusals, and (on a GPU) the measurement itself."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

from fusedkit import ceilings, problems, records
from fusedkit.cli import main

P12, P45 = problems.get("p12"), problems.get("p45")
H200 = "NVIDIA H200"
FP32_SHEET = 67.0   # datasheet TFLOP/s of the H200's CUDA cores: the elementwise stages' rate


def ctx(run_id: str, stamp: str, device: str = H200) -> records.RunContext:
    return records.RunContext(run_id=run_id, timestamp=stamp, commit="abc1234", device=device,
                              driver="580.1", cuda="12.8", torch="2.11.0", triton="3.5.0")


def ceiling(c: records.RunContext, variant: str, sizes: str, rate: float) -> dict:
    gemm = variant.startswith(ceilings.GEMM_PREFIX) or variant == "bf16_matmul"
    return records.make_row(c, problem="device", sizes=sizes, variant=variant, timer="cuda-events",
                            median_ms=1.0, **({"tflops": rate} if gemm else {"gbps": rate}))


P12_SHAPE = "m=1024,n=8192,k=8192"
G1, G2 = "m=16384,n=4096,k=2048", "m=16384,n=1024,k=4096"


@pytest.fixture
def recorded(tmp_path):
    """Records holding two runs: an old one with only the legacy copy, a new one with ceilings."""
    old, new = ctx("20261201T000000Z-000001", "2026-12-01T00:00:00Z"), ctx(
        "20261202T000000Z-000002", "2026-12-02T00:00:00Z")
    rows = [ceiling(old, "d2d_copy", "bytes=2147483648", 3000.0),
            ceiling(old, "bf16_matmul", "n=8192", 690.0),
            ceiling(new, "ceiling_copy", "bytes=2147483648", 4000.0),
            ceiling(new, "ceiling_l2_read", "bytes=16777216", 9000.0),
            ceiling(new, "ceiling_dram_read", "bytes=2147483648", 4200.0)]
    for op, rate in (("fp32", 50.0), ("tf32", 350.0), ("fp16", 700.0), ("bf16", 680.0)):
        rows.append(ceiling(new, ceilings.GEMM_PREFIX + op, P12_SHAPE, rate))
        rows.append(ceiling(new, ceilings.GEMM_PREFIX + op, G1, rate * 0.9))
        rows.append(ceiling(new, ceilings.GEMM_PREFIX + op, G2, rate * 0.8))
    path = tmp_path / "records.csv"
    records.append_rows(path, rows)
    return path


def p12_floor_ms(gemm_tflops: float, copy_gbps: float) -> float:
    """By hand: p12's GEMM (2MNK + MN bias adds) at the GEMM rate, its multiply and LeakyReLU
    (MN FLOPs each) at the datasheet FP32 rate, against its fewest fp32 bytes over the copy."""
    m, n, k = 1024, 8192, 8192
    compute = (2 * m * n * k + m * n) / (gemm_tflops * 1e12) + 2 * m * n / (FP32_SHEET * 1e12)
    memory = 4 * (m * k + n * k + n + m * n) / (copy_gbps * 1e9)
    return 1e3 * max(compute, memory)


def p45_floor_ms(rate1: float, rate2: float, copy_gbps: float) -> float:
    m, k, h, n = 16384, 2048, 4096, 1024
    compute = ((2 * m * h * k + m * h) / (rate1 * 1e12) + (2 * m * n * h + m * n) / (rate2 * 1e12)
               + (4 * m * h + 4 * m * n + 2 * m) / (FP32_SHEET * 1e12))
    memory = 4 * (m * k + h * k + h + n * h + n + m) / (copy_gbps * 1e9)
    return 1e3 * max(compute, memory)


def test_gemm_shapes_are_the_problems_own():
    assert ceilings.gemm_shapes(P12) == [(1024, 8192, 8192)]
    assert ceilings.gemm_shapes(P45) == [(16384, 4096, 2048), (16384, 1024, 4096)]
    small = [P12.sizes(batch_size=b) for b in (1, 4, 4)]
    assert ceilings.gemm_shapes(P12, small) == [(1, 8192, 8192), (4, 8192, 8192)]


def test_every_precision_has_a_ceiling():
    from fusedkit.precision import PRECISIONS
    assert set(ceilings.PRECISION_CEILING) == set(PRECISIONS)


@pytest.mark.parametrize("precision,products,op", [("fp16", 1, "fp16"), ("fp16x3", 3, "fp16"),
                                                   ("tf32x3", 3, "tf32"), ("fp32", 1, "fp32")])
def test_measured_floor_of_p12_by_hand(recorded, precision, products, op):
    rates = {"fp32": 50.0, "tf32": 350.0, "fp16": 700.0}
    got = ceilings.measured_floor(P12, P12.defaults, precision,
                                  ceilings.newest(H200, recorded))
    assert got.floor_ms == pytest.approx(p12_floor_ms(rates[op] / products, 4000.0), rel=1e-12)
    # p12 is compute-bound on these rates (fp16: 0.196 ms of GEMM against 0.084 ms of bytes)
    assert got.bound == "compute"


def test_measured_floor_of_p45_sums_both_gemms(recorded):
    got = ceilings.measured_floor(P45, P45.defaults, "bf16", ceilings.newest(H200, recorded))
    assert got.floor_ms == pytest.approx(p45_floor_ms(680 * 0.9, 680 * 0.8, 4000.0), rel=1e-12)
    x3 = ceilings.measured_floor(P45, P45.defaults, "fp16x3", ceilings.newest(H200, recorded))
    assert x3.floor_ms == pytest.approx(p45_floor_ms(700 * 0.9 / 3, 700 * 0.8 / 3, 4000.0), rel=1e-12)


def test_measured_floor_is_none_without_the_shape_or_a_copy(recorded):
    have = ceilings.newest(H200, recorded)
    # a batch size whose GEMM shape was never measured
    assert ceilings.measured_floor(P12, P12.sizes(batch_size=64), "fp16", have) is None
    no_copy = have[have["kind"] != "copy"]
    assert ceilings.measured_floor(P12, P12.defaults, "fp16", no_copy) is None
    with pytest.raises(ValueError, match="precision='fp64' is not known"):
        ceilings.measured_floor(P12, P12.defaults, "fp64", have)


def test_legacy_rows_are_read_as_ceilings(recorded):
    df = ceilings.read_ceilings(recorded)
    legacy = df[df["run_id"] == "20261201T000000Z-000001"].set_index("variant")
    assert legacy.loc["d2d_copy", "kind"] == "copy" and legacy.loc["d2d_copy", "rate"] == 3000.0
    mm = legacy.loc["bf16_matmul"]
    assert (mm["kind"], mm["operands"], mm["m"], mm["n"], mm["k"]) == ("gemm", "bf16", 8192, 8192, 8192)
    # the newest copy on the device is the new run's
    assert ceilings.rate(ceilings.newest(H200, recorded), "copy") == 4000.0


def frame(run_id: str | None, median_ms: float, variant: str = "eager", device: str = H200,
          sizes: str | None = None) -> pd.DataFrame:
    row = {"variant": variant, "sizes": sizes or problems.fmt_sizes(P12.defaults), "device": device,
           "median_ms": median_ms, "timer": "cuda-events"}
    if run_id is not None:
        row["run_id"] = run_id
    return pd.DataFrame([row])


def test_pct_of_measured_uses_the_rows_own_run_and_never_another(recorded):
    # eager is fp32: its floor is the fp32 cuBLAS rate at p12's shape
    fp32 = p12_floor_ms(50.0, 4000.0)
    new = "20261202T000000Z-000002"
    got = ceilings.add_pct_of_measured(frame(new, 2 * fp32), P12, path=recorded)
    assert got["pct_of_measured"].item() == pytest.approx(50.0)
    assert got["ceilings_run"].item() == new
    # The old run recorded only a copy: no cuBLAS rate of its own, so no % of measured. It
    # used to borrow the newer run's GEMM rates, a ratio across two runs and power states.
    old = "20261201T000000Z-000001"
    fp16 = ceilings.add_pct_of_measured(frame(old, 1.0, "wgmma_persistent"), P12, path=recorded)
    assert math.isnan(fp16["pct_of_measured"].item()) and fp16["ceilings_run"].item() == ""
    assert P12.variant("wgmma_persistent").precision == "fp16"
    # A run that recorded nothing at all: none either.
    none = ceilings.add_pct_of_measured(frame("20261203T000000Z-000003", 1.0), P12, path=recorded)
    assert math.isnan(none["pct_of_measured"].item())
    # A frame that names no run (a kernel of one's own): the newest on the device, named.
    mine = ceilings.add_pct_of_measured(frame(None, 2 * fp32), P12, path=recorded)
    assert mine["pct_of_measured"].item() == pytest.approx(50.0)
    assert mine["ceilings_run"].item() == new


def test_pct_of_measured_is_nan_without_ceilings(recorded, tmp_path):
    a100 = ceilings.add_pct_of_measured(frame(None, 1.0, device="NVIDIA A100-SXM4-80GB"), P12,
                                        path=recorded)
    assert math.isnan(a100["pct_of_measured"].item())
    empty = ceilings.add_pct_of_measured(frame(None, 1.0), P12, path=tmp_path / "none.csv")
    assert math.isnan(empty["pct_of_measured"].item())
    cpu = frame(None, 1.0).assign(timer="cpu-wall")
    assert math.isnan(ceilings.add_pct_of_measured(cpu, P12, path=recorded)["pct_of_measured"].item())
    # a component or unknown name without a precision: NaN, not a guess
    comp = ceilings.add_pct_of_measured(frame(None, 1.0, "epilogue_vec4"), P12, path=recorded)
    assert math.isnan(comp["pct_of_measured"].item())
    assert "pct_of_measured" in ceilings.add_pct_of_measured(frame(None, 1.0).iloc[0:0], P12,
                                                             path=recorded)
    with pytest.raises(ValueError, match="lacks column"):
        ceilings.add_pct_of_measured(frame(None, 1.0).drop(columns="device"), P12, path=recorded)


def test_precision_comes_from_a_column_or_the_notes(recorded):
    fp32 = p12_floor_ms(50.0, 4000.0)
    tf32 = p12_floor_ms(350.0, 4000.0)
    f = frame(None, 1.0, "my_kernel").assign(precision="tf32")
    assert ceilings.add_pct_of_measured(f, P12, path=recorded)["pct_of_measured"].item() == \
        pytest.approx(100 * tf32)
    f = frame(None, 1.0, "my_kernel").assign(notes="precision=fp32; floor on H200 SXM")
    assert ceilings.add_pct_of_measured(f, P12, path=recorded)["pct_of_measured"].item() == \
        pytest.approx(100 * fp32)


def test_for_problem_keeps_the_memory_ceilings_and_its_own_gemm_shapes(recorded):
    newest = ceilings.newest(H200, recorded)
    mine = ceilings.for_problem(P45, newest)
    gemms = mine[mine["kind"] == "gemm"]
    assert {(int(r.m), int(r.n), int(r.k)) for r in gemms.itertuples()} == {(16384, 4096, 2048),
                                                                           (16384, 1024, 4096)}
    assert len(gemms) == 8                                       # four operands at two shapes
    assert {"copy", "l2_read", "dram_read"} <= set(mine["kind"])
    p12 = ceilings.for_problem(P12, newest)
    assert set(p12.loc[p12["kind"] == "gemm", "m"]) == {1024.0}  # its own shape: not the square legacy one
    assert ceilings.for_problem(P12, newest, P12.sizes(batch_size=4)).query("kind == 'gemm'").empty


def test_rate_reads_one_ceiling_or_nan(recorded):
    newest = ceilings.newest(H200, recorded)
    assert ceilings.rate(newest, "copy") == 4000.0 and ceilings.rate(newest, "l2_read") == 9000.0
    assert ceilings.rate(newest, "gemm", "fp16", (16384, 4096, 2048)) == pytest.approx(700.0 * 0.9)
    assert math.isnan(ceilings.rate(newest, "gemm", "fp16", (1, 2, 3)))
    assert math.isnan(ceilings.rate(newest.iloc[0:0], "copy"))
    with pytest.raises(ValueError, match="kind='bandwidth'"):
        ceilings.rate(newest, "bandwidth")
    with pytest.raises(ValueError, match="needs operands"):
        ceilings.rate(newest, "gemm", "fp16")
    # the same reads at other operands and shapes (two merges had written this test twice)
    have = newest
    assert ceilings.rate(have, "gemm", "tf32", (1024, 8192, 8192)) == 350.0
    assert ceilings.rate(have, "gemm", "tf32", (16384, 4096, 2048)) == pytest.approx(315.0)
    assert ceilings.rate(have, "l2_read") == 9000.0
    assert math.isnan(ceilings.rate(have, "gemm", "fp16", (64, 8192, 8192)))   # never measured


def test_table_compares_with_the_datasheet(recorded):
    t = ceilings.table(ceilings.newest(H200, recorded)).set_index(["ceiling", "shape"])
    assert t.loc[("cuBLAS fp16", "1024 x 8192 x 8192"), "% of datasheet"] == pytest.approx(
        100 * 700 / 989.4)
    assert t.loc[("copy", "2048 MiB"), "datasheet"] == 4800.0
    assert math.isnan(t.loc[("l2 read", "16 MiB"), "datasheet"])


def test_read_kernel_sums_every_pass_in_the_interpreter():
    if torch.cuda.is_available():
        pytest.skip("the interpreter test; the GPU test measures the kernel")
    from fusedkit.kernels import load_step
    k = load_step("common", "read_sum.py")
    src = torch.rand(5 * k.BLOCK) + 0.5
    out = torch.full((3,), math.nan)
    k.read_sum(src, out, 2)
    assert out.double().sum().item() == pytest.approx(2 * src.double().sum().item(), rel=1e-6)
    with pytest.raises(ValueError, match="multiple of 4096"):
        k.read_sum(torch.rand(100), out, 1)


# --- the command line ------------------------------------------------------------------------

def test_cli_ceilings_refuses_a_bad_problem(capsys):
    assert main(["ceilings", "--problem", "p99"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --problem='p99' is not known; allowed: p12, p45")


def test_for_problem_keeps_memory_and_the_problems_own_shapes(recorded):
    have = ceilings.newest(H200, recorded)       # holds p12's shape, p45's two and the legacy 8192^3
    mine = ceilings.for_problem(P12, have)
    assert list(mine["kind"]) == ["copy", "dram_read", "l2_read"] + ["gemm"] * 4
    assert list(mine["operands"].iloc[3:]) == list(ceilings.GEMM_OPERANDS)
    assert set(zip(mine["m"].iloc[3:], mine["n"].iloc[3:], mine["k"].iloc[3:])) == {(1024, 8192, 8192)}
    theirs = ceilings.for_problem(P45, have)
    shapes = list(dict.fromkeys(zip(theirs["m"].iloc[3:], theirs["n"].iloc[3:], theirs["k"].iloc[3:])))
    assert shapes == ceilings.gemm_shapes(P45) and len(theirs) == 3 + 8


def test_one_rate_and_the_ceilings_of_one_problem(recorded):
    have = ceilings.newest(H200, recorded)
    assert ceilings.rate(have, "copy") == 4000.0 and ceilings.rate(have, "l2_read") == 9000.0
    assert ceilings.rate(have, "gemm", "fp16", (1024, 8192, 8192)) == 700.0
    assert math.isnan(ceilings.rate(have, "gemm", "fp16", (64, 8192, 8192)))   # never measured
    assert math.isnan(ceilings.rate(have.iloc[0:0], "copy"))
    with pytest.raises(ValueError, match="kind='l1_read' is not a ceiling"):
        ceilings.rate(have, "l1_read")
    with pytest.raises(ValueError, match="needs operands"):
        ceilings.rate(have, "gemm", "fp16")
    mine = ceilings.for_problem(P12, have)
    assert set(mine.loc[mine["kind"] == "gemm", "m"]) == {1024}            # p45's shapes left out
    assert set(mine["kind"]) == {"copy", "dram_read", "l2_read", "gemm"}
    assert len(ceilings.for_problem(P45, have).query("kind == 'gemm'")) == 2 * 4


def test_a_row_of_other_arithmetic_is_never_read_as_a_ceiling(recorded, tmp_path):
    c = ctx("20261203T000000Z-000003", "2026-12-03T00:00:00Z")
    fact = records.make_row(c, problem="device", sizes="m=1,n=8192,k=8192",
                            variant=ceilings.GEMM_PREFIX + "tf32", timer="cuda-events",
                            median_ms=0.05, tflops=2.7,
                            notes=f"output checked against float64: {ceilings.NOT_ITS_ARITHMETIC}")
    honest = records.make_row(c, problem="device", sizes="m=1,n=8192,k=8192",
                              variant=ceilings.GEMM_PREFIX + "fp32", timer="cuda-events",
                              median_ms=0.05, tflops=2.7, notes="output checked against float64")
    path = tmp_path / "r.csv"
    records.append_rows(path, [fact, honest])
    got = ceilings.read_ceilings(path)
    assert list(got["operands"]) == ["fp32"]
