// The tensor-core backward pass (cuda/engine/tensor_backward.cuh) against the CPU reference: the
// dense layers' part (the batch-mean gradients of C5, F6 and the output layer and each sample's
// dL/d(S4's activation), the other tensors untouched) and the whole pass (the batch-mean gradient
// of every tensor, none at the C3 table's disconnected weights), for the default config's network
// and the book's, at whole tiles and with a short last tile; the same bits on every run; and the
// training step, which gathers its batch and applies SGD's update inside its launches, against
// the separate gather and SGD kernels.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "common/augment_tolerance.hpp"
#include "core/activation_math.hpp"
#include "core/layout.hpp"
#include "core/net_config.hpp"
#include "core/rng.hpp"
#include "cuda/engine/tensor_backward.cuh"
#include "cuda/kernels/batch.cuh"
#include "cuda/kernels/optimizer.cuh"
#include "cuda/runtime/buffer.hpp"
#include "data/batch.hpp"
#include "engine/network.hpp"
#include "gpu_test_util.hpp"
#include "layers/reference_cpu.hpp"
#include "network_test_util.hpp"

namespace lenet5 {
namespace {

using Batch = test::DigitImages;

Batch make_batch(int n, std::uint64_t seed) {
  return test::digit_like_images(n, seed);
}

std::vector<float> parameters(const NetConfig& config, std::uint64_t seed) {
  return test::test_parameters(config, seed);
}

// The reference in double from the same float weights: the batch-mean gradient of every tensor
// (Network::backward), and dL/d(S4's activation) per sample, from the layer outputs:
// dL/dlogits = (softmax - onehot) / n, then back through the output layer, F6 and C5.
struct Reference {
  std::vector<double> gradients;
  std::vector<double> d4;                  // (n, 400)
  std::vector<double> c5_bias_from_chain;  // dL/dC5 summed over the samples
  LossStats loss;                          // the batch's loss sum and correct count
};
Reference reference(const NetConfig& config, const std::vector<float>& params, const Batch& batch,
                    int n) {
  const std::vector<double> input = test::reference_input(config, batch.pixels.data(), nullptr, n);
  const auto reference_net = test::reference_network(config, params, input, n);
  Network<double>& net = *reference_net;
  const std::vector<double> wide(params.begin(), params.end());
  std::vector<double> d7(std::size_t(n) * kClasses);
  const LossStats loss =
      softmax_cross_entropy_cpu(net.logits(), batch.labels.data(), n, kClasses, d7.data(), nullptr);
  const ParamLayout& layout = net.layout();
  const double* w5 = wide.data() + layout.find("c5.weight").offset;
  const double* w6 = wide.data() + layout.find("f6.weight").offset;
  const double* w7 = wide.data() + layout.find("output.weight").offset;
  Reference result;
  result.d4.assign(std::size_t(n) * 400, 0.0);
  result.c5_bias_from_chain.assign(120, 0.0);
  for (int i = 0; i < n; ++i) {
    std::vector<float> a5, a6;
    for (const LayerOutput& out : net.layer_outputs(i)) {
      if (out.name == "c5") a5 = out.values;
      if (out.name == "f6") a6 = out.values;
    }
    std::vector<double> d6(84, 0.0), d5(120, 0.0);
    for (int j = 0; j < 84; ++j) {
      for (int k = 0; k < kClasses; ++k)
        d6[j] += d7[std::size_t(i) * kClasses + k] * w7[k * 84 + j];
      d6[j] *= activation_slope(config.activation, double(a6[std::size_t(j)]));
    }
    for (int j = 0; j < 120; ++j) {
      for (int k = 0; k < 84; ++k) d5[j] += d6[k] * w6[k * 120 + j];
      d5[j] *= activation_slope(config.activation, double(a5[std::size_t(j)]));
      result.c5_bias_from_chain[std::size_t(j)] += d5[j];
    }
    for (int j = 0; j < 400; ++j)
      for (int k = 0; k < 120; ++k) result.d4[std::size_t(i) * 400 + j] += d5[k] * w5[k * 400 + j];
  }
  net.backward(d7.data(), n);
  result.gradients = net.gradients().to_vector();
  result.loss = loss;
  return result;
}

// ||got - want|| / ||want|| over [begin, begin + count).
double relative_l2(const std::vector<float>& got, const std::vector<double>& want,
                   std::size_t begin, std::size_t count) {
  double difference = 0, norm = 0;
  for (std::size_t i = begin; i < begin + count; ++i) {
    difference += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    norm += want[i] * want[i];
  }
  return std::sqrt(difference / norm);
}

// The batch's images and labels, and the weights, on the device.
struct DeviceInputs {
  Buffer<std::uint8_t> pixels, labels;
  Buffer<float> params;
  DeviceInputs(const Batch& batch, const std::vector<float>& weights)
      : pixels(Device::gpu, batch.pixels.size()),
        labels(Device::gpu, batch.labels.size()),
        params(test::upload(weights)) {
    pixels.copy_from_host(batch.pixels.data());
    labels.copy_from_host(batch.labels.data());
  }
};

struct GpuResult {
  std::vector<float> gradients, d4;
};
GpuResult run(const NetConfig& config, const std::vector<float>& params, const Batch& batch, int n,
              int max_batch) {
  const ParamLayout layout = lenet5_layout(config);
  cuda::TensorConvBackward convolutions(config, layout, max_batch);  // S4's rows, as in a step
  cuda::TensorDenseBackward backward(config, layout, max_batch);
  const DeviceInputs in(batch, params);
  Buffer<float> gradients = test::poisoned(layout.buffer_floats);
  Buffer<float> d4 = test::poisoned(std::size_t(n) * 400);
  convolutions.conv_forward(in.pixels.data(), n, in.params.data(), cudaStreamPerThread);
  backward.dense_gradients(in.labels.data(), n, in.params.data(), convolutions.s4_rows(),
                           gradients.data(), d4.data(), cudaStreamPerThread);
  return {test::download(gradients), test::download(d4)};
}

// TensorBackward's gradient of every tensor, in a buffer poisoned with NaN before the call.
std::vector<float> run_whole(const NetConfig& config, const std::vector<float>& params,
                             const Batch& batch, int n, int max_batch) {
  const ParamLayout layout = lenet5_layout(config);
  cuda::TensorBackward backward(config, layout, max_batch);
  const DeviceInputs in(batch, params);
  Buffer<float> gradients = test::poisoned(layout.buffer_floats);
  backward.gradients(in.pixels.data(), in.labels.data(), n, in.params.data(), gradients.data(),
                     cudaStreamPerThread);
  return test::download(gradients);
}

// The step's statistics slot after one TensorBackward pass and after a second one over the same
// batch (each pass ADDS its loss sum and correct count).
std::pair<cuda::StepStats, cuda::StepStats> step_stats(const NetConfig& config,
                                                       const std::vector<float>& params,
                                                       const Batch& batch, int n) {
  const ParamLayout layout = lenet5_layout(config);
  cuda::TensorBackward backward(config, layout, n);
  const DeviceInputs in(batch, params);
  Buffer<float> gradients(Device::gpu, layout.buffer_floats);
  Buffer<cuda::StepStats> stats(Device::gpu, 1);  // zeroed, as an epoch's slots are
  std::pair<cuda::StepStats, cuda::StepStats> result;
  for (cuda::StepStats* after : {&result.first, &result.second}) {
    backward.gradients(in.pixels.data(), in.labels.data(), n, in.params.data(), gradients.data(),
                       cudaStreamPerThread, nullptr, stats.data());
    CUDA_CHECK(cudaStreamSynchronize(cudaStreamPerThread));
    stats.copy_to_host(after);
  }
  return result;
}

// The tolerances, in the L2 norm relative to the reference's, per tensor. Every product on the
// way to these gradients (up to five forward and three backward ones) rounds both operands to
// TF32 (2^-11 relative each), so for the smooth network (tanh, average subsampling) each adds
// about 2^-10 of error, and over eight of them a few 1e-3 at most: kSmooth is 1e-2. With relu a
// rounding may move a C5 or F6 unit across the kink at zero, which moves that unit's whole row of
// gradient (as whole-step's tf32 tests found for C3's): kKinked, 0.25, only catches what is grossly
// wrong there (a wrong index or transpose moves a tensor by about its own norm); the same code
// runs in both networks, which the smooth one checks closely.
constexpr double kSmooth = 1e-2, kKinked = 0.25;

// Every test runs in each --precision of the set. The tolerances above are TF32's; a precision's
// scale with how far it rounds an operand: BF16 keeps 7 bits of mantissa where TF32 keeps 10
// (2^-8 against 2^-11, 8x). FP32's split products leave out only the small halves' product (2^-22
// of it), so what is left is float arithmetic against the double reference, as for whole-step's
// fp32 kernels (test_whole_step.cpp: about 1e-6, allowed 1e-4).
constexpr Precision kPrecisions[] = {Precision::fp32, Precision::tf32, Precision::bf16};
double smooth_tolerance(Precision precision, double tf32_tolerance) {
  if (precision == Precision::fp32) return 1e-4;
  return precision == Precision::bf16 ? 8 * tf32_tolerance : tf32_tolerance;
}
// With relu, the kinks: BF16's roundings move more units across them than TF32's (kKinked allows
// a quarter of a tensor's norm; BF16 twice that, still far below a wrong index's whole norm).
// FP32's errors, about 2^-22 of a product, move no unit across a kink that float arithmetic
// would not (measured on the H200: at most 1.2e-5, as small as the smooth network's), so it is
// held to the smooth network's 1e-4: a relu/max step that ran in TF32 or BF16 fails it.
double kinked_tolerance(Precision precision) {
  if (precision == Precision::fp32) return smooth_tolerance(precision, kKinked);
  return precision == Precision::bf16 ? 2 * kKinked : kKinked;
}

TEST(TensorDenseBackward, MatchesTheCpuReferenceWithinItsPrecisionsRounding) {
  LENET5_REQUIRE_GPU();
  LENET5_REQUIRE_TF32();
  for (const Precision precision : kPrecisions)
    for (const auto& [activation, subsampling] : {std::pair{Activation::tanh, Subsampling::average},
                                                  {Activation::relu, Subsampling::max}}) {
      NetConfig config;
      config.activation = activation;
      config.subsampling = subsampling;
      config.precision = precision;
      const double tolerance = activation == Activation::relu
                                   ? kinked_tolerance(precision)
                                   : smooth_tolerance(precision, kSmooth);
      const ParamLayout layout = lenet5_layout(config);
      const std::vector<float> params = parameters(config, 13);
      for (const int n : {64, 37}) {  // whole tiles, and a short last one
        const std::string what = std::string(to_string(precision)) + " " + to_string(activation) +
                                 "/" + to_string(subsampling) + " n=" + std::to_string(n);
        const Batch batch = make_batch(n, 17 + n);
        const Reference want = reference(config, params, batch, n);
        const GpuResult got = run(config, params, batch, n, 64);
        double largest = 0;
        for (const ParamSpec& spec : layout.tensors) {
          const bool dense = spec.name.rfind("c5.", 0) == 0 || spec.name.rfind("f6.", 0) == 0 ||
                             spec.name.rfind("output.", 0) == 0;
          if (!dense) {  // untouched: still the NaN they were poisoned with
            EXPECT_TRUE(std::isnan(got.gradients[spec.offset])) << what << " " << spec.name;
            continue;
          }
          const double difference =
              relative_l2(got.gradients, want.gradients, spec.offset, spec.count);
          largest = std::max(largest, difference);
          EXPECT_LE(difference, tolerance) << what << " " << spec.name;
        }
        const double d4 = relative_l2(got.d4, want.d4, 0, want.d4.size());
        EXPECT_LE(d4, tolerance) << what << " dL/dS4";
        char text[64];
        std::snprintf(text, sizeof text, "%.2e (dL/dS4 %.2e)", largest, d4);
        RecordProperty(std::string(to_string(precision)) + "_" + to_string(activation) + "_n" +
                           std::to_string(n),
                       text);
        // The reference's own chain (dL/dC5, which its dL/dS4 comes from) agrees with its backward
        // pass: c5.bias's gradient is dL/dC5 summed over the samples (the layer outputs it read are
        // floats, hence 1e-5).
        const ParamSpec& c5_bias = layout.find("c5.bias");
        std::vector<float> chain(want.c5_bias_from_chain.begin(), want.c5_bias_from_chain.end());
        std::vector<double> backward(want.gradients.begin() + std::ptrdiff_t(c5_bias.offset),
                                     want.gradients.begin() + std::ptrdiff_t(c5_bias.offset + 120));
        EXPECT_LE(relative_l2(chain, backward, 0, 120), 1e-5) << what;
        // Deterministic: a second run gives the same bits.
        const GpuResult again = run(config, params, batch, n, 64);
        for (const ParamSpec& spec : layout.tensors) {
          if (std::isnan(got.gradients[spec.offset])) continue;  // not one of the dense tensors
          for (std::size_t i = spec.offset; i < spec.offset + spec.count; ++i)
            ASSERT_EQ(again.gradients[i], got.gradients[i]) << what << " run twice " << spec.name;
        }
        EXPECT_EQ(again.d4, got.d4) << what << " run twice";
      }
    }
}

// The whole backward pass's tolerances, per tensor as above. A convolution's gradient passes
// through up to eleven products (the five of the forward pass, the dense layers' three, C3's input
// gradient, and its own weight product), each rounding both operands to TF32; the roundings are
// independent, so their errors add in quadrature over the long sums and stay a few 1e-3 relative to
// the tensor's norm, and kSmoothWhole, 2e-2, also holds for a worst case in which the eleven add up
// linearly (11 x 2^-10). With relu and max subsampling, a rounding may also move a C1 or C3
// window's maximum to another of its four positions, or a unit across relu's kink, which moves
// whole rows of gradient: kKinked again only catches what is grossly wrong, and the smooth network
// checks the same code closely.
constexpr double kSmoothWhole = 2e-2;

TEST(TensorBackward, EveryGradientMatchesTheCpuReferenceWithinItsPrecisionsRounding) {
  LENET5_REQUIRE_GPU();
  LENET5_REQUIRE_TF32();
  struct Case {
    Activation activation;
    Subsampling subsampling;
    C3Table table;
  };
  // The book's network, the default config's, the book's with LeCun's partial C3 table, whose
  // disconnected weights must get no gradient, and LeCun's scaled tanh and the sigmoid, whose
  // slopes come from stored activations near their bounds.
  for (const Precision precision : kPrecisions)
    for (const Case& c : {Case{Activation::tanh, Subsampling::average, C3Table::full},
                          Case{Activation::relu, Subsampling::max, C3Table::full},
                          Case{Activation::tanh, Subsampling::average, C3Table::lecun},
                          Case{Activation::scaled_tanh, Subsampling::average, C3Table::lecun},
                          Case{Activation::sigmoid, Subsampling::max, C3Table::full}}) {
      NetConfig config;
      config.activation = c.activation;
      config.subsampling = c.subsampling;
      config.c3_table = c.table;
      config.precision = precision;
      // Max subsampling's windows can change their maximum under a rounding, as relu's units
      // can cross the kink: kinked for either.
      const double tolerance = c.activation == Activation::relu || c.subsampling == Subsampling::max
                                   ? kinked_tolerance(precision)
                                   : smooth_tolerance(precision, kSmoothWhole);
      const ParamLayout layout = lenet5_layout(config);
      const std::vector<float> params = parameters(config, 13);
      const std::vector<float> mask = c3_weight_mask(config);
      for (const int n : {64, 37}) {  // whole tiles, and a short last one (of 16 and of 8)
        const std::string what = std::string(to_string(precision)) + " " + to_string(c.activation) +
                                 "/" + to_string(c.subsampling) + "/" + to_string(c.table) +
                                 " n=" + std::to_string(n);
        const Batch batch = make_batch(n, 17 + n);
        const Reference want = reference(config, params, batch, n);
        const std::vector<float> got = run_whole(config, params, batch, n, 64);
        std::string differences;
        for (const ParamSpec& spec : layout.tensors) {
          const double difference = relative_l2(got, want.gradients, spec.offset, spec.count);
          EXPECT_LE(difference, tolerance) << what << " " << spec.name;
          char text[64];
          std::snprintf(text, sizeof text, "%s %.2e ", spec.name.c_str(), difference);
          differences += text;
        }
        RecordProperty(std::string(to_string(precision)) + "_" + to_string(c.activation) + "_" +
                           to_string(c.subsampling) + "_" + to_string(c.table) + "_n" +
                           std::to_string(n),
                       differences);
        const std::size_t c3 = layout.find("c3.weight").offset;
        for (std::size_t i = 0; i < mask.size(); ++i)
          if (mask[i] == 0.0f)
            ASSERT_EQ(got[c3 + i], 0.0f) << what << " disconnected c3.weight " << i;
        // Deterministic: a second run gives the same bits for every tensor.
        const std::vector<float> again = run_whole(config, params, batch, n, 64);
        for (const ParamSpec& spec : layout.tensors)
          for (std::size_t i = spec.offset; i < spec.offset + spec.count; ++i)
            ASSERT_EQ(again[i], got[i]) << what << " run twice " << spec.name;
      }
    }
}

// The batches a run's last step can have: a single sample (every k-step but the first lane's past
// the batch, 15 of the 16 rows padding), fewer samples than a k-step (5), exactly one (8), and half
// a tile (24), with buffers sized for a batch of 128 (rows past the batch never read), and the
// step's statistics that the pass adds. The smooth network, so that kSmoothWhole checks every
// tensor closely.
TEST(TensorBackward, ShortBatchesMatchTheCpuReference) {
  LENET5_REQUIRE_GPU();
  LENET5_REQUIRE_TF32();
  for (const Precision precision : kPrecisions) {
    NetConfig config;
    config.activation = Activation::tanh;
    config.subsampling = Subsampling::average;
    config.precision = precision;
    const ParamLayout layout = lenet5_layout(config);
    const std::vector<float> params = parameters(config, 13);
    const double tolerance = smooth_tolerance(precision, kSmoothWhole);
    for (const int n : {1, 5, 8, 24}) {
      const std::string what = std::string(to_string(precision)) + " n=" + std::to_string(n);
      const Batch batch = make_batch(n, 17 + n);
      const Reference want = reference(config, params, batch, n);
      const std::vector<float> got = run_whole(config, params, batch, n, 128);
      for (const ParamSpec& spec : layout.tensors)
        EXPECT_LE(relative_l2(got, want.gradients, spec.offset, spec.count), tolerance)
            << what << " " << spec.name;
      // The step's statistics: the loss within the logits' TF32 rounding (a few 1e-4 of their
      // scale, which moves a loss of order 1 by as much; 1e-3 relative; BF16's 8x, FP32's
      // whole-step's 1e-4), and the correct count exactly unless a rounding moves a sample's first
      // maximum (these untrained weights' logits are close together: one such sample allowed, and
      // with BF16's coarser logits three).
      const double loss_tolerance = smooth_tolerance(precision, 1e-3);
      const auto [once, twice] = step_stats(config, params, batch, n);
      EXPECT_NEAR(once.loss_sum, want.loss.loss_sum, loss_tolerance * want.loss.loss_sum) << what;
      EXPECT_NEAR(once.correct, want.loss.correct, precision == Precision::bf16 ? 3 : 1) << what;
      EXPECT_EQ(twice.loss_sum, 2 * once.loss_sum) << what << ": added to the slot";
      EXPECT_EQ(twice.correct, 2 * once.correct) << what;
    }
  }
}

// train_step gathers its batch in the convolutions' forward kernel and folds SGD's update into the
// gradient's last launch: its parameters, velocity and gradient, and the input field and labels
// it writes, must be, bit for bit, those of the separate launches every other kernel set makes
// (gather_batch or gather_augmented_batch, the gradient, then cuda/kernels/optimizer.cu's SGD
// kernel): for plain SGD, momentum, and Nesterov momentum with weight decay, without and with
// elastic augmentation, through a permutation, with a whole and a short batch. The velocity starts
// non-zero on every tensor (as after a few steps) and zero in the padding, as the engine keeps it.
// The update reads the gradient whatever computed it, so two precisions (the default's and tf32,
// two instances of every convolution kernel) stand for the three; with the full C3 table every
// c3.weight is updated.
TEST(TensorBackward, TrainStepIsTheGatherTheGradientThenTheSgdKernel) {
  LENET5_REQUIRE_GPU();
  LENET5_REQUIRE_TF32();
  SgdSettings plain, momentum, nesterov;
  momentum.momentum = 0.9;
  nesterov.momentum = 0.85;
  nesterov.nesterov = true;
  nesterov.weight_decay = 5e-4;
  Buffer<std::uint32_t> epoch(Device::gpu, 1);
  const std::uint32_t third_epoch = 2;
  epoch.copy_from_host(&third_epoch);
  const cuda::DeviceAugmentation none{};
  const cuda::DeviceAugmentation elastic{test::moderate_augmentation(AugmentKind::elastic), 31,
                                         epoch.data()};
  for (const Precision precision : {Precision::fp32, Precision::tf32})
    for (const SgdSettings& settings : {plain, momentum, nesterov})
      for (const cuda::DeviceAugmentation& augmentation : {none, elastic})
        for (const int n : {64, 37}) {
          NetConfig config;
          config.activation = Activation::relu;
          config.subsampling = Subsampling::max;
          config.precision = precision;
          const std::string what = std::string(to_string(precision)) + " momentum " +
                                   std::to_string(settings.momentum) +
                                   (augmentation.enabled() ? " elastic" : "") +
                                   " n=" + std::to_string(n);
          const ParamLayout layout = lenet5_layout(config);
          const PixelScaling scaling = pixel_scaling(config.input_scaling);
          const std::vector<float> params = parameters(config, 23);
          std::vector<float> velocity(layout.buffer_floats, 0.0f);
          for (const ParamSpec& spec : layout.tensors)
            for (std::size_t i = 0; i < spec.count; ++i)
              velocity[spec.offset + i] = 1e-3f * float(int(i % 11) - 5);
          const Batch batch = make_batch(n, 29);
          DeviceInputs in(batch, params);  // its parameters take the separate step
          std::vector<std::int32_t> reversed(static_cast<std::size_t>(n));
          for (int i = 0; i < n; ++i) reversed[std::size_t(i)] = n - 1 - i;
          Buffer<std::int32_t> indices(Device::gpu, reversed.size());
          indices.copy_from_host(reversed.data());
          const Buffer<float> lr = test::upload({0.07f});
          cuda::TensorBackward backward(config, layout, 64);

          Buffer<float> separate_field(Device::gpu, std::size_t(n) * kInputFloats);
          Buffer<std::uint8_t> separate_labels(Device::gpu, std::size_t(n));
          Buffer<float> separate_gradients(Device::gpu, layout.buffer_floats);  // zeroed
          Buffer<float> separate_velocity = test::upload(velocity);
          if (augmentation.enabled())
            cuda::gather_augmented_batch(in.pixels.data(), in.labels.data(), indices.data(), n,
                                         augmentation, scaling, separate_field.data(),
                                         separate_labels.data(), cudaStreamPerThread);
          else
            cuda::gather_batch(in.pixels.data(), in.labels.data(), indices.data(), n, scaling,
                               separate_field.data(), separate_labels.data(),
                               cudaStreamPerThread);
          backward.gradients(nullptr, separate_labels.data(), n, in.params.data(),
                             separate_gradients.data(), cudaStreamPerThread,
                             separate_field.data());
          cuda::sgd_step(settings, lr.data(), separate_gradients.data(), in.params.data(),
                         settings.momentum > 0 ? separate_velocity.data() : nullptr,
                         layout.buffer_floats, cudaStreamPerThread);

          Buffer<float> fused_field = test::poisoned(std::size_t(n) * kInputFloats);
          Buffer<std::uint8_t> fused_labels(Device::gpu, std::size_t(n));
          Buffer<float> fused_params = test::upload(params);
          Buffer<float> fused_gradients(Device::gpu, layout.buffer_floats);  // zeroed
          Buffer<float> fused_velocity = test::upload(velocity);
          const cuda::BatchGather gathered{in.pixels.data(), in.labels.data(), indices.data(),
                                           augmentation,     scaling,          fused_field.data(),
                                           fused_labels.data()};
          const cuda::SgdStep step{settings, lr.data(), fused_params.data(),
                                   settings.momentum > 0 ? fused_velocity.data() : nullptr};
          backward.train_step(gathered, n, step, fused_gradients.data(), cudaStreamPerThread);
          CUDA_CHECK(cudaStreamSynchronize(cudaStreamPerThread));

          const std::vector<float> updated = test::download(in.params);
          EXPECT_NE(updated, params) << what << ": the separate step moved nothing";
          EXPECT_EQ(test::download(fused_field), test::download(separate_field)) << what;
          std::vector<std::uint8_t> want_labels(static_cast<std::size_t>(n)), got_labels(want_labels);
          separate_labels.copy_to_host(want_labels.data());
          fused_labels.copy_to_host(got_labels.data());
          EXPECT_EQ(got_labels, want_labels) << what;
          EXPECT_EQ(test::download(fused_params), updated) << what;
          EXPECT_EQ(test::download(fused_gradients), test::download(separate_gradients)) << what;
          EXPECT_EQ(test::download(fused_velocity), test::download(separate_velocity)) << what;
        }
}

}  // namespace
}  // namespace lenet5
