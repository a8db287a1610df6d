// cuBLAS opened with dlopen on first use, its entry points resolved by name (cublas_library.hpp
// says why it is not linked).
#include "cuda/runtime/cublas_library.hpp"

#include <dlfcn.h>

#include <atomic>
#include <string>

#include "core/error.hpp"

namespace lenet5::cuda::cublas {
namespace {

std::atomic<bool> g_loaded{false};

// The library's entry points, resolved once. cublas_v2.h maps the plain names to the _v2 symbols
// where there are two versions; the pointer types come from the declarations themselves.
struct Library {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasSetWorkspace_v2) set_workspace = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
  decltype(&cublasSgemmStridedBatched) sgemm_strided_batched = nullptr;
  decltype(&cublasGetStatusName) status_name = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
  std::string error;  // why it could not be opened; empty when it was
};

// The file found at build time first, then the version this was compiled against by its soname.
void* open_library(std::string& error) {
  const std::string candidates[] = {LENET5_CUBLAS_LIBRARY,
                                    "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR)};
  for (const std::string& file : candidates) {
    if (void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
    const char* why = dlerror();
    error += (error.empty() ? "" : "; ") + std::string(why ? why : file);
  }
  return nullptr;
}

template <class Pointer>
void resolve(void* handle, const char* symbol, Pointer& out, std::string& error) {
  out = reinterpret_cast<Pointer>(dlsym(handle, symbol));
  if (!out && error.empty()) error = std::string("the library has no ") + symbol;
}

Library load() {
  Library lib;
  void* handle = open_library(lib.error);
  if (!handle) return lib;
  lib.error.clear();
  resolve(handle, "cublasCreate_v2", lib.create, lib.error);
  resolve(handle, "cublasDestroy_v2", lib.destroy, lib.error);
  resolve(handle, "cublasSetStream_v2", lib.set_stream, lib.error);
  resolve(handle, "cublasSetMathMode", lib.set_math_mode, lib.error);
  resolve(handle, "cublasSetWorkspace_v2", lib.set_workspace, lib.error);
  resolve(handle, "cublasSgemm_v2", lib.sgemm, lib.error);
  resolve(handle, "cublasSgemmStridedBatched", lib.sgemm_strided_batched, lib.error);
  resolve(handle, "cublasGetStatusName", lib.status_name, lib.error);
  resolve(handle, "cublasGetStatusString", lib.status_string, lib.error);
  if (lib.error.empty()) g_loaded = true;
  return lib;
}

const Library& library() {
  static const Library lib = load();  // thread-safe, once
  return lib;
}

// The library, or a UsageError saying what could not be opened and what needs it.
const Library& required() {
  const Library& lib = library();
  if (!lib.error.empty())
    throw UsageError("cuBLAS could not be loaded (" + lib.error +
                     "): the book kernel set, --conv-algo unroll-gemm and the chapter's GEMM "
                     "figures need it. Install the CUDA toolkit's cuBLAS, or train with "
                     "--kernels whole-step or fast");
  return lib;
}

}  // namespace

cublasStatus_t create(cublasHandle_t* handle) {
  return required().create(handle);
}
cublasStatus_t destroy(cublasHandle_t handle) {
  return required().destroy(handle);
}
cublasStatus_t set_stream(cublasHandle_t handle, cudaStream_t stream) {
  return required().set_stream(handle, stream);
}
cublasStatus_t set_math_mode(cublasHandle_t handle, cublasMath_t mode) {
  return required().set_math_mode(handle, mode);
}
cublasStatus_t set_workspace(cublasHandle_t handle, void* workspace, std::size_t bytes) {
  return required().set_workspace(handle, workspace, bytes);
}
cublasStatus_t sgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                     int m, int n, int k, const float* alpha, const float* a, int lda,
                     const float* b, int ldb, const float* beta, float* c, int ldc) {
  return required().sgemm(handle, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
cublasStatus_t sgemm_strided_batched(cublasHandle_t handle, cublasOperation_t transa,
                                     cublasOperation_t transb, int m, int n, int k,
                                     const float* alpha, const float* a, int lda,
                                     long long stride_a, const float* b, int ldb,
                                     long long stride_b, const float* beta, float* c, int ldc,
                                     long long stride_c, int batch_count) {
  return required().sgemm_strided_batched(handle, transa, transb, m, n, k, alpha, a, lda, stride_a,
                                          b, ldb, stride_b, beta, c, ldc, stride_c, batch_count);
}
const char* status_name(cublasStatus_t status) {
  const Library& lib = library();
  return lib.error.empty() ? lib.status_name(status) : "unknown";
}
const char* status_string(cublasStatus_t status) {
  const Library& lib = library();
  return lib.error.empty() ? lib.status_string(status) : "unknown";
}

bool loaded() {
  return g_loaded;
}

}  // namespace lenet5::cuda::cublas
