// PyTorch binding of exercise p12_wgmma_desc: p12's wgmma_tma step, compiled from a copy of its
// source whose descriptors come from the learner's function, as wgmma_tma(x16, w16, b,
// multiplier, negative_slope) -> y, exactly as binding_hopper.cpp calls the ladder's step:
// fp16 x (M, K) and W (N, K) with K % 8 == 0 (TMA's 16-byte rows), fp32 b (N,), fp32 y (M, N).
// This file (1) checks inputs, (2) allocates the output, (3) launches on PyTorch's stream.
#include <torch/extension.h>

#include <ATen/cuda/CUDAContext.h>   // getCurrentCUDAStream
#include <c10/cuda/CUDAException.h>  // C10_CUDA_KERNEL_LAUNCH_CHECK
#include <c10/cuda/CUDAGuard.h>      // CUDAGuard: run on the inputs' device

#include "../common/torch_cuda.h"  // check_cuda_half, check_cuda_float, dense_aligned, ...
#include "launchers_hopper.h"

namespace {

constexpr const char* kHalfHint = "cast once with .half() (the exercise's build does)";

torch::Tensor wgmma_tma(const torch::Tensor& x16, const torch::Tensor& w16, const torch::Tensor& b,
                        double multiplier, double negative_slope) {
    fusedkit::check_cuda_half(x16, "x", kHalfHint);
    fusedkit::check_cuda_half(w16, "w", kHalfHint);
    fusedkit::check_same_device(w16, "w", x16);
    fusedkit::check_cuda_float(b, "b", 1);
    fusedkit::check_same_device(b, "b", x16);
    const int64_t K = x16.size(1);
    TORCH_CHECK_VALUE(w16.size(1) == K && b.size(0) == w16.size(0) && K >= 8 && K % 8 == 0,
                      "x (M, K), w (N, K), b (N,) with K a positive multiple of 8; got x ",
                      x16.sizes(), ", w ", w16.sizes(), ", b ", b.sizes());
    fusedkit::check_fits_int32(x16.size(0), "x.size(0) (M)");
    fusedkit::check_fits_int32(w16.size(0), "w.size(0) (N)");
    fusedkit::check_fits_int32(K, "x.size(1) (K)");
    const torch::Tensor x = fusedkit::dense_aligned(x16), w = fusedkit::dense_aligned(w16);
    const torch::Tensor bc = b.contiguous();
    const int M = static_cast<int>(x.size(0)), N = static_cast<int>(w.size(0));
    const c10::cuda::CUDAGuard device_guard(x.device());
    torch::Tensor y = torch::empty({M, N}, x.options().dtype(torch::kFloat32));
    if (M == 0 || N == 0) return y;
    const char* err = p12::launch_wgmma_tma(
        reinterpret_cast<const __half*>(x.data_ptr<at::Half>()),
        reinterpret_cast<const __half*>(w.data_ptr<at::Half>()), bc.data_ptr<float>(),
        y.data_ptr<float>(), M, N, static_cast<int>(K), static_cast<float>(multiplier),
        static_cast<float>(negative_slope), at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == nullptr, "wgmma_tma (your descriptor): ", err == nullptr ? "" : err);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("wgmma_tma", &wgmma_tma, "p12's wgmma_tma step built with the learner's descriptor");
}
