// Problem 12's fused epilogue for the wgmma steps (11-13), written once: from the accumulator
// registers of one 64 x BN wgmma tile straight to y, y[r, c] = LeakyReLU((acc + b[c]) * multiplier).
// Device code only; included by the .cu steps after common/hopper.cuh.
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

#include "../common/hopper.cuh"

namespace p12 {

__device__ __forceinline__ float hopper_leaky(float acc_plus_b, float multiplier, float slope) {
    const float v = acc_plus_b * multiplier;
    return v > 0.0f ? v : v * slope;
}

// Stores the 64 x BN tile whose top-left element is y[row0, col0], held by the calling
// warpgroup as wgmma accumulators d (fragment map in common/hopper.cuh). Rows >= M and
// columns >= N (the zero-filled edge of a partial tile) are not stored.
// pairs_ok (N even and y 8-byte aligned): each thread's two adjacent columns go out as one
// 8-byte st.global.v2.f32; a warp's store then covers 8 rows x 32 contiguous bytes, 8 full
// 32-byte sectors. Otherwise two 4-byte stores. b is read through the read-only path (__ldg),
// once per column pair for both rows.
template <int BN>
__device__ __forceinline__ void store_tile_m64(const float (&d)[BN / 2], float* __restrict__ y,
                                               const float* __restrict__ b, int row0, int col0,
                                               int M, int N, float multiplier, float slope,
                                               bool pairs_ok) {
    const int t = threadIdx.x % 128;  // thread within the warpgroup
    const int r0 = row0 + fusedkit::sm90::accumulator_row(t);
    const int c0 = col0 + fusedkit::sm90::accumulator_col(t);
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        const int c = c0 + 8 * j;
        if (c >= N) continue;  // c grows with j; `continue` keeps d's indices compile-time
        const bool c1_ok = c + 1 < N;
        const float b0 = __ldg(b + c);
        const float b1 = c1_ok ? __ldg(b + c + 1) : 0.0f;
#pragma unroll
        for (int h = 0; h < 2; ++h) {  // h = 0: row r0, h = 1: row r0 + 8
            const int r = r0 + 8 * h;
            if (r >= M) continue;
            const float v0 = hopper_leaky(d[4 * j + 2 * h] + b0, multiplier, slope);
            const float v1 = hopper_leaky(d[4 * j + 2 * h + 1] + b1, multiplier, slope);
            float* p = y + static_cast<int64_t>(r) * N + c;
            if (pairs_ok) {  // N even, so c even and c1_ok: an aligned pair inside the row
                *reinterpret_cast<float2*>(p) = make_float2(v0, v1);
            } else {
                p[0] = v0;
                if (c1_ok) p[1] = v1;
            }
        }
    }
}

}  // namespace p12
