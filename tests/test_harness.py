"""The measuring path at its public face (``fusedkit.harness.plan`` and ``measure``), against the
kernels of tests/adversaries.py: every class of fault named in one line and never timed, every
way of cheating the measurement closed, honest kernels measured as before."""

from __future__ import annotations

import hashlib
import math
import os
import re
import signal
import socket
import threading
import time
from pathlib import Path

import pytest
import torch

import adversaries as bad
from fusedkit import harness, problems, runner
from fusedkit.harness import pool, terms, wire
from fusedkit.kernels import load_step

P12, P45 = problems.get("p12"), problems.get("p45")
# 32 rows: a multiple of 16, so the whole-tiles kernel is right here and wrong at the odd shape.
SMALL = P12.sizes(batch_size=32, in_features=48, out_features=40)
SMALL45 = P45.sizes(batch_size=16, input_size=24, hidden_size=20, output_size=12)
FAST = dict(seeds=1, warmup_ms=2, rep_ms=20)


def run(builder, sizes=SMALL, problem=P12, **kw) -> harness.Measurement:
    return harness.measure(problem, builder, sizes, name=getattr(builder, "__name__", "k"),
                           **{**FAST, **kw})


def caught(m: harness.Measurement, fault: str) -> str:
    """``m`` failed with ``fault``, in one line, and was not timed or recorded; its line."""
    assert not m.ok and not m.timed, m.summary()
    assert m.failure.startswith(fault), m.failure
    assert "\n" not in m.failure and "Traceback" not in m.failure
    with pytest.raises(ValueError, match="not recorded"):
        m.row()
    return m.failure


# -- honest kernels ---------------------------------------------------------------------------------

def test_an_honest_kernel_is_checked_timed_and_gives_one_row():
    p = harness.plan(P12, "addmm_alpha_beta", SMALL, seeds=2, warmup_ms=2, rep_ms=20)
    m = harness.measure(p)
    assert m.ok and m.timed and m.tier == "fp32-faithful", m.summary()
    assert 0 < m.build_s < m.seconds and harness.measure(p).check.seeds != m.check.seeds   # fresh
    with pytest.raises(TypeError, match="takes the plan alone"):
        harness.measure(p, "eager")
    assert m.check.calls == 2 * 2 + 2 and m.check.odd_sizes == P12.sizes(
        batch_size=27, in_features=41, out_features=35)
    row = m.row()
    assert row["timer"] == "cpu-wall" and row["median_ms"] > 0 and row["repeats"] >= 3
    assert row["timed_from"] < row["timed_to"] and row["timed_to"].endswith("Z")


@pytest.mark.parametrize("problem", [P12, P45], ids=["p12", "p45"])
def test_every_registered_kernel_that_runs_here_passes_at_its_declared_precision(problem):
    """Each registered variant a CPU runs (PyTorch's, and Triton's in the interpreter), through
    the whole path once: checked, timed, and tiered as it declares."""
    sizes = SMALL if problem is P12 else SMALL45
    for m in runner.ladder(problem, sizes, seeds=1, warmup_ms=1, rep_ms=5):
        if m.skipped:
            assert m.variant.needs_gpu, m.summary()
            continue
        assert m.timed, m.summary()
        assert m.tier in ("reference", "fp32-faithful", "kb-pass", "fast", ""), m.summary()
        if m.variant.precision == "fp32":
            assert m.tier in ("reference", "fp32-faithful"), m.summary()


def test_a_slightly_noisy_kernel_is_kb_pass_and_precision_bounds_decide_wrong():
    assert run(bad.slightly_noisy).tier == "kb-pass"
    caught(run(bad.scaled_by_1_001), terms.WRONG)
    assert run(bad.scaled_by_1_001, precision="tf32").tier == "fast"


def test_a_long_tmpdir_changes_nothing(monkeypatch, tmp_path):
    """The worker's socket has no path: a TMPDIR too long for one (over 107 bytes) is no fault."""
    from fusedkit.harness import pool
    long = tmp_path / ("t" * 120)
    long.mkdir()
    monkeypatch.setenv("TMPDIR", str(long))
    pool.stop_all()   # a zygote started afresh, under this TMPDIR
    assert run("eager").timed


