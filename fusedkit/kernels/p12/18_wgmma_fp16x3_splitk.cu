// Computes y to fp32 accuracy from fp16x3 splits of x and W, as step 14, with K split over S blocks a tile at a few rows.
// Changed against 14: each block runs one tile over 1/S of K and stores its fp32 partial; a second kernel sums the S partials in order, then scales, bias, LeakyReLU.
// Bound: W's split, 256 MB at 8192 x 8192, at the copy rate (~0.06 ms predicted), plus x's split and the partials written and read once.
#include <cstdint>
#include <cuda_runtime.h>
#include <type_traits>

#include "../common/hopper.cuh"
#include "hopper_fp16x3.cuh"
#include "launchers_hopper.h"

// Why: at 8 to 64 rows step 14 has one row tile, so N / 128 = 64 tiles: 64 of 132 SMs each stream
// 4 MB of W while the others idle. Splitting each tile's K over S blocks puts S x 64 blocks on the
// SMs; S = SMs / tiles (2 on an H100 or H200 at N = 8192), not more: a block takes 192 KB of shared
// memory, one block an SM, so a second wave streams no more bytes at once and fills the ring twice.
// The mainloop (common/hopper_fp16x3.cuh: ring, k-loop) is step 14's, unchanged: the producer picks
// the k-tiles, the consumers count them. What is this step's own: the k range of a block, the
// partial store, a consumer warpgroup that skips its MMAs when its 64 rows are all past M (at most
// 64 rows: half of step 14's tensor work on zero rows saved, the TMA boxes stay 128 rows), and the
// reduction. Partials are stored before the row and column scales: these are powers of two, exact
// either way, so the reduction applies them once, reads them once, and a partial stays in the
// split's range (no overflow or underflow in the workspace where the scales' product would).
namespace fp = p12::fp16x3;
namespace sm90 = fusedkit::sm90;

namespace {

// Consumer c's 64 x 128 fragment of sum + cross / 2048 into this split's (M, N) plane of the
// workspace, rows < M and columns < N only; pairs as step 14's store when N is even.
struct PartialEpilogue {
    float* __restrict__ part;  // (M, N): the workspace's plane of this block's split
    int M, N;
    bool pairs_ok;

    struct Nothing {};
    __device__ __forceinline__ Nothing load(fp::Fragment) const { return {}; }

    __device__ __forceinline__ void operator()(float (&sum)[fp::kAcc], const float (&cross)[fp::kAcc],
                                               Nothing, fp::Fragment at) const {
        fp::add_cross(sum, cross);
        const int tw = threadIdx.x % 128;
        const int r0 = at.row0() + sm90::accumulator_row(tw);
        const int c0 = at.col0() + sm90::accumulator_col(tw);
#pragma unroll
        for (int j = 0; j < fp::BN / 8; ++j) {
            const int c = c0 + 8 * j;
            if (c >= N) continue;
#pragma unroll
            for (int h = 0; h < 2; ++h) {  // rows r0 and r0 + 8
                if (r0 + 8 * h >= M) continue;
                float* p = part + static_cast<int64_t>(r0 + 8 * h) * N + c;
                const int i = 4 * j + 2 * h;
                if (pairs_ok) {
                    *reinterpret_cast<float2*>(p) = make_float2(sum[i], sum[i + 1]);
                } else {
                    p[0] = sum[i];
                    if (c + 1 < N) p[1] = sum[i + 1];
                }
            }
        }
    }
};

}  // namespace

