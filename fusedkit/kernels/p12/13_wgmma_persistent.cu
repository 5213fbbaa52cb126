// Computes step 11's y with warp-specialised wgmma, one persistent block per SM.
// Changed against 12: grouped (super-row) tile order; the producer loads the next tile during the epilogue.
// Bound: fp16 tensor compute, floor 139 us; predicted: step 12 less one tile's epilogue per SM (two rounds of tiles either way).
#include <cstdint>
#include <cuda_runtime.h>

#include "../common/hopper.cuh"
#include "hopper_epilogue.cuh"
#include "launchers_hopper.h"

namespace {

namespace sm90 = fusedkit::sm90;

// Shapes: x is (M, K), W is (N, K), both K-contiguous ("K-major"), as wgmma wants A and B.
constexpr int BM = 128;         // rows of y per tile: consumer c owns rows 64c .. 64c + 63
constexpr int BN = 256;         // columns of y per tile: the n of one wgmma
constexpr int BK = 64;          // k per stage: 64 fp16 = 128 bytes, one 128-byte swizzle row
constexpr int kStages = 4;      // 4 x 48 KB = 192 KB of the 227 KB a block may have
constexpr int kConsumers = 2;   // consumer warpgroups
constexpr int kThreads = 128 * (1 + kConsumers);
constexpr int kProducerRegs = 40;   // 128 * 40 + 256 * 232 = 64512 <= 384 * 168 (see step 12)
constexpr int kConsumerRegs = 232;
// Grouped order: tiles go down kGroupM m-tiles (a super-row of y) before moving one n-tile
// right, so the blocks working at one time share few W tiles (each W tile is read by all
// kGroupM m-tiles while it is in L2) and all of x's super-row. At 1024 rows, kGroupM = 8 is
// the whole height of y: W (128 MB in fp16) streams from HBM once, x (16 MB) stays in L2.
constexpr int kGroupM = 8;

constexpr uint32_t kTileABytes = BM * BK * 2;  // 16 KB
constexpr uint32_t kTileBBytes = BN * BK * 2;  // 32 KB
constexpr uint32_t kStageBytes = kTileABytes + kTileBBytes;
constexpr size_t kSmemBytes = kStages * kStageBytes + sm90::kSwizzleAtomBytes;  // + alignment slack

// Tile t of the grouped order -> (m-tile, n-tile). Both roles call it with the same t, so
// they agree on every tile without talking to each other.
__device__ __forceinline__ void grouped_tile(int t, int m_tiles, int n_tiles, int& mt, int& nt) {
    const int per_group = kGroupM * n_tiles;
    const int first_m = (t / per_group) * kGroupM;
    const int group_m = min(m_tiles - first_m, kGroupM);  // the last group may be shorter
    const int r = t % per_group;
    mt = first_m + r % group_m;
    nt = r / group_m;
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 1)
p12_wgmma_persistent_kernel(const __grid_constant__ CUtensorMap x_map,  // x (M, K), box 128 x 64
                            const __grid_constant__ CUtensorMap w_map,  // W (N, K), box 256 x 64
                            const float* __restrict__ b,                // (N,)
                            float* __restrict__ y,                      // (M, N)
                            int M, int N, int K, float multiplier, float negative_slope,
                            int pairs_ok) {
    // full[s] / empty[s] as in step 12. The stage ring runs on across tiles: `it`, the count
    // of k-tiles this block has passed through, gives the stage (it % kStages) and the parity
    // of its use ((it / kStages) & 1), the same on both sides.
    __shared__ uint64_t full[kStages], empty[kStages];
    extern __shared__ uint8_t smem_raw[];
    const uint32_t raw = sm90::smem_addr(smem_raw);
    uint8_t* smem = smem_raw + ((sm90::kSwizzleAtomBytes - raw % sm90::kSwizzleAtomBytes) %
                                sm90::kSwizzleAtomBytes);
    const auto tile_a = [smem](int s) { return smem + s * kStageBytes; };
    const auto tile_b = [smem](int s) { return smem + s * kStageBytes + kTileABytes; };

    const int m_tiles = (M + BM - 1) / BM, n_tiles = (N + BN - 1) / BN;
    const int tiles = m_tiles * n_tiles;
    const int k_tiles = (K + BK - 1) / BK;
    const int warpgroup = threadIdx.x / 128;

    sm90::init_ring(full, empty, kConsumers * 4);
    __syncthreads();  // the last block-wide barrier

    if (warpgroup == 0) {
        if (sm90::become_producer<kProducerRegs>(&x_map, &w_map)) {
            uint32_t it = 0;
            for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
                int mt, nt;
                grouped_tile(t, m_tiles, n_tiles, mt, nt);
                // No wait at a tile boundary: the loads of the next tile start as soon as a
                // stage is free, while the consumers are still in the last tile's epilogue.
                for (int kt = 0; kt < k_tiles; ++kt, ++it) {
                    const int s = it % kStages;
                    sm90::mbar_wait(&empty[s], ((it / kStages) & 1) ^ 1);
                    sm90::mbar_arrive_expect_tx(&full[s], kStageBytes);
                    sm90::tma_load_2d(tile_a(s), &x_map, &full[s], kt * BK, mt * BM);
                    sm90::tma_load_2d(tile_b(s), &w_map, &full[s], kt * BK, nt * BN);
                }
            }
        }
    } else {
        sm90::setmaxnreg_inc<kConsumerRegs>();
        const int c = warpgroup - 1;
        const bool lane0 = threadIdx.x % 32 == 0;
        float acc[BN / 2];  // 64 x 256 fp32 fragment: 128 registers
        uint32_t it = 0;
        for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
            int mt, nt;
            grouped_tile(t, m_tiles, n_tiles, mt, nt);
#pragma unroll
            for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
            for (int kt = 0; kt < k_tiles; ++kt, ++it) {
                const int s = it % kStages;
                sm90::mbar_wait(&full[s], (it / kStages) & 1);
                const uint32_t a_addr = sm90::smem_addr(tile_a(s)) + c * 64 * 128;
                const uint32_t b_addr = sm90::smem_addr(tile_b(s));
                sm90::fence_accumulators(acc);
                sm90::wgmma_fence();
#pragma unroll
                for (int k16 = 0; k16 < BK / 16; ++k16) {
                    sm90::wgmma_m64n256k16_f16(acc, sm90::sw128_desc(a_addr + 32 * k16),
                                               sm90::sw128_desc(b_addr + 32 * k16));
                }
                sm90::wgmma_commit();
                sm90::wgmma_wait<0>();
                sm90::fence_accumulators(acc);
                if (lane0) sm90::mbar_arrive(&empty[s]);
            }
            // Stores leave from registers and are not waited for: the next tile's first wgmma
            // can start as soon as its stage is full, which the producer has been filling.
            p12::store_tile_m64<BN>(acc, y, b, mt * BM + 64 * c, nt * BN, M, N, multiplier,
                                    negative_slope, pairs_ok != 0);
        }
    }
}

