// Computes y = LeakyReLU((x @ W.T + b) * multiplier): shared-memory tiled SIMT fp32 GEMM, epilogue fused.
// Changed against 06: 8x8 outputs a thread on 128x128 tiles (16 FMAs per shared load), transposed padded tiles read as float4, next slice's float4 loads in flight.
// Bound: FP32 compute (no tensor cores): 32 FLOP per L2 byte per 128x128x8 step keeps HBM out of the way.
#include <cstdint>
#include <cuda_runtime.h>

#include "launchers.h"

constexpr int BM = p12::kTiledBlockM;  // rows of y per block
constexpr int BN = p12::kTiledBlockN;  // columns of y per block
constexpr int BK = 8;                  // k-slice staged in shared memory per step
constexpr int kThreads = 256;          // 16 x 16 threads, each owns 8 x 8 outputs
constexpr int kPad = 4;                // shared row padding (floats), see the bank note below

// Shapes: x is (M, K), W is (N, K): both are K-contiguous. The tiles are stored transposed,
// As[k][m] and Ws[k][n], so that the inner product step reads 4 consecutive m (or n) with one
// 16-byte shared load. The transposing store of tile loads would put 2 threads on one bank;
// padding each row by 4 floats shifts the second half-warp by 16 banks (conflict-free) and
// keeps rows 16-byte aligned (132 * 4 bytes = 33 * 16).

// Loads x[row, k..k+3] (or W's) as a float4, zero-filling whatever lies outside the matrix,
// so that edge tiles need no other special case: a zero contributes nothing to the sum.
__device__ __forceinline__ float4 load_k4(const float* __restrict__ row_ptr, bool row_ok,
                                          int k, int K, bool vec_ok) {
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (!row_ok || k >= K) return v;
    if (vec_ok) {
        // K % 4 == 0 and a 16-byte-aligned base: k is a multiple of 4, so k < K means all four
        // are inside and the address is aligned: one ld.global.v4.f32.
        v = *reinterpret_cast<const float4*>(row_ptr + k);
    } else {
        v.x = row_ptr[k];
        if (k + 1 < K) v.y = row_ptr[k + 1];
        if (k + 2 < K) v.z = row_ptr[k + 2];
        if (k + 3 < K) v.w = row_ptr[k + 3];
    }
    return v;
}

__device__ __forceinline__ float scale_leaky_relu(float acc_plus_b, float multiplier,
                                                  float negative_slope) {
    const float v = acc_plus_b * multiplier;
    return v > 0.0f ? v : v * negative_slope;
}

