// Problem 12's fp16x3 wgmma tile, written once for the steps that feed it differently (14: one
// block per tile, split operands by TMA; 15: x split in shared memory; 16: two blocks of a cluster
// sharing W's tiles): the stage layout, the tile order, and a consumer warpgroup's whole tile,
// k-loop and epilogue.
// The math (common/fp16x3_split.py): x @ W.T = (sum_k xh wh + (xh wl + xl wh) / 2048) * xi[m] * wi[n].
// Device code only; included by the .cu steps after common/hopper.cuh.
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

#include "../common/hopper.cuh"
#include "hopper_epilogue.cuh"

namespace p12::fp16x3 {

namespace sm90 = fusedkit::sm90;

// Shapes: xh, xl are (M, Kp), wh, wl are (N, Kp), fp16, K-contiguous; Kp is the split's padded K.
constexpr int BM = 128;         // rows of y per tile: consumer c owns rows 64c .. 64c + 63
constexpr int BN = 128;         // columns of y per tile: the n of one wgmma
constexpr int BK = 64;          // k per stage: 64 fp16 = 128 bytes, one 128-byte swizzle row
constexpr int kStages = 3;      // 3 x 64 KB = 192 KB of the 227 KB a block may have
constexpr int kConsumers = 2;   // consumer warpgroups
constexpr int kThreads = 128 * (1 + kConsumers);
// Three 64 x 128 fp32 fragments a consumer thread (sum, cross, chunk: 3 x 64 = 192 registers):
// 128 * 40 + 256 * 232 = 64512 <= 65536, as in step 12.
constexpr int kProducerRegs = 40;
constexpr int kConsumerRegs = 232;
constexpr int kGroupM = 8;      // grouped tile order, as step 13

constexpr int kAcc = BN / 2;    // fp32 accumulators a thread per 64 x 128 fragment
constexpr uint32_t kTileBytes = 128 * BK * 2;  // 16 KB: one 128 x 64 fp16 box, any of the four
constexpr uint32_t kStageBytes = 4 * kTileBytes;  // xh, xl, wh, wl: 64 KB
constexpr size_t kSmemBytes = kStages * kStageBytes + sm90::kSwizzleAtomBytes;  // + alignment slack
static_assert(kSmemBytes + 2 * kStages * sizeof(uint64_t) <= 227 * 1024, "shared memory");
static_assert(BM == 128 && BN == 128, "every TMA box here is 128 rows x 64 columns");

enum Operand { kXh = 0, kXl = 1, kWh = 2, kWl = 3 };

// The stage ring in dynamic shared memory: stage s = [xh | xl | wh | wl], each 16 KB and
// 1024-byte aligned (the swizzle atom). The same offsets in every block, which a multicast
// copy relies on: it lands at one offset in each block it names.
struct Ring {
    uint8_t* base;
    __device__ explicit Ring(uint8_t* raw)
        : base(raw + ((sm90::kSwizzleAtomBytes - sm90::smem_addr(raw) % sm90::kSwizzleAtomBytes) %
                      sm90::kSwizzleAtomBytes)) {}
    __device__ uint8_t* tile(int s, int which) const { return base + s * kStageBytes + which * kTileBytes; }
};

// Tile t of an (m_tiles x n_tiles) grid in grouped order: kGroupM rows of tiles walk the columns
// together, so consecutive tiles share W's columns in L2.
__device__ __forceinline__ void grouped_tile(int t, int m_tiles, int n_tiles, int group_m,
                                             int& mt, int& nt) {
    const int per_group = group_m * n_tiles;
    const int first_m = (t / per_group) * group_m;
    const int rows = min(m_tiles - first_m, group_m);  // the last group may be shorter
    const int r = t % per_group;
    mt = first_m + r % rows;
    nt = r / rows;
}

// Consumer warpgroup c's share of the tile (mt, nt): its 64 rows over every k-tile of the ring
// (`it` counts k-tiles across tiles: stage it % kStages, parity (it / kStages) & 1), then the
// epilogue straight from the registers to y. full[s] is the producer's "stage s has landed";
// prepare(s) runs once it has, before the stage's wgmmas (step 15 splits x there; 14 and 16
// pass nothing to do); release(s) is called by lane 0 of each warp once its wgmmas no longer
// read stage s.
struct NothingToPrepare {
    __device__ void operator()(int) const {}
};

template <typename Release, typename Prepare = NothingToPrepare>
__device__ __forceinline__ void consume_tile(const Ring& ring, uint64_t* full, uint32_t& it,
                                             int k_tiles, int c, int mt, int nt,
                                             const float* __restrict__ x_inv,
                                             const float* __restrict__ w_inv,
                                             const float* __restrict__ b, float* __restrict__ y,
                                             int M, int N, float multiplier, float negative_slope,
                                             bool pairs_ok, Release release,
                                             Prepare prepare = Prepare{}) {
    const bool lane0 = threadIdx.x % 32 == 0;
    float sum[kAcc];    // sum over k-tiles of hi*hi, added by FADD.RN outside the tensor cores
    float cross[kAcc];  // hi*lo + lo*hi, accumulated by the MMA over all of K
    float chunk[kAcc];  // this k-tile's hi*hi, from a zero accumulator
#pragma unroll
    for (int i = 0; i < kAcc; ++i) sum[i] = cross[i] = 0.0f;
    for (int kt = 0; kt < k_tiles; ++kt, ++it) {
        const int s = it % kStages;
        sm90::mbar_wait(&full[s], (it / kStages) & 1);
        prepare(s);
        const uint32_t xh = sm90::smem_addr(ring.tile(s, kXh)) + c * 64 * 128;  // this consumer's 64 rows
        const uint32_t xl = sm90::smem_addr(ring.tile(s, kXl)) + c * 64 * 128;
        const uint32_t wh = sm90::smem_addr(ring.tile(s, kWh));
        const uint32_t wl = sm90::smem_addr(ring.tile(s, kWl));
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
        if (kt > 0 && lane0) release((it + kStages - 1) % kStages);
        // sum += chunk with IEEE round-to-nearest adds while the cross MMAs run.
#pragma unroll
        for (int i = 0; i < kAcc; ++i) sum[i] = __fadd_rn(sum[i], chunk[i]);
    }
    sm90::wgmma_wait<0>();  // the last k-tile's cross
    sm90::fence_accumulators(cross);
    if (k_tiles > 0 && lane0) release((it + kStages - 1) % kStages);

    // sum + cross / 2048 (exact scaling), then undo the split's power-of-two row
    // scales (exact multiplies) in step 09's order, then step 13's store.
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
    store_tile_m64<BN>(sum, y, b, mt * BM + 64 * c, nt * BN, M, N, multiplier, negative_slope,
                       pairs_ok);
}

}  // namespace p12::fp16x3
