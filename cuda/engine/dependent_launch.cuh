// Programmatic dependent launch (compute capability 9.0), for the kernel sets whose steps are
// chains of kernels (whole-step's, the tensor cores'). A kernel launched with
// KernelLaunch::programmatic may be scheduled onto the SMs before the kernel before it in the
// stream has completed: once every block of that kernel has called allow_next_grid or exited.
// Its blocks call wait_for_previous_grid before they read anything that a kernel still running
// may write, or write anything it may read (with allow_next_grid early, that can be the kernel
// before the one before); the wait returns once the kernel before has completed and its writes
// are visible, and that one waited likewise. What it hides is the launch's latency between one
// kernel and the next. Inside a captured graph, the launch becomes a programmatic edge where the
// node before it is a kernel. A kernel launched so must call the wait before any such read or
// write, or have nothing to wait for: has_programmatic_launch only tells that the build holds the
// instructions, not that a kernel calls them.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "cuda/runtime/check.hpp"
#include "cuda/runtime/runtime.hpp"

namespace lenet5::cuda {

// Lets the next kernel in the stream be scheduled now, while this one's blocks still run.
__device__ inline void allow_next_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}

// Returns once the kernel before this one in the stream has completed and its writes are visible;
// at once where this kernel was not launched programmatic.
__device__ inline void wait_for_previous_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Whether `kernel` as loaded on this device was compiled for sm_90 or newer, where the
// griddepcontrol instructions exist (the PTX of an older architecture compiles the wait out): a
// kernel launched programmatic without its wait would read what the kernel before has not yet
// written. All the kernels of one translation unit share one module, so one answers for all.
template <class Kernel>
bool has_programmatic_launch(Kernel kernel) {
  return loaded_ptx_version(reinterpret_cast<const void*>(kernel)) >= 90;
}

struct KernelLaunch {
  dim3 blocks;
  dim3 threads;
  std::size_t shared_bytes;
  cudaStream_t stream;
  bool programmatic;     // may start before the stream's previous kernel completes (above)
  unsigned cluster = 1;  // blocks a thread block cluster (compute capability 9.0), 1 for none
};

// cudaLaunchKernelEx's configuration for `at`: its cluster size and programmatic serialization,
// as `at` asks, written into `attributes`, which the configuration points to (so it must outlive
// the configuration). The launches below and the occupancy queries of a launch (how many clusters
// the GPU holds at once) take it alike.
inline cudaLaunchConfig_t launch_config(const KernelLaunch& at,
                                        cudaLaunchAttribute (&attributes)[2]) {
  unsigned count = 0;
  if (at.cluster > 1) {
    attributes[count] = {};
    attributes[count].id = cudaLaunchAttributeClusterDimension;
    attributes[count].val.clusterDim.x = at.cluster;
    attributes[count].val.clusterDim.y = 1;
    attributes[count].val.clusterDim.z = 1;
    ++count;
  }
  if (at.programmatic) {
    attributes[count] = {};
    attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[count].val.programmaticStreamSerializationAllowed = 1;
    ++count;
  }
  cudaLaunchConfig_t config{};
  config.gridDim = at.blocks;
  config.blockDim = at.threads;
  config.dynamicSmemBytes = at.shared_bytes;
  config.stream = at.stream;
  config.attrs = attributes;
  config.numAttrs = count;
  return config;
}

// The one launch path of the chained kernels (whole-step's and the tensor cores'): `kernel` on
// at.blocks x at.threads, with a cluster size and programmatic serialization as `at` asks, or as
// a plain launch where it asks for neither.
template <class... Params, class... Args>
void launch_kernel(const KernelLaunch& at, void (*kernel)(Params...), const Args&... args) {
  cudaLaunchAttribute attributes[2]{};
  const cudaLaunchConfig_t config = launch_config(at, attributes);
  CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, args...));
}

}  // namespace lenet5::cuda
