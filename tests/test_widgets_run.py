"""The ladder explorer driven like a reader would on a CPU: boxes, list, Run button."""

import dataclasses
import random

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from fusedkit import problems, records, widgets  # noqa: E402
from fusedkit.mode import detect_mode  # noqa: E402
from fusedkit.widgets import LadderExplorer  # noqa: E402

P12 = problems.get("p12")
P45 = problems.get("p45")
CPU = dataclasses.replace(detect_mode(), gpu=False)


def ctx(run_id, when, commit, device="NVIDIA H200"):
    return records.RunContext(run_id=run_id, timestamp=when, commit=commit, device=device,
                              driver="550.54.15", cuda="12.8", torch="2.11.0", triton="3.6.0")


def row(c, sizes, variant, ms, tier="fp32-faithful", timer="cuda-events"):
    return records.make_row(c, problem="p12", sizes=sizes, variant=variant, tier=tier, timer=timer,
                            median_ms=ms, rel_error=random.uniform(1e-7, 1e-6))


def shown(ex) -> str:
    """Everything the explorer's output area holds, as plain text."""
    parts = []
    for o in ex.output.outputs:
        parts.append(o.get("text", "") + o.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)


def type_sizes(ex, values):
    """Type into the size boxes, one at a time, as a reader would."""
    for d, v in zip(ex.problem.dims, values):
        ex.picker.boxes[d.name].value = v


@pytest.fixture
def empty_records(tmp_path):
    return tmp_path / "records.csv"


def test_small_sizes_run_triton_in_the_interpreter_and_cuda_needs_a_gpu(empty_records):
    ex = LadderExplorer(P12, CPU, recorded_path=empty_records)
    m, k, n = random.randint(9, 40), random.randint(17, 70), random.randint(9, 40)
    type_sizes(ex, [m, k, n])
    ex.select(["eager", "triton_tf32x3", "cublas_epilogue"])
    ex.button.click()
    res = ex.result.set_index("variant")
    assert set(res.index) == {"eager", "triton_tf32x3", "cublas_epilogue"}
    tri = res.loc["triton_tf32x3"]
    assert "Triton's CPU interpreter" in tri["live here"]
    # The interpreter computes tf32x3's dots in fp32: the logic is judged, not the precision.
    assert tri["tier"] == "logic right" and 0 < tri["rel_error"] < 1e-5
    assert res.loc["eager", "tier"] == "reference"
    assert "needs a CUDA GPU" in res.loc["cublas_epilogue", "live here"]
    assert res.loc["cublas_epilogue", "tier"] != res.loc["cublas_epilogue", "tier"]   # NaN: not run
    assert (res["floor_ms"] > 0).all()
    text = shown(ex)
    assert f"batch_size={m},in_features={k},out_features={n}" in text
    assert "roofline on H200 SXM" in text and "needs a CUDA GPU" in text
    assert "no GPU measurement of these variants is recorded" in text
    assert ex.progress.value == 3 and "running 3 variant" in ex.message.value


def test_kernelbench_sizes_explain_the_interpreter_limit(empty_records):
    ex = LadderExplorer(P45, CPU, recorded_path=empty_records)
    ex.select(["triton_fused_lse_tf32", "eager"])
    ex.run()
    res = ex.result.set_index("variant")
    limit = res.loc["triton_fused_lse_tf32", "live here"]
    assert "would take about" in limit and "in Triton's CPU interpreter" in limit and "allowed: 10 s" in limit
    assert "pick smaller sizes" in res.loc["eager", "live here"]
    assert "tier" not in res.columns          # nothing ran live
    # The predicted floors follow each variant's arithmetic: TF32 is several times lower.
    assert res.loc["triton_fused_lse_tf32", "floor_ms"] < res.loc["eager", "floor_ms"] / 3


def test_nearest_records_are_found_and_labelled(tmp_path):
    path = tmp_path / "records.csv"
    near, far = "batch_size=64,in_features=256,out_features=128", "batch_size=1024,in_features=8192,out_features=8192"
    old = ctx("20260101T000000Z-aaaaaa", "2026-01-01T00:00:00Z", "abc1234")
    new = ctx("20260301T000000Z-bbbbbb", "2026-03-01T00:00:00Z", "def5678", device="NVIDIA A100-SXM4-80GB")
    e_near, t_near = random.uniform(0.5, 1.0), random.uniform(0.05, 0.2)
    records.append_rows(path, [
        row(old, near, "eager", e_near, tier="reference"), row(old, near, "triton_tf32", t_near, tier="fast"),
        row(new, far, "eager", 2.7, tier="reference"), row(new, far, "triton_tf32", 0.43, tier="fast"),
        row(new, far, "naive", 275.0),
        row(old, near, "cublas_epilogue", 0.3, timer="cpu-wall"),   # a CPU time is never "recorded on a GPU"
    ])
    ex = LadderExplorer(P12, CPU, recorded_path=path)
    type_sizes(ex, [48, 256, 160])
    ex.select(["triton_tf32", "naive", "cublas_epilogue"])
    ex.button.click()
    res = ex.result.set_index("variant")
    tri = res.loc["triton_tf32"]
    assert tri["recorded_sizes"] == near and "recorded_commit" not in res.columns
    assert tri["recorded_device"] == "NVIDIA H200" and tri["recorded_date"].startswith("2026-01-01")
    assert tri["recorded_speedup"] == pytest.approx(e_near / t_near)   # within its own run
    assert res.loc["naive", "recorded_sizes"] == far                    # the only sizes it has
    assert res.loc["naive", "recorded_speedup"] == pytest.approx(2.7 / 275.0)
    assert res.loc["cublas_epilogue", "recorded_sizes"] != res.loc["cublas_epilogue", "recorded_sizes"]
    text = shown(ex)
    assert "nearest recorded sizes" in text and "A100" in text
    assert "abc1234" not in text          # commit ids stay in the records, out of the table


