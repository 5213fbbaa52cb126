// Computes 02's two epilogues with 16-byte float4 accesses and several loads in flight per thread.
// Changed against 02: float4 sigmoid (4 rows a thread); pipelined, persistent float4 logsumexp (3 versions).
// Bound: memory, as 02; the gain is fewer instructions and more bytes in flight to cover HBM latency.
#include <cstdint>
#include <cuda_runtime.h>

#include "launchers.h"

// ---------------------------------------------------------------------------------------
// (a) sigmoid epilogue, p12's vec4 epilogue with sigmoid(v + b) in place of LeakyReLU.
// A block is 256 threads along a row (256 float4s = 4 KB) by kVec4Rows rows; each thread keeps
// kVec4Rows float4s plus one bias float4 live (within the 32 registers that 8 blocks per SM allow).
constexpr int kVec4Threads = 256;
constexpr int kVec4Rows = 4;
constexpr int kVec4MinBlocksPerSM = 8;

__device__ __forceinline__ float4 sigmoid4(float4 v, float4 bias) {
    v.x = p45::sigmoid(v.x + bias.x);
    v.y = p45::sigmoid(v.y + bias.y);
    v.z = p45::sigmoid(v.z + bias.z);
    v.w = p45::sigmoid(v.w + bias.w);
    return v;
}

// h and b1 seen as float4 arrays: row m of h is H4 = H / 4 float4s. Valid only when H % 4 == 0
// (a float4 never straddles two rows; b1's float4 j matches columns 4j..4j+3 of every row) and
// both base pointers are 16-byte aligned (a misaligned float4 access faults); the launcher checks.
// Thread (blockIdx.x * 256 + threadIdx.x) owns float4 column j, block row g owns rows 4g..4g+3:
// one bias load (ld.global.nc) and 4 loads of h (one row of H * 4 bytes apart) back to back,
// then 4 sigmoids, then 4 stores. A warp's access in one row is 512 contiguous bytes.
extern "C" __global__ void __launch_bounds__(kVec4Threads, kVec4MinBlocksPerSM)
p45_sigmoid_vec4_kernel(float4* __restrict__ h,          // (M, H / 4) float4s, in place
                        const float4* __restrict__ b1,   // (H / 4,) float4s
                        int M, int H4) {
    const int j = blockIdx.x * kVec4Threads + threadIdx.x;  // float4 column: columns 4j..4j+3
    if (j >= H4) return;  // last column block past the row's end: no work in any row
    const float4 bias = __ldg(b1 + j);
    const int64_t row_stride = H4;
    // Usually one iteration: gridDim.y covers all ceil(M / 4) row groups unless that exceeds
    // 65535 (M > 262140), when block rows stride over the rest.
    for (int64_t m0 = static_cast<int64_t>(blockIdx.y) * kVec4Rows; m0 < M;
         m0 += static_cast<int64_t>(gridDim.y) * kVec4Rows) {
        float4* tile = h + m0 * row_stride + j;
        // Rows past the end (M % 4 != 0) re-load row M - 1, which is in bounds, and are not
        // stored: the loads stay unconditional (all in flight together), only stores are guarded.
        const int64_t last = M - 1 - m0;  // the tile's valid rows are 0..min(last, 3)
        __builtin_assume(last >= 0);      // m0 < M
        float4 v[kVec4Rows];
#pragma unroll
        for (int r = 0; r < kVec4Rows; ++r) v[r] = tile[(r < last ? r : last) * row_stride];
#pragma unroll
        for (int r = 0; r < kVec4Rows; ++r) v[r] = sigmoid4(v[r], bias);
#pragma unroll
        for (int r = 0; r < kVec4Rows; ++r) {
            if (r <= last) tile[r * row_stride] = v[r];  // st.global.v4.f32
        }
    }
}

