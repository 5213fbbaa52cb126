// Computes out = logsumexp(sigmoid(x @ W1.T + b1) @ W2.T + b2) to fp32 accuracy on wgmma from fp16x3 splits.
// Changed against 05: both GEMMs on p12 step 14's wgmma kernel; epilogues split h, reduce z from registers.
// Bound: fp16 tensor compute, three products of 412 GFLOP each.
#include <cmath>
#include <cstdint>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "../common/hopper.cuh"
#include "hopper_lse.cuh"
#include "launchers_hopper.h"

namespace {

// Shapes: GEMM1 multiplies xh, xl (M, Kp) by W1's wh, wl (H, Kp); GEMM2 multiplies hh, hl
// (M, Hp) by W2's wh, wl (N, Hp); all fp16, K-contiguous, Kp and Hp padded to 64 with zeros.
// The pipeline, its tiles and the epilogues' shared pieces are hopper_lse.cuh's (with step 08's).
using Pipe3 = Pipe<3>;

// The ring's barriers and shared memory, declared here (their PTX names are this function's), and
// the fp16x3 pipeline of hopper_lse.cuh.
template <class Epilogue>
__device__ __forceinline__ void fp16x3_gemm(const CUtensorMap* ah_map, const CUtensorMap* al_map,
                                            const CUtensorMap* bh_map, const CUtensorMap* bl_map,
                                            int M, int N, int K, const Epilogue& epilogue) {
    __shared__ uint64_t full[Pipe3::kStages], empty[Pipe3::kStages];
    extern __shared__ uint8_t smem_raw[];
    lse_gemm<3>(full, empty, smem_raw, ah_map, al_map, bh_map, bl_map, M, N, K, epilogue);
}

// ---------------------------------------------------------------------------------------------
// GEMM1's epilogue: h = sigmoid(v * x_inv[r] * w_inv[c] + b1[c]), stored split for GEMM2 with
// the fixed scale 2**14 (step 05's module docstring says why one scale fits every row of h):
// hs = h * 2**14 (exact), hi = fp16(hs), lo = fp16((hs - hi) * 2048) (hs - hi and * 2048 exact).
// Columns H .. Hp - 1 (the padding GEMM2 sums over) are written as zeros; nothing else of hh, hl
// exists, so every element of them is written by some tile (the tiles cover cdiv(H, 128) * 128
// >= Hp columns). Each thread's two adjacent columns go out as one 4-byte __half2 store; a warp
// store covers 8 rows x 16 contiguous bytes.

// The epilogue runs while the tensor cores wait (both consumers finish a tile together), and at
// K = 2048 a tile has only 32 k-tiles to hide it behind: every instruction per value counts.
// Under Nsight Compute (0bbdace) GEMM1 kept the SM busy 61% of the time against GEMM2's 87%,
// issuing 1.27 times GEMM2's instructions per FLOP (344 M for 275 GFLOP, 135 M for 137 GFLOP)
// from 2.25 warps per scheduler, 0.35 of them eligible: hence the choices below. Its source
// page (315f0f2) then showed about 40 instructions a value: the ones below, plus a branch around
// each sigmoid of a column that might lie past H, and __fdividef's check for a huge divisor.

// hs = sigmoid(z) * 2**14 by hopper_lse.cuh's scaled_sigmoid (exp(-|z|), then the SFU's
// reciprocal): h already carries 2**-22 from its split, so the sigmoid's few ulp do not show in
// the output.
struct SigmoidSplit {
    const float* __restrict__ x_inv;  // (M,) 1 / row scale of x's split
    const float* __restrict__ w_inv;  // (H,) 1 / row scale of W1's split
    const float* __restrict__ b;      // (H,)
    __half* __restrict__ hh;          // (M, Hp) hi of h * 2**14
    __half* __restrict__ hl;          // (M, Hp) lo
    int M, H, Hp;

    // The thread's 2 rows and 32 columns (16 slabs of 8, two adjacent columns in each): x's row
    // scales, W1's column scales and b1, zero past M or H.
    struct Params {
        float xi[2], wi[BN / 4], b[BN / 4];
    };

