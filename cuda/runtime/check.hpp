// Checked CUDA, cuBLAS and cuFFT calls: every runtime call and every launch goes through these,
// and a failure becomes a lenet5::Error naming the file, line, expression and the library's error
// string.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cufft.h>

#include <string>

#include "core/error.hpp"

namespace lenet5 {

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* expression, const char* file,
                                   int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* expression,
                                     const char* file, int line);
// cuFFT has no error-string function: the message names the cufftResult value.
[[noreturn]] void throw_cufft_error(cufftResult status, const char* expression, const char* file,
                                    int line);

}  // namespace lenet5

#define CUDA_CHECK(expr)                                                     \
  do {                                                                       \
    const cudaError_t lenet5_status_ = (expr);                               \
    if (lenet5_status_ != cudaSuccess)                                       \
      ::lenet5::throw_cuda_error(lenet5_status_, #expr, __FILE__, __LINE__); \
  } while (0)

// After every kernel launch: catches bad launch configurations at once (no synchronisation).
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

#define CUBLAS_CHECK(expr)                                                     \
  do {                                                                         \
    const cublasStatus_t lenet5_status_ = (expr);                              \
    if (lenet5_status_ != CUBLAS_STATUS_SUCCESS)                               \
      ::lenet5::throw_cublas_error(lenet5_status_, #expr, __FILE__, __LINE__); \
  } while (0)

#define CUFFT_CHECK(expr)                                                     \
  do {                                                                        \
    const cufftResult lenet5_status_ = (expr);                                \
    if (lenet5_status_ != CUFFT_SUCCESS)                                      \
      ::lenet5::throw_cufft_error(lenet5_status_, #expr, __FILE__, __LINE__); \
  } while (0)
