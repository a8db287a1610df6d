// The tensor-core backward pass: the batch-mean gradient of every parameter over tiles of samples,
// every product an mma.sync tile in the network's --precision (tensor_mma.cuh's Operands: TF32,
// BF16, or FP32 as three TF32 products), in five kernels (the last two of which, in a training
// step, also apply SGD's update, each parameter's where its gradient is written:
// TensorBackward::train_step).
//
//   tensor_conv_forward_kernel2<Precision, Activation, Subsampling> (tensor_conv_backward.cu): a
//   block per sample computes its C1, S2, C3 and S4 (the forward pass's own code and bits, its 8
//   warps sharing the window pairs out) and writes S4's activations, a row per sample, for the
//   dense part, and S2's activations and each max window's first maximum for the convolutions'
//   backward pass: the forward pass runs once per step; tensor_dense_forward_kernel3<Precision,
//   Activation> (tensor_backward.cu): a cluster of 4 blocks of 16 warps per tile of
//   TensorDenseBackward::kTile samples (compute capability 9.0; older GPUs run kernel2, a block a
//   tile, with the same bits) runs the dense layers' forward pass on those S4 rows (C5 with its own
//   order of k, reading its weights as float4s, the later layers by tensor_tile.cuh's dense_tile as
//   the evaluation does; C5's and F6's output tiles shared out over the cluster, each block sending
//   its columns to the others' shared memory), the softmax cross-entropy's gradient dL/dlogits =
//   (softmax - onehot) / n, and the input gradients as GEMMs over the tile, dL/dF6 = (dL/dlogits
//   W7) f'(F6) and dL/dC5 = (dL/dF6 W6) f'(C5); it writes each sample's activations and output
//   gradients to its record, and its loss and whether its prediction is its label;
//   tensor_s4_gradient_kernel1<Precision> (tensor_backward.cu): a warp per m16n8 tile over the
//   batch of dL/dS4 = dL/dC5 W5 (S4's activation's gradient, one row per sample, where the
//   convolutions' backward pass starts);
//   tensor_conv_backward_kernel2<Precision, Activation, Subsampling> (tensor_conv_backward.cu): a
//   block per sample, its 8 warps sharing each product's tiles out, takes dL/dS4 through S4
//   (f'(S4), then the window's average or its first maximum) to dL/dC3, then C3's input gradient
//   (a transposed convolution as an implicit GEMM, k the 16 maps' taps) through S2 to dL/dC1, C3's
//   weight gradient (k the sample's 100 positions) and C1's (k the sample's 784 positions, in four
//   quarters added in order), each sample's into its own slot of partial sums; and, in blocks
//   after the samples' (on the SMs those leave room on: the products need nothing this launch
//   computes), the dense layers' products over the whole batch, a warp per m16n8 tile, from the
//   records (tensor_dense_gradient.cuh):
//     dL/d[W7 | b7] = dL/dlogitsᵀ [F6 | 1], dL/d[W6 | b6] = dL/dF6ᵀ [C5 | 1],
//     dL/d[W5 | b5] = dL/dC5ᵀ [S4 | 1] (k the batch's samples in order; a bias's gradient is the
//     column of ones' product),
//   and in one more block the step's loss sum and correct count, in sample order;
//   tensor_step_gradient_kernel1<Precision> (tensor_backward.cu): the convolutions' slots added
//   in a fixed order, a block per 32 floats of a slot (where the batch has more samples than the
//   GPU has SMs, the convolutions' backward kernel's last samples' blocks add them instead, the
//   same sums in the same order, and a step is four kernels: SlotSum), or, where it is launched
//   alone after TensorDenseBackward::forward, the dense products and the statistics above;
//   each gradient written, and SGD's step taken with it, where it is final. Every run gives the
//   same bits (no atomics). c3.weight's gradient is zero where the C3 table disconnects a weight,
//   as whole-step's.
// f' is taken from the activations as the forward pass stored them for the products: rounded to
// TF32 in tf32 (a relative error of 2^-11, the order of the products' own), the floats in bf16 and
// fp32. The dense biases' gradients are products too (each output gradient rounded to TF32, times
// 1), where the kernel before summed them in float: a bias whose gradients cancel (the output
// layer's, sum over the batch of softmax - onehot) keeps 2^-11 of the sum of their magnitudes, not
// of their sum (measured: 3.7e-4 of the norm for output.bias against the CPU reference in double,
// tanh). Each dense weight's sum runs over the whole batch in one warp: 515 warps whatever the
// batch, so very large batches (1,024 and more) would want the samples split into ranges added in
// a fixed order.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>

