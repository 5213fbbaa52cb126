// Computes y to fp32 accuracy from fp16x3 splits of x and W (hi + lo / 2048, row scales) on wgmma.
// Changed against 10: 4 tiles a stage (xh, xl, wh, wl), 128x128; each chunk's hi*hi added outside the MMA.
// Bound: fp16 tensor compute, three products: floor 3 x 139 us; predicted ~0.66 ms plus the x split.
#include <cstdint>
#include <cuda_runtime.h>

#include "../common/hopper.cuh"
#include "hopper_epilogue.cuh"
#include "launchers_hopper.h"

namespace {

namespace sm90 = fusedkit::sm90;

// Shapes: xh, xl are (M, Kp), wh, wl are (N, Kp), fp16, K-contiguous; Kp is the split's padded K.
// The math (common/fp16x3_split.py): x @ W.T = (sum_k xh wh + (xh wl + xl wh) / 2048) * xi[m] * wi[n].
constexpr int BM = 128;         // rows of y per tile: consumer c owns rows 64c .. 64c + 63
constexpr int BN = 128;         // columns of y per tile: the n of one wgmma
constexpr int BK = 64;          // k per stage: 64 fp16 = 128 bytes, one 128-byte swizzle row
constexpr int kStages = 3;      // 3 x 64 KB = 192 KB of the 227 KB a block may have
constexpr int kConsumers = 2;   // consumer warpgroups
constexpr int kThreads = 128 * (1 + kConsumers);
// Three 64 x 128 fp32 fragments a consumer thread (sum, cross, chunk: 3 x 64 = 192 registers):
// 128 * 40 + 256 * 232 = 64512 <= 65536, as in step 09.
constexpr int kProducerRegs = 40;
constexpr int kConsumerRegs = 232;
constexpr int kGroupM = 8;      // grouped tile order, as step 10

constexpr int kAcc = BN / 2;    // fp32 accumulators a thread per 64 x 128 fragment
constexpr uint32_t kTileBytes = 128 * BK * 2;  // 16 KB: one 128 x 64 fp16 box, any of the four
constexpr uint32_t kStageBytes = 4 * kTileBytes;  // xh, xl, wh, wl: 64 KB
constexpr size_t kSmemBytes = kStages * kStageBytes + sm90::kSwizzleAtomBytes;  // + alignment slack
static_assert(kSmemBytes + 2 * kStages * sizeof(uint64_t) <= 227 * 1024, "shared memory");
static_assert(BM == 128 && BN == 128, "every TMA box here is 128 rows x 64 columns");

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
    __shared__ uint64_t full[kStages], empty[kStages];
    extern __shared__ uint8_t smem_raw[];
    const uint32_t raw = sm90::smem_addr(smem_raw);
    uint8_t* smem = smem_raw + ((sm90::kSwizzleAtomBytes - raw % sm90::kSwizzleAtomBytes) %
                                sm90::kSwizzleAtomBytes);
    // Stage s: [xh | xl | wh | wl], each 16 KB and 1024-byte aligned (the swizzle atom).
    const auto tile = [smem](int s, int which) { return smem + s * kStageBytes + which * kTileBytes; };

    const int m_tiles = (M + BM - 1) / BM, n_tiles = (N + BN - 1) / BN;
    const int tiles = m_tiles * n_tiles;
    const int k_tiles = (K + BK - 1) / BK;
    const int warpgroup = threadIdx.x / 128;

    if (threadIdx.x == 0) {
        for (int s = 0; s < kStages; ++s) {
            sm90::mbar_init(&full[s], 1);
            sm90::mbar_init(&empty[s], kConsumers * 4);
        }
        sm90::mbar_fence_init();
    }
    __syncthreads();  // the last block-wide barrier

