// Problem 45's Hopper GEMM, written once for steps 07 (three fp16 products, fp16x3 splits) and 08
// (one fp16 or bf16 product): the persistent warp-specialised pipeline over p12 step 14's 128 x 128 tiles,
// a template on the number of products and on the epilogue it hands each finished fragment, the
// pieces both steps' epilogues share (the overflow-free sigmoid, the per-tile partial logsumexp
// from the registers) and the host side's tensor maps and grid.
// Device and host code, no torch; included by the p45 .cu steps after common/hopper.cuh. Its
// names live in the including file's anonymous namespace, as when they were step 07's own: the
// PTX (and so the mangled names of the shared-memory barriers) of step 07 is the measured one.
#pragma once

#include <cmath>
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <type_traits>

#include "../common/hopper.cuh"
#include "../common/hopper_fp16x3.cuh"
#include "launchers_hopper.h"

namespace {

namespace sm90 = fusedkit::sm90;
namespace fp = fusedkit::fp16x3;

// Tiles, registers and the tile order are p12 step 14's, written once in common/hopper_fp16x3.cuh
// (which says why each number). A stage holds two 16 KB boxes a product term of A and B: four
// (ah, al, bh, bl) for fp16x3, two (a, b) for one product, so one product fits twice the stages.
using fp::BK;
using fp::BM;
using fp::BN;
using fp::kAcc;
using fp::kConsumers;
using fp::kThreads;
static_assert(p45::kHopperLseTile == BN, "the binding sizes pmax, psum with kHopperLseTile");
static_assert(p45::kHopperPad % BK == 0 && p45::kHopperPad % 2 == 0,
              "Hp is a whole number of k-tiles, and even (h is stored in column pairs)");

template <int kProducts>
struct Pipe {
    static_assert(kProducts == 1 || kProducts == 3, "one fp16 product, or fp16x3's three");
    static constexpr int kBoxes = kProducts == 3 ? 4 : 2;  // A's and B's boxes a stage
    static constexpr int kStages = kProducts == 3 ? fp::kStages : 6;  // 192 KB of stages either way
    static constexpr uint32_t kStageBytes = kBoxes * fp::kTileBytes;
    static constexpr size_t kSmemBytes = kStages * kStageBytes + sm90::kSwizzleAtomBytes;
    static_assert(kSmemBytes + 2 * kStages * sizeof(uint64_t) <= 227 * 1024, "shared memory");
    // Box `which` of stage s (fp::Operand's order: A's boxes, then B's), 1024-byte aligned.
    static __device__ __forceinline__ uint8_t* tile(const fp::Ring& ring, int s, int which) {
        return ring.base + s * kStageBytes + which * fp::kTileBytes;
    }
};

constexpr float kNegInf = -INFINITY;

// One m64n128k16 wgmma on 16-bit operands of type Elem: step 08's fp16 or its bf16 twin.
template <class Elem>
__device__ __forceinline__ void wgmma_16bit(float (&d)[kAcc], uint64_t desc_a, uint64_t desc_b) {
    static_assert(std::is_same_v<Elem, __half> || std::is_same_v<Elem, __nv_bfloat16>, "fp16 or bf16");
    if constexpr (std::is_same_v<Elem, __half>) {
        sm90::wgmma_m64n128k16_f16(d, desc_a, desc_b);
    } else {
        sm90::wgmma_m64n128k16_bf16(d, desc_a, desc_b);
    }
}

// ---------------------------------------------------------------------------------------------
// The mainloop, p12 step 14's: a persistent block walks the (M / 128) x (N / 128) tiles in grouped
// order; warpgroup 0 copies a stage's boxes with TMA, warpgroups 1 and 2 each multiply 64 rows by
// 128 columns, from the tensor maps of A and B (fp16x3: also of their lo parts, al and bl; one
// product: al_map and bl_map are unused, nullptr). The caller declares
// the ring's barriers and its dynamic shared memory (their names are its own).
//   fp16x3 (kProducts = 3): per k-tile, hi*hi goes into `chunk` from zero and is added to `sum`
//   with round-to-nearest FADDs while hi*lo + lo*hi accumulate in `cross` on the tensor cores;
//   at the end of a tile v = sum + cross / 2048 (the split product without the row scales).
//   One product (kProducts = 1): a*b accumulates in `acc` on the tensor cores over all of K, one
//   k-tile's group in flight while the next is issued; v = acc. Elem is its operands' type,
//   __half or __nv_bfloat16 (fp16x3's are __half).
// v goes to epilogue(v, params, row0, col0, nt): the calling warpgroup's 64 x 128 fragment whose
// top-left element is (row0, col0) of the output, fragment map in common/hopper.cuh; params is
// what epilogue.load(row0, col0) read from memory (scales, biases) while the tile's last products
// were still running on the tensor cores.
// Not common/hopper_fp16x3.cuh's consume_tile: here the fragments are declared once, before the
// tile loop, and nvcc carries their registers from tile to tile; through consume_tile (a fresh set
// a tile) the PTX differs, and step 07's is the kernel the H200 measured.
template <int kProducts, class Elem = __half, int kStages, class Epilogue>
__device__ __forceinline__ void lse_gemm(uint64_t (&full)[kStages], uint64_t (&empty)[kStages],
                                         uint8_t* smem_raw, const CUtensorMap* a_map,
                                         const CUtensorMap* al_map, const CUtensorMap* b_map,
                                         const CUtensorMap* bl_map, int M, int N, int K,
                                         const Epilogue& epilogue) {
    // full[s]: the producer's expect_tx arrival + the stage's TMA bytes. empty[s]: one arrival per
    // consumer warp (8) once that warp's wgmmas no longer read stage s. `it` counts k-tiles
    // across tiles on both sides: stage it % kStages, parity (it / kStages) & 1.
    using P = Pipe<kProducts>;
    static_assert(kStages == P::kStages, "the caller's ring has the pipe's stages");
    const fp::Ring ring(smem_raw);  // stage s: [A's boxes | B's boxes], 16 KB each

    const int m_tiles = (M + BM - 1) / BM, n_tiles = (N + BN - 1) / BN;
    const int tiles = m_tiles * n_tiles;
    const int k_tiles = (K + BK - 1) / BK;
    const int warpgroup = threadIdx.x / 128;

    sm90::init_ring(full, empty, kConsumers * 4);
    __syncthreads();  // the last block-wide barrier

    if (warpgroup == 0) {
        const bool producer =
            kProducts == 3 ? sm90::become_producer<fp::kProducerRegs>(a_map, al_map, b_map, bl_map)
                           : sm90::become_producer<fp::kProducerRegs>(a_map, b_map);
        if (producer) {
            uint32_t it = 0;
            for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
                int mt, nt;
                fp::grouped_tile(t, m_tiles, n_tiles, fp::kGroupM, mt, nt);
                for (int kt = 0; kt < k_tiles; ++kt, ++it) {
                    const int s = it % kStages;
                    sm90::mbar_wait(&empty[s], ((it / kStages) & 1) ^ 1);
                    // Zero-filled rows past M or N still count their bytes: always a full stage.
                    sm90::mbar_arrive_expect_tx(&full[s], P::kStageBytes);
                    if constexpr (kProducts == 3) {
                        sm90::tma_load_2d(P::tile(ring, s, fp::kXh), a_map, &full[s], kt * BK, mt * BM);
                        sm90::tma_load_2d(P::tile(ring, s, fp::kXl), al_map, &full[s], kt * BK, mt * BM);
                        sm90::tma_load_2d(P::tile(ring, s, fp::kWh), b_map, &full[s], kt * BK, nt * BN);
                        sm90::tma_load_2d(P::tile(ring, s, fp::kWl), bl_map, &full[s], kt * BK, nt * BN);
                    } else {
                        sm90::tma_load_2d(P::tile(ring, s, 0), a_map, &full[s], kt * BK, mt * BM);
                        sm90::tma_load_2d(P::tile(ring, s, 1), b_map, &full[s], kt * BK, nt * BN);
                    }
                }
            }
        }
    } else {
        sm90::setmaxnreg_inc<fp::kConsumerRegs>();
        const int c = warpgroup - 1;
        const bool lane0 = threadIdx.x % 32 == 0;
        // fp16x3: sum over k-tiles of hi*hi, added by FADD.RN outside the tensor cores; one
        // product: the accumulator itself.
        float sum[kAcc];
        float cross[kProducts == 3 ? kAcc : 1];  // hi*lo + lo*hi, accumulated by the MMA over all of K
        float chunk[kProducts == 3 ? kAcc : 1];  // this k-tile's hi*hi, from a zero accumulator
        uint32_t it = 0;
        for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
            int mt, nt;
            fp::grouped_tile(t, m_tiles, n_tiles, fp::kGroupM, mt, nt);
            if constexpr (kProducts == 3) {
#pragma unroll
                for (int i = 0; i < kAcc; ++i) sum[i] = cross[i] = 0.0f;
            } else {
#pragma unroll
                for (int i = 0; i < kAcc; ++i) sum[i] = 0.0f;
            }
            for (int kt = 0; kt < k_tiles; ++kt, ++it) {
                const int s = it % kStages;
                sm90::mbar_wait(&full[s], (it / kStages) & 1);
                if constexpr (kProducts == 3) {
                    const uint32_t ah = sm90::smem_addr(P::tile(ring, s, fp::kXh)) + c * 64 * 128;  // this consumer's 64 rows
                    const uint32_t al = sm90::smem_addr(P::tile(ring, s, fp::kXl)) + c * 64 * 128;
                    const uint32_t bh = sm90::smem_addr(P::tile(ring, s, fp::kWh));
                    const uint32_t bl = sm90::smem_addr(P::tile(ring, s, fp::kWl));
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
                } else {
                    const uint32_t a = sm90::smem_addr(P::tile(ring, s, 0)) + c * 64 * 128;
                    const uint32_t b = sm90::smem_addr(P::tile(ring, s, 1));
                    // acc was zeroed, or read by the epilogue, by plain code: fence before wgmma.
                    sm90::fence_accumulators(sum);
                    sm90::wgmma_fence();
                    // One group: acc += a * b over this k-tile, chained on the same registers.
#pragma unroll
                    for (int k16 = 0; k16 < BK / 16; ++k16) {
                        wgmma_16bit<Elem>(sum, sm90::sw128_desc(a + 32 * k16),
                                          sm90::sw128_desc(b + 32 * k16));
                    }
                    sm90::wgmma_commit();
                    // The previous k-tile's group is done: its stage goes back to the producer.
                    sm90::wgmma_wait<1>();
                    if (kt > 0 && lane0) sm90::mbar_arrive(&empty[(it + kStages - 1) % kStages]);
                }
            }
            // The epilogue's loads go out now, with the last group still on the tensor cores:
            // their latency hides behind it (issued slab by slab inside the epilogue, they kept its
            // warps waiting: notebook 03 shows GEMM1's source pages before and after). The wait
            // below is a memory clobber, so the compiler keeps the loads above it.
            const auto params = epilogue.load(mt * BM + 64 * c, nt * BN);
            sm90::wgmma_wait<0>();  // the last k-tile's products
            if constexpr (kProducts == 3) {
                sm90::fence_accumulators(cross);
            } else {
                sm90::fence_accumulators(sum);
            }
            if (k_tiles > 0 && lane0) sm90::mbar_arrive(&empty[(it + kStages - 1) % kStages]);
            if constexpr (kProducts == 3) fp::add_cross(sum, cross);
            epilogue(sum, params, mt * BM + 64 * c, nt * BN, nt);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// GEMM1's sigmoid. The epilogue runs while the tensor cores wait (both consumers finish a tile
// together): every instruction per value counts (step 07's file says what Nsight Compute found).
//
// scale * sigmoid(z): 1 / (1 + e) for z >= 0 and e / (1 + e) below, e = exp(-|z|) in (0, 1]: exp
// never overflows and a tiny h keeps its relative accuracy. expf is the accurate one (~2 ulp,
// handles -inf); 1 / (1 + e), with 1 + e in [1, 2], is the SFU's reciprocal alone, ~1 ulp: no
// IEEE division with its refinement and slow path, and none of __fdividef's rescaling for a
// divisor above 2**126, which this one never is. `scale` is a power of two (exact). NaN stays
// NaN (z >= 0 is false, e is NaN).
__device__ __forceinline__ float rcp_approx(float a) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(a));
    return r;
}

