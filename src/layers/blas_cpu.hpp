// The one door to the BLAS (OpenBLAS through its CBLAS interface) for the fast CPU layers:
// row-major GEMM in float (training) and double (gradient checks).
//
// The BLAS always runs single-threaded: the fast layers parallelise over fixed chunks of the batch
// themselves (layers/fast_cpu.hpp), so that every sum runs in an order that does not depend on
// the number of threads. A multi-threaded BLAS inside those threads would oversubscribe the cores
// and could split its own sums by the number of threads.
#pragma once

namespace lenet5 {

enum class Transpose { no, yes };

// C (m x n) = alpha * op(A) (m x k) * op(B) (k x n) + beta * C, all row-major with leading
// dimensions lda, ldb, ldc (the row lengths of A, B and C as stored).
void gemm_cpu(Transpose trans_a, Transpose trans_b, int m, int n, int k, float alpha,
              const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc);
void gemm_cpu(Transpose trans_a, Transpose trans_b, int m, int n, int k, double alpha,
              const double* a, int lda, const double* b, int ldb, double beta, double* c, int ldc);

// Makes the BLAS single-threaded for the whole process (idempotent, thread-safe): the fast layers
// call it when they are made, before any GEMM.
void use_single_threaded_blas();

}  // namespace lenet5
