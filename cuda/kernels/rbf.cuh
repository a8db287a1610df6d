// The RBF output layer and the MAP criterion of LeCun et al. 1998 (--output rbf) on the GPU, for
// both layer-by-layer kernel sets (book and fast: the layer is 840 multiply-adds per sample each
// way, too small for the two sets to differ). Contract: rbf_forward_cpu, rbf_backward_input_cpu,
// map_loss_cpu and map_probabilities_cpu of layers/reference_cpu.hpp, on device pointers,
// launched without synchronising; the arithmetic is core/rbf_math.hpp's, the same code as the CPU
// reference's. A batch of n = 0 launches nothing.
//
// Version 1 of each kernel:
//   rbf_forward_kernel1: one thread per (sample, class), its 84-term sum in index order.
//   rbf_backward_input_kernel1: one thread per (sample, input), its 10-term sum in class order.
//   map_loss_kernel1: one block, as softmax_cross_entropy_kernel1 (loss.cu): threads take samples
//     t, t + blockDim, ...; the batch's sums combine in a fixed-order tree into one StepStats slot.
//   map_probabilities_kernel1: one thread per sample, probabilities and the nearest class.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/kernels/loss.cuh"

namespace lenet5::cuda {

// y (n, 10) = squared distances of x (n, 84) to the 10 prototypes (10, 84), all on the device.
void rbf_forward(const float* x, const float* prototypes, int n, float* y, cudaStream_t stream);
// dL/dx (n, 84) = sum_i dL/dy (n, i) * 2 (x - w_i). Overwrites dL_dx.
void rbf_backward_input(const float* x, const float* prototypes, const float* dL_dy, int n,
                        float* dL_dx, cudaStream_t stream);
// The MAP criterion over y (n, 10): dL/dy (may be null) = ([i == label] - p_i) / n, predictions
// (may be null) the nearest prototype's class, and ADDS the batch's loss sum and correct count
// to *stats, as softmax_cross_entropy does.
void map_loss(const float* y, const std::uint8_t* labels, int n, float* dL_dy,
              std::int32_t* predictions, StepStats* stats, cudaStream_t stream);
// probabilities (n, 10) as the criterion implies (each row sums to less than 1) and predictions
// (n) the nearest prototype's class (may be null).
void map_probabilities(const float* y, int n, float* probabilities, std::int32_t* predictions,
                       cudaStream_t stream);

}  // namespace lenet5::cuda
