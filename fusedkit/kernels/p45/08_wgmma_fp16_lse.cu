// Computes out = logsumexp(sigmoid(x @ W1.T + b1) @ W2.T + b2) with one fp16 (or bf16) product per term on wgmma.
// Changed against 07: one 16-bit copy of x, W1, W2 and h instead of fp16x3 splits: one product, not three.
// Bound: fp16 tensor compute, one product of 412 GFLOP; predicted 0.42 ms at 989 TFLOP/s (H200 datasheet).
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <type_traits>

#include "../common/hopper.cuh"
#include "hopper_lse.cuh"
#include "launchers_hopper.h"

namespace {

// Shapes: GEMM1 multiplies x16 (M, Kp) by W1's 16-bit copy (H, Kp); GEMM2 multiplies h (M, Hp) by
// W2's copy (N, Hp); all K-contiguous, Kp padded with zeros to a multiple of 8 (TMA's 16-byte
// rows), Hp to 64 as in step 07. Step 07's pipeline (hopper_lse.cuh) with one product: a stage is
// two 16 KB boxes, so six stages fit where step 07 has three. Elem, the operands' and h's type, is
// __half (fp16: 11 significant bits) or __nv_bfloat16 (bf16: 8 bits, fp32's range): the same
// kernels apart from the wgmma's type and h's rounding.
using Pipe1 = Pipe<1>;

// The ring's barriers and shared memory (their PTX names are this function's), and the pipeline.
template <class Elem, class Epilogue>
__device__ __forceinline__ void one_product_gemm(const CUtensorMap* a_map, const CUtensorMap* b_map,
                                                 int M, int N, int K, const Epilogue& epilogue) {
    __shared__ uint64_t full[Pipe1::kStages], empty[Pipe1::kStages];
    extern __shared__ uint8_t smem_raw[];
    lse_gemm<1, Elem>(full, empty, smem_raw, a_map, nullptr, b_map, nullptr, M, N, K, epilogue);
}

// Two adjacent values of h, each rounded once to nearest, as one 4-byte store.
__device__ __forceinline__ void store_pair(__half* at, float a, float b) {
    *reinterpret_cast<__half2*>(at) = __floats2half2_rn(a, b);
}

__device__ __forceinline__ void store_pair(__nv_bfloat16* at, float a, float b) {
    *reinterpret_cast<__nv_bfloat162*>(at) = __floats2bfloat162_rn(a, b);
}

// What both epilogues read before the tile's last products are done: the bias (of n columns) at
// the thread's 32 columns, zero past n.
struct BiasColumns {
    const float* __restrict__ b;
    int n;

    struct Params {
        float b[BN / 4];
    };

    __device__ __forceinline__ Params load(int, int col0) const {
        Params p;
        load_columns(b, col0 + sm90::accumulator_col(threadIdx.x % 128), n, p.b);
        return p;
    }
};

// GEMM1's epilogue: h = Elem(sigmoid(v + b1[c])), rounded once to nearest; columns H .. Hp - 1
// (the padding GEMM2 sums over) written as zeros, so every element of h is written by some tile.
// Each thread's two adjacent columns go out as one 4-byte store.
template <class Elem>
struct Sigmoid16 : BiasColumns {  // b1 (H,)
    Elem* __restrict__ h;         // (M, Hp)
    int M, H, Hp;

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
            for (int r = 0; r < 2; ++r) {  // rows r0, r0 + 8
                if (r0 + 8 * r >= M) continue;
                float hv[2];
#pragma unroll
                for (int e = 0; e < 2; ++e) {  // past H: b = 0, the select drops it, no branch
                    const float sig = scaled_sigmoid(v[4 * j + 2 * r + e] + p.b[2 * j + e], 1.0f);
                    hv[e] = ok[e] ? sig : 0.0f;
                }
                store_pair(h + static_cast<int64_t>(r0 + 8 * r) * Hp + c, hv[0], hv[1]);
            }
        }
    }
};

// GEMM2's epilogue: z = v + b2[c], never stored, reduced to the tile's per-row (max, sum-exp)
// pairs by hopper_lse.cuh's store_partial_lse, as in step 07.
struct PartialLse16 : BiasColumns {  // b2 (N,)
    float* __restrict__ pmax;           // (M, T), T = cdiv(N, 128)
    float* __restrict__ psum;           // (M, T)
    int M, N, T;

    __device__ __forceinline__ void operator()(float (&v)[kAcc], const Params& p, int row0,
                                               int col0, int nt) const {
        const int t = threadIdx.x % 128;
        float mx[2];  // rows r0, r0 + 8
        // fma(v, 1, b) is v + b exactly.
        tile_logits(v, col0 + sm90::accumulator_col(t), N, [&](int i) { return make_float2(1.0f, p.b[i]); }, mx);
        store_partial_lse(v, mx, row0 + sm90::accumulator_row(t), nt, M, T, pmax, psum);
    }
};

}  // namespace

// GEMM1: h = Elem(sigmoid(x @ W1.T + b1)). x_map (M, Kp) and w_map (H, Kp): boxes of 128 rows x 64
// columns; one kernel a type, extern "C" for its plain name in PTX and the profiles.
template <class Elem>
__device__ __forceinline__ void sigmoid_gemm(const CUtensorMap& x_map, const CUtensorMap& w_map,
                                             const float* b, Elem* h, int M, int H, int K, int Hp) {
    one_product_gemm<Elem>(&x_map, &w_map, M, H, K, Sigmoid16<Elem>{{b, H}, h, M, H, Hp});
}

