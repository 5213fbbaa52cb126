"""What a run measures of the device beside its kernels, on a GPU: its own ceilings, and its clocks.

The ceilings (:mod:`fusedkit.ceilings` reads them back and says what each means): a 2 GiB
device-to-device copy, a read-only kernel over 2 GiB (DRAM) and over 16 MiB read 64 times
without a flush (L2), and cuBLAS through ``torch.mm`` at each GEMM shape of a problem in every
operand type, each timed by the one timing method (:func:`time_fn`:
L2 flushed, events, the median of many calls) and each output checked, so a rate is of the
work it names. The clocks (:mod:`fusedkit.clocks` reads them back): ``nvidia-smi`` every 50 ms
beside the run, kept under the run's ``run_id``.
"""

from __future__ import annotations

import contextlib
import math
import random
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from fusedkit import records
from fusedkit.ceilings import (COPY, COPY_BYTES, DRAM_READ, DRAM_READ_BYTES, GEMM_OPERANDS,
                               GEMM_PREFIX, L2_PASSES, L2_READ, L2_READ_BYTES, NOT_ITS_ARITHMETIC,
                               PROBLEM, gemm_shapes, of_run)
from fusedkit.clocks import (ALIASES, QUERY, empty_readings, parse_smi, path_for, record,
                             summary_line)
from fusedkit.hardware import GpuSpec, detect_gpu
from fusedkit.harness.timing import Timing, count, summarize
from fusedkit.interrupts import checkpoint
from fusedkit.kernels import load_step
from fusedkit.problems import Problem
from fusedkit.problems.baselines import tf32_matmul

PROGRAMS_PER_SM = 4             # read_sum programs per SM (8 warps each)
WARMUP_MS, REP_MS = 50.0, 300.0
INTERVAL_MS = 50
"""Milliseconds between clock readings."""
_DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16,
           "bf16": torch.bfloat16}
_UNIT = {"fp32": "fp32", "tf32": "tf32", "fp16": "bf16", "bf16": "bf16"}   # datasheet unit
# Largest rel. error against float64 of the operands as stored (fp32 must not be TF32's) ...
_MAX_ERROR = {"fp32": 5e-5, "tf32": 5e-3, "fp16": 2e-3, "bf16": 1e-2}
# ... and the smallest: TF32 rounds its inputs to 10 bits (about 4e-4 on randn operands).
_MIN_ERROR = {"tf32": 5e-5}
_CHECK_ROWS = 128


# --- the timer of trusted code: this process's own, by the harness's one counting rule -------

FLUSH_BYTES = 256 * 2**20
"""Bytes written before each timed call on a GPU to evict the L2 (an H200 has 50 MB)."""

_flush: dict[str, torch.Tensor] = {}


def time_fn(fn: Callable[[], object], *, warmup_ms: float = 100.0, rep_ms: float = 500.0,
            device: torch.device | str = "cuda", flush_l2: bool = True,
            prepare: Callable[[int], None] | None = None, keep: int = 0
            ) -> tuple[Timing, list[tuple[int, object]]]:
    """Time ``fn()`` (trusted code: it runs in this process), each call after an untimed
    ``prepare(i)``; returns the timing and the outputs of ``keep`` timed calls (call index,
    output) for the caller to check. ``flush_l2=False`` leaves the L2 as the last call left it:
    only for measuring the L2 itself."""
    device = torch.device(device)
    gpu = device.type == "cuda"
    if gpu and flush_l2 and str(device) not in _flush:
        _flush[str(device)] = torch.empty(FLUSH_BYTES, dtype=torch.int8, device=device)
    flush = _flush.get(str(device)) if gpu and flush_l2 else None
    made = [0]

    def one() -> tuple[object, object]:
        checkpoint()
        if prepare is not None:
            prepare(made[0])
        made[0] += 1
        if not gpu:
            t0 = time.perf_counter()
            out = fn()
            return (time.perf_counter() - t0) * 1e3, out
        if flush is not None:
            flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        out = fn()
        end.record()
        return (start, end), out

    def ms(marks: list) -> list[float]:
        if gpu:
            torch.cuda.synchronize(device)
            return [s.elapsed_time(e) for s, e in marks]
        return list(marks)

    rng = random.Random()
    estimate = float(np.median(ms([one()[0] for _ in range(5)])))
    warm, timed = count(estimate, warmup_ms, rep_ms, device, rng)
    for _ in range(warm):
        one()
    kept_at = set(rng.sample(range(timed), min(keep, timed)))
    marks, kept = [], []
    for i in range(timed):
        mark, out = one()
        marks.append(mark)
        if i in kept_at:
            kept.append((made[0] - 1, out.detach().clone() if isinstance(out, torch.Tensor) else out))
    return summarize(ms(marks), "cuda-events" if gpu else "cpu-wall"), kept


