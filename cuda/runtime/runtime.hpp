// Host-side wrappers of the CUDA runtime that the rest of the program needs: is there a GPU,
// which one, and raw device memory (owned by lenet5::Buffer, never by hand).
//
// Defined by runtime.cpp in a build with CUDA, and by without_cuda.cpp in a build without it
// (CMakeLists.txt, LENET5_WITH_CUDA, picks one): there device_count() is 0, the counters are 0,
// and every function that needs the GPU throws UsageError(kBuiltWithoutGpu).
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

namespace lenet5::cuda {

// Whether this program was built with GPU support (a CUDA compiler was found when it was built).
// The one question host code asks about the build; it never tests a macro.
bool gpu_available_in_build();
// What every GPU request says in a build without GPU support (exit code 2).
inline constexpr const char* kBuiltWithoutGpu =
    "this lenet5 was built without GPU support (no CUDA compiler was found when it was built); "
    "install the CUDA toolkit and run scripts/setup.sh again, or use --device cpu";

// Number of usable CUDA devices; 0 (not an error) when there is no driver or no device.
int device_count();
// Creates the current device's primary context now (cudaFree(nullptr)) instead of at the first
// call that needs it; any thread may, the context is the process's.
void create_context();
// "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)"; requires device_count() > 0.
std::string device_description(int device = 0);
// The current device's compute capability, "9.0", as a refusal names it; requires a device.
std::string current_compute_capability();
// The current device's number of streaming multiprocessors: how many blocks a kernel that takes a
// whole SM runs at once.
int current_multiprocessors();
// The PTX version of `kernel` (a __global__ function's address) as the current device loaded it:
// 90 where it was compiled for sm_90 or the device JIT-compiled compute_90 PTX, 75 where it runs
// the compute_75 PTX. What decides whether the instructions a kernel relies on are there.
int loaded_ptx_version(const void* kernel);

void* allocate(std::size_t bytes);
void release(void* pointer, std::size_t bytes) noexcept;

// Device memory held by lenet5's own buffers (every one goes through allocate/release): now, and
// the most at any moment so far. Not included: the CUDA context and cuBLAS's internal state.
std::size_t allocated_bytes();
std::size_t peak_allocated_bytes();
// Restarts the peak from what is allocated now, so that a peak can be measured over one part of
// a process's life (bench: each seed's run) instead of over all of it.
void reset_peak_allocated_bytes();
// Device memory in use by everything on the GPU (cudaMemGetInfo: total minus free), context
// included, as nvidia-smi would count it.
std::size_t device_used_bytes();
void copy_to_device(void* device_dst, const void* host_src, std::size_t bytes);
void copy_to_host(void* host_dst, const void* device_src, std::size_t bytes);
void copy_device_to_device(void* dst, const void* src, std::size_t bytes);
void fill_zero(void* device_pointer, std::size_t bytes);
void synchronize();

// Median time in microseconds of `repetitions` runs of `work` (which launches on the per-thread
// default stream), each bracketed by CUDA events, after one warm-up run.
template <class Work>
double median_microseconds(int repetitions, Work&& work);
double elapsed_microseconds_of(void (*launch)(void*), void* context);  // one timed run

template <class Work>
double median_microseconds(int repetitions, Work&& work) {
  auto trampoline = [](void* context) { (*static_cast<Work*>(context))(); };
  elapsed_microseconds_of(trampoline, &work);  // warm-up
  std::vector<double> times;
  for (int i = 0; i < repetitions; ++i) times.push_back(elapsed_microseconds_of(trampoline, &work));
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace lenet5::cuda
