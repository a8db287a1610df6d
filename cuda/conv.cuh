// Convolution kernels: the book's direct kernel (Fig 16.12), corrected, plus its backward passes.
// Contract: exactly the functions of layers/reference_cpu.hpp (conv_*_cpu), on device pointers,
// NCHW, launched on `stream` without synchronising. Every launch is checked.
//
// Errata of the printed Fig 16.12 fixed here (textbook-figures.md §2): E10 (tile index times
// TILE_WIDTH), E11 (rounded-up grid and bounds guards), E12 ("intK"), E13 (the sizes the linear
// indexing needs are passed in).
#pragma once

#include <cuda_runtime.h>

#include "layers/reference_cpu.hpp"

namespace lenet5::cuda {

constexpr int kTileWidth = 16;  // Fig 16.12: 16x16 output tiles, 256 threads per block

// Version 1, direct (Fig 16.12): grid (N, M, H_grid*W_grid), one thread per output element.
void conv_forward1(const ConvShape& s, const float* x, const float* weight, const float* bias,
                   float* y, cudaStream_t stream);
// Gather form of Fig 16.8 (race-free, no atomics): one thread per input element,
// dE/dX[c,h,w] = sum_m sum_{p,q} dE/dY[m,h-p,w-q] W[m,c,p,q] over valid h-p, w-q.
void conv_backward_input1(const ConvShape& s, const float* dL_dy, const float* weight,
                          float* dL_dx, cudaStream_t stream);
// Fig 16.9 summed over the batch, deterministic: each weight's sum over (n,h,w) is computed by
// one block in a fixed order (no float atomics). dL_dbias may be null. mask (may be null)
// multiplies the weight gradient element-wise (C3 connection table). Overwrites its outputs.
void conv_backward_weights1(const ConvShape& s, const float* x, const float* dL_dy,
                            float* dL_dweight, float* dL_dbias, const float* mask,
                            cudaStream_t stream);

}  // namespace lenet5::cuda
