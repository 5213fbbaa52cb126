// Host launchers of problem 12's Hopper steps (11-16, 18): y = LeakyReLU((x @ W.T + b) * multiplier,
// slope) with x (M, K) and W (N, K) in fp16 (row-major, contiguous), b (N,) and y (M, N) in fp32.
// Requirements the binding checks: K % 8 == 0 (TMA needs 16-byte row strides) and x, W 16-byte
// aligned. Each launcher only enqueues work on `stream`; it returns nullptr, or a message when
// it could not launch (the tensor map was refused); the caller still checks the launch itself.
// Pure CUDA, no torch headers: binding_hopper.cpp includes it, the .cu steps define the launchers.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace p12 {

// 11: one warpgroup per 128 x 128 tile, TMA into a 3-stage mbarrier pipeline, wgmma m64n128k16.
const char* launch_wgmma_tma(const __half* x, const __half* w, const float* b, float* y, int M,
                             int N, int K, float multiplier, float negative_slope,
                             cudaStream_t stream);

// 12: 128 x 256 tiles; a producer warpgroup (TMA) and two consumer warpgroups (wgmma m64n256k16).
const char* launch_wgmma_warpspec(const __half* x, const __half* w, const float* b, float* y,
                                  int M, int N, int K, float multiplier, float negative_slope,
                                  cudaStream_t stream);

// 13: step 12 made persistent: one block per SM walking the tiles in grouped order.
const char* launch_wgmma_persistent(const __half* x, const __half* w, const float* b, float* y,
                                    int M, int N, int K, float multiplier, float negative_slope,
                                    cudaStream_t stream);

// 14: fp32-faithful from fp16x3 splits (common/fp16x3_split.py): xh, xl (M, K) and wh, wl (N, K)
// fp16 with x = (xh + xl / 2048) * x_inv[:, None], W likewise; 128 x 128 tiles, a producer and
// two consumers (wgmma m64n128k16), persistent as 10. Same K % 8 and alignment requirements.
const char* launch_wgmma_fp16x3(const __half* xh, const __half* xl, const float* x_inv,
                                const __half* wh, const __half* wl, const float* w_inv,
                                const float* b, float* y, int M, int N, int K, float multiplier,
                                float negative_slope, cudaStream_t stream);

// 15: step 14 with x given as fp32 (M, K), K % 4 == 0, contiguous and 16-byte aligned (TMA);
// each consumer splits its rows in shared memory with the row scales x_scale = 1 / x_inv (M,)
// of launch_x_row_scales. wh, wl (N, Kp) as in 12, Kp = K rounded up to 64.
const char* launch_wgmma_fp16x3_fused_split(const float* x, const float* x_scale,
                                            const float* x_inv, const __half* wh, const __half* wl,
                                            const float* w_inv, const float* b, float* y, int M,
                                            int N, int K, int Kp, float multiplier,
                                            float negative_slope, cudaStream_t stream);

// 15's first launch: the power-of-two row scales of x (M, K) fp32, contiguous, as the fp16x3
// split computes them: scale (M,) and inv (M,) = 1 / scale, NaN for a row holding inf or NaN.
const char* launch_x_row_scales(const float* x, float* scale, float* inv, int M, int K,
                                cudaStream_t stream);
// 16: step 14 in clusters of two blocks (two row tiles, one column tile): each block copies one
// of a stage's W boxes (wh or wl) from L2 into both blocks' shared memory (TMA multicast).
const char* launch_wgmma_fp16x3_multicast(const __half* xh, const __half* xl, const float* x_inv,
                                          const __half* wh, const __half* wl, const float* w_inv,
                                          const float* b, float* y, int M, int N, int K,
                                          float multiplier, float negative_slope,
                                          cudaStream_t stream);

// 18: step 14 with each tile's K split over `splits` blocks (whole k-tiles each): each block stores
// its fp32 partial, before the row scales, for rows < M into ws (splits, M, N); a second kernel
// adds the partials in split order, scales, adds b and applies LeakyReLU into y. splits in
// 1 .. ceil(K / 64); wgmma_fp16x3_splitk_splits picks it: SMs / tiles, at least 4 k-tiles a split.
int wgmma_fp16x3_splitk_splits(int M, int N, int K, int sms);
const char* launch_wgmma_fp16x3_splitk(const __half* xh, const __half* xl, const float* x_inv,
                                       const __half* wh, const __half* wl, const float* w_inv,
                                       const float* b, float* ws, float* y, int M, int N, int K,
                                       int splits, float multiplier, float negative_slope,
                                       cudaStream_t stream);

}  // namespace p12
