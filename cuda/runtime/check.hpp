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

// The check behind the macros below: `status` is the library's `success` value, or `fail` throws.
template <class Status>
inline void check_status(Status status, Status success,
                         void (*fail)(Status, const char*, const char*, int),
                         const char* expression, const char* file, int line) {
  if (status != success) fail(status, expression, file, line);
}

}  // namespace lenet5

#define CUDA_CHECK(expr) \
  ::lenet5::check_status((expr), cudaSuccess, ::lenet5::throw_cuda_error, #expr, __FILE__, __LINE__)

// After every kernel launch: catches bad launch configurations at once (no synchronisation).
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

#define CUBLAS_CHECK(expr)                                                                   \
  ::lenet5::check_status((expr), CUBLAS_STATUS_SUCCESS, ::lenet5::throw_cublas_error, #expr, \
                         __FILE__, __LINE__)

#define CUFFT_CHECK(expr)                                                                     \
  ::lenet5::check_status((expr), CUFFT_SUCCESS, ::lenet5::throw_cufft_error, #expr, __FILE__, \
                         __LINE__)
