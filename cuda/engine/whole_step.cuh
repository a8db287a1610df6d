// The whole-step kernel set (`--kernels whole-step`): a training step of the whole network in two
// launches instead of about twenty.
//
// Why: at batch 64 a step is ~160 MFLOP, a few microseconds of arithmetic, but the layer-by-layer
// kernel sets run ~18 dependent kernels per step, and each one's launch, ramp-up and drain costs
// more than its work. This set keeps a sample's whole forward and backward pass inside one thread
// block, in shared memory, so the only step-wide dependency left is the weight-gradient sum.
//
//   1. whole_step_sample_kernel1 and 2: one block per sample. It gathers its image through the
//      epoch's permutation, runs C1-S2-C3-S4-C5-F6-output, the softmax cross-entropy and its
//      gradient, and back-propagates to C1. It writes the sample's dense-layer activations and
//      output gradients, and its own C1/C3/bias gradient contributions, to a per-sample record.
//      Version 1 runs one sample per SM, version 2 two; the grid's size picks one (whole_step.cu).
//   2. whole_step_update_kernel: each parameter's gradient summed over the batch's records in
//      four parts, each in sample order, and the parts added in a fixed order (deterministic: no
//      atomics); a thread per part and parameter for the per-sample tensors and biases, a thread
//      per part and four adjacent weights for the dense layers (whole_step_update.cuh; with
//      --precision tf32 and a batch of 256 or more, the dense layers' in eighths on the tensor
//      cores, below). Then the SGD update of core/sgd.hpp (bit for bit the same formula as
//      cuda/kernels/optimizer.cu). The step's loss and correct count are summed in sample order
//      into its statistics slot.
// Evaluation is a third kernel, whole_step_evaluation_kernel: the forward stages and the loss
// alone, one block per test image and model (WholeStep::evaluate), how the whole-step engines,
// lone or packed, evaluate.
//
// A packed group of models (lenet5 sweep) runs in the same two launches, the model index as the
// grid's second dimension: each model reads its own parameters, permutation and rates and writes
// its own records and statistics, and the data set is shared. A block computes exactly what it
// computes for a lone model, so a model's weights are bit-identical however many share its
// launches. A lone model is the group of one.
//
// The function is the same network as the other kernel sets (core/topology.hpp), every option
// included (the four activations, average and max subsampling, both C3 tables, SGD with momentum,
// Nesterov and weight decay); only summation orders differ, so results agree up to rounding.
// With --precision tf32 (NetConfig::precision) C3's three stages, and for batches of 256 and more
// the update kernel's sums of the dense weights' gradients, run on the tensor cores instead
// (whole_step_tf32.cuh, whole_step_update.cuh): the same work otherwise, its operands rounded to
// TensorFloat-32.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/layout.hpp"
#include "core/net_config.hpp"
#include "core/sgd.hpp"
#include "cuda/kernels/augment.cuh"
#include "cuda/kernels/loss.cuh"
#include "cuda/runtime/buffer.hpp"

namespace lenet5::cuda {

// Where each parameter tensor starts in the flat buffer (core/layout.hpp), in floats.
struct WholeStepOffsets {
  int c1_weight, s2_bias, c3_weight, s4_bias, c5_weight, c5_bias, f6_weight, f6_bias, output_weight,
      output_bias;
  int buffer_floats;
};

// Where model m of a packed group keeps its part of each per-model array: the base pointer the
// step is given plus m times the stride, in elements. The group of one (the default) reads the
// base pointers as they are.
struct ModelGroup {
  int models = 1;
  std::size_t indices_stride = 0;  // permutation entries per model (the training set's size)
  std::size_t params_stride = 0;  // parameter floats per model (layout buffer_floats), velocity too
  std::size_t slots_stride = 0;   // learning rates and statistics slots per model (steps per epoch)
  // Device, one per model: the augmentation's seed of each (null: augmentation.seed for all).
  const std::uint64_t* augment_seeds = nullptr;
};

// Which version of the sample kernel a step runs (whole_step.cu): the one the grid's size picks,
// or one forced, for the test that proves the two compute the same bits.
enum class SampleBuild { by_grid, one_per_sm, two_per_sm };

// Which tiles of the update kernel sum the dense weights' gradients: those the precision and the
// batch's size pick (whole_step_update.cuh's kMmaMinBatch; for fp32, one, two or four rows per
// warp by the grid), or the fp32 ones forced, for the tests that prove the tensor cores' tiles run
// where they should and change nothing else, and that the fp32 tiles' three forms give the same
// bits.
enum class DenseTiles { by_batch, fp32, fp32_one_row, fp32_two_rows, fp32_four_rows };

class WholeStep {
 public:
  // Room for `models` models of at most max_batch samples each per step.
  WholeStep(const NetConfig& config, const ParamLayout& layout, int max_batch, int models = 1);

