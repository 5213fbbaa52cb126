"""Probe: does feeding step 08's tf32 GEMM through Hopper's bulk-copy engine (TMA tensor
descriptors) close the gap to cuBLAS's TF32 GEMM?  One line and one record per config:

    python -m devtools.probe_tma_tf32 [--rep-ms 150] [--records FILE]

Eager TF32 and each (precision, tile) of this file's TMA kernel go through
:func:`fusedkit.harness.measure` (checked at the declared precision, then timed) in one run;
a config is recorded as ``tma_<precision>@<BLOCK_M>x<BLOCK_N>x<BLOCK_K>_s<stages>_w<warps>``.
Without a GPU (TRITON_INTERPRET=1) it checks one small config in the interpreter: neither
timed nor recorded.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from fusedkit import problems  # first: settles interpreter mode before Triton loads
from devtools.common import Probe, parser, refused

import triton  # noqa: E402 - after fusedkit, which chose the interpreter or not
import triton.language as tl  # noqa: E402
from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: E402

P = problems.get("p12")
GPU_CONFIGS = [(128, 256, 32, 3, 8), (128, 256, 32, 4, 8), (128, 128, 32, 4, 4), (128, 128, 32, 5, 8),
               (128, 256, 64, 2, 8), (256, 128, 32, 3, 8), (128, 128, 64, 3, 8)]
"""(BLOCK_M, BLOCK_N, BLOCK_K, stages, warps) timed on a GPU, for tf32 and tf32x3."""
CPU_CONFIG, CPU_SIZES = (32, 32, 32, 1, 4), P.sizes(batch_size=40, in_features=72, out_features=48)


@triton.jit
def _tma_kernel(x_desc, w_desc, b_ptr, y_desc, M, N, K, multiplier, negative_slope,
                PREC: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    group = GROUP_M * num_pid_n
    first_m = (pid // group) * GROUP_M
    size_m = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group) % size_m
    pid_n = (pid % group) // size_m
    off_m, off_n = pid_m * BLOCK_M, pid_n * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = x_desc.load([off_m, k * BLOCK_K])          # (BM, BK); TMA zero-fills past the edges
        w = w_desc.load([off_n, k * BLOCK_K])          # (BN, BK), K-major as wgmma wants
        acc = tl.dot(a, w.T, acc, input_precision=PREC)
    offs_n = off_n + tl.arange(0, BLOCK_N)
    bias = tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0)
    v = (acc + bias[None, :]) * multiplier
    v = tl.where(v > 0, v, v * negative_slope)
    y_desc.store([off_m, off_n], v)                    # TMA clips the store at the edges


def _pad4(t: torch.Tensor) -> torch.Tensor:
    """``t`` with zero columns up to a multiple of 4: TMA reads rows whose stride is 16 bytes."""
    pad = -t.shape[1] % 4
    return torch.nn.functional.pad(t, (0, pad)) if pad else t


def run(x, w, b, prec, bm, bn, bk, stages, warps, group=8, multiplier=2.0, negative_slope=0.1):
    """y = LeakyReLU((x @ w.T + b) * multiplier) by the TMA kernel at one config. x is (M, K),
    w (N, K); a K or N that is not a multiple of 4 (the check's odd shapes) is padded with
    zeros, which add nothing, and y cut back to (M, N)."""
    m, n = x.shape[0], w.shape[0]
    x, w = _pad4(x.contiguous()), _pad4(w.contiguous())
    y = torch.empty(m, n + (-n % 4), device=x.device)
    xd = TensorDescriptor.from_tensor(x, [bm, bk])
    wd = TensorDescriptor.from_tensor(w, [bn, bk])
    yd = TensorDescriptor.from_tensor(y, [bm, bn])
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    _tma_kernel[grid](xd, wd, b, yd, m, n, x.shape[1], multiplier, negative_slope, PREC=prec,
                      BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group, num_stages=stages,
                      num_warps=warps)
    return y if y.shape[1] == n else y[:, :n].contiguous()


def build_tma(prec: str, cfg: tuple, model: torch.nn.Module) -> Callable:
    """The TMA kernel at ``cfg`` on the model's weights: a builder for measure."""
    w, b = model.gemm.weight.detach(), model.gemm.bias.detach()
    mult, slope = P.constants["multiplier"], P.constants["negative_slope"]
    return lambda x: run(x, w, b, prec, *cfg, multiplier=mult, negative_slope=slope)


def config_name(prec: str, cfg: tuple) -> str:
    bm, bn, bk, stages, warps = cfg
    return f"tma_{prec}@{bm}x{bn}x{bk}_s{stages}_w{warps}"


def measure_config(probe: Probe, prec: str, cfg: tuple, sizes, *, time_it: bool = True):
    """One config through measure, recorded when timed clean."""
    return probe.measure(P, functools.partial(build_tma, prec, cfg), sizes, time_it=time_it,
                         name=config_name(prec, cfg), precision=prec, triton=True,
                         notes=["config BLOCK_M={}, BLOCK_N={}, BLOCK_K={}, stages={}, warps={}"
                                .format(*cfg)])


def main(argv: list[str] | None = None) -> int:
    ap = parser("probe_tma_tf32", __doc__)
    ap.set_defaults(rep_ms=150.0)
    args = ap.parse_args(argv)
    gpu = torch.cuda.is_available()
    try:
        probe = Probe("probe_tma_tf32", rep_ms=args.rep_ms, records_path=args.records,
                      seeds=3 if gpu else 1)
    except (ValueError, OSError) as e:
        return refused("probe_tma_tf32", e)
    sizes = P.defaults if gpu else CPU_SIZES
    if gpu:
        probe.measure(P, "eager_tf32", sizes)
    for prec in (["tf32", "tf32x3"] if gpu else ["tf32"]):
        for cfg in (GPU_CONFIGS if gpu else [CPU_CONFIG]):
            measure_config(probe, prec, cfg, sizes, time_it=gpu)
    probe.done()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