// ---------------------------------------------------------------------------------------
// (b) logsumexp row reduction, one warp per row at a time as 02, float4 loads, software-pipelined.
// A warp walks its rows in chunks of 32 lanes x kLseVecPerLane float4s = 256 float4s = 1 KiB
// floats (the whole row at N = 1024). A lane holds two chunks: the one it reduces and the next
// one (the next chunk of this row, or the first of the warp's next row), whose 8 loads it issues
// before it reduces the current one. The bias float4s (ld.global.nc, L1 hits after the first
// row) are added when a chunk is reduced.
//
// History, all on an H200 at M = 16384, N = 1024 (64 MiB of z):
// - v1 (commit e5b2610): 40.2 us, 61% of a same-size copy (2755 GB/s). Each value went through
//   expf inside a `v == m ? 1 : expf(v - m)` select that compiled to branches: ~1000
//   instructions per lane per row.
// - v2 (commit 2c0543b): one ex2.approx per value, no branch per value: 34.3 us, 71% of the
//   copy (24.4 us), against a 17-24 us prediction. Instructions were no longer the limit
//   (~300 per lane per row, ~5 us of issue); the order was. One row per warp, 2048 blocks of 8
//   warps, 32 warps per SM: four waves in which every warp loads its 4 KiB, waits, then only
//   computes, so memory idles while a wave computes.
// - v3 (this one): the next chunk is in flight while the current one is reduced, and the grid
//   is persistent (as many blocks as fit on the GPU at once, each warp taking M / warps rows,
//   evened out so no warp takes one row more than the rest need). Prediction: memory stays
//   busy; 26-29 us, 85-95% of the same-size copy. Measured (commit cde70af): 27.9 us,
//   2405 GB/s, 86% of the same-size copy (2807 GB/s); 85 registers, 2 blocks per SM.
// Per value: add the bias, subtract the max, multiply by log2(e), one ex2.approx (MUFU), one
// add; out-of-row slots are -inf (exp2 gives 0) instead of a branch; the exact select survives
// only for a lane whose max is infinite (warp-uniform in practice).
// Accuracy: ex2.approx.f32 is within 2 ulp; v - m is exact to 2^-24 of its size, so the
// dominant terms (v near m) carry ~2e-7 relative error each, averaged over the row: the
// result's error stays near 1e-7 absolute on values near ln(N) ~ 7, inside the fp32 tier.
constexpr int kLseVecPerLane = 8;
constexpr int kLseChunk4 = 32 * kLseVecPerLane;  // float4s per warp chunk
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ float max4(float4 v) {
    return fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w));
}