#include "core/layout.hpp"
#include "core/net_config.hpp"
#include "core/sgd.hpp"
#include "cuda/engine/whole_step.cuh"
#include "cuda/kernels/loss.cuh"
#include "cuda/runtime/buffer.hpp"

namespace lenet5::cuda {

// SGD's step, taken with the gradient (TensorBackward::train_step): the settings (SGD's, the only
// optimizer the tensor set runs), the step's learning rate on the device, and the parameters and
// velocity (null without momentum) it updates, in the layout's buffer.
struct SgdStep {
  const SgdSettings& settings;
  const float* lr;
  float* params;
  float* velocity;
};

// The convolutions' gradients as their backward kernel leaves them, for the step's gradient kernel
// to add (TensorConvBackward::partials).
struct ConvPartials {
  const float* slots;    // (n, a slot): each sample's gradients of the convolutions' parameters
  const float* c3_mask;  // (16, 6): 1 where the C3 table connects a map to an input map
};

// The dense layers' weight gradients as a launch runs them beside its own work
// (tensor_dense_gradient.cuh).
struct DenseGradientWork;

class TensorDenseBackward {
 public:
  static constexpr int kTile = 16;  // the tile the forward pass measured fastest at

  // Room for batches of up to max_batch samples. Throws UsageError as TensorForward does. The
  // forward kernel runs a cluster of blocks a tile where the GPU has clusters (compute capability
  // 9.0) and allow_clusters is true, else a block a tile: the same bits (tested), more slowly.
  TensorDenseBackward(const NetConfig& config, const ParamLayout& layout, int max_batch,
                      bool allow_clusters = true);
  bool uses_clusters() const { return m_clusters; }
  bool launches_programmatic() const { return m_programmatic; }

  // The dense layers' forward pass of n samples (labels: their classes) from their S4
  // activations s4_rows (n, 400; TensorConvBackward::conv_forward's s4_rows(), 16-byte aligned:
  // read as float4s), and the backward pass through the output layer, F6 and C5: writes each
  // sample's dL/d(S4's activation) to d4 (n, 400), and keeps what weight_gradients needs (each
  // sample's activations, output gradients, loss and correctness). params' C5 weights must be
  // 16-byte aligned (check_params). Nothing waits for the device.
  void forward(const std::uint8_t* labels, int n, const float* params, const float* s4_rows,
               float* d4, cudaStream_t stream);

  // Refuses params whose C5 weights are not 16-byte aligned (the forward kernels read them as
  // float4s).
  void check_params(const float* params) const;

  // After forward of the same n samples: OVERWRITES the batch-mean gradient (of the softmax
  // cross-entropy averaged over the n samples) of c5.weight, c5.bias, f6.weight, f6.bias,
  // output.weight and output.bias in `gradients` (layout offsets; the other tensors untouched).
  // With stats not null, the step's loss sum and correct count (whole-step's formula, in float,
  // summed in sample order) are ADDED to *stats. One launch of its own; nothing waits for the
  // device.
  void weight_gradients(int n, const float* s4_rows, float* gradients, cudaStream_t stream,
                        StepStats* stats = nullptr);

  // weight_gradients' work, with SGD's step on those parameters as each gradient is written where
  // step is not null (step.params), for a launch that runs it beside its own:
  // TensorConvBackward::conv_gradients, after forward of the same n samples. Refuses (Error) a
  // step that is not SGD's.
  DenseGradientWork gradient_work(int n, const float* s4_rows, float* gradients,
                                  StepStats* stats = nullptr, const SgdStep* step = nullptr) const;
  // The convolutions' gradients: each sample's slot of conv added in a fixed order into c1.weight,
  // s2.bias, c3.weight and s4.bias of `gradients`, with SGD's step on each where step is not null.
  // One launch; nothing waits for the device.
  void add_conv_slots(int n, float* gradients, cudaStream_t stream, const ConvPartials& conv,
                      const SgdStep* step = nullptr);

