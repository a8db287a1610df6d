// The tensor-core backward pass, its first part: the dense layers' gradients over a
// tile of samples, every product an mma.sync TF32 tile.
//
//   tensor_dense_backward_kernel1<Activation, Subsampling>: one block per tile of kTile samples
//   runs the tile's forward pass (tensor_tile.cuh, as the evaluation does), the softmax
//   cross-entropy's gradient dL/dlogits = (softmax - onehot) / n, and then, as GEMMs over the tile:
//     the input gradients   dL/dF6 = (dL/dlogits W7) f'(F6), dL/dC5 = (dL/dF6 W6) f'(C5),
//                           dL/dS4 = dL/dC5 W5 (S4's activation's gradient, one row per sample);
//     the weight gradients  dL/dW7 = dL/dlogitsᵀ F6, dL/dW6 = dL/dF6ᵀ C5, dL/dW5 = dL/dC5ᵀ S4
//                           (the k dimension the tile's samples) and the biases' as column sums
//                           in sample order,
//   each tile's into its own slot of a buffer of partial sums;
//   tensor_dense_gradient_sum_kernel1: each parameter's partial sums added over the tiles in tile
//   order, so that every run gives the same bits (no atomics).
// f' is taken from the activations as the forward pass stored them, rounded to TF32 (a relative
// error of 2^-11, the order of the products' own).
//
// Not yet a training step: the convolutions' backward pass and the update stay with the whole-step
// kernels; dL/dS4 is what that next part starts from.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/layout.hpp"
#include "core/net_config.hpp"
#include "cuda/engine/whole_step.cuh"
#include "cuda/runtime/buffer.hpp"

namespace lenet5::cuda {

class TensorDenseBackward {
 public:
  static constexpr int kTile = 16;  // the tile the forward pass measured fastest at

  // Room for batches of up to max_batch samples. Throws UsageError as TensorForward does.
  TensorDenseBackward(const NetConfig& config, const ParamLayout& layout, int max_batch);

  // The forward pass of images[0..n) (labels: their classes) and the backward pass through the
  // output layer, F6 and C5: OVERWRITES the batch-mean gradient (of the softmax cross-entropy
  // averaged over the n samples) of c5.weight, c5.bias, f6.weight, f6.bias, output.weight and
  // output.bias in `gradients` (layout offsets; the other tensors untouched), and writes each
  // sample's dL/d(S4's activation) to d4 (n, 400). Nothing waits for the device.
  void dense_gradients(const std::uint8_t* images, const std::uint8_t* labels, int n,
                       const float* params, float* gradients, float* d4, cudaStream_t stream);

 private:
  NetConfig m_config;
  WholeStepOffsets m_offsets;
  int m_max_batch;
  Buffer<float> m_c3_mask;   // (16, 6, 5, 5): 0 where the C3 table disconnects a weight
  Buffer<float> m_partials;  // (tiles, the dense parameters): each tile's weight gradients
};

}  // namespace lenet5::cuda
