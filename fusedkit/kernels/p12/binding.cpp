// PyTorch bindings of problem 12's CUDA steps: y = LeakyReLU((x @ W.T + b) * multiplier, slope).
// This file (1) checks inputs, (2) allocates outputs, (3) launches on PyTorch's current stream;
// the kernels live in the numbered .cu files, which know nothing about torch.
#include <torch/extension.h>

#include <ATen/cuda/CUDAContext.h>   // getCurrentCUDAStream
#include <c10/cuda/CUDAException.h>  // C10_CUDA_KERNEL_LAUNCH_CHECK
#include <c10/cuda/CUDAGuard.h>      // CUDAGuard: run on the inputs' device

#include <cstdint>

#include "../common/torch_cuda.h"  // checks, CublasModeGuard, sgemm_x_wT (shared with p45)
#include "launchers.h"

namespace {

using fusedkit::check_cuda_float;
using fusedkit::check_fits_int32;
using fusedkit::check_same_device;
using fusedkit::sgemm_x_wT;

// Checked, contiguous operands of y = x @ W.T (+ b) and their sizes.
struct Linear {
    torch::Tensor x, w, b;  // x (M, K), w (N, K) or, transposed, (K, N); b (N,) or undefined
    int M, N, K;
};

// w is nn.Linear's weight (N, K), or with `transposed` its transpose wt (K, N) (step 02's form).
Linear check_linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor* b,
                    bool transposed = false) {
    const char* name = transposed ? "wt" : "w";
    check_cuda_float(x, "x", 2);
    check_cuda_float(w, name, 2);
    check_same_device(w, name, x);
    const int k_dim = transposed ? 0 : 1;  // where K lies in w
    const int64_t n = w.size(1 - k_dim);
    TORCH_CHECK_VALUE(w.size(k_dim) == x.size(1), name, ".size(", k_dim, ") must equal x.size(1) (K = ",
                      x.size(1), "), got ", name, " of shape ", w.sizes(), "; ", name,
                      transposed ? " is nn.Linear's weight transposed, (K, N)" : " is nn.Linear's weight, (N, K)");
    TORCH_CHECK_VALUE(x.size(1) >= 1, "x.size(1) (K) must be >= 1, got ", x.size(1));
    check_fits_int32(x.size(0), "x.size(0) (M)");
    check_fits_int32(n, transposed ? "wt.size(1) (N)" : "w.size(0) (N)");
    check_fits_int32(x.size(1), "x.size(1) (K)");
    Linear a;
    if (b != nullptr) {
        check_cuda_float(*b, "b", 1);
        check_same_device(*b, "b", x);
        TORCH_CHECK_VALUE(b->size(0) == n, "b must have ", name, ".size(", 1 - k_dim, ") = ", n,
                          " elements, got shape ", b->sizes());
        a.b = b->contiguous();
    }
    // The kernels assume dense row-major buffers: strided views are copied (documented).
    a.x = x.contiguous();
    a.w = w.contiguous();
    a.M = static_cast<int>(x.size(0));
    a.N = static_cast<int>(n);
    a.K = static_cast<int>(x.size(1));
    return a;
}

enum class Step { kNaive, kCoalesced, kCublasEpilogue, kCublasEpilogueVec4, kCublasTf32EpilogueVec4,
                  kSmemTiles, kRegisterTiles, kTiled, kSmallBatch };

// Steps whose grid puts one block per `rows_per_block` rows of y on gridDim.y (at most 65535).
void check_row_blocks(int M, int64_t rows_per_block, const char* kernel) {
    const int64_t row_blocks = (static_cast<int64_t>(M) + rows_per_block - 1) / rows_per_block;
    TORCH_CHECK_VALUE(row_blocks <= p12::kMaxGridY, "x.size(0) (M) = ", M, " is too large for the ",
                      kernel, " kernel: at most ", p12::kMaxGridY * rows_per_block,
                      " rows (65535 row tiles of ", rows_per_block, ")");
}

