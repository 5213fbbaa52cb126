// Computes out = logsumexp(sigmoid(x @ W1.T + b1) @ W2.T + b2) to fp32 accuracy on wgmma from fp16x3 splits.
// Changed against 05: both GEMMs on p12 step 14's wgmma kernel; epilogues split h, reduce z from registers.
// Bound: fp16 tensor compute, three products of 412 GFLOP each.
#include <cmath>
#include <cstdint>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "../common/hopper.cuh"
#include "../common/hopper_fp16x3.cuh"
#include "launchers_hopper.h"

namespace {

namespace sm90 = fusedkit::sm90;
namespace fp = fusedkit::fp16x3;

// Shapes: GEMM1 multiplies xh, xl (M, Kp) by W1's wh, wl (H, Kp); GEMM2 multiplies hh, hl
// (M, Hp) by W2's wh, wl (N, Hp); all fp16, K-contiguous, Kp and Hp padded to 64 with zeros.
// Tiles, stages, registers, the ring and the tile order are p12 step 14's, written once in
// common/hopper_fp16x3.cuh (which says why each number).
using fp::BK;
using fp::BM;
using fp::BN;
using fp::kAcc;
using fp::kConsumers;
using fp::kStages;
using fp::kThreads;
static_assert(p45::kHopperLseTile == BN, "the binding sizes pmax, psum with kHopperLseTile");
static_assert(p45::kHopperPad % BK == 0 && p45::kHopperPad % 2 == 0,
              "Hp is a whole number of k-tiles, and even (h is stored in column pairs)");

constexpr float kNegInf = -INFINITY;

// ---------------------------------------------------------------------------------------------
// The mainloop, p12 step 14's: a persistent block walks the (M / 128) x (N / 128) tiles in grouped
// order; warpgroup 0 copies four fp16 tiles a stage with TMA, warpgroups 1 and 2 each multiply
// 64 rows by 128 columns. Per k-tile, hi*hi goes into `chunk` from zero and is added to `sum`
// with round-to-nearest FADDs while hi*lo + lo*hi accumulate in `cross` on the tensor cores.
// At the end of a tile, v = sum + cross / 2048 (the split product without the row scales) goes
// to epilogue(v, params, row0, col0, nt): v is the calling warpgroup's 64 x 128 fragment whose
// top-left element is (row0, col0) of the output, fragment map in common/hopper.cuh; params is
// what epilogue.load(row0, col0) read from memory (scales, biases) while the tile's last
// cross products were still running on the tensor cores.
// The consumers' k-loop is common/hopper_fp16x3.cuh's consume_tile typed out again: here the
// fragments are declared once, before the tile loop, and nvcc carries chunk's registers from
// tile to tile; through consume_tile (a fresh set a tile) the PTX differs, so the kernel the
// H200 measured keeps its own loop until a new measurement takes the shared one.
template <class Epilogue>
__device__ __forceinline__ void fp16x3_gemm(const CUtensorMap* ah_map, const CUtensorMap* al_map,
                                            const CUtensorMap* bh_map, const CUtensorMap* bl_map,
                                            int M, int N, int K, const Epilogue& epilogue) {
    // full[s]: the producer's expect_tx arrival + 64 KB of TMA bytes. empty[s]: one arrival per
    // consumer warp (8) once that warp's wgmmas no longer read stage s. `it` counts k-tiles
    // across tiles on both sides: stage it % kStages, parity (it / kStages) & 1.
    __shared__ uint64_t full[kStages], empty[kStages];
    extern __shared__ uint8_t smem_raw[];
    const fp::Ring ring(smem_raw);  // stage s: [ah | al | bh | bl], 16 KB each

    const int m_tiles = (M + BM - 1) / BM, n_tiles = (N + BN - 1) / BN;
    const int tiles = m_tiles * n_tiles;
    const int k_tiles = (K + BK - 1) / BK;
    const int warpgroup = threadIdx.x / 128;

    sm90::init_ring(full, empty, kConsumers * 4);
    __syncthreads();  // the last block-wide barrier

    if (warpgroup == 0) {
        if (sm90::become_producer<fp::kProducerRegs>(ah_map, al_map, bh_map, bl_map)) {
            uint32_t it = 0;
            for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
                int mt, nt;
                fp::grouped_tile(t, m_tiles, n_tiles, fp::kGroupM, mt, nt);
                for (int kt = 0; kt < k_tiles; ++kt, ++it) {
                    const int s = it % kStages;
                    sm90::mbar_wait(&empty[s], ((it / kStages) & 1) ^ 1);
                    // Zero-filled rows past M or N still count their bytes: always 64 KB.
                    sm90::mbar_arrive_expect_tx(&full[s], fp::kStageBytes);
                    sm90::tma_load_2d(ring.tile(s, fp::kXh), ah_map, &full[s], kt * BK, mt * BM);
                    sm90::tma_load_2d(ring.tile(s, fp::kXl), al_map, &full[s], kt * BK, mt * BM);
                    sm90::tma_load_2d(ring.tile(s, fp::kWh), bh_map, &full[s], kt * BK, nt * BN);
                    sm90::tma_load_2d(ring.tile(s, fp::kWl), bl_map, &full[s], kt * BK, nt * BN);
                }
            }
        }
    } else {
        sm90::setmaxnreg_inc<fp::kConsumerRegs>();
        const int c = warpgroup - 1;
        const bool lane0 = threadIdx.x % 32 == 0;
        float sum[kAcc];    // sum over k-tiles of hi*hi, added by FADD.RN outside the tensor cores
        float cross[kAcc];  // hi*lo + lo*hi, accumulated by the MMA over all of K
        float chunk[kAcc];  // this k-tile's hi*hi, from a zero accumulator
        uint32_t it = 0;
        for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
            int mt, nt;
            fp::grouped_tile(t, m_tiles, n_tiles, fp::kGroupM, mt, nt);
#pragma unroll
            for (int i = 0; i < kAcc; ++i) sum[i] = cross[i] = 0.0f;
            for (int kt = 0; kt < k_tiles; ++kt, ++it) {
                const int s = it % kStages;
                sm90::mbar_wait(&full[s], (it / kStages) & 1);
                const uint32_t ah = sm90::smem_addr(ring.tile(s, fp::kXh)) + c * 64 * 128;  // this consumer's 64 rows
                const uint32_t al = sm90::smem_addr(ring.tile(s, fp::kXl)) + c * 64 * 128;
                const uint32_t bh = sm90::smem_addr(ring.tile(s, fp::kWh));
                const uint32_t bl = sm90::smem_addr(ring.tile(s, fp::kWl));
                // chunk was read by the FADDs and cross zeroed by plain code: fence before wgmma.
                sm90::fence_accumulators(chunk);
                sm90::fence_accumulators(cross);
                sm90::wgmma_fence();
                // Group 1: chunk = ah * bh over this k-tile, from zero (scale-d = 0 on the first k16).
#pragma unroll
                for (int k16 = 0; k16 < BK / 16; ++k16) {
                    sm90::wgmma_m64n128k16_f16(chunk, sm90::sw128_desc(ah + 32 * k16),
                                               sm90::sw128_desc(bh + 32 * k16), k16 == 0 ? 0 : 1);
                }
                sm90::wgmma_commit();
                // Group 2: cross += ah * bl + al * bh, chained on the same registers across k-tiles.
#pragma unroll
                for (int k16 = 0; k16 < BK / 16; ++k16) {
                    sm90::wgmma_m64n128k16_f16(cross, sm90::sw128_desc(ah + 32 * k16),
                                               sm90::sw128_desc(bl + 32 * k16));
                    sm90::wgmma_m64n128k16_f16(cross, sm90::sw128_desc(al + 32 * k16),
                                               sm90::sw128_desc(bh + 32 * k16));
                }
                sm90::wgmma_commit();
                // This k-tile's chunk is done, and so is the previous k-tile's cross, the last
                // reader of the previous stage, which goes back to the producer now.
                sm90::wgmma_wait<1>();
                sm90::fence_accumulators(chunk);
                if (kt > 0 && lane0) sm90::mbar_arrive(&empty[(it + kStages - 1) % kStages]);
#pragma unroll
                for (int i = 0; i < kAcc; ++i) sum[i] = __fadd_rn(sum[i], chunk[i]);
            }
            // The epilogue's loads go out now, with chunk's registers free and the last cross
            // group still on the tensor cores: their latency hides behind it (issued slab by slab
            // inside the epilogue, they kept its warps waiting: notebook 03 shows GEMM1's source
            // pages before and after). The wait below is a memory clobber, so the compiler keeps
            // the loads above it.
            const auto params = epilogue.load(mt * BM + 64 * c, nt * BN);
            sm90::wgmma_wait<0>();  // the last k-tile's cross
            sm90::fence_accumulators(cross);
            if (k_tiles > 0 && lane0) sm90::mbar_arrive(&empty[(it + kStages - 1) % kStages]);
            fp::add_cross(sum, cross);
            epilogue(sum, params, mt * BM + 64 * c, nt * BN, nt);
        }
    }
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

