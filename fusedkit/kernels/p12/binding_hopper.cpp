// PyTorch bindings of problem 12's Hopper steps (08-10): y = LeakyReLU((x @ W.T + b) * multiplier,
// slope) with fp16 x and W (one fp16 product, fp32 accumulation), fp32 b and y. Built apart from
// binding.cpp, for sm_90a only (fusedkit.build, hopper=True). This file (1) checks inputs,
// (2) allocates the output, (3) launches on PyTorch's current stream; kernels know nothing of torch.
#include <torch/extension.h>

#include <ATen/cuda/CUDAContext.h>   // getCurrentCUDAStream
#include <c10/cuda/CUDAException.h>  // C10_CUDA_KERNEL_LAUNCH_CHECK
#include <c10/cuda/CUDAGuard.h>      // CUDAGuard: run on the inputs' device

#include <cstdint>

#include "../common/torch_cuda.h"  // check_cuda_float, check_same_device, check_fits_int32
#include "launchers_hopper.h"

namespace {

using fusedkit::check_cuda_float;
using fusedkit::check_fits_int32;
using fusedkit::check_same_device;

void check_cuda_half(const torch::Tensor& t, const char* name) {
    TORCH_CHECK_VALUE(t.defined(), name, " must be a tensor, got an undefined tensor");
    TORCH_CHECK_VALUE(t.is_cuda(), name, " must be a CUDA tensor, got device '", t.device(), "'");
    TORCH_CHECK_TYPE(t.scalar_type() == torch::kHalf, name, " must be torch.float16, got ",
                     t.scalar_type(), "; cast once with .half() (the registry's build does)");
    TORCH_CHECK_VALUE(t.dim() == 2, name, " must be 2-D, got ", t.dim(), "-D with shape ", t.sizes());
}

// TMA reads from 16-byte aligned rows: a contiguous tensor whose base is not 16-byte aligned
// (a view into a larger buffer) is copied into a fresh allocation, which is.
torch::Tensor dense_aligned(const torch::Tensor& t) {
    torch::Tensor c = t.contiguous();
    if (reinterpret_cast<uintptr_t>(c.data_ptr()) % 16 != 0) c = c.clone();
    return c;
}

using Launcher = const char* (*)(const __half*, const __half*, const float*, float*, int, int,
                                 int, float, float, cudaStream_t);

torch::Tensor run_step(Launcher launch, const char* step, const torch::Tensor& x16,
                       const torch::Tensor& w16, const torch::Tensor& b, double multiplier,
                       double negative_slope) {
    check_cuda_half(x16, "x");
    check_cuda_half(w16, "w");
    check_same_device(w16, "w", x16);
    check_cuda_float(b, "b", 1);
    check_same_device(b, "b", x16);
    TORCH_CHECK_VALUE(w16.size(1) == x16.size(1), "w.size(1) must equal x.size(1) (K = ",
                      x16.size(1), "), got w of shape ", w16.sizes(), "; w is (N, K)");
    TORCH_CHECK_VALUE(b.size(0) == w16.size(0), "b must have w.size(0) = ", w16.size(0),
                      " elements, got shape ", b.sizes());
    const int64_t K = x16.size(1);
    TORCH_CHECK_VALUE(K >= 8 && K % 8 == 0, "x.size(1) (K) = ", K, " must be a positive multiple "
                      "of 8: TMA needs 16-byte row strides; pad K with zero columns in x and w "
                      "(the registry's build does)");
    check_fits_int32(x16.size(0), "x.size(0) (M)");
    check_fits_int32(w16.size(0), "w.size(0) (N)");
    check_fits_int32(K, "x.size(1) (K)");
    const torch::Tensor x = dense_aligned(x16), w = dense_aligned(w16), bc = b.contiguous();
    const int M = static_cast<int>(x.size(0)), N = static_cast<int>(w.size(0));
    const c10::cuda::CUDAGuard device_guard(x.device());
    torch::Tensor y = torch::empty({M, N}, x.options().dtype(torch::kFloat32));
    if (M == 0 || N == 0) return y;  // nothing to compute; an empty grid is a launch error
    const char* err = launch(reinterpret_cast<const __half*>(x.data_ptr<at::Half>()),
                             reinterpret_cast<const __half*>(w.data_ptr<at::Half>()),
                             bc.data_ptr<float>(), y.data_ptr<float>(), M, N, static_cast<int>(K),
                             static_cast<float>(multiplier), static_cast<float>(negative_slope),
                             at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == nullptr, step, ": ", err == nullptr ? "" : err);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}

torch::Tensor wgmma_tma(const torch::Tensor& x16, const torch::Tensor& w16, const torch::Tensor& b,
                        double multiplier, double negative_slope) {
    return run_step(&p12::launch_wgmma_tma, "wgmma_tma", x16, w16, b, multiplier, negative_slope);
}

torch::Tensor wgmma_warpspec(const torch::Tensor& x16, const torch::Tensor& w16,
                             const torch::Tensor& b, double multiplier, double negative_slope) {
    return run_step(&p12::launch_wgmma_warpspec, "wgmma_warpspec", x16, w16, b, multiplier,
                    negative_slope);
}

torch::Tensor wgmma_persistent(const torch::Tensor& x16, const torch::Tensor& w16,
                               const torch::Tensor& b, double multiplier, double negative_slope) {
    return run_step(&p12::launch_wgmma_persistent, "wgmma_persistent", x16, w16, b, multiplier,
                    negative_slope);
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.doc() = "Problem 12 (KernelBench L2 #12) Hopper steps (sm_90a): y = LeakyReLU((x @ w.T + b) * "
              "multiplier, negative_slope), one fp16 product with fp32 accumulation.";
    const char* step_doc =
        "Return y (M, N) float32 = LeakyReLU((x @ w.T + b) * multiplier, negative_slope).\n\n"
        "x: CUDA float16 (M, K); w: float16 (N, K); b: float32 (N,); one device; K % 8 == 0.\n"
        "Non-contiguous or non-16-byte-aligned x, w are copied first (costs time).\n"
        "Runs on the current CUDA stream and returns without synchronising.";
    const auto step_args = [&m, step_doc](const char* name, auto fn, const char* what) {
        m.def(name, fn, (std::string(what) + "\n\n" + step_doc).c_str(), py::arg("x"),
              py::arg("w"), py::arg("b"), py::arg("multiplier") = 2.0,
              py::arg("negative_slope") = 0.1);
    };
    step_args("wgmma_tma", &wgmma_tma,
              "Step 08: wgmma m64n128k16 on 128 x 128 tiles fed by TMA through a 3-stage "
              "mbarrier pipeline, epilogue fused into the store.");
    step_args("wgmma_warpspec", &wgmma_warpspec,
              "Step 09: 128 x 256 tiles; a producer warpgroup issues TMA into 4 stages, two "
              "consumer warpgroups issue wgmma m64n256k16 (warp specialisation, setmaxnreg).");
    step_args("wgmma_persistent", &wgmma_persistent,
              "Step 10: step 09 with one persistent block per SM walking the tiles in grouped "
              "order; the next tile's loads overlap the last tile's epilogue.");
}