def test_honest_times_are_the_kernels_own():
    """The caller's clock bounds each call; an honest kernel's median is its own time, with no
    more than the harness's small cost added (a sleep of 20 ms is timed at 20 to 25 ms)."""
    def sleepy(model):
        def fn(x):
            time.sleep(0.02)
            return model(x)
        return fn
    m = run(sleepy, rep_ms=200)
    assert m.timed and 19.5 <= m.timing.median_ms <= 25, m.timing


# -- the checked calls: one fault class each ---------------------------------------------------------

@pytest.mark.parametrize("builder, problem, fault", [
    (bad.skips_an_element, P12, terms.UNWRITTEN),
    (bad.forgets_the_leaky_relu, P12, terms.WRONG),
    (bad.returns_zeros, P12, terms.WRONG),
    (bad.p45_forgets_the_sigmoid, P45, terms.WRONG),
    (bad.caching, P12, terms.REUSE),
    (bad.whole_tiles_only, P12, terms.SPECIALISED),
    (bad.writes_its_input, P12, terms.MUTATION),
    (bad.writes_its_weights, P12, terms.MUTATION),
    (bad.reused_output_buffer, P12, terms.ALIASING),
    (bad.returns_a_view_of_its_input, P12, terms.ALIASING),
    (lambda model: lambda x: x, P12, terms.NOT_PLAIN),
    (bad.patches_linear, P12, terms.WRONG),
    (bad.signals_its_process_group, P12, terms.CRASHED),
    (bad.returns_a_subclass, P12, terms.NOT_PLAIN),
    (bad.raises, P12, terms.RAISED),
    (bad.segfaults, P12, terms.CRASHED),
], ids=lambda v: getattr(v, "__name__", None) if callable(v) else None)
def test_each_fault_of_a_checked_call_is_named(builder, problem, fault):
    caught(run(builder, SMALL if problem is P12 else SMALL45, problem), fault)


def test_a_call_that_never_returns_is_a_verdict_within_its_limit():
    t0 = time.monotonic()
    line = caught(run(bad.hangs, call_timeout_s=1.0), terms.HUNG)
    assert "call 1" in line and "call_timeout_s" in line and time.monotonic() - t0 < 10
    line = caught(run(bad.hangs_when_timed, call_timeout_s=1.0), terms.HUNG)
    assert "call" in line and time.monotonic() - t0 < 30


def test_a_process_left_running_is_ended_and_named(tmp_path):
    tally = bad.Tally(tmp_path / "pids")
    caught(run(bad.leaves_a_process_running(tally)), terms.LEFT_RUNNING)
    pid = int(tally.lines()[0])
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


# -- the process line: what a kernel cannot reach ------------------------------------------------------

@pytest.mark.parametrize("builder", [bad.kills_its_caller, bad.kills_its_callers_group,
                                     bad.kills_every_process, bad.kills_its_parent,
                                     bad.opens_a_network_socket, bad.pushes_input_into_a_terminal])
def test_a_kernel_that_reaches_outside_its_process_is_ended_and_the_caller_goes_on(builder):
    line = caught(run(builder), terms.FORBIDDEN)
    assert "network socket" in line
    assert harness.measure(P12, "eager", SMALL, **FAST).timed   # this process, and its pool, go on


def test_bytes_written_into_its_files_are_a_verdict_in_time():
    t0 = time.monotonic()
    caught(run(bad.writes_garbage_into_its_files, call_timeout_s=5.0), terms.MALFORMED)
    assert time.monotonic() - t0 < 15