def time_copy(nbytes_moved: float, device: torch.device | str = "cuda", *,
              warmup_ms: float = 50.0, rep_ms: float = 300.0) -> Timing:
    """A device-to-device copy that moves ``nbytes_moved`` bytes (read plus written)."""
    src = torch.rand(int(nbytes_moved // 8), device=device)
    dst = torch.empty_like(src)
    return time_fn(lambda: dst.copy_(src), warmup_ms=warmup_ms, rep_ms=rep_ms, device=device)[0]


# --- the ceilings -------------------------------------------------------------------------


def _cuda(device: str | torch.device | None) -> torch.device:
    device = torch.device(device or "cuda")
    if device.type != "cuda" or not torch.cuda.is_available():
        raise ValueError(f"device={device}: ceilings are GPU measurements and no CUDA GPU is "
                         "visible here; read the recorded ones with fusedkit.ceilings.newest()")
    return device


def time_read(nbytes: int, passes: int, *, flush_l2: bool, device: str | torch.device = "cuda",
              warmup_ms: float = WARMUP_MS, rep_ms: float = REP_MS) -> Timing:
    """Time :func:`read_sum` over a random float32 buffer of ``nbytes``, ``passes`` times per
    call (``flush_l2`` as in :func:`time_fn`); kept outputs are checked.
    The rate is ``nbytes * passes`` bytes read over the median time."""
    device = _cuda(device)
    k = load_step("common", "read_sum.py")
    src = torch.rand(nbytes // 4 // k.BLOCK * k.BLOCK, device=device) + 0.5   # never zero
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    out = torch.full((sms * PROGRAMS_PER_SM,), math.nan, device=device)
    timing, kept = time_fn(lambda: k.read_sum(src, out, passes), warmup_ms=warmup_ms,
                           rep_ms=rep_ms, device=device, keep=1, flush_l2=flush_l2)
    want = passes * src.double().sum().item()
    for _, got in kept:
        total = got.double().sum().item()
        if not abs(total - want) <= 1e-4 * want:
            raise RuntimeError(f"read_sum over {nbytes} bytes x {passes}: sums to {total:.6g}, "
                               f"expected {want:.6g}: the read is not what it claims")
    return timing


def _mm(operands: str) -> tuple[Callable[[torch.Tensor, torch.Tensor], torch.Tensor], str]:
    """x @ w.T for ``operands``, and what its output is (for the notes)."""
    if operands in ("fp32", "tf32"):
        return (lambda x, w: torch.mm(x, w.t())), "fp32 output"
    return (lambda x, w: torch.mm(x, w.t(), out_dtype=torch.float32)), "fp32 output (out_dtype)"


def arithmetic_fault(operands: str, err: float, m: int, n: int, k: int) -> str:
    """"" when a rel. error ``err`` against float64 is what ``operands`` arithmetic gives, else
    one line saying what it was instead."""
    low, high = _MIN_ERROR.get(operands, 0.0), _MAX_ERROR[operands]
    if low <= err <= high:
        return ""
    what = ("more exact than" if err < low else "less exact than")
    return (f"cuBLAS {operands} at m={m}, n={n}, k={k}: rel. error {err:.2e} against float64, "
            f"{what} {operands} arithmetic gives ({low:.0e} to {high:.0e}): cuBLAS chose a kernel "
            f"of other arithmetic at this shape; {NOT_ITS_ARITHMETIC}")


def time_gemm(m: int, n: int, k: int, operands: str, device: str | torch.device = "cuda", *,
              warmup_ms: float = WARMUP_MS, rep_ms: float = REP_MS
              ) -> tuple[Timing, str, str]:
    """Time cuBLAS (``torch.mm``) on x (m, k) times W.T, W (n, k), with ``operands`` (one of
    :data:`GEMM_OPERANDS`); x rewritten from one of two random sets before every call and the
    L2 flushed. Returns the timing, a note on the output type, and "" or, when the checked
    output is not of the arithmetic ``operands`` names, the line saying so
    (:func:`arithmetic_fault`: a fact to record, not a ceiling)."""
    if operands not in GEMM_OPERANDS:
        raise ValueError(f"operands={operands!r}; valid: {', '.join(GEMM_OPERANDS)}")
    device = _cuda(device)
    dtype = _DTYPES[operands]
    sets = [torch.randn(m, k, device=device).to(dtype) for _ in range(2)]
    x, w = sets[0].clone(), torch.randn(n, k, device=device).to(dtype)
    mm, output = _mm(operands)
    try:
        mm(x[:1], w[:1])
    except (RuntimeError, TypeError):   # a torch without mm's out_dtype: 16-bit output
        mm, output = (lambda a, b: torch.mm(a, b.t())), f"{operands} output (no out_dtype here)"
    with torch.no_grad(), tf32_matmul(operands == "tf32"):
        timing, kept = time_fn(lambda: mm(x, w), prepare=lambda i: x.copy_(sets[i % 2]),
                               warmup_ms=warmup_ms, rep_ms=rep_ms, device=device, keep=1)
    fault = ""
    for i, out in kept:
        rows = min(m, _CHECK_ROWS)
        ref = sets[i % 2][:rows].double() @ w.double().t()
        err = (torch.linalg.vector_norm(out[:rows].double() - ref) / torch.linalg.vector_norm(ref)).item()
        fault = fault or arithmetic_fault(operands, err, m, n, k)
    return timing, output, fault


def _row(ctx: records.RunContext, variant: str, sizes: str, t: Timing, **fields) -> dict:
    return records.make_row(ctx, problem=PROBLEM, sizes=sizes, variant=variant, timer=t.timer,
                            median_ms=t.median_ms, p10_ms=t.p10_ms, p90_ms=t.p90_ms,
                            repeats=t.repeats, **fields)


def time_ceilings(ctx: records.RunContext, shapes: Sequence[tuple[int, int, int]] = (),
            device: str | torch.device | None = None, *, say: Callable[[str], None] = print,
            gpu: GpuSpec | None = None) -> list[dict]:
    """Measure the copy, DRAM-read and L2-read ceilings and cuBLAS at each (M, N, K) of
    ``shapes`` for every operand type; return their rows (:func:`fusedkit.records.make_row`,
    not yet appended) and ``say`` one line each, beside the datasheet's figure of ``gpu``."""
    device = _cuda(device)
    gpu = gpu or detect_gpu().spec
    rows = []
    t = time_copy(2 * COPY_BYTES, device, warmup_ms=WARMUP_MS, rep_ms=REP_MS)
    rows.append(_row(ctx, COPY, f"bytes={COPY_BYTES}", t, gbps=2 * COPY_BYTES / (t.median_ms * 1e6),
                     notes="Tensor.copy_ of a 2 GiB buffer; bytes read + written; L2 flushed"))
    t = time_read(DRAM_READ_BYTES, 1, flush_l2=True, device=device)
    rows.append(_row(ctx, DRAM_READ, f"bytes={DRAM_READ_BYTES}", t,
                     gbps=DRAM_READ_BYTES / (t.median_ms * 1e6),
                     notes="read_sum (.cg loads, one float per program), checked; bytes read; "
                           "L2 flushed"))
    t = time_read(L2_READ_BYTES, L2_PASSES, flush_l2=False, device=device)
    rows.append(_row(ctx, L2_READ, f"bytes={L2_READ_BYTES}", t,
                     gbps=L2_READ_BYTES * L2_PASSES / (t.median_ms * 1e6),
                     notes=f"read_sum, {L2_PASSES} passes per call over a buffer left in L2 by the "
                           "call before (no flush), checked; bytes read"))
    for r in rows:
        share = ("" if r["variant"] == L2_READ else
                 f" ({100 * float(r['gbps']) / gpu.mem_gbps:.0f}% of the datasheet's "
                 f"{gpu.mem_gbps:.0f} GB/s)")
        say(f"{r['variant']}: {float(r['median_ms']):.4g} ms, {float(r['gbps']):.0f} GB/s{share}")
    for m, n, k in shapes:
        for op in GEMM_OPERANDS:
            t, output, fault = time_gemm(m, n, k, op, device)
            tflops = 2.0 * m * n * k / (t.median_ms * 1e9)
            checked = f"output checked against float64: {fault}" if fault else \
                "output checked against float64"
            rows.append(_row(ctx, GEMM_PREFIX + op, f"m={m},n={n},k={k}", t, tflops=tflops,
                             notes=f"cuBLAS via torch.mm, x (m, k) times W.T, W (n, k); {op} "
                                   f"operands, {output}; x rewritten and L2 flushed before every "
                                   f"call; {checked}"))
            say(f"{GEMM_PREFIX + op} at m={m}, n={n}, k={k}: {t.median_ms:.4g} ms, "
                f"{tflops:.1f} TFLOP/s" + (f"; {fault}" if fault else
                                           _beside_datasheet(gpu, op, tflops)))
    return rows


def measure_ceilings(ctx: records.RunContext, gpu: GpuSpec, problem: Problem,
                     sizes: Sequence = ()) -> tuple[GpuSpec, list[dict]]:
    """The ceilings of a run (:func:`time_ceilings`, cuBLAS at ``problem``'s GEMM shapes at each
    of ``sizes``): ``gpu`` with the measured copy bandwidth in place of the datasheet's (the
    recorded % of floor uses it), and the rows, not yet appended."""
    rows = time_ceilings(ctx, gemm_shapes(problem, list(sizes) or None), say=tqdm.write, gpu=gpu)
    copy_gbps = next(float(r["gbps"]) for r in rows if r["variant"] == COPY)
    return gpu.with_measurements(mem_gbps=copy_gbps), rows


def _beside_datasheet(gpu: GpuSpec, operands: str, tflops: float) -> str:
    """", 70% of the datasheet's 989 (as if always busy at 1.28 GHz)"."""
    peak = gpu.peak_tflops(_UNIT[operands])
    text = f", {100 * tflops / peak:.0f}% of the datasheet's {peak:.4g}"
    try:
        clock = gpu.implied_clock_ghz(_UNIT[operands]) * tflops / peak
    except ValueError:
        return text
    return text + f" (every unit busy at {clock:.2f} GHz would give it)"


def record_run(problems: Sequence[Problem], path: str | Path | None = None, *,
               say: Callable[[str], None] = print) -> pd.DataFrame:
    """Measure the ceilings alone, in a run of their own (``python -m fusedkit ceilings``):
    cuBLAS at every GEMM shape of ``problems`` at their default sizes, the SM clock and power
    read beside (:func:`fusedkit.clocks.sampling`); append the rows to ``path`` (default: the
    records) and return them as a typed frame of :func:`read_ceilings`."""
    device = _cuda("cuda")
    path = Path(path) if path is not None else records.default_path()
    records.preflight(path)
    ctx = records.RunContext.collect()
    shapes = [s for p in problems for s in gemm_shapes(p)]
    shapes = list(dict.fromkeys(shapes))
    say(f"run {ctx.run_id} on {ctx.device}, commit {ctx.commit}")
    with sampling(ctx.run_id, path_for(path), say=say):
        rows = time_ceilings(ctx, shapes, device, say=say)
        records.append_rows(path, rows)
    return of_run(ctx.run_id, path)



# --- the clocks ------------------------------------------------------------------------

def _supported(smi: str) -> list[str]:
    """The fields of :data:`QUERY` this nvidia-smi knows (older drivers: the throttle spelling)."""
    try:
        text = subprocess.run([smi, "--help-query-gpu"], capture_output=True, text=True,
                              timeout=15).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    known = set(re.findall(r'"([A-Za-z0-9_.]+)"', text))
    fields = [f for f in QUERY if f in known]
    if "clocks_event_reasons.active" not in known and "clocks_throttle_reasons.active" in known:
        fields.append("clocks_throttle_reasons.active")
    return fields if "timestamp" in fields else []


def _gpu_selector(smi: str) -> str:
    """nvidia-smi's ``-i`` for the GPU torch uses: its UUID (CUDA_VISIBLE_DEVICES may renumber
    GPUs), or index 0 where this nvidia-smi does not take that UUID."""
    if not torch.cuda.is_available():
        return "0"
    uuid = getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "uuid", None)
    if uuid is not None:
        sel = f"GPU-{uuid}"
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            probe = subprocess.run([smi, "-i", sel, "--query-gpu=timestamp", "--format=csv,noheader"],
                                   capture_output=True, text=True, timeout=15)
            if probe.returncode == 0 and probe.stdout.strip():
                return sel
    return "0"


class Sampler:
    """A background ``nvidia-smi --query-gpu=... -lms 50`` for the GPU in use, started by
    :meth:`start` and ended by :meth:`stop`, which returns its readings (columns
    :data:`COLUMNS` without ``run_id``). ``available`` is False where there is no nvidia-smi."""

    def __init__(self, interval_ms: int = INTERVAL_MS) -> None:
        self.interval_ms = interval_ms
        self.smi = shutil.which("nvidia-smi")
        self.fields: list[str] = []
        self._proc: subprocess.Popen | None = None
        self._out: tempfile._TemporaryFileWrapper | None = None   # type: ignore[name-defined]
        self.error = ""

    @property
    def available(self) -> bool:
        return self.smi is not None

    def start(self) -> bool:
        """Start reading; False (and :attr:`error` says why) when nothing can be read."""
        if self.smi is None:
            self.error = "no nvidia-smi here"
            return False
        self.fields = _supported(self.smi)
        if not self.fields:
            self.error = "nvidia-smi lists none of the fields needed (timestamp, clocks.sm, ...)"
            return False
        self._out = tempfile.TemporaryFile()
        cmd = [self.smi, "-i", _gpu_selector(self.smi), f"--query-gpu={','.join(self.fields)}",
               "--format=csv,noheader,nounits", "-lms", str(self.interval_ms)]
        self._proc = subprocess.Popen(cmd, stdout=self._out, stderr=subprocess.DEVNULL)
        return True

    def stop(self) -> pd.DataFrame:
        """End the nvidia-smi this sampler started and parse what it wrote (local times -> UTC)."""
        if self._proc is None or self._out is None:
            return empty_readings()
        self._proc.terminate()
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._proc.returncode not in (0, -15, 143) and not self.error:
            self.error = f"nvidia-smi exited with status {self._proc.returncode}"
        self._out.seek(0)
        text = self._out.read().decode("utf-8", "replace")
        self._out.close()
        self._proc = self._out = None
        names = [QUERY.get(ALIASES.get(f, f), "") for f in self.fields]
        return parse_smi(text, names, local_time=True)




@contextlib.contextmanager
def sampling(run_id: str, path: str | Path, *, say: Callable[[str], None] = print,
             ) -> Iterator[Sampler]:
    """Read the clocks while the block runs; then append the readings to ``path`` under
    ``run_id`` and ``say`` one line summing them up (also when the block raised: what was read
    is kept). Without nvidia-smi, one line says so and nothing is recorded."""
    sampler = Sampler()
    started = sampler.start()
    if not started:
        say(f"clocks: {sampler.error}; the SM clock and power of this run are not recorded")
    try:
        yield sampler
    finally:
        if started:
            readings = sampler.stop()
            if readings.empty:
                say(f"clocks: nvidia-smi gave no readings ({sampler.error or 'none parsed'})")
            else:
                record(run_id, readings, path)
                say(f"clocks: {summary_line(readings)} ({len(readings)} readings in {path})")


