// Computes y = LeakyReLU((x @ W.T + b) * multiplier): 32x32 tiles of x and W staged in shared memory.
// Changed against 02: a block loads each x and W value from global memory once per tile and its 32 threads reuse it.
// Bound: shared-memory throughput, still two 4-byte loads per FMA; L2 now sends a block each value once (~17 GB, not ~43).
#include <cstdint>
#include <cuda_runtime.h>

#include "launchers.h"

constexpr int kTile = p12::kSmemTile;  // a block owns a 32 x 32 tile of y, one output per thread
constexpr int kPad = 1;                // one float after every row of the W tile, see below

// Shapes: x is (M, K), W is (N, K), both K-contiguous, W in its own layout (no transposed copy:
// the tile load is where coalescing happens). Per k-slice of 32, thread (tx, ty) loads
// x[m0 + ty, k0 + tx] and W[n0 + ty, k0 + tx]: a warp (one ty) reads 32 consecutive floats of one
// row of each, one 128-byte line per load. Then thread (tx, ty) computes y[m0 + ty, n0 + tx] from
// the tiles: x_tile[ty][kk] is one address for the whole warp (a broadcast), W_tile[tx][kk] is 32
// rows of the tile. Unpadded, those 32 floats lie 32 floats apart, all in one bank of the 32
// (32 wavefronts per load); a row of 33 floats moves lane tx to bank (tx + kk) % 32: one wavefront.

extern "C" __global__ void __launch_bounds__(kTile * kTile)
p12_smem_tiles_kernel(const float* __restrict__ x,   // (M, K)
                      const float* __restrict__ w,   // (N, K)
                      const float* __restrict__ b,   // (N,)
                      float* __restrict__ y,         // (M, N)
                      int M, int N, int K, float multiplier, float negative_slope) {
    __shared__ float x_tile[kTile][kTile];         // x[m0 + r, k0 + c]
    __shared__ float w_tile[kTile][kTile + kPad];  // W[n0 + r, k0 + c]

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int64_t m = static_cast<int64_t>(blockIdx.y) * kTile + ty;  // this thread's row of y
    const int n0 = blockIdx.x * kTile;
    const int n = n0 + tx;                                            // and its column

    // The rows this thread loads: x's row m, W's row n0 + ty. Out-of-range rows load zeros
    // (a zero adds nothing to the sum); their pointers are clamped to row 0, never formed past
    // the end. 64-bit: a row times K can pass 2^31.
    const bool x_row_ok = m < M;
    const bool w_row_ok = n0 + ty < N;
    const float* x_row = x + (x_row_ok ? m : 0) * K;
    const float* w_row = w + static_cast<int64_t>(w_row_ok ? n0 + ty : 0) * K;

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += kTile) {
        const int k = k0 + tx;
        x_tile[ty][tx] = x_row_ok && k < K ? x_row[k] : 0.0f;
        w_tile[ty][tx] = w_row_ok && k < K ? w_row[k] : 0.0f;
        __syncthreads();  // the tiles are complete before anyone reads them
        // The same sequential fp32 sum over k as step 01 (the zeros past K add nothing).
#pragma unroll
        for (int kk = 0; kk < kTile; ++kk) acc = fmaf(x_tile[ty][kk], w_tile[tx][kk], acc);
        __syncthreads();  // everyone is done reading before the next slice overwrites them
    }

    if (m >= M || n >= N) return;  // after the loop: every thread helped load the tiles
    float v = (acc + b[n]) * multiplier;   // same order as PyTorch: (x @ W.T + b) * mult
    v = v > 0.0f ? v : v * negative_slope;  // LeakyReLU; NaN stays NaN
    y[m * N + n] = v;                       // a warp writes one 128-byte line of y
}

namespace p12 {

void launch_smem_tiles(const float* x, const float* w, const float* b, float* y,
                       int M, int N, int K, float multiplier, float negative_slope,
                       cudaStream_t stream) {
    const dim3 block(kTile, kTile);
    // Columns on x (no practical limit), rows on y (<= 65535 blocks: the binding checks M).
    const dim3 grid(static_cast<unsigned>((static_cast<int64_t>(N) + kTile - 1) / kTile),
                    static_cast<unsigned>((static_cast<int64_t>(M) + kTile - 1) / kTile));
    p12_smem_tiles_kernel<<<grid, block, 0, stream>>>(x, w, b, y, M, N, K, multiplier,
                                                      negative_slope);
}

}  // namespace p12
