// The CUDA runtime's host wrappers in a build with CUDA: the error checks' messages, the device
// count and description, the context, and raw device memory (runtime.hpp).
#include "cuda/runtime/runtime.hpp"

#include <spdlog/fmt/fmt.h>

#include <atomic>

#include "cuda/runtime/check.hpp"
#include "cuda/runtime/cublas_library.hpp"

namespace lenet5 {

void throw_cuda_error(cudaError_t status, const char* expression, const char* file, int line) {
  throw Error(fmt::format("CUDA error {} ({}) in {} at {}:{}", cudaGetErrorName(status),
                          cudaGetErrorString(status), expression, file, line));
}

void throw_cublas_error(cublasStatus_t status, const char* expression, const char* file,
                        int line) {
  throw Error(fmt::format("cuBLAS error {} ({}) in {} at {}:{}", cuda::cublas::status_name(status),
                          cuda::cublas::status_string(status), expression, file, line));
}

namespace {

const char* cufft_result_name(cufftResult status) {
  switch (status) {
    case CUFFT_SUCCESS: return "CUFFT_SUCCESS";
    case CUFFT_INVALID_PLAN: return "CUFFT_INVALID_PLAN";
    case CUFFT_ALLOC_FAILED: return "CUFFT_ALLOC_FAILED (out of GPU memory)";
    case CUFFT_INVALID_TYPE: return "CUFFT_INVALID_TYPE";
    case CUFFT_INVALID_VALUE: return "CUFFT_INVALID_VALUE (a bad pointer or parameter)";
    case CUFFT_INTERNAL_ERROR: return "CUFFT_INTERNAL_ERROR";
    case CUFFT_EXEC_FAILED: return "CUFFT_EXEC_FAILED (the transform failed to run on the GPU)";
    case CUFFT_SETUP_FAILED: return "CUFFT_SETUP_FAILED (cuFFT could not initialise)";
    case CUFFT_INVALID_SIZE: return "CUFFT_INVALID_SIZE (an unsupported transform size)";
    case CUFFT_UNALIGNED_DATA: return "CUFFT_UNALIGNED_DATA";
    case CUFFT_INVALID_DEVICE: return "CUFFT_INVALID_DEVICE";
    case CUFFT_NO_WORKSPACE: return "CUFFT_NO_WORKSPACE (no work area was set)";
    case CUFFT_NOT_IMPLEMENTED: return "CUFFT_NOT_IMPLEMENTED";
    case CUFFT_NOT_SUPPORTED: return "CUFFT_NOT_SUPPORTED";
    default: return "cufftResult";
  }
}

}  // namespace

void throw_cufft_error(cufftResult status, const char* expression, const char* file, int line) {
  throw Error(fmt::format("cuFFT error {} = {} in {} at {}:{}", cufft_result_name(status),
                          int(status), expression, file, line));
}

namespace cuda {

bool gpu_available_in_build() {
  return true;
}

int device_count() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    // No driver, no device or a driver too old: all mean "no usable GPU" here. Clear the sticky
    // error so later runtime calls do not report it again.
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

void create_context() {
  CUDA_CHECK(cudaFree(nullptr));
}

std::string device_description(int device) {
  cudaDeviceProp properties{};
  CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
  return fmt::format("{} (sm_{}{}, {:.1f} GiB)", properties.name, properties.major,
                     properties.minor, properties.totalGlobalMem / double(1ull << 30));
}

std::string current_compute_capability() {
  int device = 0, major = 0, minor = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return fmt::format("{}.{}", major, minor);
}

int current_multiprocessors() {
  int device = 0, count = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
  return count;
}

int loaded_ptx_version(const void* kernel) {
  cudaFuncAttributes attributes{};
  CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel));
  return attributes.ptxVersion;
}

namespace {
std::atomic<std::size_t> g_allocated{0}, g_peak{0};
}  // namespace

void* allocate(std::size_t bytes) {
  void* pointer = nullptr;
  if (bytes == 0) return pointer;
  CUDA_CHECK(cudaMalloc(&pointer, bytes));
  const std::size_t now = g_allocated += bytes;
  for (std::size_t peak = g_peak; now > peak && !g_peak.compare_exchange_weak(peak, now);) {
  }
  return pointer;
}

void release(void* pointer, std::size_t bytes) noexcept {
  if (!pointer) return;
  (void)cudaFree(pointer);  // a destructor must not throw; nothing useful to do
  g_allocated -= bytes;
}

std::size_t allocated_bytes() { return g_allocated; }
std::size_t peak_allocated_bytes() { return g_peak; }
void reset_peak_allocated_bytes() { g_peak = g_allocated.load(); }

std::size_t device_used_bytes() {
  std::size_t free = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return total - free;
}

void copy_to_device(void* device_dst, const void* host_src, std::size_t bytes) {
  if (bytes > 0) CUDA_CHECK(cudaMemcpy(device_dst, host_src, bytes, cudaMemcpyHostToDevice));
}

void copy_to_host(void* host_dst, const void* device_src, std::size_t bytes) {
  if (bytes > 0) CUDA_CHECK(cudaMemcpy(host_dst, device_src, bytes, cudaMemcpyDeviceToHost));
}

void copy_device_to_device(void* dst, const void* src, std::size_t bytes) {
  if (bytes > 0) CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
}

void fill_zero(void* device_pointer, std::size_t bytes) {
  if (bytes > 0) CUDA_CHECK(cudaMemset(device_pointer, 0, bytes));
}

void synchronize() { CUDA_CHECK(cudaDeviceSynchronize()); }

double elapsed_microseconds_of(void (*launch)(void*), void* context) {
  cudaEvent_t start = nullptr, stop = nullptr;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  float milliseconds = 0;
  cudaError_t status = cudaEventRecord(start, cudaStreamPerThread);
  if (status == cudaSuccess) {
    launch(context);
    status = cudaEventRecord(stop, cudaStreamPerThread);
  }
  if (status == cudaSuccess) status = cudaEventSynchronize(stop);
  if (status == cudaSuccess) status = cudaEventElapsedTime(&milliseconds, start, stop);
  (void)cudaEventDestroy(start);
  (void)cudaEventDestroy(stop);
  CUDA_CHECK(status);
  return 1000.0 * milliseconds;
}

}  // namespace cuda
}  // namespace lenet5