def test_bad_sizes_are_explained_not_raised(empty_records):
    ex = LadderExplorer(P12, CPU, recorded_path=empty_records)
    ex.select(["eager"])
    ex.picker.boxes["in_features"].value = -random.randint(1, 99)
    ex.button.click()
    assert "in_features=" in ex.message.value and "out of range" in ex.message.value
    assert "press Run again" in ex.message.value
    assert ex.result.empty and ex.output.outputs == ()


def test_empty_selection_is_explained(empty_records):
    ex = LadderExplorer(P12, CPU, recorded_path=empty_records)
    ex.button.click()
    assert "no variant is selected" in ex.message.value and ex.result.empty


def test_precision_menu_filters_the_list_and_keeps_what_still_fits():
    ex = LadderExplorer(P12, CPU)
    assert ex.precision.options[0] == "all" and {"fp32", "tf32", "tf32x3"} <= set(ex.precision.options)
    ex.select(["eager", "triton_tf32", "eager_tf32"])
    ex.precision.value = "tf32"
    slugs = {slug for _, slug in ex.variants.options}
    assert slugs == {v.slug for v in P12.variants.values() if v.precision == "tf32"}
    assert set(ex.variants.value) == {"triton_tf32", "eager_tf32"}
    with pytest.raises(ValueError, match="'nope'"):
        ex.select(["nope"])


def test_a_failing_variant_is_one_line_and_the_rest_still_run(empty_records, monkeypatch):
    real = widgets.measure

    def flaky(problem, v, *a, **kw):
        if v.slug == "triton_tf32":
            raise RuntimeError("boom in the kernel\nsecond line of a long compiler log")
        return real(problem, v, *a, **kw)

    monkeypatch.setattr(widgets, "measure", flaky)
    ex = LadderExplorer(P12, CPU, recorded_path=empty_records)
    type_sizes(ex, [16, 32, 24])
    ex.select(["triton_tf32", "eager"])
    ex.run()
    res = ex.result.set_index("variant")
    assert res.loc["triton_tf32", "live here"] == "ERROR: RuntimeError: boom in the kernel"
    assert res.loc["eager", "tier"] == "reference"
    assert "second line" not in shown(ex)


def test_a_failing_run_is_one_line(monkeypatch, empty_records):
    def broken(*a, **kw):
        raise OSError("records unreadable")

    monkeypatch.setattr(widgets, "nearest_records", broken)
    ex = LadderExplorer(P12, CPU, recorded_path=empty_records)
    type_sizes(ex, [16, 32, 24])
    ex.select(["naive"])
    ex.button.click()
    assert "run failed: OSError: records unreadable" in shown(ex) and ex.result.empty
    assert "failed" in ex.message.value


def test_gpu_path_times_with_eager_as_baseline_and_records_nothing(tmp_path, monkeypatch):
    # The GPU branch, driven on the CPU: same code, with the live device switched to "cpu".
    rec = tmp_path / "never.csv"
    monkeypatch.setenv("FUSEDKIT_RECORDS", str(rec))
    ex = LadderExplorer(P12, dataclasses.replace(CPU, gpu=True))
    ex._device = "cpu"
    type_sizes(ex, [random.randint(9, 33), 48, 40])
    ex.select(["triton_ieee"])
    ex.button.click()
    res = ex.result.set_index("variant")
    assert list(res.index) == ["eager", "triton_ieee"]            # eager added as the baseline
    assert res.loc["eager", "speedup"] == pytest.approx(1.0)
    assert (res["median_ms"] > 0).all() and set(res["timer"]) == {"cpu-wall"}
    assert res.loc["triton_ieee", "tier"] == "fp32-faithful"
    assert any("image/png" in o.get("data", {}) for o in ex.output.outputs)   # the bar chart
    assert "not recorded" in shown(ex) and not rec.exists()