    __device__ __forceinline__ Params load(int row0, int col0) const {
        const int t = threadIdx.x % 128;
        const int r0 = row0 + sm90::accumulator_row(t);
        const int c0 = col0 + sm90::accumulator_col(t);
        Params p;
        p.xi[0] = r0 < M ? __ldg(x_inv + r0) : 0.0f;
        p.xi[1] = r0 + 8 < M ? __ldg(x_inv + r0 + 8) : 0.0f;
#pragma unroll
        for (int i = 0; i < BN / 4; ++i) {
            const int c = c0 + 8 * (i / 2) + i % 2;
            p.wi[i] = c < H ? __ldg(w_inv + c) : 0.0f;
            p.b[i] = c < H ? __ldg(b + c) : 0.0f;
        }
        return p;
    }

    __device__ __forceinline__ void operator()(float (&v)[kAcc], const Params& p, int row0,
                                               int col0, int) const {
        const int t = threadIdx.x % 128;
        const int r0 = row0 + sm90::accumulator_row(t);
        const int c0 = col0 + sm90::accumulator_col(t);
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
            const int c = c0 + 8 * j;  // even; Hp is even, so c < Hp means c + 1 < Hp too
            if (c >= Hp) continue;     // c grows with j; `continue` keeps v's indices compile-time
            const bool ok[2] = {c < H, c + 1 < H};
#pragma unroll
            for (int h = 0; h < 2; ++h) {  // h = 0: row r0, h = 1: row r0 + 8
                const int r = r0 + 8 * h;
                if (r >= M) continue;
                float hs[2];
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    // The split's scales are powers of two, so xi * wi is exact and this FMA gives
                    // the value of fma(v * xi, wi, b) with one multiply fewer.
                    // A column past H has wi = b = 0, so z is 0 (or NaN from a NaN row): the
                    // sigmoid runs anyway and the select drops it, with no branch around it.
                    const float z = __fmaf_rn(v[4 * j + 2 * h + e], p.xi[h] * p.wi[2 * j + e],
                                              p.b[2 * j + e]);
                    const float sig = scaled_sigmoid(z, p45::kHopperHScale);
                    hs[e] = ok[e] ? sig : 0.0f;
                }
                // Both columns at once: one cvt.rn.f16x2.f32 each for hi and lo. hs - hi and the
                // * 2048 are exact (hi is hs rounded to 11 bits).
                const __half2 hi = __floats2half2_rn(hs[0], hs[1]);
                const float2 back = __half22float2(hi);
                const __half2 lo = __floats2half2_rn((hs[0] - back.x) * fp::kLoScale,
                                                     (hs[1] - back.y) * fp::kLoScale);
                const int64_t at = static_cast<int64_t>(r) * Hp + c;
                *reinterpret_cast<__half2*>(hh + at) = hi;
                *reinterpret_cast<__half2*>(hl + at) = lo;
            }
        }
    }
};

// ---------------------------------------------------------------------------------------------
// GEMM2's epilogue: z = v * h_inv * w_inv[c] + b2[c], never stored, reduced to the tile's
// per-row (max, sum-exp) pairs by hopper_lse.cuh's store_partial_lse.

struct PartialLse {
    float h_inv;                      // 1 / h's split scale, 2**-14 for every row
    const float* __restrict__ w_inv;  // (N,) 1 / row scale of W2's split
    const float* __restrict__ b;      // (N,)
    float* __restrict__ pmax;         // (M, T), T = cdiv(N, 128)
    float* __restrict__ psum;         // (M, T)
    int M, N, T;

    // The thread's 32 columns (16 slabs of 8, two adjacent columns in each): W2's column scales
    // and b2, zero past N.
    struct Params {
        float wi[BN / 4], b[BN / 4];
    };

    __device__ __forceinline__ Params load(int, int col0) const {
        const int c0 = col0 + sm90::accumulator_col(threadIdx.x % 128);
        Params p;
#pragma unroll
        for (int i = 0; i < BN / 4; ++i) {
            const int c = c0 + 8 * (i / 2) + i % 2;
            p.wi[i] = c < N ? __ldg(w_inv + c) : 0.0f;
            p.b[i] = c < N ? __ldg(b + c) : 0.0f;
        }
        return p;
    }

