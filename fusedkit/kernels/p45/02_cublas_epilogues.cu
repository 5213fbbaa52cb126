// Computes the epilogues after cuBLAS's GEMMs: h = sigmoid(h + b1) in place, out = logsumexp(z + b2).
// Changed against 01: both GEMMs go to cuBLAS (fp32, no TF32); b2 added inside the reduction, z read once.
// Bound: memory: h read and written (2*M*H*4 bytes), z read once (M*N*4 bytes).
#include <cstdint>
#include <cuda_runtime.h>

#include "launchers.h"

constexpr int kEpilogueThreads = 256;

// (a) h[m, j] = sigmoid(h[m, j] + b1[j]), in place. 2-D grid-stride loop as p12's scalar
// epilogue: x-threads walk the columns of a row (consecutive threads, consecutive addresses:
// coalesced), y-blocks walk the rows; knowing (m, j) gives b1's index without a division.
extern "C" __global__ void __launch_bounds__(kEpilogueThreads)
p45_sigmoid_scalar_kernel(float* __restrict__ h,          // (M, H), updated in place
                          const float* __restrict__ b1,   // (H,)
                          int M, int H) {
    for (int64_t m = blockIdx.y; m < M; m += gridDim.y) {
        float* h_row = h + m * H;
        for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < H;
             j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
            h_row[j] = p45::sigmoid(h_row[j] + b1[j]);  // b1[j] is re-read per row: L1/L2 hit
        }
    }
}

// (b) out[m] = logsumexp_n(z[m, n] + b2[n]), one warp per row of z (M, N).
// Lane l reads columns l, l + 32, l + 64, ...: each load instruction of the warp is 128
// contiguous bytes (coalesced), and keeps its own online (max, sum) pair; then 5 shuffle
// steps combine the 32 pairs. z is only read; b2 goes through the read-only path (__ldg:
// ld.global.nc), where every row after the first finds it in L1/L2.
// Warps stride over the rows beyond gridDim.x * 8 (launchers.h: at most 2048 blocks). The
// row loop's trip count depends only on the warp index, so all 32 lanes reach the shuffles
// together, as the full mask requires, also when N < 32 leaves some lanes without columns
// (they contribute the empty pair (-inf, 0)).
extern "C" __global__ void __launch_bounds__(p45::kLseThreads)
p45_lse_scalar_kernel(const float* __restrict__ z,    // (M, N)
                      const float* __restrict__ b2,   // (N,)
                      float* __restrict__ out,        // (M,)
                      int M, int N) {
    const int lane = threadIdx.x % 32;
    const int64_t first_row = static_cast<int64_t>(blockIdx.x) * p45::kLseWarps + threadIdx.x / 32;
    const int64_t row_stride = static_cast<int64_t>(gridDim.x) * p45::kLseWarps;
    for (int64_t m = first_row; m < M; m += row_stride) {
        const float* z_row = z + m * N;
        p45::LseState st = p45::lse_empty();
        for (int n = lane; n < N; n += 32) p45::lse_push(st, z_row[n] + __ldg(b2 + n));
        st = p45::warp_lse_allreduce(st);
        if (lane == 0) out[m] = p45::lse_value(st);
    }
}

namespace p45 {

void launch_sigmoid_scalar(float* h, const float* b1, int M, int H, cudaStream_t stream) {
    // Enough blocks to cover a row once (capped: the x loop strides over longer rows), then
    // as many block rows as keep the grid near kEpilogueTargetBlocks (the y loop strides).
    int64_t col_blocks = (static_cast<int64_t>(H) + kEpilogueThreads - 1) / kEpilogueThreads;
    col_blocks = col_blocks < 1024 ? col_blocks : 1024;
    const dim3 grid(static_cast<unsigned>(col_blocks), epilogue_grid_rows(M, col_blocks));
    p45_sigmoid_scalar_kernel<<<grid, kEpilogueThreads, 0, stream>>>(h, b1, M, H);
}

void launch_lse_scalar(const float* z, const float* b2, float* out, int M, int N,
                       cudaStream_t stream) {
    p45_lse_scalar_kernel<<<lse_grid_blocks(M), kLseThreads, 0, stream>>>(z, b2, out, M, N);
}

}  // namespace p45
