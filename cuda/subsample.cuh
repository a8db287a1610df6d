// Subsampling kernels (Fig 16.5 corrected, average with bias; and max), with backward passes.
// Contract: exactly subsample_*_cpu of layers/reference_cpu.hpp, on device pointers.
#pragma once

#include <cuda_runtime.h>

#include "layers/reference_cpu.hpp"

namespace lenet5::cuda {

void subsample_forward(const PoolShape& s, Subsampling kind, const float* x, const float* bias,
                       float* y, cudaStream_t stream);
void subsample_backward_input(const PoolShape& s, Subsampling kind, const float* x,
                              const float* dL_dy, float* dL_dx, cudaStream_t stream);
// Deterministic per-map sum (one block per map, fixed-order tree reduction). Overwrites.
void subsample_backward_bias(const PoolShape& s, const float* dL_dy, float* dL_dbias,
                             cudaStream_t stream);

}  // namespace lenet5::cuda
