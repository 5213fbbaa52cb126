// Computes y = LeakyReLU((x @ W.T + b) * multiplier): one thread per output, GEMM and epilogue fused.
// Changed against step 0 (eager: cuBLAS, then elementwise kernels): one kernel, y written once.
// Bound: loads, far below FP32 peak: no on-chip reuse, each FMA loads an x and a W float (8 B / 2 FLOP).
#include <cstdint>
#include <cuda_runtime.h>

#include "launchers.h"

// Block shape: 32 threads along N (one warp = 32 consecutive columns of y), 8 rows of y.
// threadIdx.x along N makes the store y[m, n..n+31] one coalesced 128-byte write and makes
// x[m, k] the same address for the whole warp (a broadcast). W[n, k] is the costly read: the
// 32 lanes touch 32 rows of W, K floats apart, so each load instruction needs 32 sectors;
// consecutive k of one lane hit the same 32-byte sector, so L1 serves 7 of every 8.
// The 8 warps of a block read the same W rows (same n, other m), which L1 also shares.
constexpr int kNaiveBlockX = 32;
constexpr int kNaiveBlockY = 8;

extern "C" __global__ void __launch_bounds__(kNaiveBlockX * kNaiveBlockY)
p12_naive_kernel(const float* __restrict__ x,   // (M, K)
                 const float* __restrict__ w,   // (N, K)
                 const float* __restrict__ b,   // (N,)
                 float* __restrict__ y,         // (M, N)
                 int M, int N, int K, float multiplier, float negative_slope) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N) return;  // whole threads past the right edge have nothing to do
    const float* w_row = w + static_cast<int64_t>(n) * K;  // 64-bit: n * K can pass 2^31
    const float bias = b[n];
    // gridDim.y is capped at 65535, so rows are walked with a grid-stride loop; for
    // M <= 65535 * 8 every thread runs the body once, i.e. one thread per output.
    for (int64_t m = blockIdx.y * static_cast<int64_t>(blockDim.y) + threadIdx.y; m < M;
         m += static_cast<int64_t>(gridDim.y) * blockDim.y) {
        const float* x_row = x + m * K;
        float acc = 0.0f;
        // Plain sequential fp32 sum over k, as a CPU loop would do it.
        for (int k = 0; k < K; ++k) acc = fmaf(x_row[k], w_row[k], acc);
        float v = (acc + bias) * multiplier;   // same order as PyTorch: (x @ W.T + b) * mult
        v = v > 0.0f ? v : v * negative_slope;  // LeakyReLU; NaN stays NaN
        y[m * N + n] = v;
    }
}

namespace p12 {

void launch_naive(const float* x, const float* w, const float* b, float* y,
                  int M, int N, int K, float multiplier, float negative_slope,
                  cudaStream_t stream) {
    const dim3 block(kNaiveBlockX, kNaiveBlockY);
    const int64_t row_blocks = (static_cast<int64_t>(M) + kNaiveBlockY - 1) / kNaiveBlockY;
    const dim3 grid(static_cast<unsigned>((static_cast<int64_t>(N) + kNaiveBlockX - 1) / kNaiveBlockX),
                    static_cast<unsigned>(row_blocks < kMaxGridY ? row_blocks : kMaxGridY));
    p12_naive_kernel<<<grid, block, 0, stream>>>(x, w, b, y, M, N, K, multiplier,
                                                 negative_slope);
}

}  // namespace p12
