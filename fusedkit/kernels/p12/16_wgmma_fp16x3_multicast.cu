// Computes y to fp32 accuracy from fp16x3 splits of x and W, as step 14, in clusters of two blocks.
// Changed against 14: the two blocks of a cluster (two row tiles, one column tile) share a stage's W boxes: each copies one from L2 into both.
// Bound: step 14's feed, 64 KB from L2 a k-tile a block, cut to 48 KB: faster only if the feed, not the tensor pipe, holds step 14 back.
#include <cstdint>
#include <cuda_runtime.h>

#include "../common/hopper.cuh"
#include "hopper_fp16x3.cuh"
#include "launchers_hopper.h"

// Why: at the tensor cores' rate a block of step 14 finishes a k-tile (3 x 128 x 128 x 64 MACs)
// in about 0.8 us and needs the next 64 KB by then; 132 blocks together ask L2 for ~10 TB/s.
// Nsight Compute's source page of step 14 put 13% of its warps' stall samples on the consumers'
// wait for a stage to land. Two blocks working on the same column tile read the same wh and wl
// boxes; in a cluster, block 0 copies wh and block 1 copies wl, each multicast into both blocks'
// stage at the same offset, so each block reads 48 KB a k-tile from L2 instead of 64.
//
// What the sharing costs in synchronisation: a stage may be refilled only when the consumers of
// both blocks are done with it (the other block's copy writes into it too), so every consumer
// warp arrives on the empty barrier of both blocks (16 arrivals a phase). Those arrivals are
// plain ones (release at CTA scope, hopper.cuh says why: the first version's cluster-scope
// release and acquire cost more than the sharing saved). A block's full barrier counts its own x boxes and the two
// W boxes, whichever block sent them. The peer's W box may land before this block announced the
// phase's bytes: the barrier's byte count goes below zero for a while, and the phase still cannot
// complete before this block's producer has arrived.
namespace fp = p12::fp16x3;
namespace sm90 = fusedkit::sm90;

namespace {

constexpr int kCluster = 2;                          // blocks per cluster: row tiles 2p and 2p + 1
constexpr int kGroupPairs = fp::kGroupM / kCluster;  // step 14's grouped order, in pairs of rows
constexpr uint16_t kBothBlocks = 0b11;               // multicast mask: cluster ranks 0 and 1

}  // namespace

extern "C" __global__ void __launch_bounds__(fp::kThreads, 1)
p12_wgmma_fp16x3_multicast_kernel(const __grid_constant__ CUtensorMap xh_map,  // xh (M, Kp), box 128 x 64
                                  const __grid_constant__ CUtensorMap xl_map,  // xl (M, Kp)
                                  const __grid_constant__ CUtensorMap wh_map,  // wh (N, Kp)
                                  const __grid_constant__ CUtensorMap wl_map,  // wl (N, Kp)
                                  const float* __restrict__ x_inv, const float* __restrict__ w_inv,
                                  const float* __restrict__ b, float* __restrict__ y, int M, int N,
                                  int K, float multiplier, float negative_slope, int pairs_ok) {
    __shared__ uint64_t full[fp::kStages], empty[fp::kStages];
    extern __shared__ uint8_t smem_raw[];
    const fp::Ring ring(smem_raw);

    const uint32_t rank = sm90::cluster_ctarank();  // which row tile of the pair is this block's
    const int m_tiles = (M + fp::BM - 1) / fp::BM, n_tiles = (N + fp::BN - 1) / fp::BN;
    const int m_pairs = (m_tiles + 1) / 2;
    const int pairs = m_pairs * n_tiles;  // the work items: (pair of row tiles, column tile)
    const int cluster = blockIdx.x / kCluster, clusters = gridDim.x / kCluster;
    const int k_tiles = (K + fp::BK - 1) / fp::BK;
    const int warpgroup = threadIdx.x / 128;

    sm90::init_ring(full, empty, kCluster * fp::kConsumers * 4);
    sm90::cluster_sync();  // both blocks' barriers exist before a copy or an arrival crosses over

    if (warpgroup == 0) {
        if (sm90::become_producer<fp::kProducerRegs>(&xh_map, &xl_map, &wh_map, &wl_map)) {
            const CUtensorMap* shared_w = rank == 0 ? &wh_map : &wl_map;  // the W box this block brings to both
            uint32_t it = 0;
            for (int t = cluster; t < pairs; t += clusters) {
                int pm, nt;
                fp::grouped_tile(t, m_pairs, n_tiles, kGroupPairs, pm, nt);
                const int mt = kCluster * pm + static_cast<int>(rank);
                // With an odd number of row tiles the last pair's second tile lies past M: that
                // block copies no x (its consumers compute on stale rows and store nothing) but
                // still brings its W box to the other block.
                const bool has_rows = mt < m_tiles;
                const uint32_t bytes = (has_rows ? 4 : 2) * fp::kTileBytes;
                for (int kt = 0; kt < k_tiles; ++kt, ++it) {
                    const int s = it % fp::kStages;
                    sm90::mbar_wait(&empty[s], ((it / fp::kStages) & 1) ^ 1);
                    sm90::mbar_arrive_expect_tx(&full[s], bytes);
                    if (has_rows) {
                        sm90::tma_load_2d(ring.tile(s, fp::kXh), &xh_map, &full[s], kt * fp::BK, mt * fp::BM);
                        sm90::tma_load_2d(ring.tile(s, fp::kXl), &xl_map, &full[s], kt * fp::BK, mt * fp::BM);
                    }
                    sm90::tma_load_2d_multicast(ring.tile(s, fp::kWh + static_cast<int>(rank)), shared_w,
                                                &full[s], kt * fp::BK, nt * fp::BN, kBothBlocks);
                }
            }
        }
    } else {
        sm90::setmaxnreg_inc<fp::kConsumerRegs>();
        const fp::LeakyReluEpilogue epilogue{x_inv, w_inv, b, y, M, N, multiplier, negative_slope,
                                             pairs_ok != 0};
        uint32_t it = 0;
        for (int t = cluster; t < pairs; t += clusters) {
            int pm, nt;
            fp::grouped_tile(t, m_pairs, n_tiles, kGroupPairs, pm, nt);
            const int mt = kCluster * pm + static_cast<int>(rank);
            fp::consume_tile(ring, full, it, k_tiles, warpgroup - 1, mt, nt, epilogue, [&](int s) {
                                 sm90::mbar_arrive_cluster(&empty[s], 0);
                                 sm90::mbar_arrive_cluster(&empty[s], 1);
                             });
        }
    }
    sm90::cluster_sync();  // neither block leaves while the other may still copy into it or arrive on its barriers
}