// Work unit u = (tile u / S, split u % S), persistent over units as step 14 over tiles. Split s
// takes k-tiles [k_tiles * s / S, k_tiles * (s + 1) / S): whole k-tiles, at least one each.
extern "C" __global__ void __launch_bounds__(fp::kThreads, 1)
p12_wgmma_fp16x3_splitk_kernel(const __grid_constant__ CUtensorMap xh_map,  // xh (M, Kp), box 128 x 64
                               const __grid_constant__ CUtensorMap xl_map,  // xl (M, Kp)
                               const __grid_constant__ CUtensorMap wh_map,  // wh (N, Kp)
                               const __grid_constant__ CUtensorMap wl_map,  // wl (N, Kp)
                               float* __restrict__ ws,                      // (S, M, N) partials
                               int M, int N, int K, int splits) {
    __shared__ uint64_t full[fp::kStages], empty[fp::kStages];
    extern __shared__ uint8_t smem_raw[];
    const fp::Ring ring(smem_raw);

    const int m_tiles = (M + fp::BM - 1) / fp::BM, n_tiles = (N + fp::BN - 1) / fp::BN;
    const int units = m_tiles * n_tiles * splits;
    const int k_tiles = (K + fp::BK - 1) / fp::BK;
    const int warpgroup = threadIdx.x / 128;

    sm90::init_ring(full, empty, fp::kConsumers * 4);
    __syncthreads();  // the last block-wide barrier

    if (warpgroup == 0) {
        if (sm90::become_producer<fp::kProducerRegs>(&xh_map, &xl_map, &wh_map, &wl_map)) {
            uint32_t it = 0;
            for (int u = blockIdx.x; u < units; u += gridDim.x) {
                int mt, nt;
                fp::grouped_tile(u / splits, m_tiles, n_tiles, fp::kGroupM, mt, nt);
                const int s = u % splits;
                const int k_end = static_cast<int>(static_cast<int64_t>(k_tiles) * (s + 1) / splits);
                for (int kt = static_cast<int>(static_cast<int64_t>(k_tiles) * s / splits); kt < k_end;
                     ++kt, ++it) {
                    const int st = it % fp::kStages;
                    sm90::mbar_wait(&empty[st], ((it / fp::kStages) & 1) ^ 1);
                    sm90::mbar_arrive_expect_tx(&full[st], fp::kStageBytes);  // zero-filled rows count too
                    sm90::tma_load_2d(ring.tile(st, fp::kXh), &xh_map, &full[st], kt * fp::BK, mt * fp::BM);
                    sm90::tma_load_2d(ring.tile(st, fp::kXl), &xl_map, &full[st], kt * fp::BK, mt * fp::BM);
                    sm90::tma_load_2d(ring.tile(st, fp::kWh), &wh_map, &full[st], kt * fp::BK, nt * fp::BN);
                    sm90::tma_load_2d(ring.tile(st, fp::kWl), &wl_map, &full[st], kt * fp::BK, nt * fp::BN);
                }
            }
        }
    } else {
        sm90::setmaxnreg_inc<fp::kConsumerRegs>();
        const int c = warpgroup - 1;
        const auto release = [&](int st) { sm90::mbar_arrive(&empty[st]); };
        uint32_t it = 0;
        for (int u = blockIdx.x; u < units; u += gridDim.x) {
            int mt, nt;
            fp::grouped_tile(u / splits, m_tiles, n_tiles, fp::kGroupM, mt, nt);
            const int s = u % splits;
            const int count = static_cast<int>(static_cast<int64_t>(k_tiles) * (s + 1) / splits -
                                               static_cast<int64_t>(k_tiles) * s / splits);
            if (mt * fp::BM + 64 * c >= M) {
                // Every row of this consumer is a zero-filled row past M: no MMA, no store; it
                // still takes each stage in turn and gives it back, its warps' share of empty[s].
                for (int kt = 0; kt < count; ++kt, ++it) {
                    sm90::mbar_wait(&full[it % fp::kStages], (it / fp::kStages) & 1);
                    if (threadIdx.x % 32 == 0) release(it % fp::kStages);
                }
                continue;
            }
            const PartialEpilogue epilogue{ws + static_cast<int64_t>(s) * M * N, M, N, N % 2 == 0};
            fp::consume_tile(ring, full, it, count, c, mt, nt, epilogue, release);
        }
    }
}