__device__ __forceinline__ float scaled_sigmoid(float z, float scale) {
    const float e = expf(-fabsf(z));
    const float r = scale * rcp_approx(1.0f + e);  // exact: times a power of two
    return z >= 0.0f ? r : e * r;
}

// ---------------------------------------------------------------------------------------------
// GEMM2's partial logsumexp: per row of the 128-column tile nt, pmax[r, nt] = max over the valid
// columns and psum[r, nt] = sum of exp(z - pmax), exactly common/lse.py's partial_lse_store
// (columns past N are -inf: they lose the max, add exp = 0). Row r0 of the fragment lives in the
// 4 lanes of a quad (lanes 4q .. 4q + 3), 32 values each (2 columns x 16 slabs): a max / sum over
// the thread's values, then over the quad by two butterfly shuffles. A consumer owns whole rows,
// so no other warpgroup is involved.

__device__ __forceinline__ float quad_max(float a) {
    a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, 1));
    return fmaxf(a, __shfl_xor_sync(0xffffffffu, a, 2));
}

__device__ __forceinline__ float quad_sum(float a) {
    a += __shfl_xor_sync(0xffffffffu, a, 1);
    return a + __shfl_xor_sync(0xffffffffu, a, 2);
}

// Step 08's epilogues read their biases and make their logits with the two helpers below; step 07
// keeps its own copies of these loops, since through the helpers its PTX differs from the measured.
//
// The thread's 32 columns of a 128-column tile (16 slabs of 8, two adjacent columns in each) read
// from a per-column vector `src` (a bias, a column scale), zero at columns n and beyond; c0 is the
// thread's first column, col0 + accumulator_col.
__device__ __forceinline__ void load_columns(const float* __restrict__ src, int c0, int n,
                                             float (&out)[BN / 4]) {
#pragma unroll
    for (int i = 0; i < BN / 4; ++i) {
        const int c = c0 + 8 * (i / 2) + i % 2;
        out[i] = c < n ? __ldg(src + c) : 0.0f;
    }
}

