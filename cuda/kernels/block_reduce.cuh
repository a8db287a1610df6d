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

// A step's statistics from its samples' losses and correct predictions, ADDED to *stats (a
// StepStats) by one warp, which calls it with all 32 lanes: each round the lanes read 32 samples at
// once, and every lane adds them in sample order (so the sum is the one a single thread would make
// one sample after another, the same bits every run, with n / 32 reads' waits instead of n).
template <class Stats>
__device__ void warp_add_sample_stats(const double* sample_loss, const std::int32_t* sample_correct,
                                      int n, Stats* stats, int lane) {
  double loss = 0;
  int correct = 0;
  for (int base = 0; base < n; base += 32) {
    const int s = min(base + lane, n - 1);
    const double mine = sample_loss[s];
    const int right = sample_correct[s];
#pragma unroll 1  // one add after another, as the sum is: unrolled, its shuffles cost registers
    for (int j = 0; j < 32 && base + j < n; ++j) {
      loss += __shfl_sync(~0u, mine, j);
      correct += __shfl_sync(~0u, right, j);
    }
  }
  // Stream order makes this read-modify-write safe: the next step's kernel starts after this one.
  if (lane == 0) {
    stats->loss_sum += loss;
    stats->correct += correct;
  }
}

}  // namespace lenet5::cuda
