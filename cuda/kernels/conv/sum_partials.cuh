// The second phase of the weight gradients that versions 2 (tiled) and 5 (staged) compute in two
// launches: the first writes partial sums, one set per part of the batch (a slice of samples, or
// one sample), and this one adds the parts in order.
#pragma once

#include <cstddef>

namespace lenet5::cuda {

// dL/dW[i] = mask[i] * sum_{s=0..parts-1} partial_weight[s, i]   for i < n_weights = M*C*K*K,
// dL/dbias[m] = sum_{s=0..parts-1} partial_bias[s, m]             for i = n_weights + m (if asked).
// One thread per output, grid-stride; neighbouring threads read neighbouring partials (coalesced).
// Deterministic: one owner thread per output, s in order (the unrolling only lets the loads
// overlap; the additions stay in sequence). parts = 0 writes zeros, as the CPU reference does.
// mask may be null. Overwrites both outputs. Version is the number of the convolution version
// that launches it, so that a profile names it.
template <int Version>
__global__ void conv_backward_weights_reduce_kernel(int parts, int n_weights, int n_bias,
                                                    const float* __restrict__ partial_weight,
                                                    const float* __restrict__ partial_bias,
                                                    const float* __restrict__ mask,
                                                    float* __restrict__ dL_dweight,
                                                    float* __restrict__ dL_dbias) {
  const int count = n_weights + n_bias;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
    const bool is_weight = i < n_weights;
    const float* partial = is_weight ? partial_weight + i : partial_bias + (i - n_weights);
    const std::size_t stride = is_weight ? n_weights : n_bias;
    float acc = 0.0f;
#pragma unroll 8
    for (int s = 0; s < parts; ++s) acc += partial[s * stride];
    if (is_weight)
      dL_dweight[i] = mask ? acc * mask[i] : acc;
    else
      dL_dbias[i - n_weights] = acc;
  }
}

}  // namespace lenet5::cuda