// y = LeakyReLU((sum_s ws[s]) * x_inv[m] * w_inv[n] + b[n]) * multiplier), the partials added in
// split order 0, 1, .., S - 1 (deterministic), then step 14's epilogue to the rounding: with S = 1
// its y bit for bit. V = 4: N % 4 == 0, float4 loads and stores; else V = 1.
template <int V>
__global__ void __launch_bounds__(256)
p12_splitk_reduce_kernel(const float* __restrict__ ws, const float* __restrict__ x_inv,
                         const float* __restrict__ w_inv, const float* __restrict__ b,
                         float* __restrict__ y, int M, int N, int splits, float multiplier,
                         float negative_slope) {
    using Vec = typename std::conditional<V == 4, float4, float>::type;
    const int64_t plane = static_cast<int64_t>(M) * N, groups = plane / V;
    for (int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; g < groups;
         g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        Vec acc = __ldcs(reinterpret_cast<const Vec*>(ws) + g);
        float* a = reinterpret_cast<float*>(&acc);
        for (int s = 1; s < splits; ++s) {
            Vec p = __ldcs(reinterpret_cast<const Vec*>(ws + s * plane) + g);
#pragma unroll
            for (int i = 0; i < V; ++i) a[i] = __fadd_rn(a[i], reinterpret_cast<const float*>(&p)[i]);
        }
        const int r = static_cast<int>(g * V / N), c = static_cast<int>(g * V % N);
        const float xi = __ldg(x_inv + r);
#pragma unroll
        for (int i = 0; i < V; ++i) {
            const float v = __fmul_rn(__fmul_rn(a[i], xi), __ldg(w_inv + c + i));
            a[i] = p12::hopper_leaky(v + __ldg(b + c + i), multiplier, negative_slope);
        }
        reinterpret_cast<Vec*>(y)[g] = acc;
    }
}

namespace p12 {

constexpr int kSplitKMinKTiles = 4;  // a split keeps at least 4 k-tiles (256 of K) to fill the ring

int wgmma_fp16x3_splitk_splits(int M, int N, int K, int sms) {
    const int64_t tiles = static_cast<int64_t>((M + fp::BM - 1) / fp::BM) * ((N + fp::BN - 1) / fp::BN);
    const int64_t by_sms = tiles > 0 ? sms / tiles : 1;  // blocks that one wave of the SMs holds
    const int64_t by_k = ((K + fp::BK - 1) / fp::BK) / kSplitKMinKTiles;  // k-tiles each split keeps
    const int64_t s = by_sms < by_k ? by_sms : by_k;
    return s > 1 ? static_cast<int>(s) : 1;
}

const char* launch_wgmma_fp16x3_splitk(const __half* xh, const __half* xl, const float* x_inv,
                                       const __half* wh, const __half* wl, const float* w_inv,
                                       const float* b, float* ws, float* y, int M, int N, int K,
                                       int splits, float multiplier, float negative_slope,
                                       cudaStream_t stream) {
    const int k_tiles = (K + fp::BK - 1) / fp::BK;
    if (splits < 1 || splits > k_tiles) return "splits must be 1 .. K / 64 rounded up";
    fp::SplitMaps maps;
    int sms = 0;
    if (const char* err = fp::prepare_split_launch(p12_wgmma_fp16x3_splitk_kernel, maps, xh, xl, wh, wl,
                                                   M, N, K, &sms)) {
        return err;
    }
    const int64_t units = static_cast<int64_t>((M + fp::BM - 1) / fp::BM) * ((N + fp::BN - 1) / fp::BN) * splits;
    const int blocks = static_cast<int>(units < sms ? units : sms);
    p12_wgmma_fp16x3_splitk_kernel<<<blocks, fp::kThreads, fp::kSmemBytes, stream>>>(
        maps.xh, maps.xl, maps.wh, maps.wl, ws, M, N, K, splits);
    // The reduction: 8 blocks of 256 threads an SM cover the (M, N) output in one wave or loop.
    const bool vec4 = N % 4 == 0;
    const int64_t groups = static_cast<int64_t>(M) * N / (vec4 ? 4 : 1);
    const int64_t want = (groups + 255) / 256, cap = 8 * static_cast<int64_t>(sms);
    const int rblocks = static_cast<int>(want < cap ? want : cap);
    if (vec4) {
        p12_splitk_reduce_kernel<4><<<rblocks, 256, 0, stream>>>(ws, x_inv, w_inv, b, y, M, N, splits,
                                                                 multiplier, negative_slope);
    } else {
        p12_splitk_reduce_kernel<1><<<rblocks, 256, 0, stream>>>(ws, x_inv, w_inv, b, y, M, N, splits,
                                                                 multiplier, negative_slope);
    }
    return nullptr;
}

}  // namespace p12
