// RBF output and MAP criterion kernels (see rbf.cuh for the contract and the versions).
#include <cstddef>

#include "core/rbf_math.hpp"
#include "core/rbf_prototypes.hpp"
#include "cuda/kernels/rbf.cuh"
#include "cuda/kernels/block_reduce.cuh"
#include "cuda/runtime/check.hpp"

namespace lenet5::cuda {
namespace {

constexpr int kRbfThreads = 128;
// One block for the batch, as the softmax loss (loss.cu says why); a power of two for the tree.
constexpr int kMapLossThreads = 256;

int blocks_for(std::size_t count, int threads) {
  return int((count + std::size_t(threads) - 1) / std::size_t(threads));
}

}  // namespace

__global__ void rbf_forward_kernel1(const float* x, const float* prototypes, int n, float* y) {
  const std::size_t index = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= std::size_t(n) * kClasses) return;
  const std::size_t sample = index / kClasses, unit = index % kClasses;
  y[index] = rbf_distance(x + sample * kRbfUnits, prototypes + unit * kRbfUnits, kRbfUnits);
}

__global__ void rbf_backward_input_kernel1(const float* x, const float* prototypes,
                                           const float* dL_dy, int n, float* dL_dx) {
  const std::size_t index = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= std::size_t(n) * kRbfUnits) return;
  const std::size_t sample = index / kRbfUnits, j = index % kRbfUnits;
  const float x_j = x[index];
  float sum = 0.0f;
  for (int i = 0; i < kClasses; ++i)
    sum += dL_dy[sample * kClasses + i] * 2.0f * (x_j - prototypes[std::size_t(i) * kRbfUnits + j]);
  dL_dx[index] = sum;
}

__global__ void map_loss_kernel1(const float* y, const std::uint8_t* labels, int n, float* dL_dy,
                                 std::int32_t* predictions, StepStats* stats) {
  double loss = 0;
  int correct = 0;
  for (int s = threadIdx.x; s < n; s += blockDim.x) {
    const float* row = y + std::size_t(s) * kClasses;
    const int label = labels[s];
    const int best = nearest_class(row, kClasses);
    const double log_denominator = map_log_denominator(row, kClasses, kMapRejectionConstant);
    loss += map_sample_loss(double(row[label]), log_denominator);
    correct += best == label;
    if (predictions) predictions[s] = best;
    if (dL_dy)
      for (int k = 0; k < kClasses; ++k) {
        const double p = map_probability(double(row[k]), log_denominator);
        dL_dy[std::size_t(s) * kClasses + k] = float(((k == label) - p) / n);
      }
  }
  block_add_stats<kMapLossThreads>(loss, correct, stats);
}

__global__ void map_probabilities_kernel1(const float* y, int n, float* probabilities,
                                          std::int32_t* predictions) {
  const int s = blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= n) return;
  const float* row = y + std::size_t(s) * kClasses;
  const double log_denominator = map_log_denominator(row, kClasses, kMapRejectionConstant);
  for (int k = 0; k < kClasses; ++k)
    probabilities[std::size_t(s) * kClasses + k] =
        float(map_probability(double(row[k]), log_denominator));
  if (predictions) predictions[s] = nearest_class(row, kClasses);
}

void rbf_forward(const float* x, const float* prototypes, int n, float* y, cudaStream_t stream) {
  if (n == 0) return;
  rbf_forward_kernel1<<<blocks_for(std::size_t(n) * kClasses, kRbfThreads), kRbfThreads, 0,
                        stream>>>(x, prototypes, n, y);
  CUDA_CHECK_LAUNCH();
}

void rbf_backward_input(const float* x, const float* prototypes, const float* dL_dy, int n,
                        float* dL_dx, cudaStream_t stream) {
  if (n == 0) return;
  rbf_backward_input_kernel1<<<blocks_for(std::size_t(n) * kRbfUnits, kRbfThreads), kRbfThreads, 0,
                               stream>>>(x, prototypes, dL_dy, n, dL_dx);
  CUDA_CHECK_LAUNCH();
}

void map_loss(const float* y, const std::uint8_t* labels, int n, float* dL_dy,
              std::int32_t* predictions, StepStats* stats, cudaStream_t stream) {
  if (n == 0) return;
  map_loss_kernel1<<<1, kMapLossThreads, 0, stream>>>(y, labels, n, dL_dy, predictions, stats);
  CUDA_CHECK_LAUNCH();
}

void map_probabilities(const float* y, int n, float* probabilities, std::int32_t* predictions,
                       cudaStream_t stream) {
  if (n == 0) return;
  map_probabilities_kernel1<<<blocks_for(std::size_t(n), kRbfThreads), kRbfThreads, 0, stream>>>(
      y, n, probabilities, predictions);
  CUDA_CHECK_LAUNCH();
}

}  // namespace lenet5::cuda
