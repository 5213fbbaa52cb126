"""The digest a timed call's worker commits to before the caller chooses the rows it checks: one
int64 per row of a float32 tensor, on the GPU. A row of at most CHUNK_BYTES is hashed whole: the
first 8 bytes of ``hashlib.blake2s(row_bytes, digest_size=8)``. A longer row is cut into chunks of
CHUNK_BYTES (the last may be shorter), each hashed so, and the row's digest is that of the chunks'
digests laid end to end (:func:`row_digest_cpu` says it with hashlib, as the caller computes it on
the rows it is sent). Chunks let every lane of the GPU work: p12's 1,024 rows of 32 KB, hashed a row
a lane, took most of a millisecond on 32 SMs, outside the timed call but inside its round trip, and
longer when the clock fell (an H100, 2026-12-05), so the round-trip check refused honest kernels;
as 32,768 chunks they take microseconds. A cryptographic hash, because a kernel knows the rule:
under a keyed sum of the words, rows computed after the choice could be nudged, within the
tolerance, onto any digest sent before. Each lane hashes one chunk, 64 bytes a step. Loaded like a
step (``load_step("common", "row_digest.py")``).
"""

from __future__ import annotations

import hashlib

import torch
import triton
import triton.language as tl

BLOCK_R = 32
"""Chunks a program hashes, one per lane of its one warp."""
CHUNK_BYTES = 1024
"""A row longer than this is hashed in chunks of this many bytes (256 float32 words)."""
_CHUNK_WORDS = CHUNK_BYTES // 4


def _blake8(data) -> bytes:
    return hashlib.blake2s(data, digest_size=8).digest()


def row_digest_cpu(out: torch.Tensor) -> torch.Tensor:
    """:func:`row_digest` with hashlib, for a tensor on the CPU."""
    rows = out.detach().reshape(out.shape[0], -1).contiguous().view(torch.uint8).numpy()
    whole = rows.shape[1] <= CHUNK_BYTES
    digests = [_blake8(r) if whole else _blake8(b"".join(
        [_blake8(r[i:i + CHUNK_BYTES]) for i in range(0, r.size, CHUNK_BYTES)])) for r in rows]
    return torch.tensor([int.from_bytes(d, "little", signed=True) for d in digests], dtype=torch.int64)


@triton.jit
def _rotr(x, n: tl.constexpr):
    return (x >> n) | (x << (32 - n))


@triton.jit
def _g(a, b, c, d, x, y):
    a = a + b + x
    d = _rotr(d ^ a, 16)
    c = c + d
    b = _rotr(b ^ c, 12)
    a = a + b + y
    d = _rotr(d ^ a, 8)
    c = c + d
    b = _rotr(b ^ c, 7)
    return a, b, c, d


@triton.jit
def _word(row, j, words, live):
    return tl.load(row + j, mask=live & (j < words), other=0).to(tl.uint32, bitcast=True)


