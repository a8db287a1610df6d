// Softmax cross-entropy kernels (see loss.cuh for the contract and the versions).
#include <cstddef>

#include "core/topology.hpp"
#include "cuda/kernels/loss.cuh"
#include "cuda/kernels/block_reduce.cuh"
#include "cuda/runtime/check.hpp"

namespace lenet5::cuda {
namespace {

// One block of this many threads handles the whole batch: at batch 64 a quarter of them work,
// which costs a few microseconds, less than a second launch to combine per-block results.
// A power of two for the tree reduction.
constexpr int kLossThreads = 256;
constexpr int kSoftmaxThreads = 128;

}  // namespace

// Per sample s, with z = logits[s] and b its first maximum (as the CPU reference):
//   log_sum = log(sum_k exp(z_k - z_b)) + z_b           (subtracting z_b keeps exp() finite)
//   loss_s  = log_sum - z_label
//   dL/dz_k = (exp(z_k - log_sum) - [k == label]) / n   (the 1/n makes the gradient a batch mean)
// in double, exactly as softmax_cross_entropy_cpu, so that the device's and glibc's exp/log (both
// within an ulp of a double) give float gradients that agree to the last bit almost always.
__global__ void softmax_cross_entropy_kernel1(const float* logits, const std::uint8_t* labels,
                                              int n, float* dL_dlogits, std::int32_t* predictions,
                                              StepStats* stats) {
  double loss = 0;
  int correct = 0;
  for (int s = threadIdx.x; s < n; s += blockDim.x) {
    const float* z = logits + std::size_t(s) * kClasses;
    int best = 0;
    for (int k = 1; k < kClasses; ++k)
      if (z[k] > z[best]) best = k;
    double sum = 0;
    for (int k = 0; k < kClasses; ++k) sum += exp(double(z[k]) - double(z[best]));
    const double log_sum = log(sum) + double(z[best]);
    const int label = labels[s];
    loss += log_sum - double(z[label]);
    correct += best == label;
    if (predictions) predictions[s] = best;
    if (dL_dlogits)
      for (int k = 0; k < kClasses; ++k) {
        const double p = exp(double(z[k]) - log_sum);
        dL_dlogits[std::size_t(s) * kClasses + k] = float((p - (k == label)) / n);
      }
  }
  block_add_stats<kLossThreads>(loss, correct, stats);
}

// The CPU engine's softmax_rows: p_k = exp(z_k - max) / sum_j exp(z_j - max), the difference taken
// in float and everything after it in double.
__global__ void softmax_forward_kernel1(const float* logits, int n, float* probabilities) {
  const int s = blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= n) return;
  const float* z = logits + std::size_t(s) * kClasses;
  float top = z[0];
  for (int k = 1; k < kClasses; ++k) top = z[k] > top ? z[k] : top;
  double sum = 0;
  for (int k = 0; k < kClasses; ++k) sum += exp(double(z[k] - top));
  for (int k = 0; k < kClasses; ++k)
    probabilities[std::size_t(s) * kClasses + k] = float(exp(double(z[k] - top)) / sum);
}

void softmax_cross_entropy(const float* logits, const std::uint8_t* labels, int n,
                           float* dL_dlogits, std::int32_t* predictions, StepStats* stats,
                           cudaStream_t stream) {
  if (n == 0) return;
  softmax_cross_entropy_kernel1<<<1, kLossThreads, 0, stream>>>(logits, labels, n, dL_dlogits,
                                                                predictions, stats);
  CUDA_CHECK_LAUNCH();
}

void softmax_probabilities(const float* logits, int n, float* probabilities, cudaStream_t stream) {
  if (n == 0) return;
  const int blocks = (n + kSoftmaxThreads - 1) / kSoftmaxThreads;
  softmax_forward_kernel1<<<blocks, kSoftmaxThreads, 0, stream>>>(logits, n, probabilities);
  CUDA_CHECK_LAUNCH();
}

}  // namespace lenet5::cuda
