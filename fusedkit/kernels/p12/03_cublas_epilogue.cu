// Computes y = LeakyReLU((y + b) * multiplier) in place, after cuBLAS wrote y = x @ W.T (binding.cpp).
// Changed against 01-02: the GEMM goes to cuBLAS (fp32, no TF32); only this epilogue is ours, 4-byte accesses.
// Bound: memory: y read and written once (~2*M*N*4 bytes); y makes one extra trip through HBM.
#include <cstdint>
#include <cuda_runtime.h>

#include "launchers.h"

constexpr int kEpilogueThreads = 256;

// 2-D grid-stride loop: x-threads walk the columns of a row (consecutive threads, consecutive
// addresses: coalesced), y-blocks walk the rows. Knowing (m, n) directly avoids a 64-bit
// division `i % N` per element that a flat index would need to find b[n].
extern "C" __global__ void __launch_bounds__(kEpilogueThreads)
p12_epilogue_scalar_kernel(float* __restrict__ y,        // (M, N), updated in place
                           const float* __restrict__ b,  // (N,)
                           int M, int N, float multiplier, float negative_slope) {
    for (int64_t m = blockIdx.y; m < M; m += gridDim.y) {
        float* y_row = y + m * N;
        for (int64_t n = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; n < N;
             n += static_cast<int64_t>(gridDim.x) * blockDim.x) {
            float v = (y_row[n] + b[n]) * multiplier;  // b[n] is re-read per row: L1/L2 hit
            y_row[n] = v > 0.0f ? v : v * negative_slope;
        }
    }
}

namespace p12 {

void launch_epilogue_scalar(float* y, const float* b, int M, int N,
                            float multiplier, float negative_slope, cudaStream_t stream) {
    // Enough blocks to cover a row once (capped: the x loop strides over longer rows), then
    // as many block rows as keep the grid near kEpilogueTargetBlocks (the y loop strides).
    int64_t col_blocks = (static_cast<int64_t>(N) + kEpilogueThreads - 1) / kEpilogueThreads;
    col_blocks = col_blocks < 1024 ? col_blocks : 1024;
    const dim3 grid(static_cast<unsigned>(col_blocks), epilogue_grid_rows(M, col_blocks));
    p12_epilogue_scalar_kernel<<<grid, kEpilogueThreads, 0, stream>>>(y, b, M, N, multiplier,
                                                                      negative_slope);
}

}  // namespace p12