// hs = sigmoid(z) * 2**14: 1 / (1 + e) for z >= 0 and e / (1 + e) below, e = exp(-|z|) in (0, 1]:
// exp never overflows and a tiny h keeps its relative accuracy. expf is the accurate one (~2 ulp,
// handles -inf); 1 / (1 + e), with 1 + e in [1, 2], is the SFU's reciprocal alone, ~1 ulp: no
// IEEE division with its refinement and slow path, and none of __fdividef's rescaling for a
// divisor above 2**126, which this one never is. h already carries 2**-22 from its split, so
// the sigmoid's few ulp do not show in the output. NaN stays NaN (z >= 0 is false, e is NaN).
__device__ __forceinline__ float rcp_approx(float a) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(a));
    return r;
}

__device__ __forceinline__ float scaled_sigmoid(float z) {
    const float e = expf(-fabsf(z));
    const float r = p45::kHopperHScale * rcp_approx(1.0f + e);  // exact: times a power of two
    return z >= 0.0f ? r : e * r;
}

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
                    const float sig = scaled_sigmoid(z);
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
// GEMM2's epilogue: z = v * h_inv * w_inv[c] + b2[c], never stored; per row of the 128-column tile
// nt, pmax[r, nt] = max over the valid columns and psum[r, nt] = sum of exp(z - pmax), exactly
// common/lse.py's partial_lse_store (columns past N are -inf: they lose the max, add exp = 0).
// Row r0 of the fragment lives in the 4 lanes of a quad (lanes 4q .. 4q + 3), 32 values each
// (2 columns x 16 slabs): a max / sum over the thread's values, then over the quad by two
// butterfly shuffles. A consumer owns whole rows, so no other warpgroup is involved.

