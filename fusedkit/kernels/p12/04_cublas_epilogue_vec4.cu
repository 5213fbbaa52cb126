// Computes 02's in-place epilogue with 16-byte float4 accesses, four rows per thread.
// Changed against 03: ld/st.global.v4.f32, 4 rows' loads in flight per thread; scalar fallback when unaligned.
// Bound: memory, as 02 (~2*M*N*4 bytes); the gain is fewer instructions and more bytes in flight.
#include <cstdint>
#include <cuda_runtime.h>

#include "launchers.h"

// A block is 256 threads along a row (256 float4s = 4 KB of it) by kVec4Rows rows: a tile of
// kVec4Rows x 4 KB. Each thread keeps kVec4Rows float4s (16 registers) plus one bias float4 live,
// which fits the 32 registers per thread that 8 blocks (2048 threads) per SM allow.
constexpr int kVec4Threads = 256;
constexpr int kVec4Rows = 4;
constexpr int kVec4MinBlocksPerSM = 8;

__device__ __forceinline__ float scale_leaky_relu(float v_plus_b, float multiplier,
                                                  float negative_slope) {
    const float v = v_plus_b * multiplier;
    return v > 0.0f ? v : v * negative_slope;
}

__device__ __forceinline__ float4 epilogue4(float4 v, float4 bias, float multiplier,
                                            float negative_slope) {
    v.x = scale_leaky_relu(v.x + bias.x, multiplier, negative_slope);
    v.y = scale_leaky_relu(v.y + bias.y, multiplier, negative_slope);
    v.z = scale_leaky_relu(v.z + bias.z, multiplier, negative_slope);
    v.w = scale_leaky_relu(v.w + bias.w, multiplier, negative_slope);
    return v;
}

// y and b are seen as float4 arrays: row m of y is N4 = N / 4 float4s. That is only valid
// when N % 4 == 0 (a float4 never straddles two rows, and b's float4 j matches columns
// 4j..4j+3 of every row) and both base pointers are 16-byte aligned (a float4 access to an
// unaligned address is a misaligned-address fault, not a slow load). The launcher checks both.
//
// Thread (blockIdx.x * 256 + threadIdx.x) owns float4 column j; block row g = blockIdx.y owns
// rows 4g..4g+3. Knowing the column directly gives b's index without a 64-bit `i % N4` per
// float4, and the thread's 4 rows share one bias load. Per tile the thread issues its bias
// load and its 4 y loads (16 B each, one row of N * 4 bytes apart) back to back, then
// computes, then stores: 64 B of y in flight per thread, 128 KB per SM at 2048 threads, where
// 03 and the previous 04 had one load per thread outstanding. A warp's access in one row is
// 512 contiguous bytes: coalesced.
extern "C" __global__ void __launch_bounds__(kVec4Threads, kVec4MinBlocksPerSM)
p12_epilogue_vec4_kernel(float4* __restrict__ y,        // (M, N / 4) float4s, in place
                         const float4* __restrict__ b,  // (N / 4,) float4s
                         int M, int N4, float multiplier, float negative_slope) {
    const int j = blockIdx.x * kVec4Threads + threadIdx.x;  // float4 column: columns 4j..4j+3
    if (j >= N4) return;  // last column block past the row's end: no work in any row
    // b is read-only in this kernel and read by every block row: the non-coherent (texture)
    // path, ld.global.nc, which hits L1/L2 after the first block.
    const float4 bias = __ldg(b + j);
    const int64_t row_stride = N4;
    // Usually one iteration: gridDim.y covers all ceil(M / 4) row groups unless that exceeds
    // the 65535 limit of gridDim.y (M > 262140), when block rows stride over the rest.
    for (int64_t m0 = static_cast<int64_t>(blockIdx.y) * kVec4Rows; m0 < M;
         m0 += static_cast<int64_t>(gridDim.y) * kVec4Rows) {
        float4* tile = y + m0 * row_stride + j;
        // Rows past the end (M % 4 != 0) re-load row M - 1, which is in bounds, and are not
        // stored: every load stays unconditional, only the stores are guarded.
        const int64_t last = M - 1 - m0;  // the tile's valid rows are 0..min(last, 3)
        // m0 < M, so row 0 is always valid; told so, the compiler keeps all 4 loads unconditional.
        __builtin_assume(last >= 0);
        float4 v[kVec4Rows];
#pragma unroll
        for (int r = 0; r < kVec4Rows; ++r) {
            v[r] = tile[(r < last ? r : last) * row_stride];  // ld.global.v4.f32
        }
#pragma unroll
        for (int r = 0; r < kVec4Rows; ++r) {
            v[r] = epilogue4(v[r], bias, multiplier, negative_slope);
        }
#pragma unroll
        for (int r = 0; r < kVec4Rows; ++r) {
            if (r <= last) tile[r * row_stride] = v[r];  // st.global.v4.f32
        }
    }
}

namespace p12 {

bool epilogue_vec4_fast_path(const float* y, const float* b, int N) {
    const auto aligned16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    return N % 4 == 0 && aligned16(y) && aligned16(b);
}

void launch_epilogue_vec4(float* y, const float* b, int M, int N,
                          float multiplier, float negative_slope, cudaStream_t stream) {
    if (!epilogue_vec4_fast_path(y, b, N)) {
        // Correct for any N and any 4-byte alignment: step 03's scalar kernel.
        launch_epilogue_scalar(y, b, M, N, multiplier, negative_slope, stream);
        return;
    }
    const int N4 = N / 4;
    // Exact grid: one 4-row tile per thread, no device query. At 1024 x 8192 that is
    // 8 x 256 = 2048 blocks; 8 fit per SM (<= 32 registers), 1056 on 132 SMs, so 1.94 waves.
    // A persistent grid of 1056 blocks striding over the 2048 tiles has the same 1.94
    // quantisation but fixes the split in advance (some blocks 2 tiles, some 1); with an exact
    // grid the block scheduler starts each second-wave block on whichever SM frees a slot first,
    // so SMs that see lower memory latency take more tiles and the last tiles start as early as
    // possible. What the persistent grid saves, launching ~1000 more blocks, is well under a
    // microsecond. gridDim.x = ceil(N4 / 256) <= 2^21 fits (limit 2^31 - 1); gridDim.y is
    // capped at 65535 and the kernel strides over any further row groups.
    const fusedkit::GridXY g = fusedkit::vec4_tile_grid(M, N4, kVec4Threads, kVec4Rows);
    p12_epilogue_vec4_kernel<<<dim3(g.x, g.y), kVec4Threads, 0, stream>>>(
        reinterpret_cast<float4*>(y), reinterpret_cast<const float4*>(b), M, N4, multiplier,
        negative_slope);
}

}  // namespace p12