def test_nothing_a_worker_sends_is_unpickled(tmp_path):
    caught(run(bad.sends_a_pickle(tmp_path / "ran")), terms.MALFORMED)
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize("delay_s", [0.0, 0.005, 0.06])
def test_a_message_is_read_whole_while_polling_or_after(delay_s):
    """A GPU's worker and caller poll for a while before they sleep (here 20 ms): a message that
    comes in pieces, during the polling or after it, is read whole, and a deadline still holds."""
    a, b = socket.socketpair()
    message = ["timed", {"ms": 0.25, "digest": torch.arange(500, dtype=torch.int64)}]
    header = socket.socketpair()   # wire.send's bytes, sent here in two pieces delay_s apart
    wire.send(header[0], message)
    data = header[1].recv(1 << 20)

    def later() -> None:
        b.sendall(data[:7])
        time.sleep(delay_s)
        b.sendall(data[7:])
    threading.Thread(target=later).start()
    kind, body = wire.receive(a, time.monotonic() + 5, pair=True, spin_s=0.02)
    assert kind == "timed" and body["ms"] == 0.25 and torch.equal(body["digest"], message[1]["digest"])
    with pytest.raises(TimeoutError):
        wire.receive(a, time.monotonic() + 0.05, spin_s=wire.GPU_SPIN_S)


def test_each_candidate_runs_in_a_fresh_process_of_its_own(tmp_path):
    tally = bad.Tally(tmp_path / "pids")
    for _ in range(2):
        assert run(bad.reports_its_process(tally)).timed
    pids = tally.lines()
    assert len(set(pids)) == 2 and str(os.getpid()) not in pids   # one worker each, never here


def test_workers_check_for_cuda_through_nvml_and_one_that_cannot_start_says_why():
    """The zygote imports torch before any worker makes its CUDA context: it must not make the
    CUDA runtime itself (a forked worker could not use it)."""
    from fusedkit.harness import pool
    with pool.worker(torch.device("cpu")) as w:
        w.wait_ready()
        environ = Path(f"/proc/{pool._zygote[0].pid}/environ").read_bytes()
    assert b"PYTORCH_NVML_BASED_CUDA_CHECK=1" in environ.split(b"\0")
    if not torch.cuda.is_available():
        with pytest.raises(ChildProcessError, match="did not start") as e:
            pool.Worker(torch.device("cuda", 0)).wait_ready()
        assert "\n" not in str(e.value)


def test_a_terminals_ctrl_c_reaches_the_caller_alone():
    """The zygote and every worker lead sessions of their own: a Ctrl-C at the terminal (a signal
    to the caller's process group) never reaches them; the caller ends them itself."""
    from fusedkit.harness import pool
    with pool.worker(torch.device("cpu")) as w:
        w.wait_ready()
        sessions = {os.getsid(pid) for pid in (pool._zygote[0].pid, w.pid)}
        groups = {os.getpgid(pid) for pid in (pool._zygote[0].pid, w.pid)}
    assert os.getsid(0) not in sessions and os.getpgid(0) not in groups and len(sessions) == 2


def test_no_other_processs_memory_can_be_opened(tmp_path):
    """Not the judge's, not the zygote's (every later worker is its fork), not the next worker's."""
    tally = bad.Tally(tmp_path / "seen")
    assert run(bad.opens_others_memory(tally)).timed
    assert set(tally.lines()) == {"caller PermissionError", "zygote PermissionError",
                                  "spare PermissionError"}   # every build, each of its attempts


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSTOP, signal.SIGINT, signal.SIGUSR1])
def test_a_signal_to_the_next_worker_harms_no_later_candidate(sig):
    assert run(bad.signals_the_next_worker(sig)).timed
    assert run("eager").timed


def test_the_spare_has_started_before_anything_is_timed():
    """On a GPU a spare making its CUDA context beside a timing loop shares the GPU and its driver
    with the calls being timed: the harness waits for it first (here on a CPU, the same code)."""
    with pool.worker(torch.device("cpu")):
        spare = pool._spares["cpu"]
        pool.settle(torch.device("cpu"))
        assert spare.ready and spare.fit()


def test_fusedkits_own_files_changed_while_a_kernel_ran_are_named_and_put_back():
    target = Path(harness.__file__).with_name("judge.py")
    before = target.read_bytes()
    line = caught(run(bad.rewrites_fusedkit(str(target))), terms.FORBIDDEN)
    assert "fusedkit/harness/judge.py" in line and target.read_bytes() == before


# -- the timed calls: one cause each -----------------------------------------------------------------

