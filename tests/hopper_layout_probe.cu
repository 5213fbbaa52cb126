// One wgmma tile, m64n128 over k = 64 (four m64n128k16), on operands that this kernel lays out in
// shared memory with hopper.cuh's sw128_offset and describes with its sw128_desc; every thread
// writes its 64 accumulator registers out unchanged. tests/test_hopper_layout.py compares them
// with fusedkit.hopper_layout: a wrong swizzle, descriptor or fragment map shows as wrong values.
#include <cstdint>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "../fusedkit/kernels/common/hopper.cuh"

namespace {

namespace sm90 = fusedkit::sm90;

constexpr int kM = 64, kN = 128, kK = 64;        // A (kM, kK) and B (kN, kK), both K-major
constexpr uint32_t kRowBytes = kK * 2;           // 128: one swizzled row
constexpr uint32_t kABytes = kM * kRowBytes;     // 8 KB, a multiple of the 1 KB atom
constexpr uint32_t kBBytes = kN * kRowBytes;     // 16 KB
constexpr size_t kSmemBytes = kABytes + kBBytes + sm90::kSwizzleAtomBytes;  // + alignment slack

// Element (row, k) of a K-major tile is byte row * 128 + 2k of the plain tile; TMA's 128-byte
// swizzle (and wgmma's reading of it) moves that byte to sw128_offset of it.
__device__ void store_swizzled(uint8_t* tile, const __half* src, int rows) {
    for (int e = threadIdx.x; e < rows * kK; e += blockDim.x) {
        const int row = e / kK, k = e % kK;
        *reinterpret_cast<__half*>(tile + sm90::sw128_offset(row * kRowBytes + 2 * k)) = src[e];
    }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(128)
hopper_layout_probe_kernel(const __half* __restrict__ a, const __half* __restrict__ b,
                           float* __restrict__ regs) {
    extern __shared__ uint8_t smem_raw[];
    const uint32_t raw = sm90::smem_addr(smem_raw);
    uint8_t* tile_a = smem_raw + ((sm90::kSwizzleAtomBytes - raw % sm90::kSwizzleAtomBytes) %
                                  sm90::kSwizzleAtomBytes);
    uint8_t* tile_b = tile_a + kABytes;
    store_swizzled(tile_a, a, kM);
    store_swizzled(tile_b, b, kN);
    // Plain stores become visible to wgmma's operand reads (the async proxy) through this fence.
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();

    float d[kN / 2];
#pragma unroll
    for (int i = 0; i < kN / 2; ++i) d[i] = 0.0f;
    const uint32_t a_addr = sm90::smem_addr(tile_a), b_addr = sm90::smem_addr(tile_b);
    sm90::fence_accumulators(d);
    sm90::wgmma_fence();
#pragma unroll
    for (int k16 = 0; k16 < kK / 16; ++k16) {  // the k-th 16-wide slice starts 32 k bytes in
        sm90::wgmma_m64n128k16_f16(d, sm90::sw128_desc(a_addr + 32 * k16),
                                   sm90::sw128_desc(b_addr + 32 * k16));
    }
    sm90::wgmma_commit();
    sm90::wgmma_wait<0>();
    sm90::fence_accumulators(d);
#pragma unroll
    for (int i = 0; i < kN / 2; ++i) regs[threadIdx.x * (kN / 2) + i] = d[i];
}

// One block of one warpgroup; 25 KB of dynamic shared memory needs no opt-in attribute.
const char* launch_hopper_layout_probe(const __half* a, const __half* b, float* regs,
                                       cudaStream_t stream) {
    hopper_layout_probe_kernel<<<1, 128, kSmemBytes, stream>>>(a, b, regs);
    return nullptr;
}
