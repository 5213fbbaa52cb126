// Computes y = LeakyReLU((x @ W.T + b) * multiplier, slope) in fp32 FMAs, for a few rows of x.
// Changed against 07: no tiles, no tensor cores: each warp streams 4 rows of W once with float4 loads (later steps' in flight), up to 4 or 16 rows of x riding along.
// Bound: W's bytes at 1-2 rows (268 MB read once, predicted ~0.063 ms at a 4.3 TB/s copy); from ~4 rows each lane's FMAs and x loads per W float4 grow with the rows and set the time.
#include <cstdint>
#include <cuda_runtime.h>

#include "launchers.h"

// At batch 1 a GEMM is a matrix-vector product: each weight is used once per row of x, so
// the time is the weight's bytes over the memory's rate, and the only job is to keep enough
// bytes in flight. A warp owns kRowsPerWarp rows of W; per step every lane loads one float4
// of each of its rows (kRowsPerWarp * 16 bytes in flight per lane, 16 KB per 256-thread
// block) and multiplies it with the matching float4 of each row of x, which every warp of
// the block reads at once (L1 hits after the first). Up to 4 or 16 rows of x ride along per
// launch row (gridDim.y); more rows re-read W, which is why this step is for small batches.
//
// Two things keep the bytes flowing once x has more than one row (at 4 rows the first version
// took 0.097 ms back to back against 0.073 at one row, and 0.157 ms after an L2 flush):
// - the W float4s of a lane's next steps are loaded before the FMAs of this one (two steps
//   ahead at up to 4 rows, one at 16), so a step's x loads and FMAs no longer stand between one
//   W load and the next;
// - x is prefetched into L2 at the start, spread over the grid (a line or so per thread):
//   every block reads all of x, and after the harness's L2 flush the first touch of each of
//   x's lines goes to memory. (That this is what the flush costs here is a guess; the
//   measurement after the change says whether it helped.)
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kRowsPerWarp = 4;
constexpr int kRowsPerBlock = kWarps * kRowsPerWarp;  // rows of W (columns of y) per block
constexpr int kFewRows = 4;  // up to this many rows of x, a launch with 4 x 4 accumulators a lane

__device__ __forceinline__ float leaky(float v, float multiplier, float negative_slope) {
    v *= multiplier;
    return v > 0.0f ? v : v * negative_slope;
}

// Asks L2 for the 128-byte lines of [p, p + n) floats, the lines dealt out over every thread of
// the grid's row of blocks (x's rows are contiguous: x is a dense row-major (M, K) here).
// evict_last: x is read by every block, W (evict-first loads) should not push it out.
__device__ __forceinline__ void prefetch_rows_to_l2(const float* p, int64_t n) {
    const int64_t lines = (n * 4 + 127) / 128;
    const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
    const char* base = reinterpret_cast<const char*>(p);
    for (int64_t i = first; i < lines; i += step)
        asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(base + i * 128));
}

// acc[r][m] += dot(W row r, x row m) over the lane's share of K. VEC4: K % 4 == 0 and both
// base pointers 16-byte aligned, so every row starts on a float4; otherwise single floats.
// Lane l takes elements (float4s) l, l+32, l+64, ...: a warp reads 512 contiguous bytes of a
// row per step, coalesced. Summation order: each lane adds its K/32 products in sequence,
// then a 5-level butterfly adds the lanes: ~fp32 accuracy at K = 8192, like cuBLAS's order.
template <bool VEC4, int ROWS>
__device__ __forceinline__ void small_batch(const float* __restrict__ x, const float* __restrict__ w,
                                            const float* __restrict__ b, float* __restrict__ y,
                                            int M, int N, int K, float multiplier, float negative_slope) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int n0 = blockIdx.x * kRowsPerBlock + warp * kRowsPerWarp;  // first W row of this warp
    const int m0 = blockIdx.y * ROWS;                                 // first x row of this block
    const int rows_x = min(ROWS, M - m0);
    const float* xrow = x + static_cast<int64_t>(m0) * K;
    prefetch_rows_to_l2(xrow, static_cast<int64_t>(rows_x) * K);  // every thread, before any returns
    if (n0 >= N) return;  // whole warp past the last row of W (no barrier below: safe)

    float acc[kRowsPerWarp][ROWS];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
        for (int m = 0; m < ROWS; ++m) acc[r][m] = 0.0f;

    // Rows past N are clamped to N - 1 (loaded, never stored): no branch inside the loop.
    const float* wrow[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r)
        wrow[r] = w + static_cast<int64_t>(min(n0 + r, N - 1)) * K;

    if constexpr (VEC4) {
        const int K4 = K / 4;
        const float4* wv4[kRowsPerWarp];
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) wv4[r] = reinterpret_cast<const float4*>(wrow[r]);
        // W is read once: stream it past L1 (.cs). A ring of kDepth steps' float4s: before the
        // FMAs of step i, the loads of step i + kDepth - 1 go out, so kDepth - 1 steps of W are
        // in flight while a step computes. The loop is unrolled by kDepth so that every ring
        // index is a compile-time constant (registers, not local memory).
        constexpr int kDepth = ROWS <= kFewRows ? 3 : 2;  // the 16-row version has no registers to spare
        float4 ring[kDepth][kRowsPerWarp];