def test_a_time_the_worker_reports_is_bounded_by_the_callers_clock():
    """Cause 1: a kernel that does 30 ms of work a call and reports a microsecond."""
    m = run(bad.reports_a_microsecond, rep_ms=200)
    assert m.timed and m.timing.median_ms >= 28, m.timing


def test_the_harness_cost_is_measured_before_the_kernel_runs():
    """Cause 1 through the harness's own cost: a kernel whose thread pauses every younger worker
    cannot lengthen the cost subtracted from its round trips."""
    m = run(bad.inflates_the_harness_cost, rep_ms=100)
    assert m.timed and m.timing.median_ms >= 9, m.timing


def test_work_moved_out_of_the_call_is_timed_or_refused():
    """Cause 2: the work done in the harness's step after the call is in the time; an output
    finished after the worker committed to it is refused."""
    m = run(bad.works_after_the_call, rep_ms=200)
    assert m.timed and m.timing.median_ms >= 28, m.timing
    m = run(bad.fills_its_output_later)   # the rows it sends are garbage, or not those committed to
    assert caught(m, terms.TIMED_DIFFER if m.failure.startswith(terms.TIMED_DIFFER) else terms.MALFORMED)


def test_rows_made_after_they_were_chosen_are_refused():
    """Causes 3 and 5: the rows sent must be those of the output the worker committed to."""
    assert "committed to" in caught(run(bad.computes_only_the_rows_asked), terms.MALFORMED)


def test_a_kernel_wrong_on_one_row_of_every_timed_call_is_refused():
    """Cause 4: rows are chosen after each call, enough of them that one wrong row per call
    over the calls is seen: every row, when calls are as few as here."""
    caught(run(bad.wrong_on_one_row_per_call, rep_ms=40), terms.TIMED_DIFFER)


def test_a_tier_is_the_one_every_call_met_its_timed_calls_included():
    """Cause 6: declared bf16, fp32-faithful while checked, bf16 while timed: tiered fast, as its
    timed calls are, and said so; declared fp32 the same kernel is wrong when timed."""
    m = run(bad.fp32_when_checked_bf16_when_timed, precision="bf16")
    assert m.timed and m.tier == "fast" and m.row()["tier"] == "fast", m.summary()
    assert "tiered fast by its timed calls (fp32-faithful on its checked calls)" in m.row()["notes"]
    caught(run(bad.fp32_when_checked_bf16_when_timed), terms.TIMED_DIFFER)


def _two_cores_run_at_once() -> bool:
    """Whether two threads get two cores here now (what the cheat below needs to gain)."""
    a, threads = torch.randn(512, 512), torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(20):
            a @ a
        return (time.process_time() - cpu) > 1.6 * (time.perf_counter() - wall)
    finally:
        torch.set_num_threads(threads)


def test_a_kernel_on_two_cores_is_refused_on_a_cpu():
    """Cause 7: the worker may use one core; a kernel that uses two is refused."""
    if not _two_cores_run_at_once():
        pytest.skip("two threads do not get two cores here now: the cheat would gain nothing")
    line = caught(run(bad.uses_two_cores, rep_ms=300), terms.HIDDEN_WORK)
    assert "more than one core" in line


@pytest.mark.parametrize("builder", [bad.memo_by_pointer, bad.counts_calls,
                                     bad.wrong_one_call_in_seven])
def test_a_kernel_that_changes_what_it_computes_when_timed_is_refused(builder):
    caught(run(builder, rep_ms=40), terms.TIMED_DIFFER)


def test_a_time_below_the_datasheets_floor_is_refused(monkeypatch):
    """On a GPU a median below the declared precision's floor on the datasheet is no result
    (shown here with the timing replaced by an impossible one)."""
    from fusedkit.harness import measuring, timing

    def instant(w, p, m, spec, seed, overhead):
        m.timing = timing.Timing(1e-6, 1e-6, 1e-6, 10, "cuda-events")
    monkeypatch.setattr(measuring, "_time", instant)
    line = caught(run("eager", sizes=P12.sizes(batch_size=64, in_features=64, out_features=64)),
                  terms.IMPOSSIBLE)
    assert "fp32 floor" in line and "datasheet" in line