extern "C" __global__ void __launch_bounds__(kThreads, 1)
p45_wgmma_fp16_sigmoid_kernel(const __grid_constant__ CUtensorMap x_map,
                              const __grid_constant__ CUtensorMap w_map, const float* __restrict__ b,
                              __half* __restrict__ h, int M, int H, int K, int Hp) {
    sigmoid_gemm(x_map, w_map, b, h, M, H, K, Hp);
}

extern "C" __global__ void __launch_bounds__(kThreads, 1)
p45_wgmma_bf16_sigmoid_kernel(const __grid_constant__ CUtensorMap x_map,
                              const __grid_constant__ CUtensorMap w_map, const float* __restrict__ b,
                              __nv_bfloat16* __restrict__ h, int M, int H, int K, int Hp) {
    sigmoid_gemm(x_map, w_map, b, h, M, H, K, Hp);
}

// GEMM2: pmax, psum of z = h @ W2.T + b2. h_map (M, Hp) and w_map (N, Hp).
template <class Elem>
__device__ __forceinline__ void partial_lse_gemm(const CUtensorMap& h_map, const CUtensorMap& w_map,
                                                 const float* b, float* pmax, float* psum, int M,
                                                 int N, int K, int T) {
    one_product_gemm<Elem>(&h_map, &w_map, M, N, K, PartialLse16{{b, N}, pmax, psum, M, N, T});
}

extern "C" __global__ void __launch_bounds__(kThreads, 1)
p45_wgmma_fp16_partial_lse_kernel(const __grid_constant__ CUtensorMap h_map,
                                  const __grid_constant__ CUtensorMap w_map,
                                  const float* __restrict__ b, float* __restrict__ pmax,
                                  float* __restrict__ psum, int M, int N, int K, int T) {
    partial_lse_gemm<__half>(h_map, w_map, b, pmax, psum, M, N, K, T);
}

extern "C" __global__ void __launch_bounds__(kThreads, 1)
p45_wgmma_bf16_partial_lse_kernel(const __grid_constant__ CUtensorMap h_map,
                                  const __grid_constant__ CUtensorMap w_map,
                                  const float* __restrict__ b, float* __restrict__ pmax,
                                  float* __restrict__ psum, int M, int N, int K, int T) {
    partial_lse_gemm<__nv_bfloat16>(h_map, w_map, b, pmax, psum, M, N, K, T);
}

namespace {

// The fp16 one of two things, or the bf16 one, by Elem.
template <class Elem, class F16, class BF16>
constexpr auto of_type(F16 fp16, BF16 bf16) {
    if constexpr (std::is_same_v<Elem, __half>) {
        return fp16;
    } else {
        return bf16;
    }
}

}  // namespace

namespace p45 {

template <class Elem>
const char* launch_wgmma_16bit_sigmoid(const Elem* x, const Elem* w, const float* b, Elem* h,
                                       int M, int H, int K, int Hp, cudaStream_t stream) {
    if (Hp % kHopperPad != 0 || Hp < H || Hp - H >= kHopperPad) {
        return "Hp must be H rounded up to a multiple of kHopperPad";
    }
    const auto kernel = of_type<Elem>(p45_wgmma_fp16_sigmoid_kernel, p45_wgmma_bf16_sigmoid_kernel);
    CUtensorMap maps[2];
    int blocks = 0;
    if (const char* err = prepare<1>(kernel, maps, {x}, M, {w}, H, K, blocks)) return err;
    kernel<<<blocks, kThreads, Pipe1::kSmemBytes, stream>>>(maps[0], maps[1], b, h, M, H, K, Hp);
    return nullptr;
}

template <class Elem>
const char* launch_wgmma_16bit_partial_lse(const Elem* h, const Elem* w, const float* b,
                                           float* pmax, float* psum, int M, int N, int K,
                                           cudaStream_t stream) {
    const auto kernel = of_type<Elem>(p45_wgmma_fp16_partial_lse_kernel, p45_wgmma_bf16_partial_lse_kernel);
    CUtensorMap maps[2];
    int blocks = 0;
    if (const char* err = prepare<1>(kernel, maps, {h}, M, {w}, N, K, blocks)) return err;
    const int T = (N + kHopperLseTile - 1) / kHopperLseTile;
    kernel<<<blocks, kThreads, Pipe1::kSmemBytes, stream>>>(maps[0], maps[1], b, pmax, psum, M, N, K, T);
    return nullptr;
}

// The two types the binding launches.
template const char* launch_wgmma_16bit_sigmoid(const __half*, const __half*, const float*, __half*,
                                                int, int, int, int, cudaStream_t);
template const char* launch_wgmma_16bit_sigmoid(const __nv_bfloat16*, const __nv_bfloat16*,
                                                const float*, __nv_bfloat16*, int, int, int, int,
                                                cudaStream_t);
template const char* launch_wgmma_16bit_partial_lse(const __half*, const __half*, const float*,
                                                    float*, float*, int, int, int, cudaStream_t);
template const char* launch_wgmma_16bit_partial_lse(const __nv_bfloat16*, const __nv_bfloat16*,
                                                    const float*, float*, float*, int, int, int,
                                                    cudaStream_t);

}  // namespace p45
