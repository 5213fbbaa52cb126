"""Nsight Compute counters: parsing ncu's raw CSV (the real output kept in data/logs/ncu/), and
the recorded counters covering every step of both ladders."""

import json
from pathlib import Path

import pytest

from fusedkit import counters, problems

NCU = Path(__file__).resolve().parent.parent / "data" / "logs" / "ncu"


@pytest.mark.parametrize("key", ["p12", "p45", "p12_4eba1cf", "p45_4eba1cf"])
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
# Empty since the H200 run at 4eba1cf collected the Hopper, small-batch, 16-bit and by-batch steps.
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
