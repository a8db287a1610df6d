// The threads of a block that run one sample's gather together (cuda/kernels/gather_sample.cuh,
// cuda/kernels/augment.cuh, cuda/kernels/pixel.cuh take either type below): each gives the calling
// thread's index in the team (thread()), the team's size and its barrier (sync()).
//   ThreadTeam: the whole block, whose barrier is __syncthreads, or a part of it with a named
//     barrier of its own, so that the two halves of a block gather two samples side by side (the
//     tensor-core dense forward kernel's gathering blocks, cuda/engine/tensor_backward.cu); its
//     index and size signed.
//   BlockTeam: the whole block, its index and size unsigned as threadIdx.x and blockDim.x are, so
//     that the loops step as they did where they read those: whole-step's sample kernels
//     (cuda/engine/whole_step_forward.cuh) compile to the code they had before the teams, where
//     with ThreadTeam ptxas gave some of them 64 registers and spills.
#pragma once

namespace lenet5::cuda {

struct ThreadTeam {
  int index;    // the calling thread's index in the team
  int size;     // the team's threads: the block's, or a multiple of 32 of them
  int barrier;  // 0: the block's own (__syncthreads); else a named barrier's id, 1-15

// The device code below is compiled by nvcc only; host files (tests among them) see the type.
#ifdef __CUDACC__
  // The whole block, of `threads` threads (a constant where the kernel's block size is one).
  __device__ static ThreadTeam whole_block(int threads) { return {int(threadIdx.x), threads, 0}; }

  // Part `part` of a block cut into parts of `size` consecutive threads, barrier 1 + part.
  __device__ static ThreadTeam part_of_block(int part, int size) {
    return {int(threadIdx.x) - part * size, size, 1 + part};
  }

  __device__ int thread() const {
    return index;
  }

  // Every thread of the team waits for the others, and sees their shared-memory writes.
  __device__ void sync() const {
#ifdef __CUDA_ARCH__
    if (barrier == 0)
      __syncthreads();
    else
      asm volatile("bar.sync %0, %1;" ::"r"(barrier), "r"(size) : "memory");
#endif
  }
#endif  // __CUDACC__
};

struct BlockTeam {
  // The block's threads: blockDim.x, or a constant where the kernel's block size is one.
  unsigned size;

#ifdef __CUDACC__
  __device__ unsigned thread() const {
    return threadIdx.x;
  }
  __device__ void sync() const {
    __syncthreads();
  }
#endif  // __CUDACC__
};

}  // namespace lenet5::cuda
