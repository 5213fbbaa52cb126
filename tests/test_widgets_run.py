"""The ladder explorer driven like a reader would on a CPU: boxes, list, Run button."""

import dataclasses
import random
import signal
import threading
import time
import types

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from fusedkit import check, problems, records, widgets  # noqa: E402
from fusedkit.mode import detect_mode  # noqa: E402
from fusedkit.interpreter_cost import RUN_SECONDS_BUDGET  # noqa: E402
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
    ex.wait()
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
    assert ex.progress.value == 3 and ex.status == "done" and ex.progress.description == "done"
    # What ran and what was left out, and why ("done: 3 variant(s)" counted the one left out).
    assert "done: 2 of 3 variant(s) ran; left out: cublas_epilogue (needs a CUDA GPU" in ex.message.value
    assert "estimated" in ex.message.value
    assert not ex.button.disabled and ex.cancel.disabled


def test_kernelbench_sizes_explain_the_interpreter_limit(empty_records, monkeypatch):
    # This CPU's GEMM rates set eager's estimate; fixed here so that the test does not hang on
    # how busy the machine is (eager's check at these sizes takes about a minute).
    monkeypatch.setattr(widgets, "_cpu_flops_per_s", lambda dtype: 50e9)
    ex = LadderExplorer(P45, CPU, recorded_path=empty_records)
    ex.select(["triton_fused_lse_tf32", "eager"])
    ex.run()
    res = ex.result.set_index("variant")
    limit = res.loc["triton_fused_lse_tf32", "live here"]
    assert "would take about" in limit and "in Triton's CPU interpreter" in limit and f"allowed: {RUN_SECONDS_BUDGET:.0f} s" in limit
    eager = res.loc["eager", "live here"]
    est = check.evaluations(ex.SEEDS_CPU) * P45.flops(P45.defaults) / 50e9
    assert "pick smaller sizes" in eager and f"about {est:.0f} s checked on this CPU" in eager
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
    ex.wait()
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
    ex.wait()
    assert "in_features=" in ex.message.value and "out of range" in ex.message.value
    assert "press Run again" in ex.message.value
    assert ex.result.empty and ex.output.outputs == ()


def test_empty_selection_is_explained(empty_records):
    ex = LadderExplorer(P12, CPU, recorded_path=empty_records)
    ex.button.click()
    ex.wait()
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
    ex.wait()
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
    ex.wait()
    res = ex.result.set_index("variant")
    assert list(res.index) == ["eager", "triton_ieee"]            # eager added as the baseline
    assert res.loc["eager", "speedup"] == pytest.approx(1.0)
    assert (res["median_ms"] > 0).all() and set(res["timer"]) == {"cpu-wall"}
    assert res.loc["triton_ieee", "tier"] == "fp32-faithful"
    assert any("image/png" in o.get("data", {}) for o in ex.output.outputs)   # the bar chart
    assert "not recorded" in shown(ex) and not rec.exists()


def test_the_cpu_rates_are_measured():
    for dtype in (widgets.torch.float32, widgets.torch.float64):
        assert 1e8 < widgets._cpu_flops_per_s(dtype) < 1e14


def test_the_list_is_in_step_order_whole_and_shows_every_step():
    ex = LadderExplorer(P45, CPU)
    labels = [label for label, _ in ex.variants.options]
    assert ex.variants.rows == len(P45.variants) == len(labels)
    steps = [int(lb.split(":")[0].split()[1]) for lb in labels if lb.startswith("step ")]
    assert steps == sorted(steps) and labels[0].startswith("reference: ")
    # every label carries its whole slug (once cut to "triton_fused_lse" for each Triton step)
    assert all(f": {slug} (" in lb for lb, slug in ex.variants.options)


def test_the_announced_estimate_is_the_figure_a_refusal_quotes(empty_records):
    ex = LadderExplorer(P12, CPU, recorded_path=empty_records)
    sizes = P12.sizes(batch_size=1)           # too big for the interpreter's budget
    type_sizes(ex, sizes.values())
    ex.select(["triton_ieee"])
    total, left_out = ex.estimate(sizes, ["triton_ieee"])
    est = widgets.run_seconds(P12, P12.variant("triton_ieee"), sizes, seeds=ex.SEEDS_CPU,
                                      time_it=False)
    assert total == 0 and f"about {est:.0f} s" in left_out["triton_ieee"]
    small = P12.sizes(batch_size=random.randint(9, 30), in_features=48, out_features=40)
    total, left_out = ex.estimate(small, ["triton_ieee", "eager"])
    assert not left_out
    assert total >= widgets.run_seconds(P12, P12.variant("triton_ieee"), small,
                                                seeds=ex.SEEDS_CPU, time_it=False)
    type_sizes(ex, small.values())
    ex.select(["triton_ieee", "eager"])
    ex.button.click()
    ex.wait()
    assert f"about {widgets._seconds(total)} in all" in ex.message.value or \
        f"estimated {widgets._seconds(total)}" in ex.message.value


def test_sizes_whose_copies_do_not_fit_are_refused_with_what_fits(empty_records):
    ex = LadderExplorer(P12, CPU, recorded_path=empty_records)
    type_sizes(ex, [32768, 32768, 1 + random.randint(0, 5)])
    ex.select(["eager"])
    ex.button.click()
    ex.wait()
    msg = ex.message.value
    assert "GiB while checked and timed" in msg and "e.g. batch_size&lt;=" in msg
    assert ex.result.empty and ex.output.outputs == () and ex.status == "idle"


