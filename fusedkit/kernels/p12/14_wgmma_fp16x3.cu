// Computes y to fp32 accuracy from fp16x3 splits of x and W (hi + lo / 2048, row scales) on wgmma.
// Changed against 13: 4 tiles a stage (xh, xl, wh, wl), 128x128; each chunk's hi*hi added outside the MMA.
// Bound: fp16 tensor compute, three products: floor 3 x 139 us; predicted: three of step 13's products, y stored once, plus the x split.
#include <cstdint>
#include <cuda_runtime.h>

#include "../common/hopper.cuh"
#include "hopper_fp16x3.cuh"
#include "launchers_hopper.h"

// The tile, its stages and the consumers' k-loop are shared with steps 15, 16 and p45's step 07
// (common/hopper_fp16x3.cuh), the LeakyReLU epilogue with steps 15 and 16 (hopper_fp16x3.cuh);
// what is this step's own is who loads what: one block per tile, its producer bringing all four
// 16 KB boxes of a stage.
namespace fp = p12::fp16x3;
namespace sm90 = fusedkit::sm90;

extern "C" __global__ void __launch_bounds__(fp::kThreads, 1)
p12_wgmma_fp16x3_kernel(const __grid_constant__ CUtensorMap xh_map,  // xh (M, Kp), box 128 x 64
                        const __grid_constant__ CUtensorMap xl_map,  // xl (M, Kp)
                        const __grid_constant__ CUtensorMap wh_map,  // wh (N, Kp)
                        const __grid_constant__ CUtensorMap wl_map,  // wl (N, Kp)
                        const float* __restrict__ x_inv,             // (M,) 1 / row scale of x
                        const float* __restrict__ w_inv,             // (N,) 1 / row scale of W
                        const float* __restrict__ b,                 // (N,)
                        float* __restrict__ y,                       // (M, N)
                        int M, int N, int K, float multiplier, float negative_slope,
                        int pairs_ok) {
    // full[s]: the producer's expect_tx arrival + 64 KB of TMA bytes. empty[s]: one arrival per
    // consumer warp (8) once that warp's wgmmas no longer read stage s. `it` counts k-tiles
    // across tiles on both sides: stage it % kStages, parity (it / kStages) & 1.
    __shared__ uint64_t full[fp::kStages], empty[fp::kStages];
    extern __shared__ uint8_t smem_raw[];
    const fp::Ring ring(smem_raw);

    const int m_tiles = (M + fp::BM - 1) / fp::BM, n_tiles = (N + fp::BN - 1) / fp::BN;
    const int tiles = m_tiles * n_tiles;
    const int k_tiles = (K + fp::BK - 1) / fp::BK;
    const int warpgroup = threadIdx.x / 128;

    sm90::init_ring(full, empty, fp::kConsumers * 4);
    __syncthreads();  // the last block-wide barrier

    if (warpgroup == 0) {
        if (sm90::become_producer<fp::kProducerRegs>(&xh_map, &xl_map, &wh_map, &wl_map)) {
            uint32_t it = 0;
            for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
                int mt, nt;
                fp::grouped_tile(t, m_tiles, n_tiles, fp::kGroupM, mt, nt);
                for (int kt = 0; kt < k_tiles; ++kt, ++it) {
                    const int s = it % fp::kStages;
                    sm90::mbar_wait(&empty[s], ((it / fp::kStages) & 1) ^ 1);
                    // Zero-filled rows past M or N still count their bytes: always 64 KB.
                    sm90::mbar_arrive_expect_tx(&full[s], fp::kStageBytes);
                    sm90::tma_load_2d(ring.tile(s, fp::kXh), &xh_map, &full[s], kt * fp::BK, mt * fp::BM);
                    sm90::tma_load_2d(ring.tile(s, fp::kXl), &xl_map, &full[s], kt * fp::BK, mt * fp::BM);
                    sm90::tma_load_2d(ring.tile(s, fp::kWh), &wh_map, &full[s], kt * fp::BK, nt * fp::BN);
                    sm90::tma_load_2d(ring.tile(s, fp::kWl), &wl_map, &full[s], kt * fp::BK, nt * fp::BN);
                }
            }
        }
    } else {
        sm90::setmaxnreg_inc<fp::kConsumerRegs>();
        const fp::LeakyReluEpilogue epilogue{x_inv, w_inv, b, y, M, N, multiplier, negative_slope,
                                             pairs_ok != 0};
        uint32_t it = 0;
        for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
            int mt, nt;
            fp::grouped_tile(t, m_tiles, n_tiles, fp::kGroupM, mt, nt);
            fp::consume_tile(ring, full, it, k_tiles, warpgroup - 1, mt, nt, epilogue,
                             [&](int s) { sm90::mbar_arrive(&empty[s]); });
        }
    }
}

namespace p12 {

const char* launch_wgmma_fp16x3(const __half* xh, const __half* xl, const float* x_inv,
                                const __half* wh, const __half* wl, const float* w_inv,
                                const float* b, float* y, int M, int N, int K, float multiplier,
                                float negative_slope, cudaStream_t stream) {
    fp::SplitMaps maps;
    int sms = 0;
    if (const char* err = fp::prepare_split_launch(p12_wgmma_fp16x3_kernel, maps, xh, xl, wh, wl,
                                                   M, N, K, &sms)) {
        return err;
    }
    const int64_t tiles = static_cast<int64_t>((M + fp::BM - 1) / fp::BM) * ((N + fp::BN - 1) / fp::BN);
    const int blocks = static_cast<int>(tiles < sms ? tiles : sms);  // one block per SM at most
    const bool pairs_ok = N % 2 == 0 && reinterpret_cast<uintptr_t>(y) % 8 == 0;
    p12_wgmma_fp16x3_kernel<<<blocks, fp::kThreads, fp::kSmemBytes, stream>>>(
        maps.xh, maps.xl, maps.wh, maps.wl, x_inv, w_inv, b, y, M, N, K, multiplier, negative_slope,
        pairs_ok ? 1 : 0);
    return nullptr;
}

}  // namespace p12
