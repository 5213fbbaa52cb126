// Host launchers of problem 45's Hopper steps: the two GEMMs of
// out[m] = logsumexp_n(sigmoid(x @ W1.T + b1) @ W2.T + b2)[m, n] on wgmma, step 07's on fp16x3
// splits (common/fp16x3_split.py: A = (hi + lo / 2048) * inv_scale[row], hi and lo fp16, K padded
// to 64), step 08's on one fp16 (or bf16) copy of each operand (common/fp16_operands.py, K padded to 8).
// Requirements the binding checks: K % 8 == 0 (TMA needs 16-byte row strides), fp16 operands
// 16-byte aligned and contiguous. Each launcher only enqueues work on `stream`; it returns nullptr,
// or a message when it could not launch; the caller still checks the launch itself.
// Pure CUDA, no torch headers: binding_hopper.cpp includes it, 07_wgmma_fp16x3_lse.cu and
// 08_wgmma_fp16_lse.cu define them.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace p45 {

// h's split has ONE scale for every row: hs = h * kHopperHScale, h = (hh + hl / 2048) / kHopperHScale.
constexpr float kHopperHScale = 16384.0f;  // 2**14: h in [0, 1] puts hs in [0, 2**14]
constexpr int kHopperPad = 64;       // Hp = H rounded up to this (the splits' K_ALIGN)
constexpr int kHopperLseTile = 128;  // columns of z per partial logsumexp pair: T = cdiv(N, 128)

// GEMM1: h = sigmoid(x @ W1.T + b1) stored split: hh, hl (M, Hp) fp16, Hp = H rounded up to
// kHopperPad, columns H .. Hp - 1 written as zeros. xh, xl (M, K) and wh, wl (H, K) fp16 with
// the same padded K; x_inv (M,), w_inv (H,), b (H,) fp32.
const char* launch_wgmma_fp16x3_sigmoid_split(const __half* xh, const __half* xl, const float* x_inv,
                                              const __half* wh, const __half* wl,
                                              const float* w_inv, const float* b, __half* hh,
                                              __half* hl, int M, int H, int K, int Hp,
                                              cudaStream_t stream);

// GEMM2: z = h @ W2.T + b2 with h = (hh + hl / 2048) * h_inv, hh, hl (M, K) and wh, wl (N, K) fp16
// (K = Hp); w_inv (N,), b (N,) fp32. z is never stored: per row m and 128-column tile t,
// pmax[m, t] = max_n z[m, n] and psum[m, t] = sum_n exp(z[m, n] - pmax[m, t]) over the tile's
// columns n < N (common/lse.py's pairs); pmax, psum are (M, T) fp32, T = cdiv(N, kHopperLseTile).
const char* launch_wgmma_fp16x3_partial_lse(const __half* hh, const __half* hl, float h_inv,
                                            const __half* wh, const __half* wl, const float* w_inv,
                                            const float* b, float* pmax, float* psum, int M,
                                            int N, int K, cudaStream_t stream);

// Step 08's GEMM1: h = sigmoid(x @ W1.T + b1) rounded once to Elem, h (M, Hp) as above, columns
// H .. Hp - 1 written as zeros; x (M, K) and w (H, K) of Elem (__half or __nv_bfloat16, the two
// 08_wgmma_fp16_lse.cu instantiates), b (H,) fp32.
template <class Elem>
const char* launch_wgmma_16bit_sigmoid(const Elem* x, const Elem* w, const float* b, Elem* h,
                                       int M, int H, int K, int Hp, cudaStream_t stream);

// Step 08's GEMM2: the pairs pmax, psum (M, T) of z = h @ W2.T + b2 as above, h (M, K) and
// w (N, K) of Elem (K = Hp), b (N,) fp32.
template <class Elem>
const char* launch_wgmma_16bit_partial_lse(const Elem* h, const Elem* w, const float* b,
                                           float* pmax, float* psum, int M, int N, int K,
                                           cudaStream_t stream);

}  // namespace p45
