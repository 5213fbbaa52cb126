// PyTorch bindings of problem 45's Hopper step (07): the two fp16x3 GEMMs of
// out = logsumexp(sigmoid(x @ W1.T + b1) @ W2.T + b2) on wgmma, fp32-faithful. GEMM1 returns h
// already split (hh, hl); GEMM2 returns the partial logsumexp pairs (pmax, psum) that
// common/lse.py's combine_lse turns into out (the registry's build chains the three). Built apart
// from binding.cpp, for sm_90a only (fusedkit.build, hopper=True). This file (1) checks inputs,
// (2) allocates the outputs, (3) launches on PyTorch's current stream; kernels know nothing of torch.
#include <torch/extension.h>

#include <ATen/cuda/CUDAContext.h>   // getCurrentCUDAStream
#include <c10/cuda/CUDAException.h>  // C10_CUDA_KERNEL_LAUNCH_CHECK
#include <c10/cuda/CUDAGuard.h>      // CUDAGuard: run on the inputs' device

#include <cstdint>
#include <tuple>

#include "../common/torch_cuda.h"  // check_cuda_float, check_same_device, check_fits_int32
#include "launchers_hopper.h"

namespace {

using fusedkit::check_cuda_float;
using fusedkit::check_fits_int32;
using fusedkit::check_same_device;

using fusedkit::check_cuda_half;
using fusedkit::dense_aligned;
constexpr const char* kHalfHint = "split float32 operands with common/fp16x3_split.py";

const __half* half_ptr(const torch::Tensor& t) {
    return reinterpret_cast<const __half*>(t.data_ptr<at::Half>());
}

// One fp16x3 GEMM's operands: A = (ah + al / 2048) (rows, K), B = (bh + bl / 2048) * b_inv (n, K),
// bias (n,). Checks dtypes, devices and shapes; returns K.
int64_t check_split_gemm(const torch::Tensor& ah, const char* ah_name, const torch::Tensor& al,
                         const char* al_name, const torch::Tensor& bh, const torch::Tensor& bl,
                         const torch::Tensor& b_inv, const torch::Tensor& bias) {
    check_cuda_half(ah, ah_name, kHalfHint);
    check_cuda_half(al, al_name, kHalfHint);
    check_cuda_half(bh, "wh", kHalfHint);
    check_cuda_half(bl, "wl", kHalfHint);
    check_cuda_float(b_inv, "w_inv", 1);
    check_cuda_float(bias, "b", 1);
    check_same_device(al, al_name, ah);
    check_same_device(bh, "wh", ah);
    check_same_device(bl, "wl", ah);
    check_same_device(b_inv, "w_inv", ah);
    check_same_device(bias, "b", ah);
    TORCH_CHECK_VALUE(al.sizes() == ah.sizes(), al_name, " must have ", ah_name, "'s shape ",
                      ah.sizes(), ", got ", al.sizes());
    TORCH_CHECK_VALUE(bl.sizes() == bh.sizes(), "wl must have wh's shape ", bh.sizes(), ", got ",
                      bl.sizes());
    TORCH_CHECK_VALUE(bh.size(1) == ah.size(1), "wh.size(1) must equal ", ah_name, ".size(1) (K = ",
                      ah.size(1), "), got wh of shape ", bh.sizes(), "; both splits need the "
                      "same padded K");
    TORCH_CHECK_VALUE(b_inv.size(0) == bh.size(0), "w_inv must have wh.size(0) = ", bh.size(0),
                      " elements, got shape ", b_inv.sizes());
    TORCH_CHECK_VALUE(bias.size(0) == bh.size(0), "b must have wh.size(0) = ", bh.size(0),
                      " elements, got shape ", bias.sizes());
    const int64_t K = ah.size(1);
    TORCH_CHECK_VALUE(K >= 8 && K % 8 == 0, ah_name, ".size(1) (K) = ", K, " must be a positive "
                      "multiple of 8: TMA needs 16-byte row strides; split with pad_cols_to=64 "
                      "(the registry's build does)");
    check_fits_int32(ah.size(0), "M");
    check_fits_int32(bh.size(0), "wh.size(0)");
    check_fits_int32(K, "K");
    return K;
}

// GEMM1: x's split (M, Kp) and W1's (H, Kp) -> hh, hl (M, Hp), Hp = H rounded up to 64.
std::tuple<torch::Tensor, torch::Tensor> wgmma_fp16x3_sigmoid_split(
    const torch::Tensor& xh16, const torch::Tensor& xl16, const torch::Tensor& x_inv,
    const torch::Tensor& wh16, const torch::Tensor& wl16, const torch::Tensor& w_inv,
    const torch::Tensor& b) {
    const int64_t K = check_split_gemm(xh16, "xh", xl16, "xl", wh16, wl16, w_inv, b);
    check_cuda_float(x_inv, "x_inv", 1);
    check_same_device(x_inv, "x_inv", xh16);
    TORCH_CHECK_VALUE(x_inv.size(0) == xh16.size(0), "x_inv must have xh.size(0) = ", xh16.size(0),
                      " elements, got shape ", x_inv.sizes());
    const int64_t H = wh16.size(0);
    const int64_t Hp = (H + p45::kHopperPad - 1) / p45::kHopperPad * p45::kHopperPad;
    check_fits_int32(Hp, "H rounded up to 64");
    const torch::Tensor xh = dense_aligned(xh16), xl = dense_aligned(xl16);
    const torch::Tensor wh = dense_aligned(wh16), wl = dense_aligned(wl16);
    const torch::Tensor xi = x_inv.contiguous(), wi = w_inv.contiguous(), bc = b.contiguous();
    const int M = static_cast<int>(xh.size(0));
    const c10::cuda::CUDAGuard device_guard(xh.device());
    // Every element is written by the kernel, the padding columns H .. Hp - 1 as zeros.
    torch::Tensor hh = torch::empty({M, Hp}, xh.options());
    torch::Tensor hl = torch::empty({M, Hp}, xh.options());
    if (M == 0 || H == 0) return {hh, hl};  // nothing to compute; an empty grid is a launch error
    const char* err = p45::launch_wgmma_fp16x3_sigmoid_split(
        half_ptr(xh), half_ptr(xl), xi.data_ptr<float>(), half_ptr(wh), half_ptr(wl),
        wi.data_ptr<float>(), bc.data_ptr<float>(), reinterpret_cast<__half*>(hh.data_ptr<at::Half>()),
        reinterpret_cast<__half*>(hl.data_ptr<at::Half>()), M, static_cast<int>(H),
        static_cast<int>(K), static_cast<int>(Hp), at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == nullptr, "wgmma_fp16x3_sigmoid_split: ", err == nullptr ? "" : err);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return {hh, hl};
}

// GEMM2: h's split (M, Hp) with one scale h_inv, W2's (N, Hp) -> pmax, psum (M, cdiv(N, 128)).
std::tuple<torch::Tensor, torch::Tensor> wgmma_fp16x3_partial_lse(
    const torch::Tensor& hh16, const torch::Tensor& hl16, const torch::Tensor& wh16,
    const torch::Tensor& wl16, const torch::Tensor& w_inv, const torch::Tensor& b, double h_inv) {
    const int64_t K = check_split_gemm(hh16, "hh", hl16, "hl", wh16, wl16, w_inv, b);
    const torch::Tensor hh = dense_aligned(hh16), hl = dense_aligned(hl16);
    const torch::Tensor wh = dense_aligned(wh16), wl = dense_aligned(wl16);
    const torch::Tensor wi = w_inv.contiguous(), bc = b.contiguous();
    const int M = static_cast<int>(hh.size(0)), N = static_cast<int>(wh.size(0));
    const int64_t T = (static_cast<int64_t>(N) + p45::kHopperLseTile - 1) / p45::kHopperLseTile;
    const c10::cuda::CUDAGuard device_guard(hh.device());
    // Every (row, tile) pair is written by the kernel.
    torch::Tensor pmax = torch::empty({M, T}, hh.options().dtype(torch::kFloat32));
    torch::Tensor psum = torch::empty({M, T}, hh.options().dtype(torch::kFloat32));
    if (M == 0 || N == 0) return {pmax, psum};
    const char* err = p45::launch_wgmma_fp16x3_partial_lse(
        half_ptr(hh), half_ptr(hl), static_cast<float>(h_inv), half_ptr(wh), half_ptr(wl),
        wi.data_ptr<float>(), bc.data_ptr<float>(), pmax.data_ptr<float>(), psum.data_ptr<float>(),
        M, N, static_cast<int>(K), at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == nullptr, "wgmma_fp16x3_partial_lse: ", err == nullptr ? "" : err);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return {pmax, psum};
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.doc() = "Problem 45 (KernelBench L2 #45) Hopper step 07 (sm_90a): the two GEMMs of "
              "logsumexp(sigmoid(x @ W1.T + b1) @ W2.T + b2) on fp16x3 splits with wgmma.";
    m.attr("H_SCALE") = static_cast<double>(p45::kHopperHScale);
    m.attr("LSE_TILE") = p45::kHopperLseTile;
    m.def("wgmma_fp16x3_sigmoid_split", &wgmma_fp16x3_sigmoid_split,
          "Step 07, GEMM1: h = sigmoid(x @ w.T + b) from the fp16x3 splits of x and w, returned\n"
          "split for GEMM2 with the fixed scale H_SCALE = 2**14: (hh, hl), each (M, Hp) float16,\n"
          "Hp = H rounded up to 64, h = (hh + hl / 2048) / H_SCALE, columns H.. zero.\n\n"
          "xh, xl: CUDA float16 (M, K); wh, wl: float16 (H, K); x_inv (M,), w_inv (H,), b (H,):\n"
          "float32; one device; K % 8 == 0 (the split pads K to a multiple of 64).\n"
          "Runs on the current CUDA stream and returns without synchronising.",
          py::arg("xh"), py::arg("xl"), py::arg("x_inv"), py::arg("wh"), py::arg("wl"),
          py::arg("w_inv"), py::arg("b"));
    m.def("wgmma_fp16x3_partial_lse", &wgmma_fp16x3_partial_lse,
          "Step 07, GEMM2: the partial logsumexp pairs of z = h @ w.T + b, z never stored:\n"
          "(pmax, psum), each (M, T) float32, T = cdiv(N, LSE_TILE); for row m and tile t,\n"
          "pmax = max of z[m, n] and psum = sum of exp(z[m, n] - pmax) over n in the tile, n < N.\n\n"
          "hh, hl: CUDA float16 (M, K) with h = (hh + hl / 2048) * h_inv; wh, wl: float16 (N, K);\n"
          "w_inv (N,), b (N,): float32; one device; K % 8 == 0.\n"
          "Runs on the current CUDA stream and returns without synchronising.",
          py::arg("hh"), py::arg("hl"), py::arg("wh"), py::arg("wl"), py::arg("w_inv"),
          py::arg("b"), py::arg("h_inv") = 1.0 / static_cast<double>(p45::kHopperHScale));
}
