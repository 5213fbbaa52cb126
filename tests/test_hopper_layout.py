"""fusedkit.hopper_layout against the CUDA it mirrors.

CPU: hopper.cuh's own sw128_offset, sw128_desc, accumulator_row and accumulator_col compiled
into a host program (nvcc, no GPU) give the mirror's values on many inputs; the descriptor's
constant and the address mask nvcc put into every Hopper kernel's PTX give the mirror's
descriptors; the layouts have the properties the figures show (a permutation per row and per
column of the atom, a one-to-one fragment, quads of four lanes per row).
GPU (``-m gpu``, a Hopper GPU): one real wgmma m64n128k16 on operands laid out by sw128_offset
and described by sw128_desc gives, in every thread's registers, the elements of A @ B.T that
accumulator_position says (tests/hopper_layout_probe.cu).
"""

from __future__ import annotations

import random
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from fusedkit import build
from fusedkit import hopper_layout as hl
from fusedkit.kernels import KERNELS
from kernel_helpers import gpu_test, needs_nvcc

HERE = Path(__file__).resolve().parent
ADDRESSES = sorted({*range(0, 1 << 18, 4096), *(1024 * s + 32 * k for s in range(64) for k in range(4)),
                    *random.Random(7).sample(range(1 << 32), 200), (1 << 32) - 1, 0x3FFFF, 0x40000})
OFFSETS = [*range(0, 4096), *random.Random(8).sample(range(1 << 32), 100)]

HOST_PROGRAM = r"""
#include <cstdio>
#include "hopper.cuh"
namespace sm90 = fusedkit::sm90;
int main() {
    unsigned a;
    char what;
    while (std::scanf(" %c %u", &what, &a) == 2) {
        if (what == 'D') std::printf("D %u %llu\n", a, (unsigned long long)sm90::sw128_desc(a));
        if (what == 'S') std::printf("S %u %u\n", a, sm90::sw128_offset(a));
        if (what == 'A') std::printf("A %u %d %d\n", a, sm90::accumulator_row((int)a),
                                     sm90::accumulator_col((int)a));
    }
    static_assert(sm90::sw128_desc(0) == 0x4000004000010000ull, "constexpr on the host");
    return 0;
}
"""


@pytest.fixture(scope="module")
def host_values(tmp_path_factory) -> dict[str, dict[int, tuple[int, ...]]]:
    """What hopper.cuh's functions return on the host, per function letter and input."""
    if not build.nvcc_available():
        pytest.skip("nvcc (CUDA toolkit) not found; the host program needs it, not a GPU")
    tmp = tmp_path_factory.mktemp("hopper_host")
    src, exe = tmp / "probe.cu", tmp / "probe"
    src.write_text(HOST_PROGRAM)
    # compute_90a for the device pass: hopper.cuh refuses any other target.
    build._run_nvcc(build._nvcc_path(), [*build._target_flags("sm_90a", "ptx"), "-std=c++17",
                                         f"-I{KERNELS / 'common'}", "-o", str(exe), str(src)],
                    "nvcc (host program of hopper.cuh)")
    queries = ([f"D {a}" for a in ADDRESSES] + [f"S {o}" for o in OFFSETS]
               + [f"A {t}" for t in range(hl.WARPGROUP_THREADS)])
    out = subprocess.run([str(exe)], input="\n".join(queries), capture_output=True, text=True,
                         timeout=60, check=True).stdout
    values: dict[str, dict[int, tuple[int, ...]]] = {"D": {}, "S": {}, "A": {}}
    for line in out.splitlines():
        what, key, *rest = line.split()
        values[what][int(key)] = tuple(int(x) for x in rest)
    assert sum(map(len, values.values())) == len(set(ADDRESSES)) + len(set(OFFSETS)) + 128
    return values


@needs_nvcc
def test_descriptor_mirror_equals_hopper_cuh(host_values):
    for a in ADDRESSES:
        assert hl.sw128_desc(a) == host_values["D"][a][0], hex(a)


@needs_nvcc
def test_swizzle_mirror_equals_hopper_cuh(host_values):
    for o in OFFSETS:
        assert hl.sw128_offset(o) == host_values["S"][o][0], o


@needs_nvcc
def test_fragment_base_mirror_equals_hopper_cuh(host_values):
    for t in range(hl.WARPGROUP_THREADS):
        assert (hl.accumulator_row(t), hl.accumulator_col(t)) == host_values["A"][t], t


# The descriptor as nvcc compiled it: (addr & mask) >> shift, widened, OR the constant fields.
_DESC_PTX = re.compile(r"and\.b32\s+(%r\d+), (%r\d+), (\d+);\s*\n\s*shr\.u32\s+(%r\d+), \1, (\d+);"
                       r"\s*\n\s*cvt\.u64\.u32\s+(%rd\d+), \4;\s*\n\s*or\.b64\s+%rd\d+, \6, (\d+);")


@needs_nvcc
@pytest.mark.parametrize("src", [*build.hopper_sources("p12"), *build.hopper_sources("p45")],
                         ids=lambda p: f"{p.parent.name}_{p.stem}")