torch::Tensor run_step(Step step, const torch::Tensor& x, const torch::Tensor& w,
                       const torch::Tensor& b, double multiplier, double negative_slope) {
    const Linear a = check_linear(x, w, &b, step == Step::kCoalesced);
    if (step == Step::kSmemTiles) check_row_blocks(a.M, p12::kSmemTile, "smem_tiles");
    if (step == Step::kRegisterTiles) check_row_blocks(a.M, p12::kRegisterTileBlockM, "register_tiles");
    if (step == Step::kTiled) check_row_blocks(a.M, p12::kTiledBlockM, "tiled");
    if (step == Step::kSmallBatch) {
        const int64_t row_groups = (static_cast<int64_t>(a.M) + p12::kSmallBatchRows - 1) / p12::kSmallBatchRows;
        TORCH_CHECK_VALUE(row_groups <= p12::kMaxGridY, "x.size(0) (M) = ", a.M,
                          " is too large for the small-batch kernel: at most ",
                          p12::kMaxGridY * p12::kSmallBatchRows, " rows");
    }
    const c10::cuda::CUDAGuard device_guard(a.x.device());
    torch::Tensor y = torch::empty({a.M, a.N}, a.x.options());
    if (a.M == 0 || a.N == 0) return y;  // nothing to compute; an empty grid is a launch error
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const float mult = static_cast<float>(multiplier);
    const float slope = static_cast<float>(negative_slope);
    const float* xp = a.x.data_ptr<float>();
    const float* wp = a.w.data_ptr<float>();
    const float* bp = a.b.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    switch (step) {
        case Step::kNaive:
            p12::launch_naive(xp, wp, bp, yp, a.M, a.N, a.K, mult, slope, stream);
            C10_CUDA_KERNEL_LAUNCH_CHECK();
            break;
        case Step::kCoalesced:
            p12::launch_coalesced(xp, wp, bp, yp, a.M, a.N, a.K, mult, slope, stream);
            C10_CUDA_KERNEL_LAUNCH_CHECK();
            break;
        case Step::kCublasEpilogue:
            sgemm_x_wT(xp, wp, yp, a.M, a.N, a.K);
            p12::launch_epilogue_scalar(yp, bp, a.M, a.N, mult, slope, stream);
            C10_CUDA_KERNEL_LAUNCH_CHECK();
            break;
        case Step::kCublasEpilogueVec4:
            sgemm_x_wT(xp, wp, yp, a.M, a.N, a.K);
            p12::launch_epilogue_vec4(yp, bp, a.M, a.N, mult, slope, stream);
            C10_CUDA_KERNEL_LAUNCH_CHECK();
            break;
        case Step::kCublasTf32EpilogueVec4:
            sgemm_x_wT(xp, wp, yp, a.M, a.N, a.K, /*tf32=*/true);
            p12::launch_epilogue_vec4(yp, bp, a.M, a.N, mult, slope, stream);
            C10_CUDA_KERNEL_LAUNCH_CHECK();
            break;
        case Step::kSmemTiles:
            p12::launch_smem_tiles(xp, wp, bp, yp, a.M, a.N, a.K, mult, slope, stream);
            C10_CUDA_KERNEL_LAUNCH_CHECK();
            break;
        case Step::kRegisterTiles:
            p12::launch_register_tiles(xp, wp, bp, yp, a.M, a.N, a.K, mult, slope, stream);
            C10_CUDA_KERNEL_LAUNCH_CHECK();
            break;
        case Step::kTiled:
            p12::launch_tiled(xp, wp, bp, yp, a.M, a.N, a.K, mult, slope, stream);
            C10_CUDA_KERNEL_LAUNCH_CHECK();
            break;
        case Step::kSmallBatch:
            p12::launch_small_batch(xp, wp, bp, yp, a.M, a.N, a.K, mult, slope, stream);
            C10_CUDA_KERNEL_LAUNCH_CHECK();
            break;
    }
    return y;
}

torch::Tensor naive(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                    double multiplier, double negative_slope) {
    return run_step(Step::kNaive, x, w, b, multiplier, negative_slope);
}

torch::Tensor coalesced(const torch::Tensor& x, const torch::Tensor& wt, const torch::Tensor& b,
                        double multiplier, double negative_slope) {
    return run_step(Step::kCoalesced, x, wt, b, multiplier, negative_slope);
}