__device__ __forceinline__ float quad_max(float a) {
    a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, 1));
    return fmaxf(a, __shfl_xor_sync(0xffffffffu, a, 2));
}

__device__ __forceinline__ float quad_sum(float a) {
    a += __shfl_xor_sync(0xffffffffu, a, 1);
    return a + __shfl_xor_sync(0xffffffffu, a, 2);
}

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
        float mx[2] = {kNegInf, kNegInf};  // rows r0, r0 + 8
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
            const int c = c0 + 8 * j;
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const bool ok = c + e < N;
                // h_inv and wi are powers of two: one FMA, exactly (v * h_inv) * wi + b.
                const float scale = h_inv * p.wi[2 * j + e];
                const float bb = p.b[2 * j + e];
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    float& z = v[4 * j + 2 * h + e];
                    z = ok ? __fmaf_rn(z, scale, bb) : kNegInf;
                    mx[h] = fmaxf(mx[h], z);
                }
            }
        }
        // Every tile holds a valid column (nt * 128 < N), so the max is finite for finite z. A NaN
        // z loses fmaxf but makes its exp, and so psum and out, NaN.
        mx[0] = quad_max(mx[0]);
        mx[1] = quad_max(mx[1]);
        float s[2] = {0.0f, 0.0f};
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                s[h] += expf(v[4 * j + 2 * h] - mx[h]);  // exponents <= 0: in [0, 1]
                s[h] += expf(v[4 * j + 2 * h + 1] - mx[h]);
            }
        }
        s[0] = quad_sum(s[0]);
        s[1] = quad_sum(s[1]);
        if (t % 4 == 0) {  // one lane of the quad stores the row's pair
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int r = r0 + 8 * h;
                if (r < M) {
                    const int64_t at = static_cast<int64_t>(r) * T + nt;
                    pmax[at] = mx[h];
                    psum[at] = s[h];
                }
            }
        }
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

