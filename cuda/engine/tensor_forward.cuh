// The tensor-core forward pass: each block holds a tile of samples and
// runs the whole network's forward pass and the softmax cross-entropy, every layer a matrix product
// on the tensor cores (mma.sync m16n8k8, TF32 operands, products added in float).
//
// Why: the whole-step kernels (whole_step.cuh) run one sample per block on the FP32 cores, and the
// FP32 cores are their wall. Here C1 and C3 are implicit GEMMs whose operands the lanes gather
// straight from shared memory (no im2col matrix anywhere), and C5, F6 and the output layer are
// GEMMs over the tile's samples, so that a dense weight read from L2 serves every sample of the
// tile. The subsampling, its bias and the activation are fused into the convolutions' epilogues.
//
//   tensor_forward_kernel1<Activation, Subsampling, Tile>: one block of 256 threads (8 warps,
//   tensor_tile.cuh's kThreads) per Tile samples (16, 32 or 64). Each warp takes the tile's samples in turn through
//   C1-S2 and C3-S4 (a sample's two convolutions on one warp, its working set in the warp's part of
//   shared memory); S4's outputs of the whole tile meet in shared memory, and then all warps share
//   out the n-tiles of C5, F6 and the output layer, each over the tile's rows; finally a thread per
//   sample forms its loss and predicted class.
//
// What it computes: the network of the fast and whole-step kernel sets (the book's linear C1 and
// C3, average or max subsampling with a bias, the four activations, either C3 table, softmax
// output), every operand of every product rounded to TensorFloat-32 (10-bit mantissa, round to
// nearest) and the products added in float: not fp32's bits, which is why it is only ever run
// where it is asked for. Deterministic: every sum runs in the same order every time, and every
// output is written by one lane. It refuses (UsageError, tensor_forward_refusal) trainable
// subsampling, squashed convolution units and the RBF output, which it does not compute.
//
// Its use: the evaluations after each epoch (TensorForward::evaluate, the same contract as
// WholeStep::evaluate), where --kernels tensor asks for it (core/net_config.hpp's
// tensor_evaluation: the GPU engine's and the packed group's); the training step's forward pass is
// tensor_backward.cuh's, from the same tile functions (tensor_tile.cuh). Never chosen otherwise.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/layout.hpp"
#include "core/net_config.hpp"
#include "cuda/engine/whole_step.cuh"
#include "cuda/runtime/buffer.hpp"

namespace lenet5::cuda {

// Why `config` cannot run on the tensor-core forward pass ("" when it can).
std::string tensor_forward_refusal(const NetConfig& config);

class TensorForward {
 public:
  // The tile sizes there are kernels for, and the one used unless another is asked for: the
  // fastest measured on the H200 (docs/tensor-cores.md), the smallest, whose blocks fit two to an
  // SM where the larger tiles fit one.
  static const std::vector<int>& tiles();
  static constexpr int kDefaultTile = 16;

  // Throws UsageError when the network has an option the kernels do not compute, the tile has no
  // kernel, or this GPU (or this build's kernels for it) lacks TF32 tensor cores.
  TensorForward(const NetConfig& config, const ParamLayout& layout, int tile = kDefaultTile);

  int tile() const { return m_tile; }

  // WholeStep::evaluate's contract: the forward pass and the softmax cross-entropy of images[0..n)
  // as they are for every model of `group` (params: the first model's, the others
  // group.params_stride floats apart); model m's sample i writes its loss to loss[m * n + i] and
  // its predicted class (the first largest logit) to predicted[m * n + i]; logits, when not null,
  // gets its 10 logits at (m * n + i) * 10. A sample's results are the same bits whatever tile it
  // falls in and however many models share the launch. Nothing waits for the device.
  void evaluate(const std::uint8_t* images, const std::uint8_t* labels, int n, const float* params,
                const ModelGroup& group, double* loss, std::int32_t* predicted, cudaStream_t stream,
                float* logits = nullptr) const;

 private:
  NetConfig m_config;
  WholeStepOffsets m_offsets;
  int m_tile;
  Buffer<float> m_c3_mask;  // (16, 6, 5, 5): 0 where the C3 table disconnects a weight
};

}  // namespace lenet5::cuda