  // forward, then weight_gradients of the dense layers alone.
  void dense_gradients(const std::uint8_t* labels, int n, const float* params, const float* s4_rows,
                       float* gradients, float* d4, cudaStream_t stream,
                       StepStats* stats = nullptr);

 private:
  NetConfig m_config;
  WholeStepOffsets m_offsets;
  int m_max_batch;
  bool m_clusters;          // the forward kernel: kernel3 (a cluster a tile), or kernel2
  bool m_programmatic;      // its launches programmatic (dependent_launch.cuh), where they may be
  Buffer<float> m_records;  // (tiles * kTile, a record): dense activations and output gradients
  Buffer<double> m_sample_loss;           // (max_batch): each sample's loss ...
  Buffer<std::int32_t> m_sample_correct;  // ... and whether it was classified right
};

// The convolutions' part of the training step: their forward pass before TensorDenseBackward, their
// backward pass from dL/dS4 down after it (TensorBackward runs the three).
class TensorConvBackward {
 public:
  TensorConvBackward(const NetConfig& config, const ParamLayout& layout, int max_batch);

  // C1, S2, C3 and S4 of images[0..n) (with field not null, the samples' input is its rows (n, 1,
  // 32, 32), already gathered and normalised as cuda/kernels/batch.cuh does (a training step's
  // batch), and images is not read): writes each sample's S4 activations to s4_rows() (n, 400;
  // stored for the products, as the dense part reads them) and keeps what conv_gradients needs
  // (S2's activations, each max window's first maximum). Nothing waits for the device.
  void conv_forward(const std::uint8_t* images, int n, const float* params, cudaStream_t stream,
                    const float* field = nullptr);
  const float* s4_rows() const { return m_s4_rows.data(); }

  // After conv_forward of the same samples and parameters: from each sample's dL/d(S4's
  // activation) d4 (n, 400), already the batch mean's share, writes each sample's gradients of
  // c1.weight, s2.bias, c3.weight and s4.bias to its slot of partials(), which
  // TensorDenseBackward::weight_gradients (or add_conv_slots) adds. images and field as
  // conv_forward took them. With dense not null, the same launch runs that work too
  // (TensorDenseBackward::gradient_work), in blocks after the samples'. With add_slots (dense not
  // null, can_add_slots()), the samples' blocks also add the slots once all are written, and write
  // each gradient and take SGD's step with dense's, as add_conv_slots would (the same bits): the
  // last ones to finish, while the others leave. Nothing waits for the device.
  void conv_gradients(const std::uint8_t* images, int n, const float* params, const float* d4,
                      cudaStream_t stream, const float* field = nullptr,
                      const DenseGradientWork* dense = nullptr, bool add_slots = false);
  // Whether conv_gradients may add the slots: the blocks that add them wait for the others, so
  // the GPU must hold more of the kernel's blocks at once than ever wait.
  bool can_add_slots() const;
  ConvPartials partials() const { return {m_partials.data(), m_c3_mask.data()}; }
  bool launches_programmatic() const { return m_programmatic; }
  // The dense products' tiles a block (tensor_dense_gradient.cuh's dense_gradient_block) where
  // conv_gradients runs them beside n samples: eight where the samples' blocks and the dense ones
  // fit the GPU at once, four where they do not, so that the second wave, which has the SMs to
  // itself, spreads them over twice the SMs.
  int dense_tiles_a_block(int n) const;