def test_cancel_stops_the_run_between_calls_and_records_nothing(tmp_path, monkeypatch):
    rec = tmp_path / "never.csv"
    monkeypatch.setenv("FUSEDKIT_RECORDS", str(rec))
    started = threading.Event()
    real = widgets.measure

    def counted(problem, v, *a, **kw):
        started.set()
        return real(problem, v, *a, **kw)

    monkeypatch.setattr(widgets, "measure", counted)
    ex = LadderExplorer(P12, CPU, recorded_path=tmp_path / "none.csv")
    # a Triton check of several seconds in the interpreter: cancelled within its first calls
    type_sizes(ex, [random.randint(60, 64), 256, 256])
    ex.select(["triton_ieee", "triton_tf32", "eager"])
    ex.button.click()
    assert started.wait(30)
    assert ex.status == "running" and ex.button.disabled and not ex.cancel.disabled
    ex.button.click()                                     # a second click starts nothing
    assert "already working" in ex.message.value
    t0 = time.perf_counter()
    ex.cancel.click()
    ex.wait(60)
    assert ex.status == "interrupted" and ex.progress.description == "interrupted"
    assert "interrupted: nothing recorded" in ex.message.value
    assert time.perf_counter() - t0 < 20                  # after the call running, not the run
    assert not ex.button.disabled and ex.cancel.disabled and not rec.exists()
    assert "triton_tf32" not in set(ex.result.get("variant", []))


def test_the_kernel_interrupt_reaches_a_run_in_its_thread(monkeypatch):
    # ipykernel restores Kernel.saved_sigint_handler after each message; route_kernel_interrupt
    # makes it ours, so the toolbar's interrupt between messages stops a working run.
    import IPython
    from fusedkit import interrupts

    kernel = types.SimpleNamespace(saved_sigint_handler=signal.SIG_IGN)
    monkeypatch.setattr(IPython, "get_ipython", lambda: types.SimpleNamespace(kernel=kernel))
    monkeypatch.setattr(interrupts, "_routed", False)
    assert interrupts.route_kernel_interrupt()
    handler = kernel.saved_sigint_handler
    assert callable(handler)
    handler(signal.SIGINT, None)                          # no run working: ignored, as before
    stop = threading.Event()
    with interrupts.stoppable(stop):
        interrupts.checkpoint()                           # not asked yet: goes on
        handler(signal.SIGINT, None)
        assert stop.is_set()
        with pytest.raises(interrupts.Interrupted):
            interrupts.checkpoint()
    interrupts.checkpoint()                               # outside the run: nothing to stop


def test_the_running_line_shows_the_call_limit(empty_records, monkeypatch):
    """While it runs the learner reads that each kernel has a process of its own and how long
    a call may take before it counts as hung (fusedkit.isolation.CALL_TIMEOUT_S)."""
    from fusedkit import isolation

    ex = LadderExplorer(P12, CPU, recorded_path=empty_records)
    ex.select(["eager"])
    seen = []
    monkeypatch.setattr(ex, "_execute", lambda *plan: seen.append(ex.message.value))
    ex.run()
    assert seen and "each kernel runs in a process of its own" in seen[0]
    assert f"a call that takes over {isolation.CALL_TIMEOUT_S:g} s counts as hung" in seen[0]


def test_a_refused_run_clears_the_last_runs_tables_and_its_line_goes_once_the_sizes_are_fixed(
        empty_records):
    """After a refused Run (bad sizes) the bar stayed green "done" and the previous run's tables
    stayed under the red message; fixed sizes left the "out of range" line until Run."""
    ex = LadderExplorer(P12, CPU, recorded_path=empty_records)
    type_sizes(ex, [17, 33, 65])
    ex.select(["eager"])
    ex.button.click()
    ex.wait()
    assert ex.status == "done" and ex.output.outputs and ex.progress.bar_style == "success"
    ex.picker.boxes["batch_size"].value = 0
    ex.button.click()
    ex.wait()
    assert "out of range" in ex.message.value and "Fix the sizes" in ex.message.value
    assert ex.output.outputs == () and ex.result.empty
    assert ex.progress.bar_style == "" and ex.progress.description == "not run" and ex.status == "idle"
    ex.picker.boxes["batch_size"].value = 19
    assert ex.message.value == ""
    ex.button.click()
    ex.wait()
    assert ex.status == "done" and "batch_size=19" in shown(ex)
    ex.picker.boxes["batch_size"].value = 21   # the tables are now another run's: said so
    assert "the tables below are from the last run (1 variant(s) at batch_size=19," in ex.message.value


def test_the_roofline_table_at_tiny_sizes_shows_readable_units(empty_records):
    """At 17 x 33 x 65 the roofline table showed only 0.0 / 0.000 (GFLOP and ms at 4 decimals)."""
    ex = LadderExplorer(P12, CPU, recorded_path=empty_records)
    type_sizes(ex, [17, 33, 65])
    ex.select(["eager"])
    ex.button.click()
    ex.wait()
    roofline = next(o["data"]["text/plain"] for o in ex.output.outputs
                    if o.get("data", {}).get("text/plain", "").startswith("roofline on"))
    header = roofline.splitlines()[1]
    assert "kFLOP" in header and "kB" in header and "floor ns" in header, roofline
    fused = next(ln for ln in roofline.splitlines() if "total, fused" in ln).split()
    assert float(fused[-7]) > 1 and float(fused[-2]) > 1, roofline   # kFLOP, floor ns
