// Softmax cross-entropy over the output layer's (N, 10) logits, fused with its gradient and the
// step's statistics; and plain softmax probabilities for `classify`.
// Contract: softmax_cross_entropy_cpu of layers/reference_cpu.hpp (same double-precision formula,
// first maximum as the prediction), on device pointers, launched without synchronising.
//
// Versions:
//   softmax_cross_entropy_kernel1: one block; each thread takes samples t, t + blockDim, ...; the
//     batch's loss and correct count are combined by a fixed-order tree in shared memory and
//     added to one StepStats slot by a single thread (no atomics: bit-reproducible).
//   softmax_forward_kernel1: one thread per sample, probabilities as the CPU engine computes them.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace lenet5::cuda {

// One slot per training step (or evaluation batch). The engine keeps an array of them on the
// device and sums it on the host once per epoch, in slot order.
struct StepStats {
  double loss_sum;  // sum over the batch of -log p(label)
  std::int32_t correct;
  std::int32_t unused;  // keeps the struct 16 bytes with the same layout everywhere
};

// logits (n, 10), labels (n) in 0..9. Writes dL_dlogits (n, 10) = (softmax - onehot) / n when it is
// not null, predictions (n) (argmax, first maximum) when not null, and ADDS the batch's loss sum
// and correct count to *stats (the caller zeroes the slots at the start of an epoch).
void softmax_cross_entropy(const float* logits, const std::uint8_t* labels, int n,
                           float* dL_dlogits, std::int32_t* predictions, StepStats* stats,
                           cudaStream_t stream);

// probabilities (n, 10) = softmax(logits), computed in double and rounded once.
void softmax_probabilities(const float* logits, int n, float* probabilities, cudaStream_t stream);

}  // namespace lenet5::cuda