namespace p12 {

const char* launch_wgmma_fp16x3_multicast(const __half* xh, const __half* xl, const float* x_inv,
                                          const __half* wh, const __half* wl, const float* w_inv,
                                          const float* b, float* y, int M, int N, int K,
                                          float multiplier, float negative_slope,
                                          cudaStream_t stream) {
    fp::SplitMaps maps;
    if (const char* err = fp::prepare_split_launch(p12_wgmma_fp16x3_multicast_kernel, maps, xh, xl, wh, wl,
                                                   M, N, K)) {
        return err;
    }
    cudaLaunchAttribute cluster_dims{};
    cluster_dims.id = cudaLaunchAttributeClusterDimension;
    cluster_dims.val.clusterDim.x = kCluster;
    cluster_dims.val.clusterDim.y = 1;
    cluster_dims.val.clusterDim.z = 1;
    cudaLaunchConfig_t config{};
    config.blockDim = dim3(fp::kThreads);
    config.dynamicSmemBytes = fp::kSmemBytes;
    config.stream = stream;
    config.attrs = &cluster_dims;
    config.numAttrs = 1;
    const int64_t m_pairs = ((M + fp::BM - 1) / fp::BM + 1) / 2;
    const int64_t pairs = m_pairs * ((N + fp::BN - 1) / fp::BN);
    config.gridDim = dim3(static_cast<unsigned>(kCluster * pairs));
    // Persistent: as many clusters as can be resident at once, and no more (a cluster that had to
    // wait for a free pair of SMs in one GPC would start its share of the tiles late). Clusters
    // place both blocks in one GPC, so this can be below half the SM count.
    int resident = 0;
    if (cudaOccupancyMaxActiveClusters(&resident, p12_wgmma_fp16x3_multicast_kernel, &config) !=
            cudaSuccess ||
        resident < 1) {
        return "cudaOccupancyMaxActiveClusters found no place for a cluster of two blocks";
    }
    const int64_t clusters = pairs < resident ? pairs : resident;
    config.gridDim = dim3(static_cast<unsigned>(kCluster * clusters));
    const bool pairs_ok = N % 2 == 0 && reinterpret_cast<uintptr_t>(y) % 8 == 0;
    const cudaError_t err = cudaLaunchKernelEx(
        &config, p12_wgmma_fp16x3_multicast_kernel, maps.xh, maps.xl, maps.wh, maps.wl, x_inv, w_inv,
        b, y, M, N, K, multiplier, negative_slope, pairs_ok ? 1 : 0);
    return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

}  // namespace p12