@pytest.mark.parametrize("where", ["cpu", "interpreter"])
def test_the_row_digest_is_blake2s_of_each_row(where):
    """The commitment a timed call sends: BLAKE2s of each row's bytes, or of its 1 KB chunks'
    BLAKE2s laid end to end (hashlib on a CPU; on a GPU a Triton kernel, here in the interpreter),
    so no row near the right one can be found for a digest sent before the rows were chosen (a
    keyed sum could). One flipped bit is seen."""
    digest = terms.row_digest if where == "cpu" else \
        load_step("common", "row_digest.py").row_digest

    def b8(data: bytes) -> bytes:
        return hashlib.blake2s(data, digest_size=8).digest()

    # Rows of 28 bytes, 160, none, exactly one chunk (1,024), 1,200 (a short last chunk), 2,400.
    for out in (torch.randn(5, 7), torch.randn(3, 40), torch.randn(2, 0), torch.randn(2, 256),
                torch.randn(3, 300), torch.randn(2, 600)):
        rows = [r.numpy().tobytes() for r in out]
        want = [b8(r) if len(r) <= 1024 else b8(b"".join(b8(r[i:i + 1024]) for i in range(0, len(r), 1024)))
                for r in rows]
        assert digest(out).tolist() == [int.from_bytes(w, "little", signed=True) for w in want]
    out = torch.randn(5, 7)
    nudged = out.clone()
    nudged.view(torch.int32)[2, 3] ^= 1                                 # one ulp of one element
    assert (digest(nudged) != digest(out)).tolist() == [False, False, True, False, False]


def test_every_call_gets_a_fresh_draw_of_kernelbenchs_inputs(tmp_path):
    tally = bad.Tally(tmp_path / "inputs")
    m = run(bad.records_its_inputs(tally), seeds=2)
    seen = [line.split() for line in tally.lines()]
    assert m.timed and len(seen) >= 2 * 2 + 2 + 3
    assert len({digest for digest, _, _ in seen}) == len(seen)          # never the same input
    assert all(0 <= float(lo) and float(hi) < 1 for _, lo, hi in seen)  # U[0, 1), as KernelBench


# -- the edge: arguments checked once ------------------------------------------------------------

@pytest.mark.parametrize("kw, error, phrase", [
    (dict(seeds=0), ValueError, "seeds=0 is out of range"),
    (dict(seeds=[1, 1]), ValueError, "distinct"),
    (dict(seeds=[-1, 2]), ValueError, ">= 0"),
    (dict(seeds="3"), TypeError, "not a count"),
    (dict(device="cpu:1"), ValueError, "device='cpu:1'"),
    (dict(device="cuda"), ValueError, "no CUDA GPU is visible"),
    (dict(rep_ms=0), ValueError, "rep_ms=0 is out of range"),
    (dict(warmup_ms=math.nan), ValueError, "warmup_ms=nan"),
    (dict(call_timeout_s=-1), ValueError, "call_timeout_s=-1"),
    (dict(precision="fp8"), ValueError, "precision='fp8'"),
    (dict(sizes=[8]), TypeError, "not a mapping"),
    (dict(sizes={"batch_size": 0}), ValueError, "batch_size=0 is out of range"),
    (dict(problem="p99"), ValueError, "problem='p99'"),
])
def test_a_bad_argument_is_one_line_before_anything_runs(kw, error, phrase):
    if kw.get("device") == "cuda" and torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    sizes, problem = kw.pop("sizes", SMALL), kw.pop("problem", P12)
    with pytest.raises(error, match=re.escape(phrase)) as e:
        harness.plan(problem, "eager", sizes, **kw)
    assert "\n" not in str(e.value)


def test_a_bad_limit_in_the_environment_is_named_before_anything_runs(monkeypatch):
    monkeypatch.setenv("FUSEDKIT_CALL_TIMEOUT_S", "5s")
    with pytest.raises(ValueError, match=re.escape("FUSEDKIT_CALL_TIMEOUT_S='5s' is not a number")):
        harness.plan(P12, "eager", SMALL)