    __device__ __forceinline__ void operator()(float (&v)[kAcc], const Params& p, int row0,
                                               int col0, int nt) const {
        const int t = threadIdx.x % 128;
        const int r0 = row0 + sm90::accumulator_row(t);
        const int c0 = col0 + sm90::accumulator_col(t);
        float mx[2];  // rows r0, r0 + 8
        // h_inv and wi are powers of two: one FMA, exactly (v * h_inv) * wi + b.
        tile_logits(v, c0, N, [&](int i) { return make_float2(h_inv * p.wi[i], p.b[i]); }, mx);
        store_partial_lse(v, mx, r0, nt, M, T, pmax, psum);
    }
};

}  // namespace

// GEMM1: hh, hl = split(sigmoid(x @ W1.T + b1)). xh_map, xl_map (M, Kp) and wh_map, wl_map (H, Kp):
// boxes of 128 rows x 64 columns.
extern "C" __global__ void __launch_bounds__(kThreads, 1)
p45_wgmma_fp16x3_sigmoid_split_kernel(const __grid_constant__ CUtensorMap xh_map,
                                      const __grid_constant__ CUtensorMap xl_map,
                                      const __grid_constant__ CUtensorMap wh_map,
                                      const __grid_constant__ CUtensorMap wl_map,
                                      const float* __restrict__ x_inv, const float* __restrict__ w_inv,
                                      const float* __restrict__ b, __half* __restrict__ hh,
                                      __half* __restrict__ hl, int M, int H, int K, int Hp) {
    fp16x3_gemm(&xh_map, &xl_map, &wh_map, &wl_map, M, H, K,
                SigmoidSplit{x_inv, w_inv, b, hh, hl, M, H, Hp});
}

// GEMM2: pmax, psum of z = h @ W2.T + b2. hh_map, hl_map (M, Hp) and wh_map, wl_map (N, Hp).
extern "C" __global__ void __launch_bounds__(kThreads, 1)
p45_wgmma_fp16x3_partial_lse_kernel(const __grid_constant__ CUtensorMap hh_map,
                                    const __grid_constant__ CUtensorMap hl_map,
                                    const __grid_constant__ CUtensorMap wh_map,
                                    const __grid_constant__ CUtensorMap wl_map, float h_inv,
                                    const float* __restrict__ w_inv, const float* __restrict__ b,
                                    float* __restrict__ pmax, float* __restrict__ psum, int M,
                                    int N, int K, int T) {
    fp16x3_gemm(&hh_map, &hl_map, &wh_map, &wl_map, M, N, K,
                PartialLse{h_inv, w_inv, b, pmax, psum, M, N, T});
}

namespace p45 {

const char* launch_wgmma_fp16x3_sigmoid_split(const __half* xh, const __half* xl, const float* x_inv,
                                              const __half* wh, const __half* wl,
                                              const float* w_inv, const float* b, __half* hh,
                                              __half* hl, int M, int H, int K, int Hp,
                                              cudaStream_t stream) {
    if (Hp % kHopperPad != 0 || Hp < H || Hp - H >= kHopperPad) {
        return "Hp must be H rounded up to a multiple of kHopperPad";
    }
    CUtensorMap maps[4];
    int blocks = 0;
    if (const char* err = prepare<3>(p45_wgmma_fp16x3_sigmoid_split_kernel, maps, {xh, xl}, M,
                                     {wh, wl}, H, K, blocks)) {
        return err;
    }
    p45_wgmma_fp16x3_sigmoid_split_kernel<<<blocks, kThreads, Pipe3::kSmemBytes, stream>>>(
        maps[0], maps[1], maps[2], maps[3], x_inv, w_inv, b, hh, hl, M, H, K, Hp);
    return nullptr;
}

const char* launch_wgmma_fp16x3_partial_lse(const __half* hh, const __half* hl, float h_inv,
                                            const __half* wh, const __half* wl, const float* w_inv,
                                            const float* b, float* pmax, float* psum, int M,
                                            int N, int K, cudaStream_t stream) {
    CUtensorMap maps[4];
    int blocks = 0;
    if (const char* err = prepare<3>(p45_wgmma_fp16x3_partial_lse_kernel, maps, {hh, hl}, M,
                                     {wh, wl}, N, K, blocks)) {
        return err;
    }
    const int T = (N + kHopperLseTile - 1) / kHopperLseTile;
    p45_wgmma_fp16x3_partial_lse_kernel<<<blocks, kThreads, Pipe3::kSmemBytes, stream>>>(
        maps[0], maps[1], maps[2], maps[3], h_inv, w_inv, b, pmax, psum, M, N, K, T);
    return nullptr;
}

}  // namespace p45