#pragma unroll
        for (int d = 0; d < kDepth - 1; ++d)
#pragma unroll
            for (int r = 0; r < kRowsPerWarp; ++r)
                if (lane + 32 * d < K4) ring[d][r] = __ldcs(wv4[r] + lane + 32 * d);
        for (int k0 = lane; k0 < K4; k0 += 32 * kDepth) {
#pragma unroll
            for (int d = 0; d < kDepth; ++d) {
                const int k4 = k0 + 32 * d;
                const int ahead = k4 + 32 * (kDepth - 1);
#pragma unroll
                for (int r = 0; r < kRowsPerWarp; ++r)
                    if (ahead < K4) ring[(d + kDepth - 1) % kDepth][r] = __ldcs(wv4[r] + ahead);
                if (k4 >= K4) break;
                const float4* wv = ring[d];
#pragma unroll
                for (int m = 0; m < ROWS; ++m) {
                    if (m < rows_x) {
                        const float4 xv = __ldg(reinterpret_cast<const float4*>(xrow + static_cast<int64_t>(m) * K) + k4);
#pragma unroll
                        for (int r = 0; r < kRowsPerWarp; ++r) {
                            float a = acc[r][m];
                            a = fmaf(wv[r].x, xv.x, a);
                            a = fmaf(wv[r].y, xv.y, a);
                            a = fmaf(wv[r].z, xv.z, a);
                            a = fmaf(wv[r].w, xv.w, a);
                            acc[r][m] = a;
                        }
                    }
                }
            }
        }
    } else {
        for (int k = lane; k < K; k += 32) {
            float wv[kRowsPerWarp];
#pragma unroll
            for (int r = 0; r < kRowsPerWarp; ++r) wv[r] = __ldcs(wrow[r] + k);
#pragma unroll
            for (int m = 0; m < ROWS; ++m) {
                if (m < rows_x) {
                    const float xv = __ldg(xrow + static_cast<int64_t>(m) * K + k);
#pragma unroll
                    for (int r = 0; r < kRowsPerWarp; ++r) acc[r][m] = fmaf(wv[r], xv, acc[r][m]);
                }
            }
        }
    }

    // Butterfly: afterwards every lane holds every sum, so the stores can be spread over lanes.
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
        for (int m = 0; m < ROWS; ++m)
#pragma unroll
            for (int off = 16; off > 0; off >>= 1)
                acc[r][m] += __shfl_xor_sync(0xffffffffu, acc[r][m], off);

    // Lane (m * kRowsPerWarp + r) % 32 stores y[m0 + m, n0 + r]: the epilogue in eager's order.
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
        const int n = n0 + r;
#pragma unroll
        for (int m = 0; m < ROWS; ++m) {
            if (lane == ((m * kRowsPerWarp + r) & 31) && m < rows_x && n < N)
                y[static_cast<int64_t>(m0 + m) * N + n] = leaky(acc[r][m] + b[n], multiplier, negative_slope);
        }
    }
}

// Named entries: each access width, at two row counts. The accumulators are ROWS x 4 floats a
// lane, so a launch for 4 rows holds a quarter of the 16-row one's: fewer registers, more warps
// per SM, more of W in flight (at 4 rows the 16-row version ran 2 blocks of 8 warps an SM).
#define P12_SMALL_BATCH_KERNEL(name, vec4, rows)                                                   \
    extern "C" __global__ void __launch_bounds__(kThreads)                                       \
    name(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,  \
         float* __restrict__ y, int M, int N, int K, float multiplier, float negative_slope) {   \
        small_batch<vec4, rows>(x, w, b, y, M, N, K, multiplier, negative_slope);                 \
    }
P12_SMALL_BATCH_KERNEL(p12_small_batch_vec4_kernel, true, p12::kSmallBatchRows)
P12_SMALL_BATCH_KERNEL(p12_small_batch_scalar_kernel, false, p12::kSmallBatchRows)
P12_SMALL_BATCH_KERNEL(p12_small_batch_vec4_rows4_kernel, true, kFewRows)
P12_SMALL_BATCH_KERNEL(p12_small_batch_scalar_rows4_kernel, false, kFewRows)
#undef P12_SMALL_BATCH_KERNEL

namespace p12 {

void launch_small_batch(const float* x, const float* w, const float* b, float* y,
                        int M, int N, int K, float multiplier, float negative_slope,
                        cudaStream_t stream) {
    const bool few = M <= kFewRows;
    const dim3 grid((N + kRowsPerBlock - 1) / kRowsPerBlock, few ? 1 : (M + kSmallBatchRows - 1) / kSmallBatchRows);
    const bool vec4 = K % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                      reinterpret_cast<uintptr_t>(w) % 16 == 0;
    const auto kernel = few ? (vec4 ? p12_small_batch_vec4_rows4_kernel : p12_small_batch_scalar_rows4_kernel)
                            : (vec4 ? p12_small_batch_vec4_kernel : p12_small_batch_scalar_kernel);
    kernel<<<grid, kThreads, 0, stream>>>(x, w, b, y, M, N, K, multiplier, negative_slope);
}

}  // namespace p12