 private:
  NetConfig m_config;
  WholeStepOffsets m_offsets;
  int m_max_batch;
  bool m_programmatic;  // its launches programmatic (dependent_launch.cuh), where they may be
  int m_resident_blocks = 0;  // the backward kernel's blocks the GPU holds at once
  Buffer<float> m_c3_mask;
  Buffer<float> m_s4_rows;   // (max_batch, 400): S4's activations
  Buffer<float> m_records;   // (max_batch, a record): S2's activations and the windows' maxima
  Buffer<float> m_partials;  // (max_batch, the convolutions' parameters): each sample's gradients
  Buffer<int> m_slot_counts;  // conv_gradients' with add_slots (ConvBackwardArgs::slot_counts)
};

// Where a step adds the convolutions' slots: in a launch of its own after the convolutions'
// backward, in that launch (TensorConvBackward::conv_gradients' add_slots: a launch fewer), or by
// the batch: in that launch where the batch has more samples than the GPU has SMs, so that some SM
// holds two, in a launch of its own where it has at most one an SM, each the shorter epoch where
// measured (docs/tensor-cores.md). The same bits every way.
enum class SlotSum { own_launch, in_backward_launch, by_batch };

// The whole backward pass on the tensor cores: a drop-in gradient for whole-step's update.
class TensorBackward {
 public:
  // Room for batches of up to max_batch samples. Throws UsageError as TensorForward does.
  // in_backward_launch needs a GPU where TensorConvBackward::can_add_slots (internal Error
  // otherwise); by_batch adds them in a launch of their own where it cannot.
  TensorBackward(const NetConfig& config, const ParamLayout& layout, int max_batch,
                 SlotSum slot_sum = SlotSum::by_batch);

  // OVERWRITES the batch-mean gradient (of the softmax cross-entropy averaged over the n samples)
  // of every parameter tensor, c1.weight to output.bias, in `gradients` (layout offsets; the
  // padding between tensors untouched). Deterministic. field as conv_forward takes it (a training
  // step's batch, gathered through the permutation and the augmentation), stats as
  // TensorDenseBackward::weight_gradients takes it (the step's statistics slot). Nothing waits for
  // the device.
  void gradients(const std::uint8_t* images, const std::uint8_t* labels, int n, const float* params,
                 float* gradients, cudaStream_t stream, const float* field = nullptr,
                 StepStats* stats = nullptr);

  // A training step of n samples over their batch, already gathered (field (n, 1, 32, 32) and
  // labels (n), as cuda/kernels/batch.cuh's gather_training_batch gathers them): the gradient as
  // gradients() computes it, and SGD's step of step.params with it, each parameter's where its
  // gradient is written (the dense layers' in the convolutions' backward launch, the
  // convolutions' in the last): the same bits as gradients(), then cuda/kernels/optimizer.cu's
  // sgd_step (tested), in five launches where those make six, where the padding between tensors
  // is zero in the parameters, the velocity and `gradients` (the engine's buffers are: SGD's kernel
  // keeps it zero, and this step leaves it alone). Nothing waits for the device.
  // after_conv_forward, where given, is called once the convolutions' forward kernel is launched
  // and before the next launch: where work queued on another stream should start behind that
  // kernel, which takes every SM, rather than beside it (the engine's gather of the next batch).
  void train_step(const float* field, const std::uint8_t* labels, int n, const SgdStep& step,
                  float* gradients, cudaStream_t stream, StepStats* stats = nullptr,
                  const std::function<void()>& after_conv_forward = {});
  // Whether each of its launches is a programmatic dependent launch of the one before
  // (dependent_launch.cuh): where its kernels were built for compute capability 9.0.
  bool launches_programmatic() const {
    return m_dense.launches_programmatic() && m_conv.launches_programmatic();
  }
  // Whether a step of n samples adds the slots in the convolutions' backward launch (SlotSum).
  bool adds_slots_in_backward(int n) const;

 private:
  // The five kernels (four where adds_slots_in_backward); the last two apply `step` where it is
  // not null. after_conv_forward as train_step takes it.
  void run(const std::uint8_t* images, const std::uint8_t* labels, int n, const float* params,
           float* gradients, cudaStream_t stream, const float* field, StepStats* stats,
           const SgdStep* step, const std::function<void()>& after_conv_forward = {});

  TensorDenseBackward m_dense;
  TensorConvBackward m_conv;
  Buffer<float> m_d4;  // (max_batch, 400): dL/d(S4's activation), between the two parts
  SlotSum m_slot_sum;
  int m_multiprocessors;
};

}  // namespace lenet5::cuda