namespace {

// The four tensor maps of one fp16x3 GEMM (A rows x K, B rows x K), the shared-memory opt-in, and
// the persistent grid: one block per SM at most. Returns nullptr or what went wrong.
template <class Kernel>
const char* prepare(Kernel kernel, CUtensorMap (&maps)[4], const __half* ah, const __half* al,
                    int a_rows, const __half* bh, const __half* bl, int b_rows, int K, int& blocks) {
    if (const char* err = sm90::make_tensor_map_f16(&maps[0], ah, a_rows, K, BM)) return err;
    if (const char* err = sm90::make_tensor_map_f16(&maps[1], al, a_rows, K, BM)) return err;
    if (const char* err = sm90::make_tensor_map_f16(&maps[2], bh, b_rows, K, BN)) return err;
    if (const char* err = sm90::make_tensor_map_f16(&maps[3], bl, b_rows, K, BN)) return err;
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(fp::kSmemBytes)) != cudaSuccess) {
        return "cudaFuncSetAttribute (dynamic shared memory) failed";
    }
    int device = 0, sms = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
        return "could not read the multiprocessor count";
    }
    const int64_t tiles = static_cast<int64_t>((a_rows + BM - 1) / BM) * ((b_rows + BN - 1) / BN);
    blocks = static_cast<int>(tiles < sms ? tiles : sms);
    return nullptr;
}

}  // namespace

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
    if (const char* err = prepare(p45_wgmma_fp16x3_sigmoid_split_kernel, maps, xh, xl, M, wh, wl,
                                  H, K, blocks)) {
        return err;
    }
    p45_wgmma_fp16x3_sigmoid_split_kernel<<<blocks, kThreads, fp::kSmemBytes, stream>>>(
        maps[0], maps[1], maps[2], maps[3], x_inv, w_inv, b, hh, hl, M, H, K, Hp);
    return nullptr;
}

const char* launch_wgmma_fp16x3_partial_lse(const __half* hh, const __half* hl, float h_inv,
                                            const __half* wh, const __half* wl, const float* w_inv,
                                            const float* b, float* pmax, float* psum, int M,
                                            int N, int K, cudaStream_t stream) {
    CUtensorMap maps[4];
    int blocks = 0;
    if (const char* err = prepare(p45_wgmma_fp16x3_partial_lse_kernel, maps, hh, hl, M, wh, wl, N,
                                  K, blocks)) {
        return err;
    }
    const int T = (N + kHopperLseTile - 1) / kHopperLseTile;
    p45_wgmma_fp16x3_partial_lse_kernel<<<blocks, kThreads, fp::kSmemBytes, stream>>>(
        maps[0], maps[1], maps[2], maps[3], h_inv, w_inv, b, pmax, psum, M, N, K, T);
    return nullptr;
}

}  // namespace p45
