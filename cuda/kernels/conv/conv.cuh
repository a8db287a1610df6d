// Convolution kernels: the book's direct kernel (Fig 16.12), corrected, plus its backward passes.
// Contract: exactly the functions of layers/reference_cpu.hpp (conv_*_cpu), on device pointers,
// NCHW, launched on `stream` without synchronising. Every launch is checked.
//
// Errata of the printed Fig 16.12 fixed here (textbook-figures.md §2): E10 (tile index times
// TILE_WIDTH), E11 (rounded-up grid and bounds guards), E12 ("intK"), E13 (the sizes the linear
// indexing needs are passed in).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "core/shapes.hpp"

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

// Version 5, staged: the same contracts as version 1 (same arguments, outputs overwritten,
// deterministic), with each block copying one sample's operands into shared memory first. Every
// launcher falls back to version 1 where those would exceed 48 KiB of shared memory (no LeNet
// layer). Forward: grid (N, ceil(M / maps_per_block)), x[n] and the block's filters staged.
void conv_forward5(const ConvShape& s, const float* x, const float* weight, const float* bias,
                   float* y, cudaStream_t stream);
// Gather form as version 1; grid (N, C), dL_dy[n] and the filters of channel c staged.
void conv_backward_input5(const ConvShape& s, const float* dL_dy, const float* weight,
                          float* dL_dx, cudaStream_t stream);
// As conv_backward_weights1 (dL_dbias and mask may be null; overwrites its outputs), in two
// launches: per-sample partial sums into `scratch` (grid (N, M)), then one thread per weight and
// per bias adds the N partials in order n = 0..N-1. `scratch` is caller-owned device memory of
// conv_backward_weights5_scratch_floats(s) floats (C3 at N = 64: 154,624), whose contents on
// entry do not matter; the call is done with it when the stream reaches the end of the launches.
std::size_t conv_backward_weights5_scratch_floats(const ConvShape& s);
void conv_backward_weights5(const ConvShape& s, const float* x, const float* dL_dy,
                            float* dL_dweight, float* dL_dbias, const float* mask, float* scratch,
                            cudaStream_t stream);

}  // namespace lenet5::cuda
