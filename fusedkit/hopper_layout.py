"""Hopper's layouts in Python: the 128-byte swizzle, the wgmma shared-memory descriptor and the
wgmma accumulator fragment, as ``kernels/common/hopper.cuh`` uses them, derived from NVIDIA's PTX ISA
(the wgmma section: shared memory matrix layout, matrix descriptor format, register fragment of D)
and held against the CUDA versions by tests/test_hopper_layout.py. Offsets are bytes; descriptor
fields hold bytes >> 4.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# -- the 128-byte swizzle ------------------------------------------------------------------------
#
# A K-major fp16 tile with BK = 64 has rows of 64 * 2 = 128 bytes. TMA writes it with 128-byte
# swizzle (CU_TENSOR_MAP_SWIZZLE_128B) and wgmma reads it so ("128B Swizzling Mode", K-major:
# a swizzle atom of 8 x 8 elements of 128 bits, i.e. 8 rows of 8 chunks of 16 bytes = 1024 bytes).
# The PTX ISA names the pattern by CuTe's Swizzle<3, 4, 3>: take 3 bits, 4 bits up (bits 4-6,
# the 16-byte chunk within a 128-byte row), and XOR into them the 3 bits 3 places higher
# (bits 7-9, the row within the 8-row atom):
#     swizzled(offset) = offset ^ (((offset >> 7) & 7) << 4)
# so chunk c of row r is stored at chunk position c ^ (r % 8). Because XOR with a fixed r is a
# permutation of 0..7, each row keeps its 8 chunks; because c ^ r takes 8 different values over
# r = 0..7, one logical column of chunks (the same c in 8 rows, what one 16-byte access by 8
# threads of a k-slice reads) lands in 8 different slots, 128 bytes = all 32 four-byte banks.

ROW_BYTES = 128                              # one row of the swizzled tile (64 fp16)
CHUNK_BYTES = 16                             # the unit the swizzle moves
CHUNKS = ROW_BYTES // CHUNK_BYTES            # 8 chunks a row
ATOM_ROWS = 8                                # rows of one swizzle atom
ATOM_BYTES = ATOM_ROWS * ROW_BYTES           # 1024: tiles start on this boundary


def _check_int(name: str, value: int, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not low <= value < high:
        raise ValueError(f"{name}={value!r}: must be an integer in {low} .. {high - 1}")
    return int(value)


def sw128_offset(offset: int) -> int:
    """Where the 128-byte swizzle puts byte ``offset`` (bytes from the start of a 1024-byte
    aligned tile of 128-byte rows): bits 4-6 XOR bits 7-9 (``hopper.cuh``'s ``sw128_offset``)."""
    offset = _check_int("offset", offset, 0, 2**32)
    return offset ^ (((offset >> 7) & 7) << 4)


def swizzled_chunk(row: int, chunk: int) -> int:
    """The chunk position (0-7) at which row ``row``'s 16-byte chunk ``chunk`` (0-7) is stored."""
    row = _check_int("row", row, 0, 2**25)
    chunk = _check_int("chunk", chunk, 0, CHUNKS)
    return sw128_offset(row * ROW_BYTES + chunk * CHUNK_BYTES) % ROW_BYTES // CHUNK_BYTES


def swizzle_atom() -> np.ndarray:
    """The 1024-byte atom as stored: ``atom[r, p]`` is the logical chunk (0-7) that row ``r``
    keeps at chunk position ``p`` (an 8 x 8 int array; each row and each column a permutation)."""
    atom = np.empty((ATOM_ROWS, CHUNKS), dtype=int)
    for r in range(ATOM_ROWS):
        for c in range(CHUNKS):
            atom[r, swizzled_chunk(r, c)] = c
    return atom


# -- the shared-memory matrix descriptor ----------------------------------------------------------
#
# "Matrix Descriptor Format": a 64-bit register describing an operand tile in shared memory, its
# fields as FIELD_BITS below (the base offset 0 when the swizzle pattern starts on its 1024-byte
# boundary), the addresses as matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4: 18 bits of byte
# address in 16-byte units, 14 bits. For a K-major operand with 128-byte swizzle, "Leading
# Dimension Byte Offset" says the leading offset is "not used, assumed to be 1" (a k16 slice, 32
# bytes, never leaves its row), and "Stride Dimension Byte Offset" is "the offset from the first 8
# rows to the next 8 rows": one atom, 1024 bytes. hopper.cuh's sw128_desc packs exactly these:
#     start = encode(addr), leading = encode(16) = 1, stride = encode(1024) = 64, base 0, mode 1.

SWIZZLE_MODES = {0: "no swizzle", 1: "128-byte swizzle", 2: "64-byte swizzle", 3: "32-byte swizzle"}
FIELD_BITS = {"start": (0, 14), "leading": (16, 14), "stride": (32, 14), "base_offset": (49, 3),
              "swizzle": (62, 2)}
"""Each descriptor field's (lowest bit, width)."""


def descriptor_encode(x: int) -> int:
    """PTX's matrix-descriptor-encode: ``(x & 0x3FFFF) >> 4`` (bytes to a 14-bit field)."""
    x = _check_int("x", x, 0, 2**64)
    return (x & 0x3FFFF) >> 4


@dataclass(frozen=True)
class Descriptor:
    """The fields of a wgmma shared-memory descriptor as stored (``start``, ``leading``, ``stride``:
    bytes >> 4; ``swizzle`` 1 = 128-byte), and ``stray``: the bits set outside every field."""

    start: int
    leading: int
    stride: int
    base_offset: int
    swizzle: int
    stray: int = 0

    @classmethod
    def decode(cls, desc: int) -> "Descriptor":
        """The fields of the 64-bit descriptor ``desc``."""
        desc = _check_int("desc", desc, 0, 2**64)
        fields = {name: (desc >> low) & ((1 << width) - 1) for name, (low, width) in FIELD_BITS.items()}
        covered = sum(((1 << width) - 1) << low for low, width in FIELD_BITS.values())
        return cls(**fields, stray=desc & ~covered)

    def encode(self) -> int:
        """The 64-bit descriptor (stray bits kept)."""
        out = self.stray
        for name, (low, width) in FIELD_BITS.items():
            value = getattr(self, name)
            out |= _check_int(name, value, 0, 1 << width) << low
        return out

    @property
    def start_address(self) -> int:
        """The start address in bytes (the field times 16)."""
        return self.start << 4

    @property
    def leading_bytes(self) -> int:
        return self.leading << 4

    @property
    def stride_bytes(self) -> int:
        return self.stride << 4


def sw128_desc(smem_byte_addr: int) -> int:
    """``hopper.cuh``'s ``sw128_desc``: the descriptor of a 128-byte swizzled K-major fp16 tile at
    ``smem_byte_addr`` (1024-byte aligned, or 32 * k bytes past it for the k-th 16-wide slice)."""
    smem_byte_addr = _check_int("smem_byte_addr", smem_byte_addr, 0, 2**32)
    return Descriptor(start=descriptor_encode(smem_byte_addr), leading=descriptor_encode(16),
                      stride=descriptor_encode(ATOM_BYTES), base_offset=0, swizzle=1).encode()


# -- the accumulator fragment ---------------------------------------------------------------------
#
# "Register Fragments ... for wgmma.mma_async.m64nNk16", accumulator D in fp32: each of the 128
# threads of the warpgroup holds N / 2 registers d0 .. d(N/2 - 1). Warp w = t / 32 owns rows
# 16w .. 16w + 15, laid out like mma.sync's m16n8 C fragment, repeated for every 8 columns:
# lane l sits in quad l / 4 (a row, "groupID") at position l % 4 ("threadID_in_group"), and for
# the 8-column slab j = i / 4, register i holds
#     row    16w + l / 4 + 8 * ((i / 2) % 2)      (i % 4 in {0, 1}: the top 8 rows; {2, 3}: +8)
#     column 8j + 2 (l % 4) + i % 2               (two adjacent columns per thread)
# So four consecutive lanes (a quad) share one row and cover its 8 columns of a slab, two each;
# the epilogues read d[4j + 2h + e] as (row0 + 8h, col0 + 8j + e), with (row0, col0) given by
# hopper.cuh's accumulator_row(t), accumulator_col(t).

WARPGROUP_THREADS = 128
FRAGMENT_ROWS = 64


def _check_n(n: int) -> int:
    n = _check_int("n", n, 8, 257)
    if n % 8:
        raise ValueError(f"n={n}: wgmma m64nNk16 has N a multiple of 8 in 8 .. 256")
    return n


def accumulator_row(thread: int) -> int:
    """The first row (of the 64) that ``thread`` (0-127 in the warpgroup) holds."""
    t = _check_int("thread", thread, 0, WARPGROUP_THREADS)
    return 16 * (t // 32) + (t % 32) // 4


def accumulator_col(thread: int) -> int:
    """The first column that ``thread`` holds in every 8-column slab (0, 2, 4 or 6)."""
    t = _check_int("thread", thread, 0, WARPGROUP_THREADS)
    return 2 * (t % 4)


def accumulator_position(thread: int, reg: int, n: int = 128) -> tuple[int, int]:
    """(row, column) in the 64 x ``n`` tile of register ``reg`` (0 .. n/2 - 1) of ``thread``."""
    n = _check_n(n)
    reg = _check_int("reg", reg, 0, n // 2)
    return (accumulator_row(thread) + 8 * ((reg // 2) % 2),
            accumulator_col(thread) + 8 * (reg // 4) + reg % 2)


def accumulator_owner(row: int, col: int, n: int = 128) -> tuple[int, int]:
    """(thread, register) that holds element (``row``, ``col``) of the 64 x ``n`` tile."""
    n = _check_n(n)
    row = _check_int("row", row, 0, FRAGMENT_ROWS)
    col = _check_int("col", col, 0, n)
    warp, r = divmod(row, 16)
    half, quad = divmod(r, 8)
    slab, c = divmod(col, 8)
    pair, e = divmod(c, 2)
    return 32 * warp + 4 * quad + pair, 4 * slab + 2 * half + e
