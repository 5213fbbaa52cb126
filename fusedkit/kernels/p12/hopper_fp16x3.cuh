// Problem 12's epilogue on the fp16x3 wgmma tile (common/hopper_fp16x3.cuh, shared with p45),
// for the steps that feed the tile differently (14: one block per tile, split operands by TMA;
// 15: x split in shared memory; 16: two blocks of a cluster sharing W's tiles; 18 stores partials
// of a split K instead), and the host set-up of the steps fed the four split operands (14, 16, 18).
// The math (common/fp16x3_split.py): x @ W.T = (sum_k xh wh + (xh wl + xl wh) / 2048) * xi[m] * wi[n].
// Device code only; included by the .cu steps after common/hopper.cuh.
#pragma once

#include <cstdint>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "../common/hopper.cuh"
#include "../common/hopper_fp16x3.cuh"
#include "hopper_epilogue.cuh"

namespace p12::fp16x3 {

using namespace fusedkit::fp16x3;  // the tile: its shapes, stages, ring, tile order and k-loop
namespace sm90 = fusedkit::sm90;

// y = LeakyReLU((x @ W.T + b) * multiplier) of one consumer's 64 x 128 fragment: sum + cross /
// 2048 (exact scaling), then the split's power-of-two row scales undone (exact multiplies) in
// step 09's order, then step 13's store. It reads the scales as it goes (nothing in load()).
struct LeakyReluEpilogue {
    const float* __restrict__ x_inv;  // (M,) 1 / row scale of x
    const float* __restrict__ w_inv;  // (N,) 1 / row scale of W
    const float* __restrict__ b;      // (N,)
    float* __restrict__ y;            // (M, N)
    int M, N;
    float multiplier, negative_slope;
    bool pairs_ok;                    // N even and y 8-byte aligned: 8-byte stores

    struct Nothing {};
    __device__ __forceinline__ Nothing load(Fragment) const { return {}; }

    __device__ __forceinline__ void operator()(float (&sum)[kAcc], const float (&cross)[kAcc],
                                               Nothing, Fragment at) const {
        const int tw = threadIdx.x % 128;
        const int r0 = at.row0() + sm90::accumulator_row(tw);
        const int c0 = at.col0() + sm90::accumulator_col(tw);
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
        store_tile_m64<BN>(sum, y, b, at.row0(), at.col0(), M, N, multiplier, negative_slope,
                           pairs_ok);
    }
};

// Host: what the launchers of steps 14, 16 and 18 do first: the tensor maps of xh, xl (boxes of
// BM rows) and wh, wl (BN rows), 64 columns each, the kernel's dynamic shared memory raised to the
// ring's, and, where `sms` is given, the device's multiprocessor count. nullptr, or what failed.
struct SplitMaps {
    CUtensorMap xh, xl, wh, wl;
};

template <class Kernel>
inline const char* prepare_split_launch(Kernel* kernel, SplitMaps& maps, const __half* xh,
                                        const __half* xl, const __half* wh, const __half* wl, int M,
                                        int N, int K, int* sms = nullptr) {
    if (const char* err = sm90::make_tensor_map_f16(&maps.xh, xh, M, K, BM)) return err;
    if (const char* err = sm90::make_tensor_map_f16(&maps.xl, xl, M, K, BM)) return err;
    if (const char* err = sm90::make_tensor_map_f16(&maps.wh, wh, N, K, BN)) return err;
    if (const char* err = sm90::make_tensor_map_f16(&maps.wl, wl, N, K, BN)) return err;
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(kSmemBytes)) != cudaSuccess) {
        return "cudaFuncSetAttribute (dynamic shared memory) failed";
    }
    int device = 0;
    if (sms != nullptr && (cudaGetDevice(&device) != cudaSuccess ||
                           cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)) {
        return "could not read the multiprocessor count";
    }
    return nullptr;
}

}  // namespace p12::fp16x3
