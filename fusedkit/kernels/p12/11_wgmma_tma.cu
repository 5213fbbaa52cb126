// Computes y = LeakyReLU((x @ W.T + b) * multiplier) from fp16 x, W with Hopper's wgmma fed by TMA.
// Changed against 07: wgmma m64n128k16 on 128x64 fp16 tiles copied by TMA into a 3-stage mbarrier pipeline.
// Bound: fp16 tensor compute, floor 139 us; predicted below cuBLAS fp16's rate: one warpgroup waits for its own wgmmas.
#include <cstdint>
#include <cuda_runtime.h>

#include "../common/hopper.cuh"
#include "hopper_epilogue.cuh"
#include "launchers_hopper.h"

namespace {

namespace sm90 = fusedkit::sm90;

// Shapes: x is (M, K), W is (N, K), both K-contiguous ("K-major"), as wgmma wants A and B.
constexpr int BM = 128;        // rows of y per block: two m64 wgmma halves
constexpr int BN = 128;        // columns of y per block: the n of one wgmma
constexpr int BK = 64;         // k per stage: 64 fp16 = 128 bytes, one 128-byte swizzle row
constexpr int kStages = 3;     // 3 x 32 KB of shared memory: two blocks fit on an SM
constexpr int kThreads = 128;  // one warpgroup: it issues the wgmmas, its thread 0 the copies
constexpr int kWarps = kThreads / 32;

constexpr uint32_t kTileABytes = BM * BK * 2;  // 16 KB, a multiple of the 1 KB swizzle atom
constexpr uint32_t kTileBBytes = BN * BK * 2;  // 16 KB
constexpr uint32_t kStageBytes = kTileABytes + kTileBBytes;
// Dynamic shared memory: the stages plus 1 KB of slack to start them on a 1024-byte boundary
// (the 128-byte swizzle pattern, and the descriptors' base offset of 0, assume it).
constexpr size_t kSmemBytes = kStages * kStageBytes + sm90::kSwizzleAtomBytes;

}  // namespace