namespace p12 {

const char* launch_wgmma_persistent(const __half* x, const __half* w, const float* b, float* y,
                                    int M, int N, int K, float multiplier, float negative_slope,
                                    cudaStream_t stream) {
    CUtensorMap x_map, w_map;
    if (const char* err = sm90::make_tensor_map_f16(&x_map, x, M, K, BM)) return err;
    if (const char* err = sm90::make_tensor_map_f16(&w_map, w, N, K, BN)) return err;
    if (cudaFuncSetAttribute(p12_wgmma_persistent_kernel,
                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(kSmemBytes)) != cudaSuccess) {
        return "cudaFuncSetAttribute (dynamic shared memory) failed";
    }
    int device = 0, sms = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
        return "could not read the multiprocessor count";
    }
    const int64_t tiles = static_cast<int64_t>((M + BM - 1) / BM) * ((N + BN - 1) / BN);
    const int blocks = static_cast<int>(tiles < sms ? tiles : sms);  // one block per SM at most
    const bool pairs_ok = N % 2 == 0 && reinterpret_cast<uintptr_t>(y) % 8 == 0;
    p12_wgmma_persistent_kernel<<<blocks, kThreads, kSmemBytes, stream>>>(
        x_map, w_map, b, y, M, N, K, multiplier, negative_slope, pairs_ok ? 1 : 0);
    return nullptr;
}

}  // namespace p12
