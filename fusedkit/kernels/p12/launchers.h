// Host launchers of problem 12's CUDA steps: y = LeakyReLU((x @ W.T + b) * multiplier, slope).
// Shapes (row-major, contiguous): x is (M, K), W is (N, K) (nn.Linear's weight), b is (N,),
// y is (M, N). Every launcher only enqueues work on `stream` and returns at once; the caller
// checks the launch (C10_CUDA_KERNEL_LAUNCH_CHECK in binding.cpp). Pure CUDA: no torch headers,
// so each .cu that includes this file still compiles alone with `nvcc -ptx`.
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

#include "../common/grid.h"

namespace p12 {

// Block tiles of steps 05, 06 and 07 (rows of y, columns of y). The binding needs them to check
// that the grid fits: ceil(M / rows per block) blocks go on gridDim.y, which is at most 65535.
constexpr int kSmemTile = 32;
constexpr int kRegisterTileBlockM = 64;
constexpr int kRegisterTileBlockN = 64;
constexpr int kTiledBlockM = 128;
constexpr int kTiledBlockN = 128;
// The epilogue grid (kMaxGridY, kEpilogueTargetBlocks, epilogue_grid_rows) is shared with p45.
using fusedkit::epilogue_grid_rows;
using fusedkit::kEpilogueTargetBlocks;
using fusedkit::kMaxGridY;

// 01: one thread per y[m, n]; GEMM + bias + multiply + LeakyReLU in one kernel, no tiling.
void launch_naive(const float* x, const float* w, const float* b, float* y,
                  int M, int N, int K, float multiplier, float negative_slope,
                  cudaStream_t stream);

// 02: as 01, with W given transposed, wt (K, N), so that a warp's loads of it are coalesced.
void launch_coalesced(const float* x, const float* wt, const float* b, float* y,
                      int M, int N, int K, float multiplier, float negative_slope,
                      cudaStream_t stream);

// 03: epilogue only, in place on y = x @ W.T (the GEMM ran in cuBLAS before):
// y[m, n] = LeakyReLU((y[m, n] + b[n]) * multiplier). Scalar 4-byte loads and stores.
void launch_epilogue_scalar(float* y, const float* b, int M, int N,
                            float multiplier, float negative_slope, cudaStream_t stream);

// 04: the same epilogue with 16-byte float4 loads and stores when N % 4 == 0 and y, b are
// 16-byte aligned; otherwise it launches a scalar fallback (same result, slower).
// Measured before (H200, M = 1024, N = 8192, epilogue alone, 67 MB moved): one float4 per
// thread per row, the 03 grid (8 x 256 blocks, 4 rows in turn per thread): 22.3 us =
// 3015 GB/s, 96% of a same-size device-to-device copy (3127 GB/s), 71% of a 2 GiB copy
// (4248 GB/s). Now: each thread loads its float4 column in 4 rows (and one bias float4) before
// any store, exact grid of 8 x 256 blocks, 28 registers, 8 blocks per SM. Prediction, not yet
// measured: 4x the loads in flight (128 KB instead of 32 KB per SM) lift the latency limit,
// 18-19.5 us = 3.4-3.7 TB/s = 81-88% of the 2 GiB copy (target: >= 80%, <= 19.7 us).
void launch_epilogue_vec4(float* y, const float* b, int M, int N,
                          float multiplier, float negative_slope, cudaStream_t stream);

// True when launch_epilogue_vec4 takes its float4 fast path for these arguments.
bool epilogue_vec4_fast_path(const float* y, const float* b, int N);

// 05: 32x32 tiles of x and W staged in shared memory, one output per thread, epilogue fused.
// Any M, N, K >= 1; requires ceil(M / 32) <= 65535.
void launch_smem_tiles(const float* x, const float* w, const float* b, float* y,
                       int M, int N, int K, float multiplier, float negative_slope,
                       cudaStream_t stream);

// 06: 64x64 block tiles, 8 outputs of one column per thread (1-D register tiling), epilogue
// fused. Any M, N, K >= 1; requires ceil(M / 64) <= 65535.
void launch_register_tiles(const float* x, const float* w, const float* b, float* y,
                           int M, int N, int K, float multiplier, float negative_slope,
                           cudaStream_t stream);

// 07: shared-memory tiled SGEMM (128x128 block tile, 8x8 outputs per thread) with the
// epilogue fused into its store. Any M, N, K >= 1; requires ceil(M / 128) <= 65535.
void launch_tiled(const float* x, const float* w, const float* b, float* y,
                  int M, int N, int K, float multiplier, float negative_slope,
                  cudaStream_t stream);

// 17: small batches: each warp streams 4 rows of W once (float4 loads, scalar fallback when
// K % 4 != 0 or x, W are not 16-byte aligned) against up to kSmallBatchRows rows of x per
// launch row; fp32 FMAs, epilogue fused. Any M, N, K >= 1; ceil(M / kSmallBatchRows) <= 65535.
constexpr int kSmallBatchRows = 16;
void launch_small_batch(const float* x, const float* w, const float* b, float* y,
                        int M, int N, int K, float multiplier, float negative_slope,
                        cudaStream_t stream);

}  // namespace p12
