// The entry point of exercise p12_wgmma_desc's binding (p12_wgmma_desc_binding.cpp), included at the end
// of the exercise's copy of the wgmma_tma step: the tensors and the stream arrive as addresses from Python.
#pragma once

const char* exercise_wgmma_tma(uintptr_t x, uintptr_t w, uintptr_t b, uintptr_t y, int M, int N, int K,
                               float multiplier, float negative_slope, uintptr_t stream) {
    if (M == 0 || N == 0) return nullptr;
    const char* err = p12::launch_wgmma_tma(
        reinterpret_cast<const __half*>(x), reinterpret_cast<const __half*>(w),
        reinterpret_cast<const float*>(b), reinterpret_cast<float*>(y), M, N, K, multiplier,
        negative_slope, reinterpret_cast<cudaStream_t>(stream));
    if (err != nullptr) return err;
    const cudaError_t launched = cudaGetLastError();
    return launched == cudaSuccess ? nullptr : cudaGetErrorString(launched);
}
