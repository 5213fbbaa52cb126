// PyTorch bindings of problem 45's Hopper steps: the two GEMMs of
// out = logsumexp(sigmoid(x @ W1.T + b1) @ W2.T + b2) on wgmma, step 07's on fp16x3 splits
// (fp32-faithful), step 08's on one fp16 (or bf16) copy of each operand. GEMM1 returns h (07: already split,
// hh and hl; 08: one fp16 h); GEMM2 returns the partial logsumexp pairs (pmax, psum) that
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

using fusedkit::check_cuda_16bit;
using fusedkit::dense_aligned;
constexpr const char* kSplitHint = "split float32 operands with common/fp16x3_split.py";
constexpr const char* kCastHint = "cast float32 operands with common/fp16_operands.py";

// A checked 16-bit tensor's data as the kernels' element type: __half or __nv_bfloat16.
template <class Elem>
Elem* elems(const torch::Tensor& t) {
    return reinterpret_cast<Elem*>(t.data_ptr());
}

// One 16-bit GEMM's operands: A (rows, K), B (n, K) of `type` (fp16 unless said), bias (n,) fp32.
// Checks dtypes, devices and shapes (`hint` says how to make the operands); returns K.
int64_t check_gemm(const torch::Tensor& a, const char* a_name, const torch::Tensor& w,
                   const char* w_name, const torch::Tensor& bias, const char* hint,
                   torch::ScalarType type = torch::kHalf) {
    check_cuda_16bit(a, a_name, hint, type);
    check_cuda_16bit(w, w_name, hint, type);
    check_cuda_float(bias, "b", 1);
    check_same_device(w, w_name, a);
    check_same_device(bias, "b", a);
    TORCH_CHECK_VALUE(w.size(1) == a.size(1), w_name, ".size(1) must equal ", a_name, ".size(1) (K = ",
                      a.size(1), "), got ", w_name, " of shape ", w.sizes(), "; both need the same "
                      "padded K");
    TORCH_CHECK_VALUE(bias.size(0) == w.size(0), "b must have ", w_name, ".size(0) = ", w.size(0),
                      " elements, got shape ", bias.sizes());
    const int64_t K = a.size(1);
    TORCH_CHECK_VALUE(K >= 8 && K % 8 == 0, a_name, ".size(1) (K) = ", K, " must be a positive "
                      "multiple of 8: TMA needs 16-byte row strides; pad K with zero columns "
                      "(the registry's build does)");
    check_fits_int32(a.size(0), "M");
    check_fits_int32(w.size(0), "w.size(0)");
    check_fits_int32(K, "K");
    return K;
}

// One fp16x3 GEMM's operands: A = (ah + al / 2048) (rows, K), B = (bh + bl / 2048) * b_inv (n, K),
// bias (n,): check_gemm's of the hi parts, and the lo parts and B's scales alike. Returns K.
int64_t check_split_gemm(const torch::Tensor& ah, const char* ah_name, const torch::Tensor& al,
                         const char* al_name, const torch::Tensor& bh, const torch::Tensor& bl,
                         const torch::Tensor& b_inv, const torch::Tensor& bias) {
    const int64_t K = check_gemm(ah, ah_name, bh, "wh", bias, kSplitHint);
    check_cuda_16bit(al, al_name, kSplitHint);
    check_cuda_16bit(bl, "wl", kSplitHint);
    check_cuda_float(b_inv, "w_inv", 1);
    check_same_device(al, al_name, ah);
    check_same_device(bl, "wl", ah);
    check_same_device(b_inv, "w_inv", ah);
    TORCH_CHECK_VALUE(al.sizes() == ah.sizes(), al_name, " must have ", ah_name, "'s shape ",
                      ah.sizes(), ", got ", al.sizes());
    TORCH_CHECK_VALUE(bl.sizes() == bh.sizes(), "wl must have wh's shape ", bh.sizes(), ", got ",
                      bl.sizes());
    TORCH_CHECK_VALUE(b_inv.size(0) == bh.size(0), "w_inv must have wh.size(0) = ", bh.size(0),
                      " elements, got shape ", b_inv.sizes());
    return K;
}

// Hp, the width of h: H rounded up to kHopperPad (the padding columns are written as zeros).
int64_t padded_hidden(int64_t H) {
    const int64_t Hp = (H + p45::kHopperPad - 1) / p45::kHopperPad * p45::kHopperPad;
    check_fits_int32(Hp, "H rounded up to 64");
    return Hp;
}

// GEMM2's outputs, pmax and psum (M, cdiv(N, 128)) fp32: every (row, tile) pair is written by the
// kernel.
std::tuple<torch::Tensor, torch::Tensor> lse_pairs(int64_t M, int64_t N, const torch::Tensor& like) {
    const int64_t T = (N + p45::kHopperLseTile - 1) / p45::kHopperLseTile;
    const auto options = like.options().dtype(torch::kFloat32);
    return {torch::empty({M, T}, options), torch::empty({M, T}, options)};
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
    const int64_t H = wh16.size(0), Hp = padded_hidden(H);
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
        elems<const __half>(xh), elems<const __half>(xl), xi.data_ptr<float>(),
        elems<const __half>(wh), elems<const __half>(wl), wi.data_ptr<float>(), bc.data_ptr<float>(),
        elems<__half>(hh), elems<__half>(hl), M, static_cast<int>(H), static_cast<int>(K),
        static_cast<int>(Hp), at::cuda::getCurrentCUDAStream());
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
    const c10::cuda::CUDAGuard device_guard(hh.device());
    auto [pmax, psum] = lse_pairs(M, N, hh);
    if (M == 0 || N == 0) return {pmax, psum};
    const char* err = p45::launch_wgmma_fp16x3_partial_lse(
        elems<const __half>(hh), elems<const __half>(hl), static_cast<float>(h_inv),
        elems<const __half>(wh), elems<const __half>(wl), wi.data_ptr<float>(), bc.data_ptr<float>(), pmax.data_ptr<float>(), psum.data_ptr<float>(),
        M, N, static_cast<int>(K), at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == nullptr, "wgmma_fp16x3_partial_lse: ", err == nullptr ? "" : err);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return {pmax, psum};
}