extern "C" __global__ void __launch_bounds__(kThreads, 2)  // 2 blocks/SM => <= 128 registers
p12_tiled_kernel(const float* __restrict__ x,   // (M, K)
                 const float* __restrict__ w,   // (N, K)
                 const float* __restrict__ b,   // (N,)
                 float* __restrict__ y,         // (M, N)
                 int M, int N, int K, float multiplier, float negative_slope,
                 bool vec_load_ok,    // K % 4 == 0 and x, W 16-byte aligned
                 bool vec_store_ok) { // N % 4 == 0 and y 16-byte aligned
    __shared__ __align__(16) float As[BK][BM + kPad];
    __shared__ __align__(16) float Ws[BK][BN + kPad];

    const int tid = threadIdx.x;
    const int m0 = blockIdx.y * BM;  // first row of y for this block
    const int n0 = blockIdx.x * BN;  // first column of y for this block

    // Tile loads: 128 rows x 8 k = 256 float4s per operand, one float4 per thread.
    // Two threads per row (k 0..3, k 4..7): a warp reads 16 rows x 32 contiguous bytes.
    const int load_row = tid / 2;
    const int load_k = (tid % 2) * 4;
    const int a_row = m0 + load_row, w_row = n0 + load_row;
    const bool a_row_ok = a_row < M, w_row_ok = w_row < N;
    // Row pointers are clamped to a valid row so that no out-of-range pointer is formed.
    const float* a_ptr = x + static_cast<int64_t>(a_row_ok ? a_row : 0) * K;
    const float* w_ptr = w + static_cast<int64_t>(w_row_ok ? w_row : 0) * K;

    // Compute layout: thread (ty, tx) owns rows {ty*4 + 0..3, 64 + ty*4 + 0..3} and the same
    // for columns with tx. Two groups of 4, 64 apart (instead of 8 consecutive), keep the
    // 16-byte shared reads of a quarter-warp on consecutive addresses: no bank conflicts.
    const int tx = tid % 16, ty = tid / 16;

    float acc[8][8] = {};  // acc[i][j]: row group i, column group j, in registers

    // Register prefetch: the next tile's global loads are issued before the current tile's
    // math, so their latency hides behind 512 FMAs instead of stalling the block.
    float4 a_next = load_k4(a_ptr, a_row_ok, load_k, K, vec_load_ok);
    float4 w_next = load_k4(w_ptr, w_row_ok, load_k, K, vec_load_ok);

    for (int k0 = 0; k0 < K; k0 += BK) {
        // Transposing store into shared memory: As[k][m] so compute reads go along m.
        As[load_k + 0][load_row] = a_next.x;
        As[load_k + 1][load_row] = a_next.y;
        As[load_k + 2][load_row] = a_next.z;
        As[load_k + 3][load_row] = a_next.w;
        Ws[load_k + 0][load_row] = w_next.x;
        Ws[load_k + 1][load_row] = w_next.y;
        Ws[load_k + 2][load_row] = w_next.z;
        Ws[load_k + 3][load_row] = w_next.w;
        __syncthreads();  // the tile is complete before anyone reads it

        if (k0 + BK < K) {  // uniform branch: start the next tile's loads now
            a_next = load_k4(a_ptr, a_row_ok, k0 + BK + load_k, K, vec_load_ok);
            w_next = load_k4(w_ptr, w_row_ok, k0 + BK + load_k, K, vec_load_ok);
        }

#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            // 4 shared loads of 16 bytes give 8 x values and 8 W values: 64 FMAs.
            const float4 a_lo = *reinterpret_cast<const float4*>(&As[kk][ty * 4]);
            const float4 a_hi = *reinterpret_cast<const float4*>(&As[kk][64 + ty * 4]);
            const float4 w_lo = *reinterpret_cast<const float4*>(&Ws[kk][tx * 4]);
            const float4 w_hi = *reinterpret_cast<const float4*>(&Ws[kk][64 + tx * 4]);
            const float a[8] = {a_lo.x, a_lo.y, a_lo.z, a_lo.w, a_hi.x, a_hi.y, a_hi.z, a_hi.w};
            const float c[8] = {w_lo.x, w_lo.y, w_lo.z, w_lo.w, w_hi.x, w_hi.y, w_hi.z, w_hi.w};
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], c[j], acc[i][j]);
        }
        __syncthreads();  // everyone is done reading before the next store overwrites
    }

    // Fused epilogue: bias, multiply, LeakyReLU on the registers, then one store of y.
    float bias[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        const int col = n0 + (j / 4) * 64 + tx * 4 + (j % 4);
        bias[j] = col < N ? b[col] : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int row = m0 + (i / 4) * 64 + ty * 4 + (i % 4);
        if (row >= M) continue;
        float* y_row = y + static_cast<int64_t>(row) * N;
#pragma unroll
        for (int g = 0; g < 2; ++g) {
            const int col = n0 + g * 64 + tx * 4;
            float4 v;
            v.x = scale_leaky_relu(acc[i][g * 4 + 0] + bias[g * 4 + 0], multiplier, negative_slope);
            v.y = scale_leaky_relu(acc[i][g * 4 + 1] + bias[g * 4 + 1], multiplier, negative_slope);
            v.z = scale_leaky_relu(acc[i][g * 4 + 2] + bias[g * 4 + 2], multiplier, negative_slope);
            v.w = scale_leaky_relu(acc[i][g * 4 + 3] + bias[g * 4 + 3], multiplier, negative_slope);
            if (vec_store_ok && col + 3 < N) {
                // A warp writes 2 rows x 16 float4 = 2 x 256 contiguous bytes.
                *reinterpret_cast<float4*>(y_row + col) = v;
            } else {  // right edge, or N % 4 != 0, or y unaligned: element by element
                if (col + 0 < N) y_row[col + 0] = v.x;
                if (col + 1 < N) y_row[col + 1] = v.y;
                if (col + 2 < N) y_row[col + 2] = v.z;
                if (col + 3 < N) y_row[col + 3] = v.w;
            }
        }
    }
}

namespace p12 {

void launch_tiled(const float* x, const float* w, const float* b, float* y,
                  int M, int N, int K, float multiplier, float negative_slope,
                  cudaStream_t stream) {
    const auto aligned16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    const bool vec_load_ok = K % 4 == 0 && aligned16(x) && aligned16(w);
    const bool vec_store_ok = N % 4 == 0 && aligned16(y);
    // Columns on x (no practical limit), rows on y (<= 65535 blocks: the binding checks M).
    const dim3 grid(static_cast<unsigned>((static_cast<int64_t>(N) + BN - 1) / BN),
                    static_cast<unsigned>((static_cast<int64_t>(M) + BM - 1) / BM));
    p12_tiled_kernel<<<grid, kThreads, 0, stream>>>(x, w, b, y, M, N, K, multiplier,
                                                    negative_slope, vec_load_ok, vec_store_ok);
}

}  // namespace p12
