// A 2x2 subsampling window as the CPU reference reads it (subsample_cpu.cpp), shared by the
// whole-step kernels (whole_step_forward.cuh, whole_step_backward.cuh) and the tensor-core set
// (tensor_tile.cuh, tensor_conv_backward.cu): its pooled value, which of its four values is its
// first maximum, and the gradient each value gets.
//
// The values are taken in row-major order, (dy, dx) = (0, 0), (0, 1), (1, 0), (1, 1), so that the
// average's sum rounds as the reference's does and ties go to the earliest value in the forward
// pass and the backward pass alike.
#pragma once

#include "core/net_config.hpp"

namespace lenet5::cuda::pool {

// Index 0-3 (2 dy + dx) of the first maximum: a strict '>' scan, as first_max_in_window's.
__device__ inline int first_max4(float v00, float v01, float v10, float v11) {
  int best = 0;
  float value = v00;
  if (v01 > value) best = 1, value = v01;
  if (v10 > value) best = 2, value = v10;
  if (v11 > value) best = 3;
  return best;
}

// The pooled value: the sum in row-major order divided by 4, or the first maximum.
template <Subsampling P>
__device__ inline float pool4(float v00, float v01, float v10, float v11) {
  if constexpr (P == Subsampling::max) {
    float best = v00;
    best = v01 > best ? v01 : best;
    best = v10 > best ? v10 : best;
    return v11 > best ? v11 : best;
  } else {
    return (((v00 + v01) + v10) + v11) / 4.0f;
  }
}

// dL/d(the window's value at position 2 dy + dx) from dL/d(the pooled value) dy, as
// subsample_backward_input_cpu has it: average spreads dy / 4 over the window; max gives dy to
// its first maximum (first_max, 0-3) and 0 to the rest.
template <Subsampling P>
__device__ inline float window_gradient(float dy, int first_max, int position) {
  if constexpr (P == Subsampling::max)
    return position == first_max ? dy : 0.0f;
  else
    return dy / 4.0f;
}

}  // namespace lenet5::cuda::pool