def test_what_cannot_run_here_is_a_verdict_and_too_slow_is_refused_with_its_estimate():
    m = harness.measure(P12, "naive", SMALL)
    assert m.skipped and "needs a CUDA GPU" in m.failure
    p = harness.plan(P12, "triton_ieee", P12.sizes(batch_size=512, in_features=2048,
                                                    out_features=2048))
    assert p.refusal and re.search(r"would take about \d+ s in Triton's CPU interpreter", p.refusal)
    assert harness.plan(P12, "eager", SMALL).estimate_s < 1
    assert not harness.plan(P12, "triton_ieee", SMALL, budget_s=math.inf).refusal


def test_a_step_for_another_gpu_says_which_it_needs(monkeypatch):
    step = P12.variant("wgmma_fp16x3")
    assert "needs a Hopper (sm_90) GPU" in step.refusal(torch.device("cpu"))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA A100")
    assert "this one, NVIDIA A100, is sm_80" in step.refusal(torch.device("cuda"))


def test_the_tiers_and_the_one_budget_they_set():
    assert harness.classify(3e-7, 2e-7, True) == "fp32-faithful"
    assert harness.classify(5e-7, 2e-7, True) == "kb-pass"
    assert harness.classify(5e-7, 2e-7, False) == "fast"
    assert harness.classify(math.nan, 2e-7, True) == "kb-pass"


@pytest.mark.parametrize("key", ["p12", "p45"])
def test_timed_rows_are_judged_in_one_forward_as_they_were_one_by_one(key):
    from fusedkit.precision import error_bound, grouped_error_bounds
    p = problems.get(key)
    sizes = p.sizes(dict(zip([d.name for d in p.dims], (24, 40, 36, 20))))
    model64 = p.make_model(sizes, seed=3).double()
    x = p.get_inputs(sizes, seed=4)[0]
    out, bounds = grouped_error_bounds(model64, [x], 8, "tf32", p.error_model)
    for i in range(3):
        ref, bound = error_bound(model64, [x[8 * i:8 * i + 8]], "tf32", p.error_model, float64=True)
        assert torch.allclose(out[8 * i:8 * i + 8], ref) and float(bounds[i]) == pytest.approx(float(bound))


def test_a_builder_that_cannot_travel_is_one_line():
    lock = threading.Lock()

    def holds_a_lock(model):
        return lambda x: (lock, model(x))[1]
    with pytest.raises(TypeError, match="cannot be sent to the worker process"):
        run(holds_a_lock)


def test_a_notebook_kernel_travels_with_its_source_lines():
    import linecache
    src = "def from_a_cell(model):\n    return lambda x: model(x)\n"
    name = "<ipython-input-7-abc>"
    linecache.cache[name] = (len(src), None, src.splitlines(True), name)
    scope: dict = {}
    exec(compile(src, name, "exec"), scope)
    assert run(scope["from_a_cell"]).timed


# -- on a GPU ---------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_the_memory_one_call_needs_is_recorded():
    n = 4_000_000

    def wasteful(model):
        def fn(x):
            torch.empty(n, device=x.device).fill_(1.0)   # a temporary of 16 MB, freed in the call
            return model(x)
        return fn
    m = run(wasteful, device="cuda")
    assert m.timed and 16.0 <= m.peak_mem_mb < 17.0 + 1e-6 * 4 * 32 * 40 * 3, m.peak_mem_mb


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("builder, fault", [(bad.side_stream_output, terms.STREAM),
                                            (bad.reports_a_microsecond, terms.HIDDEN_WORK),
                                            (bad.tf32_declared_fp32, terms.WRONG),
                                            (bad.skips_an_element, terms.UNWRITTEN),
                                            (bad.reads_out_of_bounds_on_the_gpu, terms.CRASHED)])
def test_what_only_a_gpu_shows_is_caught_there(builder, fault):
    caught(run(builder, device="cuda", rep_ms=50), fault)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_work_left_on_a_side_stream_is_timed():
    m = run(bad.side_stream_busywork, device="cuda", rep_ms=50)   # 2e6 cycles: 1 ms at 2 GHz
    assert m.timed and m.timing.median_ms >= 1.0, m.summary()