// The logits in place: v[...] of column slot i (load_columns' order) becomes
// fma(v, scale, bias) with (scale, bias) = coef(i) at the valid columns, -inf past N; mx gets the
// thread's maximum of each of its two rows r0, r0 + 8.
template <class Coef>
__device__ __forceinline__ void tile_logits(float (&v)[kAcc], int c0, int N, const Coef& coef,
                                            float (&mx)[2]) {
    mx[0] = mx[1] = kNegInf;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        const int c = c0 + 8 * j;
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const bool ok = c + e < N;
            const float2 sb = coef(2 * j + e);
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                float& z = v[4 * j + 2 * h + e];
                z = ok ? __fmaf_rn(z, sb.x, sb.y) : kNegInf;
                mx[h] = fmaxf(mx[h], z);
            }
        }
    }
}

// The pairs of the fragment's two rows r0, r0 + 8 (this thread's) from z, the fragment's logits
// (-inf past N), and mx, the thread's own maxima of them.
__device__ __forceinline__ void store_partial_lse(const float (&z)[kAcc], float (&mx)[2], int r0,
                                                  int nt, int M, int T, float* __restrict__ pmax,
                                                  float* __restrict__ psum) {
    // Every tile holds a valid column (nt * 128 < N), so the max is finite for finite z. A NaN z
    // loses fmaxf but makes its exp, and so psum and out, NaN.
    mx[0] = quad_max(mx[0]);
    mx[1] = quad_max(mx[1]);
    float s[2] = {0.0f, 0.0f};
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            s[h] += expf(z[4 * j + 2 * h] - mx[h]);  // exponents <= 0: in [0, 1]
            s[h] += expf(z[4 * j + 2 * h + 1] - mx[h]);
        }
    }
    s[0] = quad_sum(s[0]);
    s[1] = quad_sum(s[1]);
    if (threadIdx.x % 4 == 0) {  // one lane of the quad stores the row's pair
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

// ---------------------------------------------------------------------------------------------
// Host: the tensor maps of one GEMM (A's boxes of 128 rows x 64 columns, then B's; fp16's maps
// serve bf16 too, since a box is bytes and its zero fill is the same bits in either), the
// shared-memory opt-in, and the persistent grid: one block per SM at most. Returns nullptr or
// what went wrong.
template <int kProducts, class Kernel>
const char* prepare(Kernel kernel, CUtensorMap (&maps)[Pipe<kProducts>::kBoxes],
                    const void* const (&a)[Pipe<kProducts>::kBoxes / 2], int a_rows,
                    const void* const (&b)[Pipe<kProducts>::kBoxes / 2], int b_rows, int K,
                    int& blocks) {
    constexpr int kHalf = Pipe<kProducts>::kBoxes / 2;
    for (int i = 0; i < kHalf; ++i) {
        if (const char* err = sm90::make_tensor_map_f16(&maps[i], a[i], a_rows, K, BM)) return err;
        if (const char* err = sm90::make_tensor_map_f16(&maps[kHalf + i], b[i], b_rows, K, BN)) return err;
    }
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(Pipe<kProducts>::kSmemBytes)) != cudaSuccess) {
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
