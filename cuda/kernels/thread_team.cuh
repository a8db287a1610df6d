// The threads of a block that run one sample's gather together (cuda/kernels/gather_sample.cuh,
// cuda/kernels/augment.cuh, cuda/kernels/pixel.cuh take either type below): each gives the calling
// thread's index in the team (thread()), the team's size and its barrier (sync()).
//   ThreadTeam: the whole block, whose barrier is __syncthreads, its index and size signed (the
//     gather kernels of cuda/kernels/batch.cu).
//   BlockTeam: the whole block, its index and size unsigned as threadIdx.x and blockDim.x are, so
//     that the loops step as they did where they read those: whole-step's sample kernels
//     (cuda/engine/whole_step_forward.cuh) compile to the code they had before the teams, where
//     with ThreadTeam ptxas gave some of them 64 registers and spills.
#pragma once

namespace lenet5::cuda {

struct ThreadTeam {
  int index;    // the calling thread's index in the team
  int size;     // the team's threads: the block's

// The device code below is compiled by nvcc only; host files (tests among them) see the type.
#ifdef __CUDACC__
  // The whole block, of `threads` threads (a constant where the kernel's block size is one).
  __device__ static ThreadTeam whole_block(int threads) {
    return {int(threadIdx.x), threads};
  }

  __device__ int thread() const {
    return index;
  }

  // Every thread of the team waits for the others, and sees their shared-memory writes.
  __device__ void sync() const {
    __syncthreads();
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
