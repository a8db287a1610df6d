// A deterministic block-wide sum for the reduction kernels.
#pragma once

#include <cstdint>

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

// A loss kernel's closing step: each thread's loss and count of correct predictions summed over a
// block of exactly Threads threads in a fixed tree, then ADDED to *stats by thread 0 (a
// StepStats of cuda/kernels/loss.cuh). Every thread of the block must call it.
template <int Threads, class Stats>
__device__ void block_add_stats(double loss, int correct, Stats* stats) {
  static_assert(Threads > 0 && (Threads & (Threads - 1)) == 0, "a power of two");
  __shared__ double loss_partial[Threads];
  __shared__ int correct_partial[Threads];
  loss_partial[threadIdx.x] = loss;
  correct_partial[threadIdx.x] = correct;
  __syncthreads();
  for (int half = Threads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      loss_partial[threadIdx.x] += loss_partial[threadIdx.x + half];
      correct_partial[threadIdx.x] += correct_partial[threadIdx.x + half];
    }
    __syncthreads();
  }
  // Stream order makes this read-modify-write safe: the next step's kernel starts after this one.
  if (threadIdx.x == 0) {
    stats->loss_sum += loss_partial[0];
    stats->correct += correct_partial[0];
  }
}

// A step's statistics from its samples' losses and correct predictions, added in sample order by
// the one thread that calls it (the same sum every run, no atomics), to *stats (a StepStats).
template <class Stats>
__device__ void add_sample_stats(const double* sample_loss, const std::int32_t* sample_correct,
                                 int n, Stats* stats) {
  double loss = 0;
  int correct = 0;
  for (int s = 0; s < n; ++s) {
    loss += sample_loss[s];
    correct += sample_correct[s];
  }
  // Stream order makes this read-modify-write safe: the next step's kernel starts after this one.
  stats->loss_sum += loss;
  stats->correct += correct;
}

}  // namespace lenet5::cuda
