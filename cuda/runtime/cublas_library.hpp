// cuBLAS, loaded the first time it is used rather than when the program starts.
//
// Why: linking libcublas makes every lenet5 process pay for cuBLASLt's start-up and exit code,
// about 86 ms on an H100 host (measured with an empty program linked to it), although only the
// book kernel set's dense layers, the unroll-gemm convolution (version 3) and some figures call
// it; the default path (whole-step training, fast-layer evaluation) and `classify` never do.
// These functions have the signatures of the cuBLAS calls of the same meaning; the first call
// opens the library (UsageError naming the file and what needs it when it cannot).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>

namespace lenet5::cuda::cublas {

cublasStatus_t create(cublasHandle_t* handle);
cublasStatus_t destroy(cublasHandle_t handle);
cublasStatus_t set_stream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t set_math_mode(cublasHandle_t handle, cublasMath_t mode);
cublasStatus_t set_workspace(cublasHandle_t handle, void* workspace, std::size_t bytes);
cublasStatus_t sgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                     int m, int n, int k, const float* alpha, const float* a, int lda,
                     const float* b, int ldb, const float* beta, float* c, int ldc);
cublasStatus_t sgemm_strided_batched(cublasHandle_t handle, cublasOperation_t transa,
                                     cublasOperation_t transb, int m, int n, int k,
                                     const float* alpha, const float* a, int lda,
                                     long long stride_a, const float* b, int ldb,
                                     long long stride_b, const float* beta, float* c, int ldc,
                                     long long stride_c, int batch_count);
// The status's name and description ("unknown" when the library could not be opened).
const char* status_name(cublasStatus_t status);
const char* status_string(cublasStatus_t status);

// Whether the library has been opened by this process (tests: the default path must not).
bool loaded();

}  // namespace lenet5::cuda::cublas
