// Computes out[m] = logsumexp_n(sigmoid(x @ W1.T + b1) @ W2.T + b2) with three untiled kernels.
// Changed against step 0 (eager): biases and sigmoid fused into the GEMM kernels; the row reduction is ours.
// Bound: loads, far below FP32 peak: no on-chip reuse, each FMA loads two floats through L1/L2.
#include <cstdint>
#include <cuda_runtime.h>

#include "launchers.h"

// Block shape of the two GEMM kernels, as p12's naive step: 32 threads along the output
// columns (one warp = 32 consecutive columns: a coalesced 128-byte store, and the row of the
// left operand is the same address for the whole warp, a broadcast), 8 output rows. The weight
// row of each lane is K (or H) floats from its neighbour's: 32 sectors per load instruction,
// 7 of every 8 consecutive-k loads served by L1.
constexpr int kNaiveBlockX = 32;
constexpr int kNaiveBlockY = 8;
constexpr int kNaiveRowThreads = 256;  // the logsumexp kernel: one thread per row of z

// out[m, c] = sum_k a[m, k] * w[c, k] + bias[c], a plain sequential fp32 sum as a CPU loop does.
__device__ __forceinline__ float dot_plus_bias(const float* __restrict__ a_row,
                                               const float* __restrict__ w_row, float bias,
                                               int K) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(a_row[k], w_row[k], acc);
    return acc + bias;  // same order as PyTorch's addmm: (a @ w.T) + b
}

// Kernel A: h[m, j] = sigmoid(x[m] . W1[j] + b1[j]), one thread per element of h (M, H).
extern "C" __global__ void __launch_bounds__(kNaiveBlockX * kNaiveBlockY)
p45_naive_linear_sigmoid_kernel(const float* __restrict__ x,   // (M, K)
                                const float* __restrict__ w1,  // (H, K)
                                const float* __restrict__ b1,  // (H,)
                                float* __restrict__ h,         // (M, H)
                                int M, int K, int H) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= H) return;
    const float* w_row = w1 + static_cast<int64_t>(j) * K;  // 64-bit: j * K can pass 2^31
    const float bias = b1[j];
    // gridDim.y is capped at 65535: rows are walked with a grid-stride loop; for
    // M <= 65535 * 8 every thread runs the body once, i.e. one thread per output.
    for (int64_t m = blockIdx.y * static_cast<int64_t>(blockDim.y) + threadIdx.y; m < M;
         m += static_cast<int64_t>(gridDim.y) * blockDim.y) {
        const float v = dot_plus_bias(x + m * K, w_row, bias, K);
        h[m * H + j] = p45::sigmoid(v);
    }
}

// Kernel B: z[m, n] = h[m] . W2[n] + b2[n], one thread per element of z (M, N).
extern "C" __global__ void __launch_bounds__(kNaiveBlockX * kNaiveBlockY)
p45_naive_linear_kernel(const float* __restrict__ h,   // (M, H)
                        const float* __restrict__ w2,  // (N, H)
                        const float* __restrict__ b2,  // (N,)
                        float* __restrict__ z,         // (M, N)
                        int M, int H, int N) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N) return;
    const float* w_row = w2 + static_cast<int64_t>(n) * H;
    const float bias = b2[n];
    for (int64_t m = blockIdx.y * static_cast<int64_t>(blockDim.y) + threadIdx.y; m < M;
         m += static_cast<int64_t>(gridDim.y) * blockDim.y) {
        z[m * N + n] = dot_plus_bias(h + m * H, w_row, bias, H);
    }
}

// Kernel C: out[m] = logsumexp_n z[m, n], one thread per row, two passes over the row:
// the max, then sum exp(z - max). Subtracting the max keeps every exp <= 1 (no overflow
// for large z). As torch.logsumexp, an infinite max is not subtracted (inf - inf is NaN):
// a row with +inf gives +inf, a row of only -inf gives log(0) = -inf, and a NaN anywhere
// reaches the sum (fmaxf skips NaN, exp does not) and gives NaN.
// Neighbouring threads read addresses N floats apart: one sector per lane per load, the
// uncoalesced pattern that step 02's warp-per-row kernel removes.
extern "C" __global__ void __launch_bounds__(kNaiveRowThreads)
p45_naive_logsumexp_kernel(const float* __restrict__ z,  // (M, N)
                           float* __restrict__ out,      // (M,)
                           int M, int N) {
    for (int64_t m = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; m < M;
         m += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const float* z_row = z + m * N;
        float mx = -INFINITY;
        for (int n = 0; n < N; ++n) mx = fmaxf(mx, z_row[n]);
        const float shift = isinf(mx) ? 0.0f : mx;
        float sum = 0.0f;
        for (int n = 0; n < N; ++n) sum += expf(z_row[n] - shift);
        out[m] = logf(sum) + shift;
    }
}

namespace p45 {

void launch_naive(const float* x, const float* w1, const float* b1, const float* w2,
                  const float* b2, float* h, float* z, float* out,
                  int M, int K, int H, int N, cudaStream_t stream) {
    const dim3 block(kNaiveBlockX, kNaiveBlockY);
    const int64_t row_blocks = (static_cast<int64_t>(M) + kNaiveBlockY - 1) / kNaiveBlockY;
    const unsigned grid_y = static_cast<unsigned>(row_blocks < kMaxGridY ? row_blocks : kMaxGridY);
    const auto col_blocks = [](int cols) {
        return static_cast<unsigned>((static_cast<int64_t>(cols) + kNaiveBlockX - 1) / kNaiveBlockX);
    };
    // The three kernels run in stream order: B reads all of h, C all of z.
    p45_naive_linear_sigmoid_kernel<<<dim3(col_blocks(H), grid_y), block, 0, stream>>>(
        x, w1, b1, h, M, K, H);
    p45_naive_linear_kernel<<<dim3(col_blocks(N), grid_y), block, 0, stream>>>(
        h, w2, b2, z, M, H, N);
    // ceil(M / 256) <= 2^23 blocks fits gridDim.x (2^31 - 1); the loop strides anyway.
    const unsigned row_grid =
        static_cast<unsigned>((static_cast<int64_t>(M) + kNaiveRowThreads - 1) / kNaiveRowThreads);
    p45_naive_logsumexp_kernel<<<row_grid, kNaiveRowThreads, 0, stream>>>(z, out, M, N);
}

}  // namespace p45