def test_every_hopper_kernel_builds_the_mirrors_descriptor(src):
    found = {(int(mask), int(shift), int(const)) for *_, mask, _, shift, _, const
             in _DESC_PTX.findall(build.ptx(src))}
    assert len(found) == 1, f"{src.name}: descriptor arithmetic in the PTX: {found or 'none found'}"
    mask, shift, const = found.pop()
    assert hl.Descriptor.decode(const) == hl.Descriptor(start=0, leading=1, stride=64,
                                                        base_offset=0, swizzle=1)
    for a in ADDRESSES:
        assert ((a & mask) >> shift) | const == hl.sw128_desc(a), hex(a)


def test_descriptor_fields_round_trip_and_name_the_bits():
    d = hl.Descriptor.decode(hl.sw128_desc(0x1_2340))
    assert (d.start_address, d.leading_bytes, d.stride_bytes, d.base_offset, d.swizzle) == \
        (0x1_2340, 16, 1024, 0, 1)
    assert hl.SWIZZLE_MODES[d.swizzle] == "128-byte swizzle" and d.stray == 0
    odd = (1 << 63) | (5 << 49) | (1 << 15) | 0x2AAA
    assert hl.Descriptor.decode(odd).encode() == odd and hl.Descriptor.decode(odd).stray == 1 << 15
    # PTX's encoding keeps 18 bits of address: 256 KB wraps to 0.
    assert hl.sw128_desc(1 << 18) == hl.sw128_desc(0)
    with pytest.raises(ValueError, match=r"smem_byte_addr=-1: must be an integer in 0 \.\."):
        hl.sw128_desc(-1)


def test_swizzle_atom_permutes_each_row_and_spreads_each_column():
    atom = hl.swizzle_atom()
    assert atom.shape == (8, 8)
    for r in range(8):
        assert sorted(atom[r]) == list(range(8))           # a row keeps its 8 chunks
        assert atom[r, 0] == r                             # chunk r sits at position 0 in row r
    for c in range(8):
        slots = [hl.swizzled_chunk(r, c) for r in range(8)]
        assert sorted(slots) == list(range(8)), c          # a column over all 8 slots (32 banks)
    assert hl.swizzled_chunk(9, 3) == 3 ^ 1                # the pattern repeats every 8 rows
    assert hl.sw128_offset(1024 + 130) == 1024 + 146       # byte 2 of chunk 1, row 1 -> chunk 0
    with pytest.raises(ValueError, match="chunk=8"):
        hl.swizzled_chunk(0, 8)


@pytest.mark.parametrize("n", [8, 16, 128, 256])
def test_fragment_is_one_to_one_with_quads_sharing_rows(n):
    held = {hl.accumulator_position(t, i, n) for t in range(128) for i in range(n // 2)}
    assert len(held) == 64 * n                             # every element by one (thread, register)
    for t in range(128):
        for i in range(n // 2):
            assert hl.accumulator_owner(*hl.accumulator_position(t, i, n), n) == (t, i)
    thread = np.array([[hl.accumulator_owner(r, c, n)[0] for c in range(n)] for r in range(64)])
    # Rows 16w .. 16w + 15 belong to warp w; each row of a slab to one quad of 4 lanes.
    assert np.array_equal(thread // 32, np.repeat(np.arange(4), 16)[:, None].repeat(n, 1))
    for r in range(64):
        lanes = set((thread[r, :8] % 32).tolist())
        assert len(lanes) == 4 and len({lane // 4 for lane in lanes}) == 1
    # The epilogues' reading: d[4j + 2h + e] at (row0 + 8h, col0 + 8j + e).
    for t in (0, 5, 37, 127):
        for j in range(n // 8):
            for h in range(2):
                for e in range(2):
                    assert hl.accumulator_position(t, 4 * j + 2 * h + e, n) == (
                        hl.accumulator_row(t) + 8 * h, hl.accumulator_col(t) + 8 * j + e)
    with pytest.raises(ValueError, match="n=12"):
        hl.accumulator_position(0, 0, 12)


# -- on a Hopper GPU: one real wgmma ------------------------------------------------------------

PROBE = HERE / "hopper_layout_probe.cu"


@needs_nvcc
def test_the_gpu_probe_compiles_for_sm90a():
    text = build.ptx(PROBE, arch="sm_90a")
    assert build.ptx_instructions(text, r"wgmma\.mma_async\.sync\.aligned\.m64n128k16\.f32\.f16\.f16")
    assert build.ptx_instructions(text, r"fence\.proxy\.async")


@gpu_test
def test_one_wgmma_puts_each_element_where_the_mirrors_say():
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("needs a Hopper (sm_90) GPU: wgmma")
    ext = build.load_sources("fusedkit_hopper_layout_probe",
                             [PROBE, HERE / "hopper_layout_probe_binding.cpp"], hopper=True)
    g = torch.Generator().manual_seed(11)
    # Small integers: every product and sum is exact in fp16 inputs and fp32 accumulators.
    a = torch.randint(-3, 4, (64, 64), generator=g).half()
    b = torch.randint(-3, 4, (128, 64), generator=g).half()
    d = (a.double() @ b.double().t())
    regs = ext.one_wgmma(a.cuda(), b.cuda()).cpu().double()     # (128 threads, 64 registers)
    assert regs.shape == (128, 64)
    want = torch.empty_like(regs)
    for t in range(128):
        for i in range(64):
            r, c = hl.accumulator_position(t, i, 128)
            want[t, i] = d[r, c]
    assert torch.equal(regs, want), f"{int((regs != want).sum())} of 8192 registers differ"
