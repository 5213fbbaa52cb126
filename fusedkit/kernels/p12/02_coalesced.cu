// Computes y = LeakyReLU((x @ W.T + b) * multiplier): one thread per output, W read as Wt (K, N).
// Changed against 01: W transposed once per weight version, so a warp's W load is one 128-byte line, not 32.
// Bound: L1 throughput, two load wavefronts (an x broadcast, a Wt line) per warp-wide FMA; far below FP32 peak.
#include <cstdint>
#include <cuda_runtime.h>

#include "launchers.h"

// Block shape as step 01: 32 threads along N (one warp = 32 consecutive columns of y), 8 rows.
// Step 01's lanes read W[n..n+31, k]: 32 rows K floats apart, 32 sectors in 32 lines per load.
// y = x @ W.T takes both operands along k, so no mapping of threads to (m, n) makes that read
// contiguous; the layout does. In Wt (K, N), row k holds W[0..N-1, k], and the warp's 32 lanes
// read Wt[k, n..n+31]: 128 contiguous bytes, 4 sectors of one line per load. x[m, k] is still
// one address for the whole warp (a broadcast), and the store of y[m, n..n+31] one 128-byte line.
constexpr int kCoalescedBlockX = 32;
constexpr int kCoalescedBlockY = 8;

extern "C" __global__ void __launch_bounds__(kCoalescedBlockX * kCoalescedBlockY)
p12_coalesced_kernel(const float* __restrict__ x,   // (M, K)
                     const float* __restrict__ wt,  // (K, N): W transposed
                     const float* __restrict__ b,   // (N,)
                     float* __restrict__ y,         // (M, N)
                     int M, int N, int K, float multiplier, float negative_slope) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N) return;  // whole threads past the right edge have nothing to do
    const float* w_col = wt + n;  // column n of Wt; Wt[k, n] lies k * N floats further
    const float bias = b[n];
    // gridDim.y is capped at 65535, so rows are walked with a grid-stride loop; for
    // M <= 65535 * 8 every thread runs the body once, i.e. one thread per output.
    for (int64_t m = blockIdx.y * static_cast<int64_t>(blockDim.y) + threadIdx.y; m < M;
         m += static_cast<int64_t>(gridDim.y) * blockDim.y) {
        const float* x_row = x + m * K;
        float acc = 0.0f;
        // Plain sequential fp32 sum over k, as step 01 (the same result, bit for bit).
        // 64-bit: k * N can pass 2^31.
        for (int k = 0; k < K; ++k) acc = fmaf(x_row[k], w_col[static_cast<int64_t>(k) * N], acc);
        float v = (acc + bias) * multiplier;   // same order as PyTorch: (x @ W.T + b) * mult
        v = v > 0.0f ? v : v * negative_slope;  // LeakyReLU; NaN stays NaN
        y[m * N + n] = v;
    }
}

namespace p12 {

void launch_coalesced(const float* x, const float* wt, const float* b, float* y,
                      int M, int N, int K, float multiplier, float negative_slope,
                      cudaStream_t stream) {
    const dim3 block(kCoalescedBlockX, kCoalescedBlockY);
    const int64_t row_blocks = (static_cast<int64_t>(M) + kCoalescedBlockY - 1) / kCoalescedBlockY;
    const dim3 grid(static_cast<unsigned>((static_cast<int64_t>(N) + kCoalescedBlockX - 1) / kCoalescedBlockX),
                    static_cast<unsigned>(row_blocks < kMaxGridY ? row_blocks : kMaxGridY));
    p12_coalesced_kernel<<<grid, block, 0, stream>>>(x, wt, b, y, M, N, K, multiplier,
                                                     negative_slope);
}

}  // namespace p12
