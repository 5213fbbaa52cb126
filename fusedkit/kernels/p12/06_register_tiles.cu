// Computes y = LeakyReLU((x @ W.T + b) * multiplier): 64x64 block tiles, 8 outputs of one column per thread.
// Changed against 05: a thread holds W[n, k] in a register for 8 FMAs (8 rows of y), so one shared load of W feeds 8.
// Bound: shared-memory throughput, 9 shared loads per 8 FMAs instead of 16 (the x reads are the rest).
#include <cstdint>
#include <cuda_runtime.h>

#include "launchers.h"

constexpr int BM = p12::kRegisterTileBlockM;  // rows of y per block
constexpr int BN = p12::kRegisterTileBlockN;  // columns of y per block
constexpr int BK = 8;                         // k-slice staged in shared memory per step
constexpr int TM = 8;                         // rows of y per thread: one column, 8 accumulators
constexpr int kThreads = BM / TM * BN;        // 512: 8 row groups x 64 columns
static_assert(BM * BK == kThreads && BN * BK == kThreads, "one float of each tile per thread");

// Shapes: x is (M, K), W is (N, K), both K-contiguous, tiles in that layout. Tile loads: thread t
// loads row t / 8, k t % 8 of each tile, so a warp reads 4 rows x 32 contiguous bytes (4 sectors).
// Compute: thread t owns column t % 64 and rows (t / 64) * 8 + 0..7 of the block's tile. A warp
// (32 consecutive t) shares its 8 rows: x_tile[row][kk] is a broadcast; its 32 lanes read 32 rows
// of the W tile at one kk, which a row of BK + 1 = 9 floats spreads over 32 banks (9 * lane + kk
// is distinct mod 32). The tile store of those rows puts 2 lanes on 3 banks (2 wavefronts), once
// per 8 k beside the 72 reads.

// 4 blocks of 512 threads fill an SM (2048 threads): at most 32 registers a thread, no spills.
extern "C" __global__ void __launch_bounds__(kThreads, 4)
p12_register_tiles_kernel(const float* __restrict__ x,   // (M, K)
                          const float* __restrict__ w,   // (N, K)
                          const float* __restrict__ b,   // (N,)
                          float* __restrict__ y,         // (M, N)
                          int M, int N, int K, float multiplier, float negative_slope) {
    __shared__ float x_tile[BM][BK];      // x[m0 + r, k0 + c]
    __shared__ float w_tile[BN][BK + 1];  // W[n0 + r, k0 + c], rows padded by one float

    const int tid = threadIdx.x;
    const int m0 = blockIdx.y * BM;  // first row of y for this block
    const int n0 = blockIdx.x * BN;  // first column of y for this block
    const int col = tid % BN;        // this thread's column of the tile
    const int row0 = tid / BN * TM;  // and the first of its TM rows

    // One float of each tile per thread per k-slice; rows outside the matrix load zeros (a zero
    // adds nothing), their pointers clamped to row 0. 64-bit: a row times K can pass 2^31.
    const int load_row = tid / BK, load_k = tid % BK;
    const bool x_row_ok = m0 + load_row < M, w_row_ok = n0 + load_row < N;
    const float* x_row = x + static_cast<int64_t>(x_row_ok ? m0 + load_row : 0) * K;
    const float* w_row = w + static_cast<int64_t>(w_row_ok ? n0 + load_row : 0) * K;

    float acc[TM] = {};  // acc[i]: y[m0 + row0 + i, n0 + col], in registers
    for (int k0 = 0; k0 < K; k0 += BK) {
        const int k = k0 + load_k;
        x_tile[load_row][load_k] = x_row_ok && k < K ? x_row[k] : 0.0f;
        w_tile[load_row][load_k] = w_row_ok && k < K ? w_row[k] : 0.0f;
        __syncthreads();  // the tiles are complete before anyone reads them
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            const float w_k = w_tile[col][kk];  // one shared load of W ...
#pragma unroll
            for (int i = 0; i < TM; ++i)        // ... feeds TM FMAs, one per row of y
                acc[i] = fmaf(x_tile[row0 + i][kk], w_k, acc[i]);
        }
        __syncthreads();  // everyone is done reading before the next slice overwrites them
    }

    // Fused epilogue on the registers; a warp stores 32 consecutive floats of a row of y.
    const int n = n0 + col;
    if (n >= N) return;
    const float bias = b[n];
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int64_t m = static_cast<int64_t>(m0) + row0 + i;
        if (m >= M) break;
        float v = (acc[i] + bias) * multiplier;  // same order as PyTorch: (x @ W.T + b) * mult
        v = v > 0.0f ? v : v * negative_slope;   // LeakyReLU; NaN stays NaN
        y[m * N + n] = v;
    }
}

namespace p12 {

void launch_register_tiles(const float* x, const float* w, const float* b, float* y,
                           int M, int N, int K, float multiplier, float negative_slope,
                           cudaStream_t stream) {
    // Columns on x (no practical limit), rows on y (<= 65535 blocks: the binding checks M).
    const dim3 grid(static_cast<unsigned>((static_cast<int64_t>(N) + BN - 1) / BN),
                    static_cast<unsigned>((static_cast<int64_t>(M) + BM - 1) / BM));
    p12_register_tiles_kernel<<<grid, kThreads, 0, stream>>>(x, w, b, y, M, N, K, multiplier,
                                                             negative_slope);
}

}  // namespace p12