    if (warpgroup == 0) {
        sm90::setmaxnreg_dec<kProducerRegs>();
        if (threadIdx.x == 0) {
            sm90::tma_prefetch_map(&xh_map);
            sm90::tma_prefetch_map(&xl_map);
            sm90::tma_prefetch_map(&wh_map);
            sm90::tma_prefetch_map(&wl_map);
            uint32_t it = 0;
            for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
                int mt, nt;
                grouped_tile(t, m_tiles, n_tiles, mt, nt);
                for (int kt = 0; kt < k_tiles; ++kt, ++it) {
                    const int s = it % kStages;
                    sm90::mbar_wait(&empty[s], ((it / kStages) & 1) ^ 1);
                    // Zero-filled rows past M or N still count their bytes: always 64 KB.
                    sm90::mbar_arrive_expect_tx(&full[s], kStageBytes);
                    sm90::tma_load_2d(tile(s, 0), &xh_map, &full[s], kt * BK, mt * BM);
                    sm90::tma_load_2d(tile(s, 1), &xl_map, &full[s], kt * BK, mt * BM);
                    sm90::tma_load_2d(tile(s, 2), &wh_map, &full[s], kt * BK, nt * BN);
                    sm90::tma_load_2d(tile(s, 3), &wl_map, &full[s], kt * BK, nt * BN);
                }
            }
        }
    } else {
        sm90::setmaxnreg_inc<kConsumerRegs>();
        const int c = warpgroup - 1;
        const bool lane0 = threadIdx.x % 32 == 0;
        float sum[kAcc];    // sum over k-tiles of hi*hi, added by FADD.RN outside the tensor cores
        float cross[kAcc];  // hi*lo + lo*hi, accumulated by the MMA over all of K
        float chunk[kAcc];  // this k-tile's hi*hi, from a zero accumulator
        uint32_t it = 0;
        for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
            int mt, nt;
            grouped_tile(t, m_tiles, n_tiles, mt, nt);
#pragma unroll
            for (int i = 0; i < kAcc; ++i) sum[i] = cross[i] = 0.0f;
            for (int kt = 0; kt < k_tiles; ++kt, ++it) {
                const int s = it % kStages;
                sm90::mbar_wait(&full[s], (it / kStages) & 1);
                const uint32_t xh = sm90::smem_addr(tile(s, 0)) + c * 64 * 128;  // this consumer's 64 rows
                const uint32_t xl = sm90::smem_addr(tile(s, 1)) + c * 64 * 128;
                const uint32_t wh = sm90::smem_addr(tile(s, 2));
                const uint32_t wl = sm90::smem_addr(tile(s, 3));
                // chunk was read by the FADDs and cross zeroed by plain code: fence before wgmma.
                sm90::fence_accumulators(chunk);
                sm90::fence_accumulators(cross);
                sm90::wgmma_fence();
                // Group 1: chunk = xh * wh over this k-tile; scale-d = 0 on the first k16 ignores
                // chunk's old value, so every k-tile's hi*hi starts from zero.
#pragma unroll
                for (int k16 = 0; k16 < BK / 16; ++k16) {
                    sm90::wgmma_m64n128k16_f16(chunk, sm90::sw128_desc(xh + 32 * k16),
                                               sm90::sw128_desc(wh + 32 * k16), k16 == 0 ? 0 : 1);
                }
                sm90::wgmma_commit();
                // Group 2: cross += xh * wl + xl * wh, chained on the same registers across
                // k-tiles (same shape: the hardware orders them, no fence needed between).
#pragma unroll
                for (int k16 = 0; k16 < BK / 16; ++k16) {
                    sm90::wgmma_m64n128k16_f16(cross, sm90::sw128_desc(xh + 32 * k16),
                                               sm90::sw128_desc(wl + 32 * k16));
                    sm90::wgmma_m64n128k16_f16(cross, sm90::sw128_desc(xl + 32 * k16),
                                               sm90::sw128_desc(wh + 32 * k16));
                }
                sm90::wgmma_commit();
                // At most one group (this k-tile's cross) still runs: this k-tile's chunk is
                // done, and so is the previous k-tile's cross, the last reader of the previous
                // stage, which goes back to the producer now.
                sm90::wgmma_wait<1>();
                sm90::fence_accumulators(chunk);
                if (kt > 0 && lane0) sm90::mbar_arrive(&empty[(it + kStages - 1) % kStages]);
                // sum += chunk with IEEE round-to-nearest adds while the cross MMAs run.
#pragma unroll
                for (int i = 0; i < kAcc; ++i) sum[i] = __fadd_rn(sum[i], chunk[i]);
            }
            sm90::wgmma_wait<0>();  // the last k-tile's cross
            sm90::fence_accumulators(cross);
            if (k_tiles > 0 && lane0) sm90::mbar_arrive(&empty[(it + kStages - 1) % kStages]);

            // sum + cross / 2048 (exact scaling), then undo the split's power-of-two row
            // scales (exact multiplies) in step 06's order, then step 10's store.
            const int tw = threadIdx.x % 128;
            const int r0 = mt * BM + 64 * c + sm90::accumulator_row(tw);
            const int c0 = nt * BN + sm90::accumulator_col(tw);
            const float xi0 = r0 < M ? __ldg(x_inv + r0) : 0.0f;
            const float xi1 = r0 + 8 < M ? __ldg(x_inv + r0 + 8) : 0.0f;
#pragma unroll
            for (int j = 0; j < BN / 8; ++j) {
                const int col = c0 + 8 * j;
                const float wi0 = col < N ? __ldg(w_inv + col) : 0.0f;
                const float wi1 = col + 1 < N ? __ldg(w_inv + col + 1) : 0.0f;
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const float xi = h == 0 ? xi0 : xi1;
                    const int i = 4 * j + 2 * h;
                    sum[i] = __fmul_rn(__fmul_rn(__fadd_rn(sum[i], cross[i] * (1.0f / 2048.0f)), xi), wi0);
                    sum[i + 1] =
                        __fmul_rn(__fmul_rn(__fadd_rn(sum[i + 1], cross[i + 1] * (1.0f / 2048.0f)), xi), wi1);
                }
            }
            p12::store_tile_m64<BN>(sum, y, b, mt * BM + 64 * c, nt * BN, M, N, multiplier,
                                    negative_slope, pairs_ok != 0);
        }
    }
}

namespace p12 {

const char* launch_wgmma_fp16x3(const __half* xh, const __half* xl, const float* x_inv,
                                const __half* wh, const __half* wl, const float* w_inv,
                                const float* b, float* y, int M, int N, int K, float multiplier,
                                float negative_slope, cudaStream_t stream) {
    CUtensorMap xh_map, xl_map, wh_map, wl_map;
    if (const char* err = sm90::make_tensor_map_f16(&xh_map, xh, M, K, BM)) return err;
    if (const char* err = sm90::make_tensor_map_f16(&xl_map, xl, M, K, BM)) return err;
    if (const char* err = sm90::make_tensor_map_f16(&wh_map, wh, N, K, BN)) return err;
    if (const char* err = sm90::make_tensor_map_f16(&wl_map, wl, N, K, BN)) return err;
    if (cudaFuncSetAttribute(p12_wgmma_fp16x3_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
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
    p12_wgmma_fp16x3_kernel<<<blocks, kThreads, kSmemBytes, stream>>>(
        xh_map, xl_map, wh_map, wl_map, x_inv, w_inv, b, y, M, N, K, multiplier, negative_slope,
        pairs_ok ? 1 : 0);
    return nullptr;
}

}  // namespace p12
