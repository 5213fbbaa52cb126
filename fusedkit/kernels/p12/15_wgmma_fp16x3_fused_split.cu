// Computes y to fp32 accuracy as step 14, with x split into fp16 hi + lo in shared memory, not by a pass.
// Changed against 14: x TMA-loaded as fp32, converted in place by its consumers; a pass only finds row scales.
// Bound: as step 14, same GEMM bytes; the split pass becomes one read of x: a saving only if the split hides under the MMAs.
#include <cstdint>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "../common/hopper.cuh"
#include "hopper_fp16x3.cuh"
#include "launchers_hopper.h"

// Step 14's tile, stages, order, k-loop (common/hopper_fp16x3.cuh) and epilogue (hopper_fp16x3.cuh);
// this step's own parts are the row-scale pass, the fp32 boxes of x in a stage, and the split
// before the wgmmas.
namespace fp = p12::fp16x3;
namespace sm90 = fusedkit::sm90;

namespace {

// Shapes: x is (M, K) fp32, K-contiguous, K % 4 == 0; wh, wl are (N, Kp) fp16, Kp = K rounded up
// to 64 by the weight split. x's boxes past K arrive as zeros, so x needs no padding. A stage is
// step 14's: [x 0-31 -> xh | x 32-63 -> xl | wh | wl], each box 16 KB (128 rows of 128 bytes,
// 32 fp32 or 64 fp16 a row).
static_assert(fp::kTileBytes == 128 * 128, "an fp32 box of 32 columns fills a tile of step 14's");

constexpr int kScaleThreads = 256;  // the row-scale pass: one block per row of x

// fp32 -> fp16 hi and lo of two scaled values, as common/fp16x3_split.py's split: v*s is exact
// (a power of two), hi rounds to nearest, (v*s - hi) * 2048 is exact, lo rounds to nearest.
__device__ __forceinline__ void split2(float a, float b, float s, uint32_t& hi, uint32_t& lo) {
    a = __fmul_rn(a, s);
    b = __fmul_rn(b, s);
    const __half2 h = __floats2half2_rn(a, b);
    const float2 hf = __half22float2(h);
    const __half2 l = __floats2half2_rn(__fmul_rn(__fsub_rn(a, hf.x), 2048.0f),
                                        __fmul_rn(__fsub_rn(b, hf.y), 2048.0f));
    hi = *reinterpret_cast<const uint32_t*>(&h);
    lo = *reinterpret_cast<const uint32_t*>(&l);
}

// In place, one 128-byte row r of a stage's x: on entry box h (h = 0, 1) holds x's fp32
// columns 32h .. 32h + 31 (16-byte chunk j of row r at slot j ^ (r & 7), TMA's 128-byte
// swizzle); on exit box 0 holds the 64 fp16 hi of the row and box 1 the 64 lo, chunk q at
// slot q ^ (r & 7): exactly what step 14's TMA wrote from xh and xl. The thread of half h
// reads box h, its partner (lane ^ 16) box 1 - h; each writes into both boxes.
__device__ __forceinline__ void split_row_in_place(uint8_t* box0, uint8_t* box1, int r, int h,
                                                   float s) {
    const int sw = r & 7;
    const uint8_t* src = (h == 0 ? box0 : box1) + r * 128;
    float4 v[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = *reinterpret_cast<const float4*>(src + ((j ^ sw) << 4));
    __syncwarp();  // the partner has read its box before either of us overwrites it
#pragma unroll
    for (int q = 0; q < 4; ++q) {  // fp16 chunk 4h + q: fp32 chunks 2q, 2q + 1
        uint4 hi, lo;
        split2(v[2 * q].x, v[2 * q].y, s, hi.x, lo.x);
        split2(v[2 * q].z, v[2 * q].w, s, hi.y, lo.y);
        split2(v[2 * q + 1].x, v[2 * q + 1].y, s, hi.z, lo.z);
        split2(v[2 * q + 1].z, v[2 * q + 1].w, s, hi.w, lo.w);
        const int off = r * 128 + (((4 * h + q) ^ sw) << 4);
        *reinterpret_cast<uint4*>(box0 + off) = hi;
        *reinterpret_cast<uint4*>(box1 + off) = lo;
    }
}

// Generic-proxy writes to shared memory, then one barrier of the 128 threads of a warpgroup:
// afterwards wgmma (which reads through the async proxy) sees every thread's writes. The
// barrier id is a constant (1 + consumer; 0 is __syncthreads) so ptxas reserves only those.
template <int kBarrier>
__device__ __forceinline__ void publish_to_wgmma() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    asm volatile("bar.sync %0, 128;" ::"n"(kBarrier) : "memory");
}

}  // namespace