// Grid: blockIdx.x walks the m-tiles (fastest), blockIdx.y the n-tiles, so the blocks resident
// at one time share the same few W tiles: W (128 MB in fp16) streams from HBM about once and
// x (16 MB) stays in L2.
extern "C" __global__ void __launch_bounds__(kThreads)
p12_wgmma_tma_kernel(const __grid_constant__ CUtensorMap x_map,  // x (M, K) fp16, box 128 x 64
                     const __grid_constant__ CUtensorMap w_map,  // W (N, K) fp16, box 128 x 64
                     const float* __restrict__ b,                // (N,)
                     float* __restrict__ y,                      // (M, N)
                     int M, int N, int K, float multiplier, float negative_slope, int pairs_ok) {
    // full[s]: stage s holds its k-tile (1 arrival from the copying thread + the TMA bytes).
    // empty[s]: the 4 warps have finished their wgmmas on stage s (1 arrival per warp).
    __shared__ uint64_t full[kStages], empty[kStages];
    extern __shared__ uint8_t smem_raw[];
    const uint32_t raw = sm90::smem_addr(smem_raw);
    uint8_t* smem = smem_raw + ((sm90::kSwizzleAtomBytes - raw % sm90::kSwizzleAtomBytes) %
                                sm90::kSwizzleAtomBytes);
    // Stage s: A tile (128 rows x 128 bytes) at s * kStageBytes, B tile right after it.
    const auto tile_a = [smem](int s) { return smem + s * kStageBytes; };
    const auto tile_b = [smem](int s) { return smem + s * kStageBytes + kTileABytes; };

    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
    const int k_tiles = (K + BK - 1) / BK;  // a partial last k-tile is zero-filled by TMA
    const int lane = threadIdx.x % 32;
    const bool copier = threadIdx.x == 0;

    sm90::init_ring(full, empty, kWarps);
    __syncthreads();  // barriers initialised before anyone waits on them

    // Starts the copy of k-tile kt into stage s: announce the bytes, then two TMA boxes.
    const auto load = [&](int kt, int s) {
        sm90::mbar_arrive_expect_tx(&full[s], kStageBytes);
        sm90::tma_load_2d(tile_a(s), &x_map, &full[s], kt * BK, m0);
        sm90::tma_load_2d(tile_b(s), &w_map, &full[s], kt * BK, n0);
    };
    if (copier) {
        sm90::tma_prefetch_map(&x_map);
        sm90::tma_prefetch_map(&w_map);
        for (int kt = 0; kt < kStages && kt < k_tiles; ++kt) load(kt, kt);
    }

    float acc[2][BN / 2];  // two 64 x 128 fp32 accumulator fragments: 128 registers a thread
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) acc[h][i] = 0.0f;
    }

    for (int kt = 0; kt < k_tiles; ++kt) {
        const int s = kt % kStages;
        const uint32_t parity = (kt / kStages) & 1;  // the stage's use count, mod 2
        sm90::mbar_wait(&full[s], parity);           // TMA bytes of k-tile kt have landed

        const uint32_t a_addr = sm90::smem_addr(tile_a(s));
        const uint32_t b_addr = sm90::smem_addr(tile_b(s));
        sm90::fence_accumulators(acc[0]);
        sm90::fence_accumulators(acc[1]);
        sm90::wgmma_fence();
#pragma unroll
        for (int k16 = 0; k16 < BK / 16; ++k16) {  // 16-wide k slices: +32 bytes in each row
            const uint64_t db = sm90::sw128_desc(b_addr + 32 * k16);
#pragma unroll
            for (int h = 0; h < 2; ++h) {  // rows 64h..64h+63 of the tile: 8 atoms of 1 KB down
                const uint64_t da = sm90::sw128_desc(a_addr + h * 64 * 128 + 32 * k16);
                sm90::wgmma_m64n128k16_f16(acc[h], da, db);
            }
        }
        sm90::wgmma_commit();
        sm90::wgmma_wait<0>();  // this warp's part of the 8 wgmmas is done: stage s is free for it
        sm90::fence_accumulators(acc[0]);
        sm90::fence_accumulators(acc[1]);

        if (lane == 0) sm90::mbar_arrive(&empty[s]);
        // Refill stage s with k-tile kt + kStages once all four warps have released it; the
        // copy then has kStages - 1 k-tiles of math to hide behind.
        if (copier && kt + kStages < k_tiles) {
            sm90::mbar_wait(&empty[s], parity);
            load(kt + kStages, s);
        }
        __syncwarp();  // warp 0 converged again before the next .aligned wgmma instruction
    }

#pragma unroll
    for (int h = 0; h < 2; ++h) {
        p12::store_tile_m64<BN>(acc[h], y, b, m0 + 64 * h, n0, M, N, multiplier, negative_slope,
                                pairs_ok != 0);
    }
}

namespace p12 {

const char* launch_wgmma_tma(const __half* x, const __half* w, const float* b, float* y, int M,
                             int N, int K, float multiplier, float negative_slope,
                             cudaStream_t stream) {
    CUtensorMap x_map, w_map;
    if (const char* err = sm90::make_tensor_map_f16(&x_map, x, M, K, BM)) return err;
    if (const char* err = sm90::make_tensor_map_f16(&w_map, w, N, K, BN)) return err;
    // More than 48 KB of dynamic shared memory must be asked for explicitly.
    if (cudaFuncSetAttribute(p12_wgmma_tma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(kSmemBytes)) != cudaSuccess) {
        return "cudaFuncSetAttribute (dynamic shared memory) failed";
    }
    const bool pairs_ok = N % 2 == 0 && reinterpret_cast<uintptr_t>(y) % 8 == 0;
    const dim3 grid((M + BM - 1) / BM, (N + BN - 1) / BN);  // N <= 65536: grid.y <= 512
    p12_wgmma_tma_kernel<<<grid, kThreads, kSmemBytes, stream>>>(
        x_map, w_map, b, y, M, N, K, multiplier, negative_slope, pairs_ok ? 1 : 0);
    return nullptr;
}

}  // namespace p12
