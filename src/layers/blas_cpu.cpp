// The GEMMs of the fast CPU layers through OpenBLAS's CBLAS, kept single-threaded.
#include "layers/blas_cpu.hpp"

#include <cblas.h>

#include <mutex>

namespace lenet5 {
namespace {

CBLAS_TRANSPOSE cblas(Transpose t) {
  return t == Transpose::yes ? CblasTrans : CblasNoTrans;
}

}  // namespace

void gemm_cpu(Transpose trans_a, Transpose trans_b, int m, int n, int k, float alpha,
              const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, cblas(trans_a), cblas(trans_b), m, n, k, alpha, a, lda, b, ldb, beta,
              c, ldc);
}

void gemm_cpu(Transpose trans_a, Transpose trans_b, int m, int n, int k, double alpha,
              const double* a, int lda, const double* b, int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, cblas(trans_a), cblas(trans_b), m, n, k, alpha, a, lda, b, ldb, beta,
              c, ldc);
}

void use_single_threaded_blas() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

}  // namespace lenet5
