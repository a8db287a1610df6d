// The runtime (runtime.hpp, streams.hpp) of a build without GPU support, compiled instead of
// runtime.cpp and streams.cpp when no CUDA compiler was found (CMakeLists.txt, LENET5_WITH_CUDA).
// There is no GPU to find, so nothing here can succeed at a GPU's work: device_count() is 0, the
// memory counters stay 0, and every call that needs the GPU throws the UsageError that says how
// to get GPU support. Host buffers never come here (Buffer handles them itself).
#include <string>

#include "core/error.hpp"
#include "cuda/runtime/runtime.hpp"
#include "cuda/runtime/streams.hpp"

namespace lenet5::cuda {
namespace {

[[noreturn]] void refuse() {
  throw UsageError(kBuiltWithoutGpu);
}

}  // namespace

bool gpu_available_in_build() {
  return false;
}
int device_count() {
  return 0;
}
void create_context() {
  refuse();
}
std::string device_description(int) {
  refuse();
}

std::string current_compute_capability() {
  refuse();
}

int current_multiprocessors() {
  refuse();
}

int loaded_ptx_version(const void*) {
  refuse();
}

void* allocate(std::size_t) {
  refuse();
}
// Nothing was ever allocated, so there is nothing to free (and a destructor's call must not throw).
void release(void*, std::size_t) noexcept {}
std::size_t allocated_bytes() {
  return 0;
}
std::size_t peak_allocated_bytes() {
  return 0;
}
void reset_peak_allocated_bytes() {}
std::size_t device_used_bytes() {
  refuse();
}
void copy_to_device(void*, const void*, std::size_t) {
  refuse();
}
void copy_to_host(void*, const void*, std::size_t) {
  refuse();
}
void copy_device_to_device(void*, const void*, std::size_t) {
  refuse();
}
void fill_zero(void*, std::size_t) {
  refuse();
}
void synchronize() {
  refuse();
}
double elapsed_microseconds_of(void (*)(void*), void*) {
  refuse();
}

// No streams: the layer stream is the (null) default, and a side stream cannot be made.
cudaStream_t layer_stream() {
  return nullptr;
}
// The destructors name the fields that only the CUDA build uses, which clang would otherwise
// report as unused private fields here.
ScopedLayerStream::ScopedLayerStream(cudaStream_t) : m_previous(nullptr) {}
ScopedLayerStream::~ScopedLayerStream() {
  (void)m_previous;
}
SideStream::SideStream() {
  refuse();
}
SideStream::~SideStream() {
  (void)m_branch, (void)m_join;
}
void SideStream::branch_from(cudaStream_t) {
  refuse();
}
void SideStream::join_into(cudaStream_t) {
  refuse();
}

}  // namespace lenet5::cuda
