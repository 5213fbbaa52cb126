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
# at 68accf4 and ecf7419 (p12's steps 15 and 16), and at cf6de5a (p12's SIMT steps 2, 5 and 6).
# p12's split-K step 18 and p45's single-product step 08 are new and untimed: collected by the
# first GPU run that times them.
NOT_YET_COLLECTED: dict[str, set[str]] = {"p12": {"wgmma_fp16x3_splitk"}, "p45": {"wgmma_fp16_lse", "wgmma_bf16_lse"}}


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


# -- coalescing and shared-memory columns, sizes other than the defaults ------------------------

_CONTEXT = {"run_id": "r1", "timestamp": "2026-12-01T00:00:00Z", "commit": "abc1234",
            "device": "NVIDIA H200", "driver": "580", "cuda": "13.0", "torch": "2.11", "triton": "3.6"}


def _ncu_csv(kernels: list[tuple[str, dict[str, str]]]) -> str:
    """A raw ncu CSV (header, units row, one row per kernel) as ``ncu --csv --page raw`` writes it."""
    metrics = [m for ms in counters.METRICS.values() for m in ms]
    units = {m: ("sector" if "sectors" in m else "request" if "requests" in m else
                 "%" if m.endswith(".pct") else "nsecond" if m.startswith("gpu__time") else "")
             for m in metrics}
    header = ["ID", "Kernel Name", *metrics]
    lines = [",".join(f'"{h}"' for h in header),
             ",".join(f'"{u}"' for u in ["", "", *(units[m] for m in metrics)])]
    for i, (name, values) in enumerate(kernels):
        lines.append(",".join(f'"{v}"' for v in [str(i), name, *(values.get(m, "1") for m in metrics)]))
    return "==PROF== Connected\n" + "\n".join(lines) + "\n"


def test_coalescing_and_bank_conflict_columns_come_from_their_metrics():
    sectors, requests = "2,147,483,648", "134217728"   # ncu's thousands separators
    simt = {"l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": sectors,
            "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": requests,
            "l1tex__t_sector_pipe_lsu_mem_global_op_ld_hit_rate.pct": "87.5",
            "lts__t_sectors_srcunit_tex_op_read.sum": "1000000000",
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": "0",
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum": "4096"}
    no_loads = {"l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": "0"}
    text = _ncu_csv([(counters.MARKER, {}), ("p12_coalesced_kernel", simt),
                     (counters.MARKER, {}), ("p12_other_kernel", no_loads)])
    order = {"problem": "p12", "context": _CONTEXT,
             "runs": [["coalesced", "batch_size=1024,in_features=8192,out_features=8192"],
                      ["small_batch_stream", "batch_size=4,in_features=8192,out_features=8192"]]}
    first, second = counters.rows_from_ncu(text, order)
    assert first["gld_sectors_per_request"] == 16.0         # 2^31 sectors / 2^27 requests
    assert first["l1_hit_pct"] == 87.5 and first["smem_ld_conflicts"] == 0
    assert first["smem_st_conflicts"] == 4096
    assert first["l2_l1_gb"] == pytest.approx(32.0)        # 10^9 sectors of 32 bytes
    assert first["sizes"].startswith("batch_size=1024") and second["sizes"].startswith("batch_size=4,")
    assert second["variant"] == "small_batch_stream"
    assert second["gld_sectors_per_request"] != second["gld_sectors_per_request"]  # NaN: no loads


def test_rows_at_other_sizes_are_kept_apart(tmp_path):
    text = _ncu_csv([(counters.MARKER, {}), ("p12_small_batch_kernel", {}),
                     (counters.MARKER, {}), ("p12_small_batch_kernel", {})])
    order = {"problem": "p12", "context": _CONTEXT,
             "runs": [["small_batch_stream", "batch_size=1,in_features=8192,out_features=8192"],
                      ["small_batch_stream", "batch_size=4,in_features=8192,out_features=8192"]]}
    folder = tmp_path / "collected"
    folder.mkdir()
    (folder / "ncu_p12-batch_size-1_batch_size-4.csv").write_text(text)
    (folder / "order_p12-batch_size-1_batch_size-4.json").write_text(json.dumps(order))
    path = tmp_path / "counters.csv"
    assert counters.import_dir(folder, path) == 2
    assert counters.step_counters("p12", "small_batch_stream", path=path).empty   # not at 1024 rows
    for rows in (1, 4):
        c = counters.step_counters("p12", "small_batch_stream", {"batch_size": rows}, path=path)
        assert len(c) == 1 and c["sizes"].iloc[0].startswith(f"batch_size={rows},")


def test_sizes_to_profile_at_and_their_file_tag():
    p12 = problems.get("p12")
    assert counters.size_list(p12, None) == [p12.defaults]
    both = counters.size_list(p12, "batch_size=1;batch_size=4")
    assert [s["batch_size"] for s in both] == [1, 4] and both[0]["in_features"] == 8192
    assert counters.sizes_tag(p12, [p12.defaults]) == "p12"
    assert counters.sizes_tag(p12, both) == "p12-batch_size-1_batch_size-4"
    with pytest.raises(problems.SizeError, match="batch_size=0 is out of range"):
        counters.size_list(p12, "batch_size=0")


@pytest.mark.parametrize("argv,phrase", [
    (["--sizes", "batch_size=0"], "batch_size=0 is out of range"),
    (["--sizes", "rows=4"], "'rows' is not a size of p12"),
    (["--sizes", "batch_size=1,batch_size=2"], "batch_size is given twice"),
    (["--variants", "fastest"], "variant='fastest' is not a variant of p12"),
])
def test_collect_refuses_bad_sizes_and_variants_in_one_line(argv, phrase, tmp_path, capsys):
    code = counters.main(["collect", "--problem", "p12", "--out", str(tmp_path), *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and phrase in err[0] and err[0].startswith("error:"), err
    assert not list(tmp_path.iterdir()), "nothing is written before the arguments are checked"


# -- a step's counters and source pages over its history ----------------------------------------

def test_source_pages_come_oldest_first_with_their_commit():
    pages = counters.source_pages("p12", "wgmma_fp16x3_multicast")
    assert [p.attrs["commit"] for p in pages] == ["68accf4", "ecf7419"]
    assert pages[0].attrs["when"] < pages[1].attrs["when"]
    # a step whose name starts with another's is not mixed in
    assert [p.attrs["commit"] for p in counters.source_pages("p12", "wgmma_fp16x3")] == ["9cb7cc1"]
    assert counters.source_pages("p12", "tiled") == []


def test_the_fences_of_cluster_scope_release_show_on_the_page():
    fences = r"\b(ERRBAR|CGAERRBAR|MEMBAR\S*|CCTL\S*)"
    before, after = (counters.instructions(p, fences) for p in counters.source_pages("p12", "wgmma_fp16x3_multicast"))
    assert "UTMACCTL.PF" not in before.index                     # the pattern, not a substring
    assert before["share"].sum() > 0.2 > 0.05 > after["share"].sum()
    assert before.loc["ERRBAR", "executed"] > 100 * after.loc["ERRBAR", "executed"]
    assert list(before["samples"]) == sorted(before["samples"], reverse=True)
    with pytest.raises(ValueError, match="not a regular expression"):
        counters.instructions(pages_first := counters.source_pages("p12", "wgmma_fp16x3")[0], "(")
    assert pages_first["samples"].sum() > 0

