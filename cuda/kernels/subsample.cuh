// Subsampling kernels (Fig 16.5 corrected, average with bias; max; LeCun 1998's trainable
// coefficient), with backward passes.
// Contract: exactly subsample_*_cpu of layers/reference_cpu.hpp, on device pointers.
#pragma once

#include <cuda_runtime.h>

#include "core/activation_math.hpp"
#include "core/net_config.hpp"
#include "core/shapes.hpp"

namespace lenet5::cuda {

// Optionally with the network's activation fused in after the bias, in the book's order (Fig 16.5:
// pool, + b, then f); see FusedActivation in core/activation_math.hpp. coef: trainable
// subsampling's coefficients (C), which that kind alone reads and needs.

void subsample_forward(const PoolShape& s, Subsampling kind, const float* x, const float* bias,
                       float* y, cudaStream_t stream, FusedActivation activation = {},
                       const float* coef = nullptr);
// y: the forward output, needed only with a fused activation.
void subsample_backward_input(const PoolShape& s, Subsampling kind, const float* x,
                              const float* dL_dy, float* dL_dx, cudaStream_t stream,
                              FusedActivation activation = {}, const float* y = nullptr,
                              const float* coef = nullptr);
// Deterministic per-map sum (one block per map, fixed-order tree reduction). Overwrites.
void subsample_backward_bias(const PoolShape& s, const float* dL_dy, float* dL_dbias,
                             cudaStream_t stream, FusedActivation activation = {},
                             const float* y = nullptr);
// Trainable subsampling: dL/dcoef[c] = sum over n, h, w of dL/dS * (the window's sum), the same
// deterministic per-map reduction as the bias. Overwrites.
void subsample_backward_coef(const PoolShape& s, const float* x, const float* dL_dy,
                             float* dL_dcoef, cudaStream_t stream, FusedActivation activation = {},
                             const float* y = nullptr);

}  // namespace lenet5::cuda
