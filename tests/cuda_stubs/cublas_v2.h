// Declarations-only stand-in for the cuBLAS headers, which this CPU machine lacks: enough
// of the API for `g++ -fsyntax-only` to check our bindings (tests/test_binding_syntax.py).
// Never linked, never run; the real header decides on a GPU machine.
#pragma once
#include <cuda_runtime.h>
typedef struct cublasContext* cublasHandle_t;
typedef enum { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_NOT_INITIALIZED = 1 } cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 } cublasOperation_t;
typedef enum { CUBLAS_DEFAULT_MATH = 0, CUBLAS_TENSOR_OP_MATH = 1, CUBLAS_PEDANTIC_MATH = 2,
               CUBLAS_TF32_TENSOR_OP_MATH = 3 } cublasMath_t;
typedef enum { CUBLAS_POINTER_MODE_HOST = 0, CUBLAS_POINTER_MODE_DEVICE = 1 } cublasPointerMode_t;
cublasStatus_t cublasGetStream(cublasHandle_t, cudaStream_t*);
cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t);
cublasStatus_t cublasGetMathMode(cublasHandle_t, cublasMath_t*);
cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t);
cublasStatus_t cublasGetPointerMode(cublasHandle_t, cublasPointerMode_t*);
cublasStatus_t cublasSetPointerMode(cublasHandle_t, cublasPointerMode_t);
cublasStatus_t cublasSgemm(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                           const float*, const float*, int, const float*, int, const float*,
                           float*, int);
