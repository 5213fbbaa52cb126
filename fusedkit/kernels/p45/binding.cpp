// PyTorch bindings of problem 45's CUDA steps: out[m] = logsumexp_n(sigmoid(x @ W1.T + b1) @ W2.T + b2)[m, n].
// This file (1) checks inputs, (2) allocates outputs and the intermediates h (M, H) and z (M, N),
// (3) launches on PyTorch's current stream; the kernels live in the numbered .cu files, which know
// nothing about torch. Checks and the cuBLAS call are shared with p12 (../common/torch_cuda.h).
#include <torch/extension.h>

#include <ATen/cuda/CUDAContext.h>   // getCurrentCUDAStream
#include <c10/cuda/CUDAException.h>  // C10_CUDA_KERNEL_LAUNCH_CHECK
#include <c10/cuda/CUDAGuard.h>      // CUDAGuard: run on the inputs' device

#include <cstdint>
#include <string>

#include "../common/torch_cuda.h"  // checks, CublasModeGuard, sgemm_x_wT (shared with p12)
#include "launchers.h"

namespace {

using fusedkit::check_cuda_float;
using fusedkit::check_fits_int32;
using fusedkit::check_same_device;
using fusedkit::sgemm_x_wT;

// Checked, contiguous operands of the model and its sizes.
struct Mlp {
    torch::Tensor x, w1, b1, w2, b2;  // x (M, K), w1 (H, K), b1 (H,), w2 (N, H), b2 (N,)
    int M, K, H, N;
};

Mlp check_mlp(const torch::Tensor& x, const torch::Tensor& w1, const torch::Tensor& b1,
              const torch::Tensor& w2, const torch::Tensor& b2) {
    check_cuda_float(x, "x", 2);
    check_cuda_float(w1, "w1", 2);
    check_cuda_float(b1, "b1", 1);
    check_cuda_float(w2, "w2", 2);
    check_cuda_float(b2, "b2", 1);
    check_same_device(w1, "w1", x);
    check_same_device(b1, "b1", x);
    check_same_device(w2, "w2", x);
    check_same_device(b2, "b2", x);
    TORCH_CHECK_VALUE(w1.size(1) == x.size(1), "w1.size(1) must equal x.size(1) (K = ", x.size(1),
                      "), got w1 of shape ", w1.sizes(), "; w1 is linear1's weight, (H, K)");
    TORCH_CHECK_VALUE(b1.size(0) == w1.size(0), "b1 must have w1.size(0) = ", w1.size(0),
                      " elements (H), got shape ", b1.sizes());
    TORCH_CHECK_VALUE(w2.size(1) == w1.size(0), "w2.size(1) must equal w1.size(0) (H = ",
                      w1.size(0), "), got w2 of shape ", w2.sizes(),
                      "; w2 is linear2's weight, (N, H)");
    TORCH_CHECK_VALUE(b2.size(0) == w2.size(0), "b2 must have w2.size(0) = ", w2.size(0),
                      " elements (N), got shape ", b2.sizes());
    // cuBLAS needs leading dimensions >= 1; the naive kernels would sum nothing.
    TORCH_CHECK_VALUE(x.size(1) >= 1, "x.size(1) (K) must be >= 1, got ", x.size(1));
    TORCH_CHECK_VALUE(w1.size(0) >= 1, "w1.size(0) (H) must be >= 1, got ", w1.size(0));
    TORCH_CHECK_VALUE(w2.size(0) >= 1, "w2.size(0) (N) must be >= 1, got ", w2.size(0));
    check_fits_int32(x.size(0), "x.size(0) (M)");
    check_fits_int32(x.size(1), "x.size(1) (K)");
    check_fits_int32(w1.size(0), "w1.size(0) (H)");
    check_fits_int32(w2.size(0), "w2.size(0) (N)");
    Mlp a;
    // The kernels and cuBLAS assume dense row-major buffers: strided views are copied (costs time).
    a.x = x.contiguous();
    a.w1 = w1.contiguous();
    a.b1 = b1.contiguous();
    a.w2 = w2.contiguous();
    a.b2 = b2.contiguous();
    a.M = static_cast<int>(x.size(0));
    a.K = static_cast<int>(x.size(1));
    a.H = static_cast<int>(w1.size(0));
    a.N = static_cast<int>(w2.size(0));
    return a;
}

enum class Step { kNaive, kCublasEpilogues, kCublasEpiloguesVec4, kCublasTf32EpiloguesVec4 };

torch::Tensor run_step(Step step, const torch::Tensor& x, const torch::Tensor& w1,
                       const torch::Tensor& b1, const torch::Tensor& w2,
                       const torch::Tensor& b2) {
    const Mlp a = check_mlp(x, w1, b1, w2, b2);
    const c10::cuda::CUDAGuard device_guard(a.x.device());
    torch::Tensor out = torch::empty({a.M}, a.x.options());
    if (a.M == 0) return out;  // nothing to compute; an empty grid is a launch error
    // Intermediates from PyTorch's caching allocator, ordered on the current stream like every
    // launch below: h = sigmoid(x @ W1.T + b1) (M, H), z = h @ W2.T (+ b2 in naive) (M, N).
    torch::Tensor h = torch::empty({a.M, a.H}, a.x.options());
    torch::Tensor z = torch::empty({a.M, a.N}, a.x.options());
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const float* xp = a.x.data_ptr<float>();
    const float* w1p = a.w1.data_ptr<float>();
    const float* b1p = a.b1.data_ptr<float>();
    const float* w2p = a.w2.data_ptr<float>();
    const float* b2p = a.b2.data_ptr<float>();
    float* hp = h.data_ptr<float>();
    float* zp = z.data_ptr<float>();
    float* outp = out.data_ptr<float>();
    switch (step) {
        case Step::kNaive:
            p45::launch_naive(xp, w1p, b1p, w2p, b2p, hp, zp, outp, a.M, a.K, a.H, a.N, stream);
            C10_CUDA_KERNEL_LAUNCH_CHECK();
            break;
        case Step::kCublasEpilogues:
            sgemm_x_wT(xp, w1p, hp, a.M, a.H, a.K);        // h = x @ W1.T
            p45::launch_sigmoid_scalar(hp, b1p, a.M, a.H, stream);
            C10_CUDA_KERNEL_LAUNCH_CHECK();
            sgemm_x_wT(hp, w2p, zp, a.M, a.N, a.H);        // z = h @ W2.T (b2 comes in the LSE)
            p45::launch_lse_scalar(zp, b2p, outp, a.M, a.N, stream);
            C10_CUDA_KERNEL_LAUNCH_CHECK();
            break;
        case Step::kCublasEpiloguesVec4:
        case Step::kCublasTf32EpiloguesVec4: {
            const bool tf32 = step == Step::kCublasTf32EpiloguesVec4;
            sgemm_x_wT(xp, w1p, hp, a.M, a.H, a.K, tf32);
            p45::launch_sigmoid_vec4(hp, b1p, a.M, a.H, stream);
            C10_CUDA_KERNEL_LAUNCH_CHECK();
            sgemm_x_wT(hp, w2p, zp, a.M, a.N, a.H, tf32);
            p45::launch_lse_vec4(zp, b2p, outp, a.M, a.N, stream);
            C10_CUDA_KERNEL_LAUNCH_CHECK();
            break;
        }
    }
    // h and z go back to the caching allocator here; the allocator reuses their blocks only
    // for work on this same stream, which runs after the kernels above.
    return out;
}

torch::Tensor naive(const torch::Tensor& x, const torch::Tensor& w1, const torch::Tensor& b1,
                    const torch::Tensor& w2, const torch::Tensor& b2) {
    return run_step(Step::kNaive, x, w1, b1, w2, b2);
}

torch::Tensor cublas_epilogues(const torch::Tensor& x, const torch::Tensor& w1,
                               const torch::Tensor& b1, const torch::Tensor& w2,
                               const torch::Tensor& b2) {
    return run_step(Step::kCublasEpilogues, x, w1, b1, w2, b2);
}

torch::Tensor cublas_epilogues_vec4(const torch::Tensor& x, const torch::Tensor& w1,
                                    const torch::Tensor& b1, const torch::Tensor& w2,
                                    const torch::Tensor& b2) {
    return run_step(Step::kCublasEpiloguesVec4, x, w1, b1, w2, b2);
}

torch::Tensor cublas_tf32_epilogues_vec4(const torch::Tensor& x, const torch::Tensor& w1,
                                         const torch::Tensor& b1, const torch::Tensor& w2,
                                         const torch::Tensor& b2) {
    return run_step(Step::kCublasTf32EpiloguesVec4, x, w1, b1, w2, b2);
}

// Checks of a 2-D t (rows, cols) and its per-column bias b (cols,); `t_name`, `b_name` are the
// Python parameter names. Returns b made contiguous.
torch::Tensor check_rows_and_bias(const torch::Tensor& t, const char* t_name,
                                  const torch::Tensor& b, const char* b_name) {
    check_cuda_float(t, t_name, 2);
    check_cuda_float(b, b_name, 1);
    check_same_device(b, b_name, t);
    TORCH_CHECK_VALUE(b.size(0) == t.size(1), b_name, " must have ", t_name, ".size(1) = ",
                      t.size(1), " elements, got shape ", b.sizes());
    check_fits_int32(t.size(0), (std::string(t_name) + ".size(0) (M)").c_str());
    check_fits_int32(t.size(1), (std::string(t_name) + ".size(1)").c_str());
    return b.contiguous();
}

torch::Tensor sigmoid_only(torch::Tensor h, const torch::Tensor& b1, bool vec4) {
    check_cuda_float(h, "h", 2);
    TORCH_CHECK_VALUE(h.is_contiguous(), "h must be contiguous (the epilogue runs in place, a "
                      "copy would not update it), got strides ", h.strides());
    const torch::Tensor bc = check_rows_and_bias(h, "h", b1, "b1");
    if (h.numel() == 0) return h;
    const c10::cuda::CUDAGuard device_guard(h.device());
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const int M = static_cast<int>(h.size(0)), H = static_cast<int>(h.size(1));
    if (vec4) {
        p45::launch_sigmoid_vec4(h.data_ptr<float>(), bc.data_ptr<float>(), M, H, stream);
    } else {
        p45::launch_sigmoid_scalar(h.data_ptr<float>(), bc.data_ptr<float>(), M, H, stream);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return h;
}

torch::Tensor lse_only(const torch::Tensor& z, const torch::Tensor& b2, bool vec4, int64_t version) {
    TORCH_CHECK_VALUE(version >= 1 && version <= 3, "version must be 1, 2 or 3 (the float4 "
                      "reduction's versions), got ", version);
    const torch::Tensor bc = check_rows_and_bias(z, "z", b2, "b2");
    TORCH_CHECK_VALUE(z.size(1) >= 1, "z.size(1) (N) must be >= 1, got ", z.size(1));
    const c10::cuda::CUDAGuard device_guard(z.device());
    torch::Tensor out = torch::empty({z.size(0)}, z.options());
    if (z.size(0) == 0) return out;
    const torch::Tensor zc = z.contiguous();  // read only: a strided z is copied (costs time)
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const int M = static_cast<int>(zc.size(0)), N = static_cast<int>(zc.size(1));
    if (vec4) {
        p45::launch_lse_vec4(zc.data_ptr<float>(), bc.data_ptr<float>(), out.data_ptr<float>(),
                             M, N, stream, static_cast<int>(version));
    } else {
        p45::launch_lse_scalar(zc.data_ptr<float>(), bc.data_ptr<float>(), out.data_ptr<float>(),
                               M, N, stream);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

bool vec4_fast_path(const torch::Tensor& t, const torch::Tensor& b) {
    check_cuda_float(t, "t", 2);
    TORCH_CHECK_VALUE(t.is_contiguous(), "t must be contiguous (the answer depends on its data "
                      "pointer, and the kernels see a strided tensor only as a copy), got strides ",
                      t.strides());
    check_cuda_float(b, "b", 1);
    check_same_device(b, "b", t);
    TORCH_CHECK_VALUE(b.size(0) == t.size(1), "b must have t.size(1) = ", t.size(1),
                      " elements, got shape ", b.sizes());
    check_fits_int32(t.size(1), "t.size(1)");
    // A strided b is copied by sigmoid_only / lse_only, and a fresh copy is 16-byte aligned.
    const torch::Tensor bc = b.contiguous();
    return p45::vec4_fast_path(t.data_ptr<float>(), bc.data_ptr<float>(),
                               static_cast<int>(t.size(1)));
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.doc() = "Problem 45 (KernelBench L2 #45) CUDA steps: "
              "out = logsumexp(sigmoid(x @ w1.T + b1) @ w2.T + b2, dim=1), all fp32.";
    const char* step_doc =
        "Return out (M,) = logsumexp(sigmoid(x @ w1.T + b1) @ w2.T + b2, dim=1).\n\n"
        "x: CUDA float32 (M, K); w1: (H, K) and b1: (H,), linear1's parameters; w2: (N, H) and\n"
        "b2: (N,), linear2's; all on one device; K, H, N >= 1. Non-contiguous inputs are copied\n"
        "to contiguous memory first (costs time). The intermediates h (M, H) and z (M, N) come\n"
        "from PyTorch's caching allocator. Runs on the current CUDA stream and returns without\n"
        "synchronising.";
    const auto step_args = [&m, step_doc](const char* name, auto fn, const char* what) {
        m.def(name, fn, (std::string(what) + "\n\n" + step_doc).c_str(), py::arg("x"),
              py::arg("w1"), py::arg("b1"), py::arg("w2"), py::arg("b2"));
    };
    step_args("naive", &naive,
              "Step 01: three untiled kernels, one thread per element of h, of z, per row of out.");
    step_args("cublas_epilogues", &cublas_epilogues,
              "Step 02: cublasSgemm (fp32, no TF32) for both GEMMs; a scalar bias + sigmoid pass\n"
              "over h and a warp-per-row bias + logsumexp reduction of z.");
    step_args("cublas_epilogues_vec4", &cublas_epilogues_vec4,
              "Step 03: as step 02 with the float4 epilogue kernels.");
    step_args("cublas_tf32_epilogues_vec4", &cublas_tf32_epilogues_vec4,
              "Step 03 in TF32: both cublasSgemm calls on TF32 tensor cores (the handle's math\n"
              "mode is restored afterwards), then the float4 epilogues.");
    m.def("sigmoid_only", &sigmoid_only,
          "In place: h = sigmoid(h + b1); returns h.\n\n"
          "h: contiguous CUDA float32 (M, H), updated in place (a strided h is refused, since a\n"
          "copy would not update it); b1: (H,), copied if non-contiguous. vec4=True takes the\n"
          "float4 kernel when H % 4 == 0 and h, b1 are 16-byte aligned, else the scalar one.",
          py::arg("h"), py::arg("b1"), py::arg("vec4") = false);
    m.def("lse_only", &lse_only,
          "Return out (M,) = logsumexp(z + b2, dim=1), max-subtracted (+inf rows give +inf, rows\n"
          "of only -inf give -inf, NaN propagates), one warp per row.\n\n"
          "z: CUDA float32 (M, N), N >= 1, only read (copied if non-contiguous); b2: (N,).\n"
          "vec4=True takes the float4 kernel when N % 4 == 0 and z, b2 are 16-byte aligned,\n"
          "else the scalar one; version (1, 2 or 3, the current one) picks the float4 kernel's\n"
          "version, to time the three side by side.",
          py::arg("z"), py::arg("b2"), py::arg("vec4") = false, py::arg("version") = 3);
    m.def("vec4_fast_path", &vec4_fast_path,
          "True when sigmoid_only(t, b, vec4=True) or lse_only(t, b, vec4=True) takes the float4\n"
          "path (t.size(1) % 4 == 0 and t, b 16-byte aligned), False when it falls back to the\n"
          "scalar kernel. t: contiguous CUDA float32 (rows, cols); b: (cols,).",
          py::arg("t"), py::arg("b"));
}