torch::Tensor cublas_epilogue(const torch::Tensor& x, const torch::Tensor& w,
                              const torch::Tensor& b, double multiplier, double negative_slope) {
    return run_step(Step::kCublasEpilogue, x, w, b, multiplier, negative_slope);
}

torch::Tensor cublas_epilogue_vec4(const torch::Tensor& x, const torch::Tensor& w,
                                   const torch::Tensor& b, double multiplier,
                                   double negative_slope) {
    return run_step(Step::kCublasEpilogueVec4, x, w, b, multiplier, negative_slope);
}

torch::Tensor cublas_tf32_epilogue_vec4(const torch::Tensor& x, const torch::Tensor& w,
                                        const torch::Tensor& b, double multiplier,
                                        double negative_slope) {
    return run_step(Step::kCublasTf32EpilogueVec4, x, w, b, multiplier, negative_slope);
}

torch::Tensor smem_tiles(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                         double multiplier, double negative_slope) {
    return run_step(Step::kSmemTiles, x, w, b, multiplier, negative_slope);
}

torch::Tensor register_tiles(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                             double multiplier, double negative_slope) {
    return run_step(Step::kRegisterTiles, x, w, b, multiplier, negative_slope);
}

torch::Tensor tiled(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                    double multiplier, double negative_slope) {
    return run_step(Step::kTiled, x, w, b, multiplier, negative_slope);
}

torch::Tensor small_batch(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                          double multiplier, double negative_slope) {
    return run_step(Step::kSmallBatch, x, w, b, multiplier, negative_slope);
}

// Checks of the in-place epilogue's y (M, N) and b (N,); returns b made contiguous.
torch::Tensor check_epilogue_args(const torch::Tensor& y, const torch::Tensor& b) {
    check_cuda_float(y, "y", 2);
    TORCH_CHECK_VALUE(y.is_contiguous(), "y must be contiguous (the epilogue runs in place, a "
                      "copy would not update it), got strides ", y.strides());
    check_cuda_float(b, "b", 1);
    check_same_device(b, "b", y);
    TORCH_CHECK_VALUE(b.size(0) == y.size(1), "b must have y.size(1) = ", y.size(1),
                      " elements, got shape ", b.sizes());
    check_fits_int32(y.size(0), "y.size(0) (M)");
    check_fits_int32(y.size(1), "y.size(1) (N)");
    return b.contiguous();
}