// The row scales of x, as common/fp16x3_split.py computes them: one block per row reduces
// max |x| (NaN as inf) and writes 2**shift and 2**-shift (NaN for a row with inf or NaN).
// Reads x once, writes 8 bytes a row instead of step 14's 4 bytes a value of hi and lo.
extern "C" __global__ void __launch_bounds__(kScaleThreads)
p12_x_row_scales_kernel(const float* __restrict__ x, float* __restrict__ scale,
                        float* __restrict__ inv, int K, int vec4) {
    const float* row = x + static_cast<int64_t>(blockIdx.x) * K;
    // |v|'s bits order like |v| (non-negative floats); min(bits, inf's) turns NaN into inf.
    uint32_t amax = 0;
    if (vec4) {
        for (int i = threadIdx.x; i < K / 4; i += kScaleThreads) {
            const float4 v = __ldg(reinterpret_cast<const float4*>(row) + i);
            amax = max(amax, min(__float_as_uint(fabsf(v.x)), 0x7f800000u));
            amax = max(amax, min(__float_as_uint(fabsf(v.y)), 0x7f800000u));
            amax = max(amax, min(__float_as_uint(fabsf(v.z)), 0x7f800000u));
            amax = max(amax, min(__float_as_uint(fabsf(v.w)), 0x7f800000u));
        }
    } else {
        for (int i = threadIdx.x; i < K; i += kScaleThreads)
            amax = max(amax, min(__float_as_uint(fabsf(__ldg(row + i))), 0x7f800000u));
    }
    amax = __reduce_max_sync(0xffffffffu, amax);
    __shared__ uint32_t warp_max[kScaleThreads / 32];
    if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = amax;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < kScaleThreads / 32; ++w) amax = max(amax, warp_max[w]);
        // amax in [2**(E-127), 2**(E-126)) for biased exponent E: shift = 141 - E puts it in
        // [2**14, 2**15); clamped so 2**shift and 2**-shift stay normal.
        const int biased = static_cast<int>(amax >> 23);
        const int shift = min(max(141 - biased, -126), 126);
        scale[blockIdx.x] = __uint_as_float(static_cast<uint32_t>(shift + 127) << 23);
        inv[blockIdx.x] = biased == 255 ? __uint_as_float(0x7fc00000u)
                                        : __uint_as_float(static_cast<uint32_t>(127 - shift) << 23);
    }
}

