// A deterministic block-wide sum for the reduction kernels.
#pragma once

namespace lenet5::cuda {

// Sum of one value per thread over a block of exactly Threads threads, in a fixed tree (stride
// Threads/2, ..., 1), so the result depends only on the values, never on timing. Every thread of
// the block must call it (it contains barriers); the total is returned to all of them.
template <int Threads>
__device__ float block_sum(float value) {
  static_assert(Threads > 0 && (Threads & (Threads - 1)) == 0, "a power of two");
  __shared__ float partial[Threads];
  const int t = threadIdx.x;
  partial[t] = value;
  __syncthreads();
  for (int stride = Threads / 2; stride > 0; stride /= 2) {
    if (t < stride) partial[t] += partial[t + stride];
    __syncthreads();
  }
  return partial[0];
}

}  // namespace lenet5::cuda