  // One SGD step on the n samples images[indices[0..n)] (indices null: the first n images),
  // each augmented first when `augmentation` is enabled (then indices must not be null),
  // reading the rate from *lr on the device (so that a captured graph can replay the launch).
  // velocity may be null only when sgd.momentum is 0.
  // ADDS the batch's loss sum and correct count to *stats. Nothing waits for the device.
  void train_step(const std::uint8_t* images, const std::uint8_t* labels,
                  const std::int32_t* indices, int n, const DeviceAugmentation& augmentation,
                  const SgdSettings& sgd, const float* lr, float* params, float* velocity,
                  StepStats* stats, cudaStream_t stream, const ModelGroup& group = {});

  // The batch-mean gradient of the same step, written to `gradients` (layout buffer_floats, the
  // padding left untouched), without updating anything: what the tests compare with the CPU
  // reference. stats may be null.
  void gradients(const std::uint8_t* images, const std::uint8_t* labels,
                 const std::int32_t* indices, int n, const DeviceAugmentation& augmentation,
                 const float* params, float* gradients, StepStats* stats, cudaStream_t stream,
                 SampleBuild build = SampleBuild::by_grid,
                 DenseTiles tiles = DenseTiles::by_batch);

  // The forward pass and the softmax cross-entropy of images[0..n) as they are (no permutation,
  // no augmentation) for every model of `group` (params: the first model's, the others
  // group.params_stride floats apart): model m's sample i writes its loss to loss[m * n + i] and
  // its predicted class (the first largest logit) to predicted[m * n + i]. One launch, with the
  // training step's forward stages: the losses are those a training step computes from the same
  // weights (tested), and a model's results are the same bits however many models share the
  // launch. Nothing waits for the device.
  void evaluate(const std::uint8_t* images, const std::uint8_t* labels, int n, const float* params,
                const ModelGroup& group, double* loss, std::int32_t* predicted,
                cudaStream_t stream) const;

  // How many samples (blocks) of a version of the sample kernel one SM runs at once on this
  // device, as the occupancy calculator counts them: on sm_90, one and two.
  int samples_per_sm(SampleBuild build) const;

 private:
  void run_samples(const std::uint8_t* images, const std::uint8_t* labels,
                   const std::int32_t* indices, int n, const DeviceAugmentation& augmentation,
                   const float* params, const ModelGroup& group, SampleBuild build,
                   cudaStream_t stream);
  // The version that runs a grid of n samples for each of the group's models.
  SampleBuild build_for(int n, const ModelGroup& group, SampleBuild asked) const;
  // The dynamic shared memory a launch of that version asks for.
  std::size_t shared_bytes(SampleBuild build) const;
  // The update kernel over the records of the last run_samples: sgd and lr null compute the
  // gradient only.
  void launch_update(int n, const ModelGroup& group, const SgdSettings* sgd, const float* lr,
                     float* params, float* velocity, float* gradients_out, StepStats* stats,
                     cudaStream_t stream, DenseTiles tiles = DenseTiles::by_batch);

  NetConfig m_config;
  WholeStepOffsets m_offsets;
  int m_max_batch;
  int m_models;
  Buffer<float> m_records;       // (models, max_batch, record floats): see whole_step.cu
  Buffer<double> m_sample_loss;  // (models, max_batch)
  Buffer<std::int32_t> m_sample_correct;
  Buffer<float> m_c3_mask;      // (16, 6, 5, 5): 0 where the C3 table disconnects a weight
  bool m_programmatic = false;  // the kernels were built with griddepcontrol (sm_90 and newer)
  int m_sms = 0;                // the device's SMs
  bool m_two_fit = false;       // an SM holds two samples of whole_step_sample_kernel2
  std::size_t m_one_per_sm_shared = 0;  // whole_step_sample_kernel1's: over half an SM's
};

}  // namespace lenet5::cuda