extern "C" __global__ void __launch_bounds__(fp::kThreads, 1)
p12_wgmma_fp16x3_fused_split_kernel(const __grid_constant__ CUtensorMap x_map,   // x (M, K) fp32, box 128 x 32
                                    const __grid_constant__ CUtensorMap wh_map,  // wh (N, Kp), box 128 x 64
                                    const __grid_constant__ CUtensorMap wl_map,  // wl (N, Kp)
                                    const float* __restrict__ x_scale,           // (M,) row scale of x
                                    const float* __restrict__ x_inv,             // (M,) its inverse
                                    const float* __restrict__ w_inv,             // (N,)
                                    const float* __restrict__ b,                 // (N,)
                                    float* __restrict__ y,                       // (M, N)
                                    int M, int N, int Kp, float multiplier, float negative_slope,
                                    int pairs_ok) {
    // The pipeline of step 14: full[s] = expect_tx + 64 KB, empty[s] = one arrival per consumer warp.
    __shared__ uint64_t full[fp::kStages], empty[fp::kStages];
    extern __shared__ uint8_t smem_raw[];
    const fp::Ring ring(smem_raw);

    const int m_tiles = (M + fp::BM - 1) / fp::BM, n_tiles = (N + fp::BN - 1) / fp::BN;
    const int tiles = m_tiles * n_tiles;
    const int k_tiles = (Kp + fp::BK - 1) / fp::BK;
    const int warpgroup = threadIdx.x / 128;

    sm90::init_ring(full, empty, fp::kConsumers * 4);
    __syncthreads();  // the last block-wide barrier (id 0); the consumers sync on ids 1 and 2

    if (warpgroup == 0) {
        if (sm90::become_producer<fp::kProducerRegs>(&x_map, &wh_map, &wl_map)) {
            uint32_t it = 0;
            for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
                int mt, nt;
                fp::grouped_tile(t, m_tiles, n_tiles, fp::kGroupM, mt, nt);
                for (int kt = 0; kt < k_tiles; ++kt, ++it) {
                    const int s = it % fp::kStages;
                    sm90::mbar_wait(&empty[s], ((it / fp::kStages) & 1) ^ 1);
                    sm90::mbar_arrive_expect_tx(&full[s], fp::kStageBytes);  // zero fill counts too
                    sm90::tma_load_2d(ring.tile(s, fp::kXh), &x_map, &full[s], kt * fp::BK, mt * fp::BM);
                    sm90::tma_load_2d(ring.tile(s, fp::kXl), &x_map, &full[s], kt * fp::BK + fp::BK / 2,
                                      mt * fp::BM);
                    sm90::tma_load_2d(ring.tile(s, fp::kWh), &wh_map, &full[s], kt * fp::BK, nt * fp::BN);
                    sm90::tma_load_2d(ring.tile(s, fp::kWl), &wl_map, &full[s], kt * fp::BK, nt * fp::BN);
                }
            }
        }
    } else {
        sm90::setmaxnreg_inc<fp::kConsumerRegs>();
        const fp::LeakyReluEpilogue epilogue{x_inv, w_inv, b, y, M, N, multiplier, negative_slope,
                                             pairs_ok != 0};
        const int c = warpgroup - 1;
        const int tw = threadIdx.x % 128;
        // The split's thread map: warp w takes 16 rows, lanes 0-15 box 0 and lanes 16-31 box 1
        // of the same rows. Each 8-lane phase of a 16-byte access then covers 8 rows of one box,
        // 8 different swizzle slots: no bank conflict.
        const int split_row = 64 * c + 16 * (tw / 32) + tw % 16;  // row in the 128-row box
        const int split_half = (tw % 32) / 16;
        uint32_t it = 0;
        for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
            int mt, nt;
            fp::grouped_tile(t, m_tiles, n_tiles, fp::kGroupM, mt, nt);
            const int x_row = mt * fp::BM + split_row;
            const float s_row = x_row < M ? __ldg(x_scale + x_row) : 1.0f;  // zero rows stay zero
            // The split of a k-tile runs while the previous k-tile's cross group is still on the
            // tensor cores (the k-loop's wait<1> left it running); it touches only stage s,
            // which no wgmma in flight reads. Then step 14's k-tile, unchanged.
            const auto split_stage = [&](int s) {
                split_row_in_place(ring.tile(s, fp::kXh), ring.tile(s, fp::kXl), split_row, split_half,
                                   s_row);
                if (c == 0) publish_to_wgmma<1>(); else publish_to_wgmma<2>();
            };
            fp::consume_tile(ring, full, it, k_tiles, c, mt, nt, epilogue,
                             [&](int s) { sm90::mbar_arrive(&empty[s]); }, split_stage);
        }
    }
}

namespace p12 {

const char* launch_x_row_scales(const float* x, float* scale, float* inv, int M, int K,
                                cudaStream_t stream) {
    const bool vec4 = K % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0;
    p12_x_row_scales_kernel<<<M, kScaleThreads, 0, stream>>>(x, scale, inv, K, vec4 ? 1 : 0);
    return nullptr;
}

const char* launch_wgmma_fp16x3_fused_split(const float* x, const float* x_scale,
                                            const float* x_inv, const __half* wh, const __half* wl,
                                            const float* w_inv, const float* b, float* y, int M,
                                            int N, int K, int Kp, float multiplier,
                                            float negative_slope, cudaStream_t stream) {
    if (Kp != (K + fp::BK - 1) / fp::BK * fp::BK) return "the weight split's K must be x's K rounded up to 64";
    CUtensorMap x_map, wh_map, wl_map;
    if (const char* err = sm90::make_tensor_map_f32(&x_map, x, M, K, fp::BM)) return err;
    if (const char* err = sm90::make_tensor_map_f16(&wh_map, wh, N, Kp, fp::BN)) return err;
    if (const char* err = sm90::make_tensor_map_f16(&wl_map, wl, N, Kp, fp::BN)) return err;
    if (cudaFuncSetAttribute(p12_wgmma_fp16x3_fused_split_kernel,
                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(fp::kSmemBytes)) != cudaSuccess) {
        return "cudaFuncSetAttribute (dynamic shared memory) failed";
    }
    int device = 0, sms = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
        return "could not read the multiprocessor count";
    }
    const int64_t tiles = static_cast<int64_t>((M + fp::BM - 1) / fp::BM) * ((N + fp::BN - 1) / fp::BN);
    const int blocks = static_cast<int>(tiles < sms ? tiles : sms);
    const bool pairs_ok = N % 2 == 0 && reinterpret_cast<uintptr_t>(y) % 8 == 0;
    p12_wgmma_fp16x3_fused_split_kernel<<<blocks, fp::kThreads, fp::kSmemBytes, stream>>>(
        x_map, wh_map, wl_map, x_scale, x_inv, w_inv, b, y, M, N, Kp, multiplier, negative_slope,
        pairs_ok ? 1 : 0);
    return nullptr;
}

}  // namespace p12
