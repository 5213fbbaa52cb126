// Helpers that every problem's binding.cpp shares: input checks with errors that name the
// parameter, a scope guard for the cuBLAS math mode, and y = x @ W.T through cublasSgemm on
// PyTorch's handle and stream. Header-only (every function is inline); included by
// kernels/<problem>/binding.cpp as "../common/torch_cuda.h". It uses torch, so the pure-CUDA
// kernel files (.cu) never include it. fusedkit/build.py hashes kernels/common/*.h into every
// extension's build key, so an edit here rebuilds every problem.
#pragma once

#include <torch/extension.h>

#include <ATen/cuda/CUDAContext.h>   // getCurrentCUDAStream, getCurrentCUDABlasHandle
#include <ATen/cuda/Exceptions.h>    // TORCH_CUDABLAS_CHECK: cuBLAS status -> readable error
#include <cublas_v2.h>

#include <cstdint>
#include <limits>

namespace fusedkit {

constexpr int64_t kIntMax = std::numeric_limits<int>::max();

// A CUDA float32 tensor of `dim` dimensions; errors name the parameter, what it got and
// what is allowed (TypeError for the dtype, ValueError for device and shape).
inline void check_cuda_float(const torch::Tensor& t, const char* name, int64_t dim) {
    TORCH_CHECK_VALUE(t.defined(), name, " must be a tensor, got an undefined tensor");
    TORCH_CHECK_VALUE(t.is_cuda(), name, " must be a CUDA tensor, got device '", t.device(),
                      "'; move it with .cuda()");
    TORCH_CHECK_TYPE(t.scalar_type() == torch::kFloat32, name, " must be torch.float32, got ",
                     t.scalar_type(), "; these kernels are fp32 only");
    TORCH_CHECK_VALUE(t.dim() == dim, name, " must be ", dim, "-D, got ", t.dim(),
                      "-D with shape ", t.sizes());
}

// A CUDA 16-bit float matrix (float16 unless `type` says bfloat16), the operands of the Hopper
// (wgmma) steps; `hint` says how to make one.
inline void check_cuda_16bit(const torch::Tensor& t, const char* name, const char* hint,
                             torch::ScalarType type = torch::kHalf) {
    TORCH_CHECK_VALUE(t.defined(), name, " must be a tensor, got an undefined tensor");
    TORCH_CHECK_VALUE(t.is_cuda(), name, " must be a CUDA tensor, got device '", t.device(), "'");
    TORCH_CHECK_TYPE(t.scalar_type() == type, name, " must be torch.",
                     type == torch::kHalf ? "float16" : "bfloat16", ", got ", t.scalar_type(), "; ",
                     hint);
    TORCH_CHECK_VALUE(t.dim() == 2, name, " must be 2-D, got ", t.dim(), "-D with shape ", t.sizes());
}

// TMA reads from 16-byte aligned rows: a contiguous tensor whose base is not 16-byte aligned
// (a view into a larger buffer) is copied into a fresh allocation, which is.
inline torch::Tensor dense_aligned(const torch::Tensor& t) {
    torch::Tensor c = t.contiguous();
    if (reinterpret_cast<uintptr_t>(c.data_ptr()) % 16 != 0) c = c.clone();
    return c;
}

inline void check_same_device(const torch::Tensor& t, const char* name, const torch::Tensor& x) {
    TORCH_CHECK_VALUE(t.device() == x.device(), name, " must be on x's device '", x.device(),
                      "', got '", t.device(), "'");
}

inline void check_fits_int32(int64_t v, const char* what) {
    TORCH_CHECK_VALUE(v <= kIntMax, what, " = ", v, " does not fit in int32 (max ", kIntMax,
                      "); the kernels index with 32-bit sizes");
}

// Sets a cuBLAS handle's math mode for one scope and restores the previous one on exit,
// also when an error is thrown, so that PyTorch's own later calls see what they set.
class CublasModeGuard {
public:
    CublasModeGuard(cublasHandle_t handle, cublasMath_t math) : handle_(handle) {
        TORCH_CUDABLAS_CHECK(cublasGetMathMode(handle_, &saved_math_));
        TORCH_CUDABLAS_CHECK(cublasGetPointerMode(handle_, &saved_pointer_));
        TORCH_CUDABLAS_CHECK(cublasSetMathMode(handle_, math));
        // alpha and beta below live on the host.
        TORCH_CUDABLAS_CHECK(cublasSetPointerMode(handle_, CUBLAS_POINTER_MODE_HOST));
    }
    ~CublasModeGuard() {  // a destructor must not throw: restore, ignoring the status
        cublasSetMathMode(handle_, saved_math_);
        cublasSetPointerMode(handle_, saved_pointer_);
    }
    CublasModeGuard(const CublasModeGuard&) = delete;
    CublasModeGuard& operator=(const CublasModeGuard&) = delete;

private:
    cublasHandle_t handle_;
    cublasMath_t saved_math_{};
    cublasPointerMode_t saved_pointer_{};
};

// y = x @ W.T through cublasSgemm, for row-major x (M, K), W (N, K), y (M, N): plain fp32, or
// with `tf32` on cuBLAS's TF32 tensor-core math (inputs rounded to 10-bit mantissas, fp32
// accumulation), the mode PyTorch's own handle takes under allow_tf32=True.
//
// The row-major / column-major mapping, derived once: cuBLAS reads a buffer as column-major,
// and a row-major (R, C) buffer read column-major is its transpose, a (C, R) matrix. So the
// buffers of y, x and W are, to cuBLAS, Y' = y^T (N, M), X' = x^T (K, M) and W' = W^T (K, N),
// each with leading dimension = the row length of the row-major matrix. We want
//   y = x W^T  <=>  y^T = W x^T  <=>  Y' = (W')^T X'.
// That is C = op(A) op(B) with C = Y' (m = N rows, n = M columns, ldc = N),
// A = W's buffer with transa = T (W' is K x N, lda = K), B = x's buffer with transb = N
// (X' is K x M, ldb = K), and k = K. No data is transposed or copied.
inline void sgemm_x_wT(const float* x, const float* w, float* y, int M, int N, int K,
                       bool tf32 = false) {
    // PyTorch's handle for this device and thread; getCurrentCUDABlasHandle() has already bound
    // it to the current stream and to PyTorch's cuBLAS workspace for that stream. We do not
    // call cublasSetStream again: per the cuBLAS docs it resets the handle's workspace to
    // cuBLAS's default pool, undoing PyTorch's cublasSetWorkspace. We verify the binding instead.
    cublasHandle_t handle = at::cuda::getCurrentCUDABlasHandle();
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    cudaStream_t bound = nullptr;
    TORCH_CUDABLAS_CHECK(cublasGetStream(handle, &bound));
    TORCH_CHECK(bound == stream, "cuBLAS handle is bound to stream ", bound,
                ", not to PyTorch's current stream ", stream);
    // Plain fp32: PyTorch sets CUBLAS_TF32_TENSOR_OP_MATH on its handle when
    // torch.backends.cuda.matmul.allow_tf32 is True. CUBLAS_DEFAULT_MATH never rounds fp32
    // inputs to TF32 (CUBLAS_PEDANTIC_MATH would also forbid any faster-than-prescribed
    // internal algorithm, at some speed cost). The guard restores the previous mode after.
    CublasModeGuard mode(handle, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
    const float alpha = 1.0f, beta = 0.0f;
    TORCH_CUDABLAS_CHECK(cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N,
                                     /*m=*/N, /*n=*/M, /*k=*/K, &alpha,
                                     /*A=*/w, /*lda=*/K,
                                     /*B=*/x, /*ldb=*/K, &beta,
                                     /*C=*/y, /*ldc=*/N));
}

}  // namespace fusedkit
