// Computes step 11's y with wgmma, one warpgroup copying (TMA) and two computing.
// Changed against 11: warp specialisation on 128x256 tiles, setmaxnreg, full/empty mbarriers, 4 stages.
// Bound: fp16 tensor compute, floor 139 us; predicted near cuBLAS fp16: the copies no longer wait behind the math.
#include <cstdint>
#include <cuda_runtime.h>

#include "../common/hopper.cuh"
#include "hopper_epilogue.cuh"
#include "launchers_hopper.h"

namespace {

namespace sm90 = fusedkit::sm90;

// Shapes: x is (M, K), W is (N, K), both K-contiguous ("K-major"), as wgmma wants A and B.
constexpr int BM = 128;         // rows of y per block: consumer c owns rows 64c .. 64c + 63
constexpr int BN = 256;         // columns of y per block: the n of one wgmma
constexpr int BK = 64;          // k per stage: 64 fp16 = 128 bytes, one 128-byte swizzle row
constexpr int kStages = 4;      // 4 x 48 KB = 192 KB of the 227 KB a block may have
constexpr int kConsumers = 2;   // consumer warpgroups
constexpr int kThreads = 128 * (1 + kConsumers);  // warpgroup 0 produces, 1 and 2 consume
// Register budget: __launch_bounds__(384, 1) gives 65536 / 384 = 168 registers a thread at entry;
// the producer needs few and gives most back (40), the consumers take them (232 >= 128
// accumulators + addresses): 128 * 40 + 256 * 232 = 64512 <= 384 * 168.
constexpr int kProducerRegs = 40;
constexpr int kConsumerRegs = 232;

constexpr uint32_t kTileABytes = BM * BK * 2;  // 16 KB
constexpr uint32_t kTileBBytes = BN * BK * 2;  // 32 KB: one TMA box of 256 rows (the maximum)
constexpr uint32_t kStageBytes = kTileABytes + kTileBBytes;
constexpr size_t kSmemBytes = kStages * kStageBytes + sm90::kSwizzleAtomBytes;  // + alignment slack

}  // namespace

// Grid: blockIdx.x walks the m-tiles (fastest), blockIdx.y the n-tiles, so the ~132 blocks
// resident at once share ~17 W tiles: W streams from HBM about once, x stays in L2.
extern "C" __global__ void __launch_bounds__(kThreads, 1)
p12_wgmma_warpspec_kernel(const __grid_constant__ CUtensorMap x_map,  // x (M, K), box 128 x 64
                          const __grid_constant__ CUtensorMap w_map,  // W (N, K), box 256 x 64
                          const float* __restrict__ b,                // (N,)
                          float* __restrict__ y,                      // (M, N)
                          int M, int N, int K, float multiplier, float negative_slope,
                          int pairs_ok) {
    // full[s]: stage s holds its k-tile (1 arrival from the producer + the TMA bytes).
    // empty[s]: both consumers are done reading stage s (1 arrival per consumer warp: 8).
    __shared__ uint64_t full[kStages], empty[kStages];
    extern __shared__ uint8_t smem_raw[];
    const uint32_t raw = sm90::smem_addr(smem_raw);
    uint8_t* smem = smem_raw + ((sm90::kSwizzleAtomBytes - raw % sm90::kSwizzleAtomBytes) %
                                sm90::kSwizzleAtomBytes);
    const auto tile_a = [smem](int s) { return smem + s * kStageBytes; };
    const auto tile_b = [smem](int s) { return smem + s * kStageBytes + kTileABytes; };

    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
    const int k_tiles = (K + BK - 1) / BK;  // a partial last k-tile is zero-filled by TMA
    const int warpgroup = threadIdx.x / 128;

    sm90::init_ring(full, empty, kConsumers * 4);
    __syncthreads();  // the last block-wide barrier: from here on the roles only meet at mbarriers

    if (warpgroup == 0) {
        // Producer: one thread issues every copy; the other 127 threads have nothing to do.
        if (sm90::become_producer<kProducerRegs>(&x_map, &w_map)) {
            for (int kt = 0; kt < k_tiles; ++kt) {
                const int s = kt % kStages;
                // Wait until the consumers released this stage's previous use (round kt / kStages
                // - 1); in round 0 the parity-1 wait on a fresh barrier passes at once.
                sm90::mbar_wait(&empty[s], ((kt / kStages) & 1) ^ 1);
                sm90::mbar_arrive_expect_tx(&full[s], kStageBytes);
                sm90::tma_load_2d(tile_a(s), &x_map, &full[s], kt * BK, m0);
                sm90::tma_load_2d(tile_b(s), &w_map, &full[s], kt * BK, n0);
            }
        }
    } else {
        sm90::setmaxnreg_inc<kConsumerRegs>();
        const int c = warpgroup - 1;                 // consumer index: rows 64c .. 64c + 63
        const bool lane0 = threadIdx.x % 32 == 0;
        float acc[BN / 2];                           // 64 x 256 fp32 fragment: 128 registers
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;

        for (int kt = 0; kt < k_tiles; ++kt) {
            const int s = kt % kStages;
            sm90::mbar_wait(&full[s], (kt / kStages) & 1);  // the stage's bytes have landed
            // This consumer's 64 rows start 64 rows (8 swizzle atoms, 8 KB) into the A tile.
            const uint32_t a_addr = sm90::smem_addr(tile_a(s)) + c * 64 * 128;
            const uint32_t b_addr = sm90::smem_addr(tile_b(s));
            sm90::fence_accumulators(acc);
            sm90::wgmma_fence();
#pragma unroll
            for (int k16 = 0; k16 < BK / 16; ++k16) {  // 16-wide k slices: +32 bytes in each row
                sm90::wgmma_m64n256k16_f16(acc, sm90::sw128_desc(a_addr + 32 * k16),
                                           sm90::sw128_desc(b_addr + 32 * k16));
            }
            sm90::wgmma_commit();
            sm90::wgmma_wait<0>();  // this warp's wgmmas on stage s are done
            sm90::fence_accumulators(acc);
            if (lane0) sm90::mbar_arrive(&empty[s]);  // one of the 8 arrivals that free stage s
        }
        p12::store_tile_m64<BN>(acc, y, b, m0 + 64 * c, n0, M, N, multiplier, negative_slope,
                                pairs_ok != 0);
    }
}

namespace p12 {

const char* launch_wgmma_warpspec(const __half* x, const __half* w, const float* b, float* y,
                                  int M, int N, int K, float multiplier, float negative_slope,
                                  cudaStream_t stream) {
    CUtensorMap x_map, w_map;
    if (const char* err = sm90::make_tensor_map_f16(&x_map, x, M, K, BM)) return err;
    if (const char* err = sm90::make_tensor_map_f16(&w_map, w, N, K, BN)) return err;
    if (cudaFuncSetAttribute(p12_wgmma_warpspec_kernel,
                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(kSmemBytes)) != cudaSuccess) {
        return "cudaFuncSetAttribute (dynamic shared memory) failed";
    }
    const bool pairs_ok = N % 2 == 0 && reinterpret_cast<uintptr_t>(y) % 8 == 0;
    const dim3 grid((M + BM - 1) / BM, (N + BN - 1) / BN);  // N <= 65536: grid.y <= 256
    p12_wgmma_warpspec_kernel<<<grid, kThreads, kSmemBytes, stream>>>(
        x_map, w_map, b, y, M, N, K, multiplier, negative_slope, pairs_ok ? 1 : 0);
    return nullptr;
}

}  // namespace p12