torch::Tensor epilogue_only(torch::Tensor y, const torch::Tensor& b, double multiplier,
                            double negative_slope, bool vec4) {
    const torch::Tensor bc = check_epilogue_args(y, b);
    if (y.numel() == 0) return y;
    const c10::cuda::CUDAGuard device_guard(y.device());
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const int M = static_cast<int>(y.size(0)), N = static_cast<int>(y.size(1));
    const float mult = static_cast<float>(multiplier);
    const float slope = static_cast<float>(negative_slope);
    if (vec4) {
        p12::launch_epilogue_vec4(y.data_ptr<float>(), bc.data_ptr<float>(), M, N, mult, slope,
                                  stream);
    } else {
        p12::launch_epilogue_scalar(y.data_ptr<float>(), bc.data_ptr<float>(), M, N, mult,
                                    slope, stream);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}

bool vec4_fast_path(const torch::Tensor& y, const torch::Tensor& b) {
    const torch::Tensor bc = check_epilogue_args(y, b);
    return p12::epilogue_vec4_fast_path(y.data_ptr<float>(), bc.data_ptr<float>(),
                                        static_cast<int>(y.size(1)));
}

torch::Tensor sgemm_rowmajor(const torch::Tensor& x, const torch::Tensor& w) {
    const Linear a = check_linear(x, w, nullptr);
    const c10::cuda::CUDAGuard device_guard(a.x.device());
    torch::Tensor y = torch::empty({a.M, a.N}, a.x.options());
    if (a.M == 0 || a.N == 0) return y;
    sgemm_x_wT(a.x.data_ptr<float>(), a.w.data_ptr<float>(), y.data_ptr<float>(), a.M, a.N, a.K);
    return y;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.doc() = "Problem 12 (KernelBench L2 #12) CUDA steps: "
              "y = LeakyReLU((x @ w.T + b) * multiplier, negative_slope), all fp32.";
    const char* step_doc =
        "Return y (M, N) = LeakyReLU((x @ w.T + b) * multiplier, negative_slope).\n\n"
        "x: CUDA float32 (M, K); w: (N, K), nn.Linear's weight; b: (N,); all on one device.\n"
        "Non-contiguous x, w or b are copied to contiguous memory first (costs time).\n"
        "Runs on the current CUDA stream and returns without synchronising.";
    const auto step_args = [&m, step_doc](const char* name, auto fn, const char* what) {
        m.def(name, fn, (std::string(what) + "\n\n" + step_doc).c_str(), py::arg("x"),
              py::arg("w"), py::arg("b"), py::arg("multiplier") = 2.0,
              py::arg("negative_slope") = 0.1);
    };
    step_args("naive", &naive, "Step 01: one thread per output, GEMM and epilogue fused.");
    // Step 02 takes W transposed: its own docstring, not step_doc's w (N, K).
    m.def("coalesced", &coalesced,
          "Step 02: step 01 reading W transposed, so that a warp's loads of it are coalesced.\n\n"
          "Return y (M, N) = LeakyReLU((x @ wt + b) * multiplier, negative_slope).\n\n"
          "x: CUDA float32 (M, K); wt: (K, N), nn.Linear's weight transposed (w.t().contiguous());\n"
          "b: (N,); all on one device. Non-contiguous x, wt or b are copied first (costs time).\n"
          "Runs on the current CUDA stream and returns without synchronising.",
          py::arg("x"), py::arg("wt"), py::arg("b"), py::arg("multiplier") = 2.0,
          py::arg("negative_slope") = 0.1);
    step_args("cublas_epilogue", &cublas_epilogue,
              "Step 03: cublasSgemm (fp32, no TF32), then a scalar epilogue kernel.");
    step_args("cublas_epilogue_vec4", &cublas_epilogue_vec4,
              "Step 04: cublasSgemm (fp32, no TF32), then a float4 epilogue kernel.");
    step_args("cublas_tf32_epilogue_vec4", &cublas_tf32_epilogue_vec4,
              "Step 04 in TF32: cublasSgemm on TF32 tensor cores, then the float4 epilogue.");
    step_args("smem_tiles", &smem_tiles,
              "Step 05: 32x32 tiles of x and w in shared memory, one output per thread, epilogue fused.");
    step_args("register_tiles", &register_tiles,
              "Step 06: 64x64 tiles, 8 outputs of one column per thread from a register-held w value.");
    step_args("tiled", &tiled,
              "Step 07: shared-memory tiled SIMT SGEMM with the epilogue fused into its store.");
    step_args("small_batch", &small_batch,
              "Step 17: for a few rows of x: warps stream rows of w once (float4), fp32 FMAs,\n"
              "epilogue fused. Meant for M <= 16; larger M re-reads w once per 16 rows.");
    m.def("epilogue_only", &epilogue_only,
          "In place: y = LeakyReLU((y + b) * multiplier, negative_slope); returns y.\n\n"
          "y: contiguous CUDA float32 (M, N), updated in place (a strided y is refused, since a\n"
          "copy would not update it); b: (N,), copied if non-contiguous. vec4=True takes the\n"
          "float4 kernel when N % 4 == 0 and y, b are 16-byte aligned, else the scalar one.",
          py::arg("y"), py::arg("b"), py::arg("multiplier") = 2.0,
          py::arg("negative_slope") = 0.1, py::arg("vec4") = false);
    m.def("vec4_fast_path", &vec4_fast_path,
          "True when epilogue_only(y, b, vec4=True) takes the float4 path (N % 4 == 0 and y, b\n"
          "16-byte aligned), False when it falls back to the scalar kernel.",
          py::arg("y"), py::arg("b"));
    m.def("sgemm_rowmajor", &sgemm_rowmajor,
          "Return y (M, N) = x @ w.T through cublasSgemm in plain fp32 (no TF32), with the\n"
          "row-major to column-major mapping transa=T on w, transb=N on x, m=N, n=M, k=K,\n"
          "lda=ldb=K, ldc=N. x: CUDA float32 (M, K); w: (N, K); non-contiguous inputs are copied.",
          py::arg("x"), py::arg("w"));
}
