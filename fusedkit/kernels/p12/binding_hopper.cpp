// PyTorch bindings of problem 12's Hopper steps (11-16, 18): y = LeakyReLU((x @ W.T + b) * multiplier,
// slope) with fp16 x and W (one fp16 product, fp32 accumulation), fp32 b and y; step 14 takes
// the fp16x3 splits of x and W instead (three fp16 products, fp32-faithful), step 15 fp32 x, its
// row scales and W's split. Built apart from
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

using fusedkit::check_cuda_16bit;
using fusedkit::dense_aligned;
constexpr const char* kHalfHint = "cast once with .half() (the registry's build does)";

using Launcher = const char* (*)(const __half*, const __half*, const float*, float*, int, int,
                                 int, float, float, cudaStream_t);

torch::Tensor run_step(Launcher launch, const char* step, const torch::Tensor& x16,
                       const torch::Tensor& w16, const torch::Tensor& b, double multiplier,
                       double negative_slope) {
    check_cuda_16bit(x16, "x", kHalfHint);
    check_cuda_16bit(w16, "w", kHalfHint);
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

// Steps 14, 16 and 18: x and W arrive as their fp16x3 splits (common/fp16x3_split.py): hi and lo
// (R, Kp) fp16 with the same padded Kp, and inv_scale (R,) fp32. `launch` takes
// p12::launch_wgmma_fp16x3's arguments (steps 14 and 16 are such launchers; 18 a lambda).
template <class Launch>
torch::Tensor run_fp16x3_step(Launch launch, const char* name, const torch::Tensor& xh16,
                              const torch::Tensor& xl16, const torch::Tensor& x_inv,
                              const torch::Tensor& wh16, const torch::Tensor& wl16,
                              const torch::Tensor& w_inv, const torch::Tensor& b, double multiplier,
                              double negative_slope) {
    check_cuda_16bit(xh16, "xh", kHalfHint);
    check_cuda_16bit(xl16, "xl", kHalfHint);
    check_cuda_16bit(wh16, "wh", kHalfHint);
    check_cuda_16bit(wl16, "wl", kHalfHint);
    check_cuda_float(x_inv, "x_inv", 1);
    check_cuda_float(w_inv, "w_inv", 1);
    check_cuda_float(b, "b", 1);
    check_same_device(xl16, "xl", xh16);
    check_same_device(wh16, "wh", xh16);
    check_same_device(wl16, "wl", xh16);
    check_same_device(x_inv, "x_inv", xh16);
    check_same_device(w_inv, "w_inv", xh16);
    check_same_device(b, "b", xh16);
    TORCH_CHECK_VALUE(xl16.sizes() == xh16.sizes(), "xl must have xh's shape ", xh16.sizes(),
                      ", got ", xl16.sizes());
    TORCH_CHECK_VALUE(wl16.sizes() == wh16.sizes(), "wl must have wh's shape ", wh16.sizes(),
                      ", got ", wl16.sizes());
    TORCH_CHECK_VALUE(wh16.size(1) == xh16.size(1), "wh.size(1) must equal xh.size(1) (K = ",
                      xh16.size(1), "), got wh of shape ", wh16.sizes(), "; both splits need the "
                      "same padded K");
    TORCH_CHECK_VALUE(x_inv.size(0) == xh16.size(0), "x_inv must have xh.size(0) = ", xh16.size(0),
                      " elements, got shape ", x_inv.sizes());
    TORCH_CHECK_VALUE(w_inv.size(0) == wh16.size(0), "w_inv must have wh.size(0) = ", wh16.size(0),
                      " elements, got shape ", w_inv.sizes());
    TORCH_CHECK_VALUE(b.size(0) == wh16.size(0), "b must have wh.size(0) = ", wh16.size(0),
                      " elements, got shape ", b.sizes());
    const int64_t K = xh16.size(1);
    TORCH_CHECK_VALUE(K >= 8 && K % 8 == 0, "xh.size(1) (K) = ", K, " must be a positive multiple "
                      "of 8: TMA needs 16-byte row strides; split with pad_cols_to=64 (the "
                      "registry's build does)");
    check_fits_int32(xh16.size(0), "xh.size(0) (M)");
    check_fits_int32(wh16.size(0), "wh.size(0) (N)");
    check_fits_int32(K, "xh.size(1) (K)");
    const torch::Tensor xh = dense_aligned(xh16), xl = dense_aligned(xl16);
    const torch::Tensor wh = dense_aligned(wh16), wl = dense_aligned(wl16);
    const torch::Tensor xi = x_inv.contiguous(), wi = w_inv.contiguous(), bc = b.contiguous();
    const int M = static_cast<int>(xh.size(0)), N = static_cast<int>(wh.size(0));
    const c10::cuda::CUDAGuard device_guard(xh.device());
    torch::Tensor y = torch::empty({M, N}, xh.options().dtype(torch::kFloat32));
    if (M == 0 || N == 0) return y;  // nothing to compute; an empty grid is a launch error
    const auto half_ptr = [](const torch::Tensor& t) {
        return reinterpret_cast<const __half*>(t.data_ptr<at::Half>());
    };
    const char* err = launch(
        half_ptr(xh), half_ptr(xl), xi.data_ptr<float>(), half_ptr(wh), half_ptr(wl),
        wi.data_ptr<float>(), bc.data_ptr<float>(), y.data_ptr<float>(), M, N, static_cast<int>(K),
        static_cast<float>(multiplier), static_cast<float>(negative_slope),
        at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == nullptr, name, ": ", err == nullptr ? "" : err);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}

torch::Tensor wgmma_fp16x3(const torch::Tensor& xh, const torch::Tensor& xl,
                           const torch::Tensor& x_inv, const torch::Tensor& wh,
                           const torch::Tensor& wl, const torch::Tensor& w_inv,
                           const torch::Tensor& b, double multiplier, double negative_slope) {
    return run_fp16x3_step(&p12::launch_wgmma_fp16x3, "wgmma_fp16x3", xh, xl, x_inv, wh, wl, w_inv,
                           b, multiplier, negative_slope);
}

torch::Tensor wgmma_fp16x3_multicast(const torch::Tensor& xh, const torch::Tensor& xl,
                                     const torch::Tensor& x_inv, const torch::Tensor& wh,
                                     const torch::Tensor& wl, const torch::Tensor& w_inv,
                                     const torch::Tensor& b, double multiplier,
                                     double negative_slope) {
    return run_fp16x3_step(&p12::launch_wgmma_fp16x3_multicast, "wgmma_fp16x3_multicast", xh, xl,
                           x_inv, wh, wl, w_inv, b, multiplier, negative_slope);
}

// Step 18: splits = 0 picks the number of K splits for this size and GPU
// (p12::wgmma_fp16x3_splitk_splits) and, where that is 1, runs step 14 itself: no workspace, no
// second kernel. splits >= 1 forces that many (the tests' handle), the workspace path even at 1.
// The workspace (splits, M, N) fp32 comes from torch's caching allocator per call: no host sync.
torch::Tensor wgmma_fp16x3_splitk(const torch::Tensor& xh, const torch::Tensor& xl,
                                  const torch::Tensor& x_inv, const torch::Tensor& wh,
                                  const torch::Tensor& wl, const torch::Tensor& w_inv,
                                  const torch::Tensor& b, double multiplier, double negative_slope,
                                  int64_t splits) {
    const auto launch = [&](const __half* ah, const __half* al, const float* ai, const __half* bh,
                            const __half* bl, const float* bi, const float* bias, float* y, int M,
                            int N, int K, float mult, float slope, cudaStream_t stream) {
        TORCH_CHECK_VALUE(splits >= 0 && splits <= (K + 63) / 64, "splits = ", splits,
                          " must be 0 (choose) or 1 .. K / 64 rounded up = ", (K + 63) / 64);
        const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
        const int s = splits > 0 ? static_cast<int>(splits) : p12::wgmma_fp16x3_splitk_splits(M, N, K, sms);
        if (splits == 0 && s == 1) {
            return p12::launch_wgmma_fp16x3(ah, al, ai, bh, bl, bi, bias, y, M, N, K, mult, slope, stream);
        }
        // Freed on return, before the kernels run: safe, as the caching allocator hands the block
        // out again only to later work on this same stream.
        const torch::Tensor ws = torch::empty({s, M, N}, xh.options().dtype(torch::kFloat32));
        return p12::launch_wgmma_fp16x3_splitk(ah, al, ai, bh, bl, bi, bias, ws.data_ptr<float>(), y,
                                               M, N, K, s, mult, slope, stream);
    };
    return run_fp16x3_step(launch, "wgmma_fp16x3_splitk", xh, xl, x_inv, wh, wl, w_inv, b,
                           multiplier, negative_slope);
}

// Step 15's first launch: the row scales of x (M, K) fp32, as split_fp16x3 computes them.
std::tuple<torch::Tensor, torch::Tensor> x_row_scales(const torch::Tensor& x) {
    check_cuda_float(x, "x", 2);
    TORCH_CHECK_VALUE(x.size(1) >= 1, "x.size(1) (K) must be positive, got shape ", x.sizes());
    check_fits_int32(x.size(0), "x.size(0) (M)");
    check_fits_int32(x.size(1), "x.size(1) (K)");
    const torch::Tensor xc = x.contiguous();
    const int M = static_cast<int>(xc.size(0)), K = static_cast<int>(xc.size(1));
    const c10::cuda::CUDAGuard device_guard(xc.device());
    torch::Tensor scale = torch::empty({M}, xc.options()), inv = torch::empty({M}, xc.options());
    if (M == 0) return {scale, inv};
    const char* err = p12::launch_x_row_scales(xc.data_ptr<float>(), scale.data_ptr<float>(),
                                               inv.data_ptr<float>(), M, K,
                                               at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == nullptr, "x_row_scales: ", err == nullptr ? "" : err);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return {scale, inv};
}

// Step 15: x fp32 as it is (no copy: the caller falls back to step 14 when x does not qualify),
// its row scales, and W's fp16x3 split with K padded to 64.
torch::Tensor wgmma_fp16x3_fused_split(const torch::Tensor& x, const torch::Tensor& x_scale,
                                       const torch::Tensor& x_inv, const torch::Tensor& wh16,
                                       const torch::Tensor& wl16, const torch::Tensor& w_inv,
                                       const torch::Tensor& b, double multiplier,
                                       double negative_slope) {
    check_cuda_float(x, "x", 2);
    check_cuda_float(x_scale, "x_scale", 1);
    check_cuda_float(x_inv, "x_inv", 1);
    check_cuda_16bit(wh16, "wh", kHalfHint);
    check_cuda_16bit(wl16, "wl", kHalfHint);
    check_cuda_float(w_inv, "w_inv", 1);
    check_cuda_float(b, "b", 1);
    check_same_device(x_scale, "x_scale", x);
    check_same_device(x_inv, "x_inv", x);
    check_same_device(wh16, "wh", x);
    check_same_device(wl16, "wl", x);
    check_same_device(w_inv, "w_inv", x);
    check_same_device(b, "b", x);
    const int64_t K = x.size(1), Kp = wh16.size(1);
    TORCH_CHECK_VALUE(K >= 4 && K % 4 == 0, "x.size(1) (K) = ", K, " must be a positive multiple "
                      "of 4: TMA needs 16-byte row strides (use step 14, wgmma_fp16x3)");
    TORCH_CHECK_VALUE(x.is_contiguous() && reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 == 0,
                      "x must be contiguous and 16-byte aligned for TMA, got strides ", x.strides(),
                      " (use step 14, wgmma_fp16x3)");
    TORCH_CHECK_VALUE(Kp == (K + 63) / 64 * 64, "wh.size(1) must be x.size(1) = ", K, " rounded up "
                      "to 64 (split W with pad_cols_to=64), got wh of shape ", wh16.sizes());
    TORCH_CHECK_VALUE(wl16.sizes() == wh16.sizes(), "wl must have wh's shape ", wh16.sizes(),
                      ", got ", wl16.sizes());
    TORCH_CHECK_VALUE(x_scale.size(0) == x.size(0) && x_inv.size(0) == x.size(0),
                      "x_scale and x_inv must have x.size(0) = ", x.size(0), " elements, got ",
                      x_scale.sizes(), " and ", x_inv.sizes());
    TORCH_CHECK_VALUE(w_inv.size(0) == wh16.size(0), "w_inv must have wh.size(0) = ", wh16.size(0),
                      " elements, got shape ", w_inv.sizes());
    TORCH_CHECK_VALUE(b.size(0) == wh16.size(0), "b must have wh.size(0) = ", wh16.size(0),
                      " elements, got shape ", b.sizes());
    check_fits_int32(x.size(0), "x.size(0) (M)");
    check_fits_int32(wh16.size(0), "wh.size(0) (N)");
    check_fits_int32(Kp, "wh.size(1) (K)");
    const torch::Tensor wh = dense_aligned(wh16), wl = dense_aligned(wl16);
    const torch::Tensor xs = x_scale.contiguous(), xi = x_inv.contiguous();
    const torch::Tensor wi = w_inv.contiguous(), bc = b.contiguous();
    const int M = static_cast<int>(x.size(0)), N = static_cast<int>(wh.size(0));
    const c10::cuda::CUDAGuard device_guard(x.device());
    torch::Tensor y = torch::empty({M, N}, x.options());
    if (M == 0 || N == 0) return y;
    const auto half_ptr = [](const torch::Tensor& t) {
        return reinterpret_cast<const __half*>(t.data_ptr<at::Half>());
    };
    const char* err = p12::launch_wgmma_fp16x3_fused_split(
        x.data_ptr<float>(), xs.data_ptr<float>(), xi.data_ptr<float>(), half_ptr(wh), half_ptr(wl),
        wi.data_ptr<float>(), bc.data_ptr<float>(), y.data_ptr<float>(), M, N, static_cast<int>(K),
        static_cast<int>(Kp), static_cast<float>(multiplier), static_cast<float>(negative_slope),
        at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == nullptr, "wgmma_fp16x3_fused_split: ", err == nullptr ? "" : err);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
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
              "Step 11: wgmma m64n128k16 on 128 x 128 tiles fed by TMA through a 3-stage "
              "mbarrier pipeline, epilogue fused into the store.");
    step_args("wgmma_warpspec", &wgmma_warpspec,
              "Step 12: 128 x 256 tiles; a producer warpgroup issues TMA into 4 stages, two "
              "consumer warpgroups issue wgmma m64n256k16 (warp specialisation, setmaxnreg).");
    step_args("wgmma_persistent", &wgmma_persistent,
              "Step 13: step 12 with one persistent block per SM walking the tiles in grouped "
              "order; the next tile's loads overlap the last tile's epilogue.");
    const char* fp16x3_doc =
        "Return y (M, N) float32 = LeakyReLU(((xh + xl/2048) * x_inv[:, None]) @ "
        "((wh + wl/2048) * w_inv[:, None]).T + b) * multiplier, negative_slope).\n"
        "xh, xl: CUDA float16 (M, K); wh, wl: float16 (N, K); x_inv (M,), w_inv (N,), b (N,): "
        "float32; one device; K % 8 == 0 (the split pads K to a multiple of 64).\n"
        "Runs on the current CUDA stream and returns without synchronising.";
    const auto fp16x3_args = [&m, fp16x3_doc](const char* name, auto fn, const char* what) {
        m.def(name, fn, (std::string(what) + "\n\n" + fp16x3_doc).c_str(), py::arg("xh"),
              py::arg("xl"), py::arg("x_inv"), py::arg("wh"), py::arg("wl"), py::arg("w_inv"),
              py::arg("b"), py::arg("multiplier") = 2.0, py::arg("negative_slope") = 0.1);
    };
    fp16x3_args("wgmma_fp16x3", &wgmma_fp16x3,
                "Step 14: fp32-faithful y from the fp16x3 splits of x and w (three fp16 wgmma "
                "products per k-tile, hi*hi added outside the tensor cores), persistent as step 13.");
    fp16x3_args("wgmma_fp16x3_multicast", &wgmma_fp16x3_multicast,
                "Step 16: step 14 in clusters of two blocks that share each stage's W boxes "
                "(TMA multicast): each block reads 48 KB a k-tile from L2 instead of 64.");
    m.def("wgmma_fp16x3_splitk", &wgmma_fp16x3_splitk,
          (std::string("Step 18: step 14 with each tile's K split over several blocks (splits = 0: "
                       "as many as one wave of the SMs holds, step 14 itself where that is 1), fp32 "
                       "partials in a workspace summed in split order by a second kernel, which "
                       "applies the scales, b and LeakyReLU.\n\n") + fp16x3_doc).c_str(),
          py::arg("xh"), py::arg("xl"), py::arg("x_inv"), py::arg("wh"), py::arg("wl"),
          py::arg("w_inv"), py::arg("b"), py::arg("multiplier") = 2.0,
          py::arg("negative_slope") = 0.1, py::arg("splits") = 0);
    m.def("x_row_scales", &x_row_scales,
          "Step 15's first launch: (scale, inv), each (M,) float32, the power-of-two row scales of "
          "x (M, K) float32 that split_fp16x3 uses (inv NaN for a row holding inf or NaN).",
          py::arg("x"));
    m.def("wgmma_fp16x3_fused_split", &wgmma_fp16x3_fused_split,
          "Step 15: step 14 with x loaded as float32 by TMA and split into fp16 hi + lo in shared "
          "memory by the consumers, scaled by x_scale (from x_row_scales).\n\n"
          "x: CUDA float32 (M, K), contiguous, 16-byte aligned, K % 4 == 0 (else use step 14); "
          "x_scale, x_inv (M,); wh, wl: float16 (N, Kp), Kp = K rounded up to 64; w_inv, b (N,).\n"
          "Runs on the current CUDA stream and returns without synchronising.",
          py::arg("x"), py::arg("x_scale"), py::arg("x_inv"), py::arg("wh"), py::arg("wl"),
          py::arg("w_inv"), py::arg("b"), py::arg("multiplier") = 2.0,
          py::arg("negative_slope") = 0.1);
}
