"""Nsight Compute counters: parsing ncu's raw CSV (the real output kept in data/logs/ncu/), and
the recorded counters covering every step of both ladders."""

import json
from pathlib import Path

import pytest

from fusedkit import counters, problems, records

NCU = Path(__file__).resolve().parent.parent / "data" / "logs" / "ncu"


@pytest.mark.parametrize("key", ["p12", "p45", "p12_4eba1cf", "p45_4eba1cf", "p45_96996dc"])
def test_raw_ncu_output_splits_into_variants_at_the_markers(key):
    order = json.loads((NCU / f"order_{key}.json").read_text())
    rows = counters.rows_from_ncu((NCU / f"ncu_{key}.csv").read_text(), order)
    seen = [r["variant"] for r in rows]
    assert list(dict.fromkeys(seen)) == order["variants"]          # every variant, in order
    assert not any("FillFunctor" in r["kernel"] and r["launch"] == max(
        q["launch"] for q in rows if q["variant"] == r["variant"]) for r in rows)
    assert not any(counters.MARKER in r["kernel"] for r in rows)
    for r in rows:
        assert r["duration_us"] > 0 and r["registers"] >= 1 and r["grid"] >= 1


# Steps registered before their counters were collected on a GPU (the notebooks say "none
# recorded"): the list must shrink to nothing as they are collected, and never grow silently.
# Empty since the H200 runs at 4eba1cf (the Hopper, small-batch, 16-bit and by-batch steps) and
# at 68accf4 and ecf7419 (p12's steps 13 and 14).
NOT_YET_COLLECTED: dict[str, set[str]] = {"p12": set(), "p45": set()}


def test_the_ladders_are_recorded_with_device_and_commit():
    df = counters.read_counters()
    for key in ("p12", "p45"):
        p = problems.get(key)
        missing = {v.slug for v in p.ladder() if counters.step_counters(p, v.slug).empty}
        assert missing == NOT_YET_COLLECTED[key], f"{key}: steps without counters: {sorted(missing)}"
        for v in p.ladder():
            if v.slug in missing:
                continue
            c = counters.step_counters(p, v.slug)
            assert "H200" in c.attrs["label"] and "commit" in c.attrs["label"]
            assert list(c["launch"]) == list(range(len(c)))
    assert set(df["device"]) == {"NVIDIA H200"}


def test_what_the_counters_say_about_two_known_kernels():
    # cuBLAS fp32 runs on the FMA pipe, not the tensor cores; its TF32 twin the other way round.
    fp32 = counters.step_counters("p12", "cublas_epilogue").iloc[0]
    tf32 = counters.step_counters("p12", "cublas_tf32_epilogue_vec4").iloc[0]
    assert fp32["tensor_pct"] < 1 < 50 < fp32["fma_pct"]
    assert tf32["tensor_pct"] > 50 > tf32["fma_pct"]


def test_nothing_recorded_reads_as_empty_with_a_label(tmp_path):
    c = counters.step_counters("p12", "tiled", path=tmp_path / "none.csv")
    assert c.empty and c.attrs["label"] == "no counters recorded"


def test_source_pages_of_gemm1_split_into_k_loop_and_epilogue():
    # Problem 45's GEMM1 at KernelBench's sizes: 128 x 32 output tiles of 32 k-tiles each, eight
    # consumer warps per block, one producer warp; the page before and after the change that
    # issued the epilogue's loads before the last wgmma wait (commits 315f0f2, b39259a).
    tiles, k_tiles = 128 * 32, 32
    regions = {"k-loop": tiles * k_tiles * 8, "epilogue": tiles * 8, "producer": tiles * k_tiles}
    pages = {c: counters.read_source_page(NCU / f"source_p45_gemm1_{c}.csv")
             for c in ("315f0f2", "b39259a")}
    split = {c: counters.source_regions(p, regions) for c, p in pages.items()}
    for c, r in split.items():
        assert c in pages[c].attrs["label"] and "H200" in pages[c].attrs["label"]
        assert list(r.index) == ["k-loop", "epilogue", "producer", "other"]
        assert r["samples"].sum() == pages[c]["samples"].sum()  # every sample lands in a region
        assert r.loc["other", "samples_share"] < 0.05            # the counts name nearly all of it
        reasons = [col for col in r.columns if col not in
                   ("samples", "samples_share", "executed", "executed_share")]
        # The reasons ncu names cover most samples, never more than all (the rest it leaves unnamed).
        named = r[reasons].sum(axis=1)
        assert (named <= r["samples"]).all() and named.sum() >= 0.9 * r["samples"].sum()
    before, after = split["315f0f2"], split["b39259a"]
    # The loads' waits (long scoreboard) in the epilogue fell by more than half...
    assert after.loc["epilogue", "long_sb"] < 0.5 * before.loc["epilogue", "long_sb"]
    # ...and the epilogue's share of the samples with them; the k-loop's stayed put.
    assert after.loc["epilogue", "samples_share"] < before.loc["epilogue", "samples_share"] - 0.05
    assert abs(after.loc["k-loop", "samples"] / before.loc["k-loop", "samples"] - 1) < 0.05


def test_a_file_that_is_not_a_source_page_says_so(tmp_path):
    path = tmp_path / "page.csv"
    path.write_text("# a label\na,b\n1,2\n")
    with pytest.raises(records.RecordsError, match="not a kept source page"):
        counters.read_source_page(path)