// Step 08's operands are fp16, or bf16 for its twin: the type of A (x or h), which B must share.
torch::ScalarType type_16bit(const torch::Tensor& a) {
    return a.defined() && a.scalar_type() == torch::kBFloat16 ? torch::kBFloat16 : torch::kHalf;
}

// Step 08, GEMM1: x (M, Kp) and W1's copy (H, Kp), fp16 or bf16 -> h (M, Hp) of their type, Hp = H
// rounded up to 64.
torch::Tensor wgmma_fp16_sigmoid(const torch::Tensor& x16, const torch::Tensor& w16,
                                 const torch::Tensor& b) {
    const torch::ScalarType type = type_16bit(x16);
    const int64_t K = check_gemm(x16, "x", w16, "w", b, kCastHint, type);
    const int64_t H = w16.size(0), Hp = padded_hidden(H);
    const torch::Tensor x = dense_aligned(x16), w = dense_aligned(w16), bc = b.contiguous();
    const int M = static_cast<int>(x.size(0));
    const c10::cuda::CUDAGuard device_guard(x.device());
    // Every element is written by the kernel, the padding columns H .. Hp - 1 as zeros.
    torch::Tensor h = torch::empty({M, Hp}, x.options());
    if (M == 0 || H == 0) return h;
    const auto launch = [&](auto elem) {
        using Elem = decltype(elem);
        return p45::launch_wgmma_16bit_sigmoid(elems<const Elem>(x), elems<const Elem>(w),
                                               bc.data_ptr<float>(), elems<Elem>(h), M,
                                               static_cast<int>(H), static_cast<int>(K),
                                               static_cast<int>(Hp), at::cuda::getCurrentCUDAStream());
    };
    const char* err = type == torch::kHalf ? launch(__half{}) : launch(__nv_bfloat16{});
    TORCH_CHECK(err == nullptr, "wgmma_fp16_sigmoid: ", err == nullptr ? "" : err);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return h;
}

// Step 08, GEMM2: h (M, Hp) and W2's copy (N, Hp), fp16 or bf16 -> pmax, psum (M, cdiv(N, 128)).
std::tuple<torch::Tensor, torch::Tensor> wgmma_fp16_partial_lse(const torch::Tensor& h16,
                                                                const torch::Tensor& w16,
                                                                const torch::Tensor& b) {
    const torch::ScalarType type = type_16bit(h16);
    const int64_t K = check_gemm(h16, "h", w16, "w", b, kCastHint, type);
    const torch::Tensor h = dense_aligned(h16), w = dense_aligned(w16), bc = b.contiguous();
    const int M = static_cast<int>(h.size(0)), N = static_cast<int>(w.size(0));
    const c10::cuda::CUDAGuard device_guard(h.device());
    auto [pmax, psum] = lse_pairs(M, N, h);
    if (M == 0 || N == 0) return {pmax, psum};
    const auto launch = [&](auto elem) {
        using Elem = decltype(elem);
        return p45::launch_wgmma_16bit_partial_lse(
            elems<const Elem>(h), elems<const Elem>(w), bc.data_ptr<float>(), pmax.data_ptr<float>(),
            psum.data_ptr<float>(), M, N, static_cast<int>(K), at::cuda::getCurrentCUDAStream());
    };
    const char* err = type == torch::kHalf ? launch(__half{}) : launch(__nv_bfloat16{});
    TORCH_CHECK(err == nullptr, "wgmma_fp16_partial_lse: ", err == nullptr ? "" : err);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return {pmax, psum};
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.doc() = "Problem 45 (KernelBench L2 #45) Hopper steps 07 and 08 (sm_90a): the two GEMMs of "
              "logsumexp(sigmoid(x @ W1.T + b1) @ W2.T + b2) with wgmma, on fp16x3 splits (07) or "
              "one fp16 or bf16 copy of each operand (08).";
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
    m.def("wgmma_fp16_sigmoid", &wgmma_fp16_sigmoid,
          "Step 08, GEMM1: h = sigmoid(x @ w.T + b) with one 16-bit product per term, fp32 sums,\n"
          "rounded once to x's type: (M, Hp), Hp = H rounded up to 64, columns H.. zero.\n\n"
          "x: CUDA float16 or bfloat16 (M, K); w: (H, K) of x's type; b (H,): float32; one device; K % 8 == 0\n"
          "(common/fp16_operands.py pads K with zeros). Runs on the current CUDA stream and\n"
          "returns without synchronising.",
          py::arg("x"), py::arg("w"), py::arg("b"));
    m.def("wgmma_fp16_partial_lse", &wgmma_fp16_partial_lse,
          "Step 08, GEMM2: the partial logsumexp pairs of z = h @ w.T + b with one 16-bit product per\n"
          "term, z never stored: (pmax, psum) as wgmma_fp16x3_partial_lse returns them.\n\n"
          "h: CUDA float16 or bfloat16 (M, K); w: (N, K) of h's type; b (N,): float32; one device; K % 8 == 0.\n"
          "Runs on the current CUDA stream and returns without synchronising.",
          py::arg("h"), py::arg("w"), py::arg("b"));
}
