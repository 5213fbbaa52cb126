// The fp16x3 wgmma tile, written once for both problems: its shapes, stages, registers, the
// stage ring, the tile order and the cross term's scaling (p12's steps 14-16 and 18, p45's step 07),
// and a consumer warpgroup's whole tile, k-loop then epilogue, a template over the epilogue (p12's
// steps; p45's step 07 still types its own k-loop: its fragments live across tiles, which this
// template's, a fresh set a tile, do not, and that is other PTX).
// The math (common/fp16x3_split.py): A @ B.T = (sum_k ah bh + (ah bl + al bh) / 2048) * a_inv[m] * b_inv[n].
// Device code only; included by the .cu steps after common/hopper.cuh.
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

#include "hopper.cuh"

namespace fusedkit::fp16x3 {

// Shapes: ah, al are (M, Kp), bh, bl are (N, Kp), fp16, K-contiguous; Kp is the split's padded K.
constexpr int BM = 128;         // rows per tile: consumer c owns rows 64c .. 64c + 63, whole rows
constexpr int BN = 128;         // columns per tile: the n of one wgmma
constexpr int BK = 64;          // k per stage: 64 fp16 = 128 bytes, one 128-byte swizzle row
constexpr int kStages = 3;      // 3 x 64 KB = 192 KB of the 227 KB a block may have
constexpr int kConsumers = 2;   // consumer warpgroups
constexpr int kThreads = 128 * (1 + kConsumers);
// Three 64 x 128 fp32 fragments a consumer thread (sum, cross, chunk: 3 x 64 = 192 registers):
// 128 * 40 + 256 * 232 = 64512 <= 65536, as in p12's step 12.
constexpr int kProducerRegs = 40;
constexpr int kConsumerRegs = 232;
constexpr int kGroupM = 8;      // grouped tile order: 8 row tiles share each B tile in L2

constexpr int kAcc = BN / 2;    // fp32 accumulators a thread per 64 x 128 fragment
constexpr uint32_t kTileBytes = 128 * BK * 2;  // 16 KB: one 128 x 64 fp16 box, any of the four
constexpr uint32_t kStageBytes = 4 * kTileBytes;  // ah, al, bh, bl: 64 KB
constexpr size_t kSmemBytes = kStages * kStageBytes + sm90::kSwizzleAtomBytes;  // + alignment slack
static_assert(kSmemBytes + 2 * kStages * sizeof(uint64_t) <= 227 * 1024, "shared memory");
static_assert(BM == 128 && BN == 128, "every TMA box here is 128 rows x 64 columns");

constexpr float kLoScale = 2048.0f;  // lo holds the residual times 2**11

// Which box of a stage (p12 names them after x and W: xh, xl, wh, wl).
enum Operand { kXh = 0, kXl = 1, kWh = 2, kWl = 3 };

// The stage ring in dynamic shared memory: stage s = [ah | al | bh | bl], each 16 KB and
// 1024-byte aligned (the swizzle atom). The same offsets in every block, which a multicast
// copy relies on: it lands at one offset in each block it names.
struct Ring {
    uint8_t* base;
    __device__ explicit Ring(uint8_t* raw)
        : base(raw + ((sm90::kSwizzleAtomBytes - sm90::smem_addr(raw) % sm90::kSwizzleAtomBytes) %
                      sm90::kSwizzleAtomBytes)) {}
    __device__ uint8_t* tile(int s, int which) const { return base + s * kStageBytes + which * kTileBytes; }
};

// Tile t of an (m_tiles x n_tiles) grid in grouped order: group_m rows of tiles walk the columns
// together, so consecutive tiles share B's columns in L2.
__device__ __forceinline__ void grouped_tile(int t, int m_tiles, int n_tiles, int group_m,
                                             int& mt, int& nt) {
    const int per_group = group_m * n_tiles;
    const int first_m = (t / per_group) * group_m;
    const int rows = min(m_tiles - first_m, group_m);  // the last group may be shorter
    const int r = t % per_group;
    mt = first_m + r % rows;
    nt = r / rows;
}

// sum + cross / 2048 (exact scaling, one rounding): the split product without its row scales.
__device__ __forceinline__ void add_cross(float (&sum)[kAcc], const float (&cross)[kAcc]) {
#pragma unroll
    for (int i = 0; i < kAcc; ++i) sum[i] = __fadd_rn(sum[i], cross[i] * (1.0f / kLoScale));
}

// Consumer warpgroup c's share of the tile (mt, nt): its 64 rows over every k-tile of the ring
// (`it` counts k-tiles across tiles: stage it % kStages, parity (it / kStages) & 1), then the
// epilogue from the registers. full[s] is the producer's "stage s has landed"; prepare(s) runs
// once it has, before the stage's wgmmas (p12's step 15 splits x there; the others pass nothing
// to do); release(s) is called by lane 0 of each warp once its wgmmas no longer read stage s.
//
// The epilogue is an object with two members. load(at) returns what it reads from memory
// (scales, biases) for the consumer's fragment `at`; it is called while the tile's last cross
// products still run on the tensor cores, so the loads' latency hides behind them. Then
// epilogue(sum, cross, loaded, at) gets the fragment's values as two halves, sum (hi*hi) and
// cross (hi*lo + lo*hi, to be divided by 2048: add_cross), fragment map in common/hopper.cuh.
struct NothingToPrepare {
    __device__ void operator()(int) const {}
};

// Which 64 x 128 fragment of the output a consumer holds: consumer c's rows of tile (mt, nt).
struct Fragment {
    int mt, nt, c;
    __device__ __forceinline__ int row0() const { return mt * BM + 64 * c; }  // its top-left element
    __device__ __forceinline__ int col0() const { return nt * BN; }
};

template <typename Epilogue, typename Release, typename Prepare = NothingToPrepare>
__device__ __forceinline__ void consume_tile(const Ring& ring, uint64_t* full, uint32_t& it,
                                             int k_tiles, int c, int mt, int nt,
                                             const Epilogue& epilogue, Release release,
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
        const uint32_t ah = sm90::smem_addr(ring.tile(s, kXh)) + c * 64 * 128;  // this consumer's 64 rows
        const uint32_t al = sm90::smem_addr(ring.tile(s, kXl)) + c * 64 * 128;
        const uint32_t bh = sm90::smem_addr(ring.tile(s, kWh));
        const uint32_t bl = sm90::smem_addr(ring.tile(s, kWl));
        // chunk was read by the FADDs and cross zeroed by plain code: fence before wgmma.
        sm90::fence_accumulators(chunk);
        sm90::fence_accumulators(cross);
        sm90::wgmma_fence();
        // Group 1: chunk = ah * bh over this k-tile; scale-d = 0 on the first k16 ignores
        // chunk's old value, so every k-tile's hi*hi starts from zero.
#pragma unroll
        for (int k16 = 0; k16 < BK / 16; ++k16) {
            sm90::wgmma_m64n128k16_f16(chunk, sm90::sw128_desc(ah + 32 * k16),
                                       sm90::sw128_desc(bh + 32 * k16), k16 == 0 ? 0 : 1);
        }
        sm90::wgmma_commit();
        // Group 2: cross += ah * bl + al * bh, chained on the same registers across
        // k-tiles (same shape: the hardware orders them, no fence needed between).
#pragma unroll
        for (int k16 = 0; k16 < BK / 16; ++k16) {
            sm90::wgmma_m64n128k16_f16(cross, sm90::sw128_desc(ah + 32 * k16),
                                       sm90::sw128_desc(bl + 32 * k16));
            sm90::wgmma_m64n128k16_f16(cross, sm90::sw128_desc(al + 32 * k16),
                                       sm90::sw128_desc(bh + 32 * k16));
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
    // The epilogue's loads go out now, with chunk's registers free and the last cross group
    // still on the tensor cores. The wait below is a memory clobber, so the compiler keeps the
    // loads above it.
    const Fragment at{mt, nt, c};
    const auto loaded = epilogue.load(at);
    sm90::wgmma_wait<0>();  // the last k-tile's cross
    sm90::fence_accumulators(cross);
    if (k_tiles > 0 && lane0) release((it + kStages - 1) % kStages);
    epilogue(sum, cross, loaded, at);
}

}  // namespace fusedkit::fp16x3