__device__ __forceinline__ float4 add4(float4 a, float4 b) {
    return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

// exp(d) for d = v - m <= 0 on a finite max m: one FMUL and one ex2.approx.f32 (2 ulp); -inf
// gives 0 and NaN gives NaN, which is what the reduction needs.
__device__ __forceinline__ float exp_le0(float d) {
    float r;
    asm("ex2.approx.f32 %0, %1;" : "=f"(r) : "f"(d * kLog2e));
    return r;
}

__device__ __forceinline__ float sum_exp4(float4 v, float m) {
    return (exp_le0(v.x - m) + exp_le0(v.y - m)) + (exp_le0(v.z - m) + exp_le0(v.w - m));
}

__device__ __forceinline__ float sum_exp4_exact(float4 v, float m) {
    return (p45::exp_below(v.x, m) + p45::exp_below(v.y, m)) +
           (p45::exp_below(v.z, m) + p45::exp_below(v.w, m));
}

// Versions 1 and 2 of the reduction, kept runnable (launch_lse_vec4's `version`) so that the
// three can be timed side by side in one run: one warp per row, 02's grid (lse_grid_blocks),
// each chunk loaded and then reduced, nothing in flight during the reduction.
// v1: each value through exp_below (expf inside a select that compiles to branches), and the
// out-of-row slots skipped by a branch.
extern "C" __global__ void __launch_bounds__(p45::kLseThreads)
p45_lse_vec4_v1_kernel(const float4* __restrict__ z, const float4* __restrict__ b2,
                       float* __restrict__ out, int M, int N4) {
    const int lane = threadIdx.x % 32;
    const int64_t first_row = static_cast<int64_t>(blockIdx.x) * p45::kLseWarps + threadIdx.x / 32;
    const int64_t row_stride = static_cast<int64_t>(gridDim.x) * p45::kLseWarps;
    for (int64_t m = first_row; m < M; m += row_stride) {
        const float4* z_row = z + m * N4;
        p45::LseState st = p45::lse_empty();
        for (int c0 = 0; c0 < N4; c0 += kLseChunk4) {
            float4 v[kLseVecPerLane];
            bool valid[kLseVecPerLane];
#pragma unroll
            for (int i = 0; i < kLseVecPerLane; ++i) {
                const int idx = c0 + i * 32 + lane;
                valid[i] = idx < N4;
                const int at = valid[i] ? idx : N4 - 1;
                v[i] = add4(z_row[at], __ldg(b2 + at));
            }
            float chunk_max = -INFINITY;
#pragma unroll
            for (int i = 0; i < kLseVecPerLane; ++i) {
                if (valid[i]) chunk_max = fmaxf(chunk_max, max4(v[i]));
            }
            const float m_new = fmaxf(st.m, chunk_max);
            float s = st.s * p45::exp_below(st.m, m_new);
#pragma unroll
            for (int i = 0; i < kLseVecPerLane; ++i) {
                if (valid[i]) s += sum_exp4_exact(v[i], m_new);
            }
            st = {m_new, s};
        }
        st = p45::warp_lse_allreduce(st);
        if (lane == 0) out[m] = p45::lse_value(st);
    }
}

// v2: one ex2.approx per value and -inf in the out-of-row slots (a select, not a branch); still
// one row per warp, loaded and then reduced.
extern "C" __global__ void __launch_bounds__(p45::kLseThreads)
p45_lse_vec4_v2_kernel(const float4* __restrict__ z, const float4* __restrict__ b2,
                       float* __restrict__ out, int M, int N4) {
    const int lane = threadIdx.x % 32;
    const int64_t first_row = static_cast<int64_t>(blockIdx.x) * p45::kLseWarps + threadIdx.x / 32;
    const int64_t row_stride = static_cast<int64_t>(gridDim.x) * p45::kLseWarps;
    const float4 none = make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
    for (int64_t m = first_row; m < M; m += row_stride) {
        const float4* z_row = z + m * N4;
        p45::LseState st = p45::lse_empty();
        for (int c0 = 0; c0 < N4; c0 += kLseChunk4) {
            float4 v[kLseVecPerLane];
#pragma unroll
            for (int i = 0; i < kLseVecPerLane; ++i) {
                const int idx = c0 + i * 32 + lane;
                const int at = idx < N4 ? idx : N4 - 1;
                v[i] = add4(z_row[at], __ldg(b2 + at));
                v[i] = idx < N4 ? v[i] : none;
            }
            float chunk_max = -INFINITY;
#pragma unroll
            for (int i = 0; i < kLseVecPerLane; ++i) chunk_max = fmaxf(chunk_max, max4(v[i]));
            const float m_new = fmaxf(st.m, chunk_max);
            float s = st.s * p45::exp_below(st.m, m_new);
            if (isfinite(m_new)) {
#pragma unroll
                for (int i = 0; i < kLseVecPerLane; ++i) s += sum_exp4(v[i], m_new);
            } else {
#pragma unroll
                for (int i = 0; i < kLseVecPerLane; ++i) s += sum_exp4_exact(v[i], m_new);
            }
            st = {m_new, s};
        }
        st = p45::warp_lse_allreduce(st);
        if (lane == 0) out[m] = p45::lse_value(st);
    }
}

// Issues a lane's loads of chunk c0 of one row of z. Lanes whose float4 index passes the row's
// end (the last chunk, or N / 4 < 256) load the row's last float4 instead, which is in bounds,
// and lse_chunk counts it as -inf: the loads stay unconditional and go out back to back.
__device__ __forceinline__ void load_chunk(float4 (&v)[kLseVecPerLane], const float4* z_row,
                                           int c0, int N4, int lane) {
#pragma unroll
    for (int i = 0; i < kLseVecPerLane; ++i) {
        const int idx = c0 + i * 32 + lane;
        v[i] = z_row[idx < N4 ? idx : N4 - 1];
    }
}

// Folds chunk c0 (raw z, as loaded) into the lane's running (max, sum): bias added on the fly,
// one rescale of the old sum per chunk, then one exp per value.
__device__ __forceinline__ p45::LseState lse_chunk(p45::LseState st,
                                                   const float4 (&z)[kLseVecPerLane],
                                                   const float4* __restrict__ b2,
                                                   int c0, int N4, int lane) {
    const float4 none = make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
    float4 v[kLseVecPerLane];
    float chunk_max = -INFINITY;
#pragma unroll
    for (int i = 0; i < kLseVecPerLane; ++i) {
        const int idx = c0 + i * 32 + lane;
        v[i] = add4(z[i], __ldg(b2 + (idx < N4 ? idx : N4 - 1)));
        v[i] = idx < N4 ? v[i] : none;  // a select, not a branch
        chunk_max = fmaxf(chunk_max, max4(v[i]));
    }
    const float m_new = fmaxf(st.m, chunk_max);
    float s = st.s * p45::exp_below(st.m, m_new);  // see exp_below for the infinite cases
    if (isfinite(m_new)) {  // always, unless this lane saw only -inf, or a +inf
#pragma unroll
        for (int i = 0; i < kLseVecPerLane; ++i) s += sum_exp4(v[i], m_new);
    } else {
        // With m_new = -inf every slot counts 1 (padding too): harmless, the pair is (-inf, s)
        // and merges to 0 beside any finite max, or ends as -inf + log(s) = -inf.
#pragma unroll
        for (int i = 0; i < kLseVecPerLane; ++i) s += sum_exp4_exact(v[i], m_new);
    }
    return {m_new, s};
}

// Valid only when N % 4 == 0 and z, b2 16-byte aligned (then every row of z starts aligned).
// Warp-uniform control flow (rows by warp index, chunks by N4), so every lane reaches the
// shuffles, as the full mask requires.
extern "C" __global__ void __launch_bounds__(p45::kLseThreads)
p45_lse_vec4_kernel(const float4* __restrict__ z,    // (M, N / 4) float4s
                    const float4* __restrict__ b2,   // (N / 4,) float4s
                    float* __restrict__ out,         // (M,)
                    int M, int N4) {
    const int lane = threadIdx.x % 32;
    const int64_t row_stride = static_cast<int64_t>(gridDim.x) * p45::kLseWarps;
    int64_t m = static_cast<int64_t>(blockIdx.x) * p45::kLseWarps + threadIdx.x / 32;
    if (m >= M) return;  // warp-uniform: a whole warp without rows
    float4 cur[kLseVecPerLane];
    load_chunk(cur, z + m * N4, 0, N4, lane);
    p45::LseState st = p45::lse_empty();
    int c0 = 0;
    while (true) {
        // Where the next chunk is: further along this row, or the start of the warp's next row.
        const bool row_ends = c0 + kLseChunk4 >= N4;
        const int64_t m_next = row_ends ? m + row_stride : m;
        const int c_next = row_ends ? 0 : c0 + kLseChunk4;
        // Unconditional, so the compiler issues these loads first: past the warp's last row it
        // re-loads the current chunk (in bounds, 4 KiB once per warp) and never reads it.
        float4 nxt[kLseVecPerLane];
        load_chunk(nxt, z + (m_next < M ? m_next : m) * N4, m_next < M ? c_next : c0, N4, lane);
        st = lse_chunk(st, cur, b2, c0, N4, lane);
        if (row_ends) {
            st = p45::warp_lse_allreduce(st);
            if (lane == 0) out[m] = p45::lse_value(st);
            st = p45::lse_empty();
        }
        if (m_next >= M) break;
        m = m_next;
        c0 = c_next;
#pragma unroll
        for (int i = 0; i < kLseVecPerLane; ++i) cur[i] = nxt[i];
    }
}

// Blocks for the persistent grid: as many as fit on the device at once, then evened out so that
// every warp takes the same number of rows, give or take one. At M = 16384 with 2 blocks per SM
// on 132 SMs, 264 blocks would give some warps 8 rows and the rest 7, and all would wait on the
// 8-row ones; 256 blocks give every warp 8.
static unsigned lse_vec4_grid_blocks(int64_t M) {
    int device = 0, sms = 0, per_sm = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, p45_lse_vec4_kernel, p45::kLseThreads, 0);
    const int64_t resident = static_cast<int64_t>(sms > 0 ? sms : 1) * (per_sm > 0 ? per_sm : 1);
    const int64_t needed = (M + p45::kLseWarps - 1) / p45::kLseWarps;  // one row per warp
    const int64_t blocks = needed < resident ? needed : resident;
    const int64_t rows_per_warp = (M + blocks * p45::kLseWarps - 1) / (blocks * p45::kLseWarps);
    const int64_t even = (M + rows_per_warp * p45::kLseWarps - 1) / (rows_per_warp * p45::kLseWarps);
    return static_cast<unsigned>(even < 1 ? 1 : even);
}

