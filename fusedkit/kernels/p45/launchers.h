// Host launchers of problem 45's CUDA steps: out[m] = logsumexp_n(sigmoid(x @ W1.T + b1) @ W2.T + b2)[m, n].
// Shapes (row-major, contiguous): x is (M, K), W1 is (H, K), b1 is (H,), W2 is (N, H), b2 is (N,),
// the intermediates h = sigmoid(x @ W1.T + b1) is (M, H) and z = h @ W2.T + b2 is (M, N), out is
// (M,). Every launcher only enqueues work on `stream` and returns at once; the caller checks the
// launch (C10_CUDA_KERNEL_LAUNCH_CHECK in binding.cpp). Pure CUDA: no torch headers, so each .cu
// that includes this file still compiles alone with `nvcc -ptx`.
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

#include "../common/grid.h"

namespace p45 {

// The epilogue grid (kMaxGridY, kEpilogueTargetBlocks, epilogue_grid_rows), as p12's.
using fusedkit::epilogue_grid_rows;
using fusedkit::kEpilogueTargetBlocks;
using fusedkit::kMaxGridY;

// The logsumexp kernels (02, 03) give one warp to one row of z at a time, in blocks of kLseWarps
// warps. 02's grid: at most kLseMaxBlocks blocks, warps stride over the rows beyond
// (M > 8 * 2048 = 16384); at the default M = 16384 exactly one row per warp. 03 sizes its own,
// persistent grid (as many blocks as fit at once), so that each warp has a next row to prefetch.
constexpr int kLseWarps = 8;
constexpr int kLseThreads = 32 * kLseWarps;
constexpr int64_t kLseMaxBlocks = 2048;

inline unsigned lse_grid_blocks(int64_t M) {
    int64_t blocks = (M + kLseWarps - 1) / kLseWarps;
    blocks = blocks < 1 ? 1 : blocks;
    return static_cast<unsigned>(blocks < kLseMaxBlocks ? blocks : kLseMaxBlocks);
}

// 01: three untiled kernels, one thread per output of each stage:
// h[m, j] = sigmoid(x[m] . W1[j] + b1[j]), then z[m, n] = h[m] . W2[n] + b2[n], then
// out[m] = logsumexp_n z[m, n] (one thread per row). h (M, H) and z (M, N) are scratch
// buffers the caller allocates. Needs M, K, H, N >= 1.
void launch_naive(const float* x, const float* w1, const float* b1, const float* w2,
                  const float* b2, float* h, float* z, float* out,
                  int M, int K, int H, int N, cudaStream_t stream);

// 02 (a): in place on h = x @ W1.T (cuBLAS wrote it): h[m, j] = sigmoid(h[m, j] + b1[j]).
// Scalar 4-byte loads and stores.
void launch_sigmoid_scalar(float* h, const float* b1, int M, int H, cudaStream_t stream);

// 02 (b): out[m] = logsumexp_n(z[m, n] + b2[n]) for z = h @ W2.T (cuBLAS wrote it), one warp per
// row, 4-byte loads, max-subtracted (online per lane, then a shuffle combine). Any N >= 1.
void launch_lse_scalar(const float* z, const float* b2, float* out, int M, int N,
                       cudaStream_t stream);

// 03 (a): the sigmoid epilogue with 16-byte float4 loads and stores when H % 4 == 0 and h, b1 are
// 16-byte aligned; otherwise it launches 02's scalar kernel (same result, slower).
void launch_sigmoid_vec4(float* h, const float* b1, int M, int H, cudaStream_t stream);

// 03 (b): the logsumexp reduction with float4 loads, 8 per lane per chunk, the next chunk's
// loads in flight while the current one is reduced, when N % 4 == 0 and z, b2 are 16-byte
// aligned; otherwise 02's scalar kernel. `version` picks one of its three versions (1, 2, or 3,
// the current one), whose H200 timings are in 03's comments; any other value means 3. The
// scalar 02 kernel keeps the exact online form, one expf per value.
void launch_lse_vec4(const float* z, const float* b2, float* out, int M, int N,
                     cudaStream_t stream, int version = 3);

// True when the vec4 launchers take their float4 path: cols % 4 == 0 (a float4 never straddles
// two rows) and both base pointers 16-byte aligned.
bool vec4_fast_path(const float* t, const float* b, int cols);

#if defined(__CUDACC__)
// ----------------------------------------------------------------------------------------
// Device math shared by the kernel files (nvcc only; binding.cpp, compiled by the host
// compiler, sees none of it). One definition, so every step computes sigmoid and combines
// logsumexp partials the same way.

// sigmoid as PyTorch writes it in fp32, 1 / (1 + exp(-v)): exp(-v) overflows to inf for
// v < -88.7, giving exactly 0, and underflows to 0 for large v, giving exactly 1; NaN stays NaN.
// The division is __fdividef (div.approx.f32, within 2 ulp for these denominators, which lie in
// [1, inf]; 1 / inf = 0): the IEEE division `1.0f / d`, and __frcp_rn too, make ptxas emit a
// slow-path subroutine call whose frame it reports as 4-8 bytes of spills in the epilogue
// kernels. 2 ulp (~2.4e-7 relative) is far below the 1e-5 bar of the fp32 checks.
__device__ __forceinline__ float sigmoid(float v) { return __fdividef(1.0f, 1.0f + expf(-v)); }

// Partial logsumexp of some values v_i: their max m and s = sum_i exp(v_i - m), so that
// logsumexp = m + log(s). The empty set is (-inf, 0). Subtracting the max keeps every exp
// <= 1: no overflow for large values, and s >= 1 once a finite value has been seen.
struct LseState {
    float m;
    float s;
};

__device__ __forceinline__ LseState lse_empty() { return {-INFINITY, 0.0f}; }

// exp(v - m) for v <= m, also when v == m is infinite, where v - m would be inf - inf = NaN:
// then 1. Counting a -inf as exp(0) while m is -inf is harmless, the count is scaled by
// exp(-inf - m') = 0 as soon as a finite max m' arrives, and a row of only -inf ends as
// -inf + log(count) = -inf; a +inf max ends as +inf + log(s) = +inf, as torch.logsumexp.
// A NaN v gives NaN (NaN == m is false, exp(NaN) is NaN), which then stays in s.
__device__ __forceinline__ float exp_below(float v, float m) {
    return v == m ? 1.0f : expf(v - m);
}

// Adds one value: online max and rescaled sum. The max never becomes NaN (NaN > m is false);
// a NaN value turns s into NaN through exp_below instead, so the result is NaN.
__device__ __forceinline__ void lse_push(LseState& st, float v) {
    if (v > st.m) {
        st.s = st.s * exp_below(st.m, v) + 1.0f;
        st.m = v;
    } else {
        st.s += exp_below(v, st.m);
    }
}

// Combines two partials: both sums rescaled to the larger max.
__device__ __forceinline__ LseState lse_merge(LseState a, LseState b) {
    const float m = fmaxf(a.m, b.m);
    return {m, a.s * exp_below(a.m, m) + b.s * exp_below(b.m, m)};
}

// Butterfly over the 32 lanes of a warp: after 5 shuffle steps every lane holds the
// combination of all 32 partials (the (max, sum) pair travels as two shuffles). All 32 lanes
// must call it (full mask): the kernels call it in warp-uniform control flow.
__device__ __forceinline__ LseState warp_lse_allreduce(LseState st) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        const LseState other{__shfl_xor_sync(0xffffffffu, st.m, offset),
                             __shfl_xor_sync(0xffffffffu, st.s, offset)};
        st = lse_merge(st, other);
    }
    return st;
}

// The row's logsumexp from its combined partial: m + log(s); -inf for an all -inf row.
__device__ __forceinline__ float lse_value(LseState st) { return st.m + logf(st.s); }
#endif  // __CUDACC__

}  // namespace p45