@triton.jit
def _row_digest_kernel(x_ptr, out_ptr, lanes, words, stride, chunks, CHUNK: tl.constexpr,
                       BLOCK_R: tl.constexpr):
    # Lane r hashes chunk r % chunks of row r // chunks: its words start .. start + n - 1.
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    live = r < lanes
    start = (r % chunks) * CHUNK
    n = tl.minimum(words - start, CHUNK)
    row = x_ptr + (r // chunks).to(tl.int64) * stride + start
    zero = tl.zeros([BLOCK_R], tl.uint32)
    # h = IV, the first word xored with the parameter block: 8-byte digest, no key, sequential.
    h0, h1, h2, h3 = zero + 0x6B08E66F, zero + 0xBB67AE85, zero + 0x3C6EF372, zero + 0xA54FF53A
    h4, h5, h6, h7 = zero + 0x510E527F, zero + 0x9B05688C, zero + 0x1F83D9AB, zero + 0x5BE0CD19
    blocks = tl.maximum((n + 15) // 16, 1)           # this lane's (a row's last chunk may be short)
    for k in range(0, tl.maximum((tl.minimum(words, CHUNK) + 15) // 16, 1)):
        j = k * 16
        m0, m1, m2, m3 = _word(row, j, n, live), _word(row, j + 1, n, live), \
            _word(row, j + 2, n, live), _word(row, j + 3, n, live)
        m4, m5, m6, m7 = _word(row, j + 4, n, live), _word(row, j + 5, n, live), \
            _word(row, j + 6, n, live), _word(row, j + 7, n, live)
        m8, m9, m10, m11 = _word(row, j + 8, n, live), _word(row, j + 9, n, live), \
            _word(row, j + 10, n, live), _word(row, j + 11, n, live)
        m12, m13, m14, m15 = _word(row, j + 12, n, live), _word(row, j + 13, n, live), \
            _word(row, j + 14, n, live), _word(row, j + 15, n, live)
        counted = (tl.minimum(j + 16, n) * 4).to(tl.uint32)    # bytes hashed so far
        last = tl.where(k == blocks - 1, 0xFFFFFFFF, 0).to(tl.uint32)
        v0, v1, v2, v3, v4, v5, v6, v7 = h0, h1, h2, h3, h4, h5, h6, h7
        v8, v9, v10, v11 = zero + 0x6A09E667, zero + 0xBB67AE85, zero + 0x3C6EF372, zero + 0xA54FF53A
        v12, v13 = (zero + 0x510E527F) ^ counted, zero + 0x9B05688C
        v14, v15 = (zero + 0x1F83D9AB) ^ last, zero + 0x5BE0CD19
        # Ten rounds, the message words in RFC 7693's SIGMA order.
        v0, v4, v8, v12 = _g(v0, v4, v8, v12, m0, m1)
        v1, v5, v9, v13 = _g(v1, v5, v9, v13, m2, m3)
        v2, v6, v10, v14 = _g(v2, v6, v10, v14, m4, m5)
        v3, v7, v11, v15 = _g(v3, v7, v11, v15, m6, m7)
        v0, v5, v10, v15 = _g(v0, v5, v10, v15, m8, m9)
        v1, v6, v11, v12 = _g(v1, v6, v11, v12, m10, m11)
        v2, v7, v8, v13 = _g(v2, v7, v8, v13, m12, m13)
        v3, v4, v9, v14 = _g(v3, v4, v9, v14, m14, m15)
        v0, v4, v8, v12 = _g(v0, v4, v8, v12, m14, m10)
        v1, v5, v9, v13 = _g(v1, v5, v9, v13, m4, m8)
        v2, v6, v10, v14 = _g(v2, v6, v10, v14, m9, m15)
        v3, v7, v11, v15 = _g(v3, v7, v11, v15, m13, m6)
        v0, v5, v10, v15 = _g(v0, v5, v10, v15, m1, m12)
        v1, v6, v11, v12 = _g(v1, v6, v11, v12, m0, m2)
        v2, v7, v8, v13 = _g(v2, v7, v8, v13, m11, m7)
        v3, v4, v9, v14 = _g(v3, v4, v9, v14, m5, m3)
        v0, v4, v8, v12 = _g(v0, v4, v8, v12, m11, m8)
        v1, v5, v9, v13 = _g(v1, v5, v9, v13, m12, m0)
        v2, v6, v10, v14 = _g(v2, v6, v10, v14, m5, m2)
        v3, v7, v11, v15 = _g(v3, v7, v11, v15, m15, m13)
        v0, v5, v10, v15 = _g(v0, v5, v10, v15, m10, m14)
        v1, v6, v11, v12 = _g(v1, v6, v11, v12, m3, m6)
        v2, v7, v8, v13 = _g(v2, v7, v8, v13, m7, m1)
        v3, v4, v9, v14 = _g(v3, v4, v9, v14, m9, m4)
        v0, v4, v8, v12 = _g(v0, v4, v8, v12, m7, m9)
        v1, v5, v9, v13 = _g(v1, v5, v9, v13, m3, m1)
        v2, v6, v10, v14 = _g(v2, v6, v10, v14, m13, m12)
        v3, v7, v11, v15 = _g(v3, v7, v11, v15, m11, m14)
        v0, v5, v10, v15 = _g(v0, v5, v10, v15, m2, m6)
        v1, v6, v11, v12 = _g(v1, v6, v11, v12, m5, m10)
        v2, v7, v8, v13 = _g(v2, v7, v8, v13, m4, m0)
        v3, v4, v9, v14 = _g(v3, v4, v9, v14, m15, m8)
        v0, v4, v8, v12 = _g(v0, v4, v8, v12, m9, m0)
        v1, v5, v9, v13 = _g(v1, v5, v9, v13, m5, m7)
        v2, v6, v10, v14 = _g(v2, v6, v10, v14, m2, m4)
        v3, v7, v11, v15 = _g(v3, v7, v11, v15, m10, m15)
        v0, v5, v10, v15 = _g(v0, v5, v10, v15, m14, m1)
        v1, v6, v11, v12 = _g(v1, v6, v11, v12, m11, m12)
        v2, v7, v8, v13 = _g(v2, v7, v8, v13, m6, m8)
        v3, v4, v9, v14 = _g(v3, v4, v9, v14, m3, m13)
        v0, v4, v8, v12 = _g(v0, v4, v8, v12, m2, m12)
        v1, v5, v9, v13 = _g(v1, v5, v9, v13, m6, m10)
        v2, v6, v10, v14 = _g(v2, v6, v10, v14, m0, m11)
        v3, v7, v11, v15 = _g(v3, v7, v11, v15, m8, m3)
        v0, v5, v10, v15 = _g(v0, v5, v10, v15, m4, m13)
        v1, v6, v11, v12 = _g(v1, v6, v11, v12, m7, m5)
        v2, v7, v8, v13 = _g(v2, v7, v8, v13, m15, m14)
        v3, v4, v9, v14 = _g(v3, v4, v9, v14, m1, m9)
        v0, v4, v8, v12 = _g(v0, v4, v8, v12, m12, m5)
        v1, v5, v9, v13 = _g(v1, v5, v9, v13, m1, m15)
        v2, v6, v10, v14 = _g(v2, v6, v10, v14, m14, m13)
        v3, v7, v11, v15 = _g(v3, v7, v11, v15, m4, m10)
        v0, v5, v10, v15 = _g(v0, v5, v10, v15, m0, m7)
        v1, v6, v11, v12 = _g(v1, v6, v11, v12, m6, m3)
        v2, v7, v8, v13 = _g(v2, v7, v8, v13, m9, m2)
        v3, v4, v9, v14 = _g(v3, v4, v9, v14, m8, m11)
        v0, v4, v8, v12 = _g(v0, v4, v8, v12, m13, m11)
        v1, v5, v9, v13 = _g(v1, v5, v9, v13, m7, m14)
        v2, v6, v10, v14 = _g(v2, v6, v10, v14, m12, m1)
        v3, v7, v11, v15 = _g(v3, v7, v11, v15, m3, m9)
        v0, v5, v10, v15 = _g(v0, v5, v10, v15, m5, m0)
        v1, v6, v11, v12 = _g(v1, v6, v11, v12, m15, m4)
        v2, v7, v8, v13 = _g(v2, v7, v8, v13, m8, m6)
        v3, v4, v9, v14 = _g(v3, v4, v9, v14, m2, m10)
        v0, v4, v8, v12 = _g(v0, v4, v8, v12, m6, m15)
        v1, v5, v9, v13 = _g(v1, v5, v9, v13, m14, m9)
        v2, v6, v10, v14 = _g(v2, v6, v10, v14, m11, m3)
        v3, v7, v11, v15 = _g(v3, v7, v11, v15, m0, m8)
        v0, v5, v10, v15 = _g(v0, v5, v10, v15, m12, m2)
        v1, v6, v11, v12 = _g(v1, v6, v11, v12, m13, m7)
        v2, v7, v8, v13 = _g(v2, v7, v8, v13, m1, m4)
        v3, v4, v9, v14 = _g(v3, v4, v9, v14, m10, m5)
        v0, v4, v8, v12 = _g(v0, v4, v8, v12, m10, m2)
        v1, v5, v9, v13 = _g(v1, v5, v9, v13, m8, m4)
        v2, v6, v10, v14 = _g(v2, v6, v10, v14, m7, m6)
        v3, v7, v11, v15 = _g(v3, v7, v11, v15, m1, m5)
        v0, v5, v10, v15 = _g(v0, v5, v10, v15, m15, m11)
        v1, v6, v11, v12 = _g(v1, v6, v11, v12, m9, m14)
        v2, v7, v8, v13 = _g(v2, v7, v8, v13, m3, m12)
        v3, v4, v9, v14 = _g(v3, v4, v9, v14, m13, m0)
        on = k < blocks                               # lanes whose chunk is hashed keep h
        h0, h1 = tl.where(on, h0 ^ v0 ^ v8, h0), tl.where(on, h1 ^ v1 ^ v9, h1)
        h2, h3 = tl.where(on, h2 ^ v2 ^ v10, h2), tl.where(on, h3 ^ v3 ^ v11, h3)
        h4, h5 = tl.where(on, h4 ^ v4 ^ v12, h4), tl.where(on, h5 ^ v5 ^ v13, h5)
        h6, h7 = tl.where(on, h6 ^ v6 ^ v14, h6), tl.where(on, h7 ^ v7 ^ v15, h7)
    tl.store(out_ptr + r.to(tl.int64) * 2, h0.to(tl.int32, bitcast=True), mask=live)
    tl.store(out_ptr + r.to(tl.int64) * 2 + 1, h1.to(tl.int32, bitcast=True), mask=live)


def _lanes(words: torch.Tensor, chunks: int) -> torch.Tensor:
    """The digests of every chunk of every row of ``words`` (R, W) int32, row after row: (R * chunks,)."""
    lanes = words.shape[0] * chunks
    pairs = torch.empty((lanes, 2), dtype=torch.int32, device=words.device)
    _row_digest_kernel[(triton.cdiv(lanes, BLOCK_R),)](
        words, pairs, lanes, words.shape[1], words.stride(0), chunks, CHUNK=_CHUNK_WORDS,
        BLOCK_R=BLOCK_R, num_warps=1)
    return pairs.view(torch.int64).reshape(-1)


def row_digest(out: torch.Tensor) -> torch.Tensor:
    """One int64 per row of ``out`` (float32, on its device): see the module's docstring."""
    words = out.reshape(out.shape[0], -1).contiguous().view(torch.int32)
    chunks = max(triton.cdiv(words.shape[1], _CHUNK_WORDS), 1)
    first = _lanes(words, chunks)
    if chunks == 1:
        return first
    return _lanes(first.view(torch.int32).reshape(words.shape[0], 2 * chunks), 1)