namespace p45 {

bool vec4_fast_path(const float* t, const float* b, int cols) {
    const auto aligned16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    return cols % 4 == 0 && aligned16(t) && aligned16(b);
}

void launch_sigmoid_vec4(float* h, const float* b1, int M, int H, cudaStream_t stream) {
    if (!vec4_fast_path(h, b1, H)) {
        launch_sigmoid_scalar(h, b1, M, H, stream);  // any H, any 4-byte alignment
        return;
    }
    const int H4 = H / 4;
    // Exact grid as p12's: one 4-row tile per thread. At 16384 x 4096 that is 4 x 4096 blocks
    // (256 MiB read, 256 MiB written: ~115-130 us at 4.2-4.8 TB/s). gridDim.y capped at 65535,
    // the kernel strides over further row groups.
    const fusedkit::GridXY g = fusedkit::vec4_tile_grid(M, H4, kVec4Threads, kVec4Rows);
    p45_sigmoid_vec4_kernel<<<dim3(g.x, g.y), kVec4Threads, 0, stream>>>(
        reinterpret_cast<float4*>(h), reinterpret_cast<const float4*>(b1), M, H4);
}

void launch_lse_vec4(const float* z, const float* b2, float* out, int M, int N,
                     cudaStream_t stream, int version) {
    if (!vec4_fast_path(z, b2, N)) {
        launch_lse_scalar(z, b2, out, M, N, stream);  // any N, any 4-byte alignment
        return;
    }
    const auto* z4 = reinterpret_cast<const float4*>(z);
    const auto* b4 = reinterpret_cast<const float4*>(b2);
    if (version == 1) {
        p45_lse_vec4_v1_kernel<<<lse_grid_blocks(M), kLseThreads, 0, stream>>>(z4, b4, out, M, N / 4);
    } else if (version == 2) {
        p45_lse_vec4_v2_kernel<<<lse_grid_blocks(M), kLseThreads, 0, stream>>>(z4, b4, out, M, N / 4);
    } else {
        p45_lse_vec4_kernel<<<lse_vec4_grid_blocks(M), kLseThreads, 0, stream>>>(z4, b4, out, M, N / 4);
    }
}

}  // namespace p45
