// The threads of a block that run one sample's gather together (cuda/kernels/gather_sample.cuh,
// cuda/kernels/augment.cuh and cuda/kernels/pixel.cuh take it): the whole block, the calling
// thread's index in it (thread()), its size and its barrier (sync()). Index and size are unsigned
// as threadIdx.x and blockDim.x are, so that the loops step as they did where they read those:
// whole-step's sample kernels (cuda/engine/whole_step_forward.cuh) compile to the code they had
// before the team, where signed ones gave some of them 64 registers and spills (ptxas).
#pragma once

namespace lenet5::cuda {

struct BlockTeam {
  // The block's threads: blockDim.x, or a constant where the kernel's block size is one.
  unsigned size;

// The device code below is compiled by nvcc only; host files (tests among them) see the type.
#ifdef __CUDACC__
  __device__ unsigned thread() const {
    return threadIdx.x;
  }

  // Every thread of the block waits for the others, and sees their shared-memory writes.
  __device__ void sync() const {
    __syncthreads();
  }
#endif  // __CUDACC__
};

}  // namespace lenet5::cuda
