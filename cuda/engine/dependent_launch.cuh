// Programmatic dependent launch (compute capability 9.0) for the tensor-core step's chain of
// kernels. A kernel launched with launch_kernel's `after_previous` is scheduled once every block
// of the kernel before it in the stream has exited, without waiting for that kernel's completion
// to be signalled and its writes flushed; its blocks begin with wait_for_previous_kernel, which
// returns once both have happened. Every read and write keeps the stream's order, as without it;
// what it saves is part of the gap between one kernel's last block and the next kernel's first.
// No kernel releases the next one earlier (griddepcontrol.launch_dependents): the next kernel's
// blocks, placed on the SMs while this one's still ran, made the step longer
// (docs/tensor-cores.md, "Programmatic dependent launches").
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "cuda/runtime/check.hpp"
#include "cuda/runtime/runtime.hpp"

namespace lenet5::cuda {

// The first statement of every kernel that launch_kernel may launch after_previous: no global
// memory is read or written before it. A no-op where the kernel was launched without the
// attribute; compiled out in PTX below 9.0, where after_previous_allowed keeps the attribute off.
__device__ __forceinline__ void wait_for_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Whether kernels compiled alongside `kernel` wait for the kernel before them: only the sm_90 build
// has the instruction, and a kernel launched after_previous without it would read what the kernel
// before has not yet written.
inline bool after_previous_allowed(const void* kernel) {
  return loaded_ptx_version(kernel) >= 90;
}

struct KernelLaunch {
  dim3 grid;
  dim3 block;
  std::size_t shared_bytes;
  cudaStream_t stream;
  bool after_previous;   // programmatic dependent launch (the kernel waits for the one before)
  unsigned cluster = 1;  // blocks a thread block cluster, 1 for none
};

template <typename... Params, typename... Args>
void launch_kernel(const KernelLaunch& at, void (*kernel)(Params...), const Args&... args) {
  cudaLaunchAttribute attributes[2]{};
  unsigned count = 0;
  if (at.cluster > 1) {
    attributes[count].id = cudaLaunchAttributeClusterDimension;
    attributes[count].val.clusterDim.x = at.cluster;
    attributes[count].val.clusterDim.y = 1;
    attributes[count].val.clusterDim.z = 1;
    ++count;
  }
  if (at.after_previous) {
    attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[count].val.programmaticStreamSerializationAllowed = 1;
    ++count;
  }
  cudaLaunchConfig_t config{};
  config.gridDim = at.grid;
  config.blockDim = at.block;
  config.dynamicSmemBytes = at.shared_bytes;
  config.stream = at.stream;
  config.attrs = attributes;
  config.numAttrs = count;
  CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, args...));
}

}  // namespace lenet5::cuda
