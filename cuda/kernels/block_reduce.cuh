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
// StepStats) by one warp, which calls it with all 32 lanes. The loss is the sum a single thread
// would make one sample after another (the same bits every run): each round the lanes read 32
// samples at once (the next round's read in flight during this round's adds), and every lane adds
// them in sample order from shuffles taken eight at a time, so that a round waits for four
// shuffles' latency, not 32 (a shuffle and an add a sample, in turn, made the tensor-core step's
// statistics block the longest of its launch at batch 256: docs/tensor-cores.md). The count is an
// integer's sum, the same in any order: each lane's samples', then a butterfly over the lanes.
template <class Stats>
__device__ void warp_add_sample_stats(const double* sample_loss, const std::int32_t* sample_correct,
                                      int n, Stats* stats, int lane) {
  constexpr int kShuffles = 8;
  double loss = 0;
  int correct = 0;
  double next_loss = n > 0 ? sample_loss[min(lane, n - 1)] : 0.0;
  int next_correct = n > 0 ? sample_correct[min(lane, n - 1)] : 0;
  for (int base = 0; base < n; base += 32) {
    const double mine = next_loss;
    if (base + lane < n) correct += next_correct;
    next_loss = sample_loss[min(base + 32 + lane, n - 1)];
    next_correct = sample_correct[min(base + 32 + lane, n - 1)];
    const int count = n - base;
#pragma unroll
    for (int first = 0; first < 32; first += kShuffles) {
      double value[kShuffles];
#pragma unroll
      for (int j = 0; j < kShuffles; ++j) value[j] = __shfl_sync(~0u, mine, first + j);
#pragma unroll
      for (int j = 0; j < kShuffles; ++j)
        if (first + j < count) loss += value[j];
    }
  }
  for (int offset = 16; offset > 0; offset /= 2) correct += __shfl_xor_sync(~0u, correct, offset);
  // Stream order makes this read-modify-write safe: the next step's kernel starts after this one.
  if (lane == 0) {
    stats->loss_sum += loss;
    stats->correct += correct;
  }
}

}  // namespace lenet5::cuda
