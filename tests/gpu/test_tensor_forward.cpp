// The tensor-core forward pass (cuda/engine/tensor_forward.cuh) against the CPU reference: logits,
// losses and predicted classes for every network option it computes, every tile size, a short
// last tile and a packed group of models; the same bits on every run, in every tile size and
// however many models share a launch; and what it refuses.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/layout.hpp"
#include "core/net_config.hpp"
#include "core/rng.hpp"
#include "cuda/engine/engine_parts.hpp"
#include "cuda/engine/gpu_engine.hpp"
#include "cuda/engine/tensor_forward.cuh"
#include "cuda/runtime/buffer.hpp"
#include "data/batch.hpp"
#include "data/mnist.hpp"
#include "engine/engine.hpp"
#include "engine/network.hpp"
#include "gpu_test_util.hpp"
#include "network_test_util.hpp"

namespace lenet5 {
namespace {

using test::DigitImages;
using Images = DigitImages;

Images make_images(int n, std::uint64_t seed) {
  return test::digit_like_images(n, seed);
}

// The initial weights of `seed`, with non-zero biases that differ from seed to seed.
std::vector<float> parameters(const NetConfig& config, std::uint64_t seed) {
  return test::test_parameters(config, seed, /*bias_phase=*/seed);
}

// The CPU reference's logits (n, 10), in double from the same float weights and images.
std::vector<double> reference_logits(const NetConfig& config, const std::vector<float>& params,
                                     const Images& images, int n) {
  const std::vector<double> input = test::reference_input(config, images.pixels.data(), nullptr, n);
  const auto net = test::reference_network(config, params, input, n);
  return std::vector<double>(net->logits(), net->logits() + std::size_t(n) * kClasses);
}

// What one launch of TensorForward::evaluate wrote, brought back.
struct Results {
  std::vector<double> loss;
  std::vector<std::int32_t> predicted;
  std::vector<float> logits;
};

// params holds the group's models one after another, params_stride floats apart.
Results run(const NetConfig& config, int tile, const std::vector<float>& params,
            const Images& images, int n, int models = 1) {
  const ParamLayout layout = lenet5_layout(config);
  const cuda::TensorForward forward(config, layout, tile);
  Buffer<std::uint8_t> pixels(Device::gpu, images.pixels.size()),
      labels(Device::gpu, std::size_t(n));
  pixels.copy_from_host(images.pixels.data());
  labels.copy_from_host(images.labels.data());
  const Buffer<float> device_params = test::upload(params);
  const std::size_t outputs = std::size_t(models) * std::size_t(n);
  Buffer<double> loss(Device::gpu, outputs);
  Buffer<std::int32_t> predicted(Device::gpu, outputs);
  Buffer<float> logits = test::poisoned(outputs * kClasses);
  // Unwritten losses and classes show too: all bytes 0xFF is a NaN loss and class -1.
  CUDA_CHECK(cudaMemset(loss.data(), 0xFF, loss.bytes()));
  CUDA_CHECK(cudaMemset(predicted.data(), 0xFF, predicted.bytes()));
  cuda::ModelGroup group;
  group.models = models;
  group.params_stride = layout.buffer_floats;
  forward.evaluate(pixels.data(), labels.data(), n, device_params.data(), group, loss.data(),
                   predicted.data(), cudaStreamPerThread, logits.data());
  return {loss.to_vector(), predicted.to_vector(), test::download(logits)};
}

std::string describe(const NetConfig& c) {
  return std::string(to_string(c.activation)) + "/" + to_string(c.subsampling) + "/" +
         to_string(c.c3_table);
}

using NetworkOption = std::tuple<Activation, Subsampling, C3Table>;
std::string option_name(const ::testing::TestParamInfo<NetworkOption>& info) {
  NetConfig config;
  std::tie(config.activation, config.subsampling, config.c3_table) = info.param;
  std::string name = describe(config);
  for (char& c : name)
    if (c == '/' || c == '-') c = '_';
  return name;
}

// The tolerance on the logits, relative to their scale (1 + the largest |logit| of the batch).
// Every product of the five layers has both operands rounded to TF32 (10-bit mantissa: a relative
// error of at most 2^-11 each, so about 2^-10 per product); a layer's rounding errors have random
// signs and add up as its terms do, so each layer errs by about 2^-10 of its outputs' size, and
// the activations and subsampling (1-Lipschitz, a little over for the scaled tanh; max and relu
// included: a rounding that moves a window's maximum moves its value by less than the rounding)
// carry each layer's error on: about 5 x 2^-10 = 5e-3 of the logits' scale over five layers.
// 2e-2 allows four times that; a wrong tap, map or row index moves the logits by a sizeable part
// of their scale.
constexpr double kLogitTolerance = 2e-2;

class TensorForwardOptions : public ::testing::TestWithParam<NetworkOption> {};

TEST_P(TensorForwardOptions, MatchesTheCpuReferenceWithinTf32Rounding) {
  LENET5_REQUIRE_GPU();
  LENET5_REQUIRE_TF32();
  NetConfig config;
  std::tie(config.activation, config.subsampling, config.c3_table) = GetParam();
  const int n = 100;  // a short last tile for every tile size (100 = 6 x 16 + 4 = 3 x 32 + 4)
  const Images images = make_images(n, 5);
  const std::vector<float> params = parameters(config, 21);
  const std::vector<double> want = reference_logits(config, params, images, n);
  double scale = 1;
  for (const double z : want) scale = std::max(scale, 1 + std::fabs(z));
  const double tolerance = kLogitTolerance * scale;
  const Results got = run(config, cuda::TensorForward::kDefaultTile, params, images, n);
  double largest = 0;
  for (int i = 0; i < n; ++i) {
    const double* z = want.data() + std::size_t(i) * kClasses;
    for (int k = 0; k < kClasses; ++k) {
      const double difference = std::fabs(double(got.logits[std::size_t(i) * kClasses + k]) - z[k]);
      largest = std::max(largest, difference);
      ASSERT_LE(difference, tolerance) << describe(config) << " sample " << i << " logit " << k;
    }
    // The loss log(sum exp z) - z[label] moves by at most twice the logits' largest error.
    double top = z[0];
    for (int k = 1; k < kClasses; ++k) top = std::max(top, z[k]);
    double sum = 0;
    for (int k = 0; k < kClasses; ++k) sum += std::exp(z[k] - top);
    const double loss = std::log(sum) + top - z[images.labels[std::size_t(i)]];
    EXPECT_LE(std::fabs(got.loss[std::size_t(i)] - loss), 2 * tolerance) << "sample " << i;
    // The predicted class is the reference's wherever no other logit is within twice the
    // tolerance of the largest.
    int best = 0;
    bool clear = true;
    for (int k = 1; k < kClasses; ++k)
      if (z[k] > z[best]) best = k;
    for (int k = 0; k < kClasses; ++k)
      if (k != best && z[best] - z[k] <= 2 * tolerance) clear = false;
    if (clear) {
      EXPECT_EQ(got.predicted[std::size_t(i)], best) << "sample " << i;
    }
    EXPECT_GE(got.predicted[std::size_t(i)], 0);
    EXPECT_LT(got.predicted[std::size_t(i)], kClasses);
  }
  // In --gtest_output's XML: what the tolerance was checked against.
  char text[32];
  std::snprintf(text, sizeof text, "%.2e", largest / scale);
  RecordProperty("largest_logit_error_relative_to_scale", text);
  // Every tile size computes each sample with the same sums in the same order: the same bits.
  for (const int tile : cuda::TensorForward::tiles()) {
    const Results other = run(config, tile, params, images, n);
    EXPECT_EQ(other.logits, got.logits) << describe(config) << " tile " << tile;
    EXPECT_EQ(other.loss, got.loss) << describe(config) << " tile " << tile;
    EXPECT_EQ(other.predicted, got.predicted) << describe(config) << " tile " << tile;
  }
}

INSTANTIATE_TEST_SUITE_P(
    EveryOption, TensorForwardOptions,
    ::testing::Combine(::testing::Values(Activation::tanh, Activation::sigmoid,
                                         Activation::scaled_tanh, Activation::relu),
                       ::testing::Values(Subsampling::average, Subsampling::max),
                       ::testing::Values(C3Table::full, C3Table::lecun)),
    option_name);

// The default config's network (relu, max subsampling) and the book's (tanh, average): two runs
// give the same bytes, and a model packed with another gets its lone bytes.
TEST(TensorForward, RepeatRunsAndPackedModelsGiveTheSameBits) {
  LENET5_REQUIRE_GPU();
  LENET5_REQUIRE_TF32();
  for (const auto& [activation, subsampling] :
       {std::pair{Activation::relu, Subsampling::max}, {Activation::tanh, Subsampling::average}}) {
    NetConfig config;
    config.activation = activation;
    config.subsampling = subsampling;
    const int n = 77;
    const Images images = make_images(n, 9);
    const std::vector<float> first = parameters(config, 3), second = parameters(config, 4);
    const Results once = run(config, 16, first, images, n);
    const Results again = run(config, 16, first, images, n);
    EXPECT_EQ(once.logits, again.logits) << describe(config);
    EXPECT_EQ(once.loss, again.loss) << describe(config);
    EXPECT_EQ(once.predicted, again.predicted) << describe(config);
    std::vector<float> both = first;
    both.insert(both.end(), second.begin(), second.end());
    const Results packed = run(config, 16, both, images, n, 2);
    const Results alone = run(config, 16, second, images, n);
    const auto model = [n](const auto& values, int m, int per_sample) {
      const auto begin = values.begin() + std::ptrdiff_t(m) * n * per_sample;
      return std::vector<typename std::decay_t<decltype(values)>::value_type>(
          begin, begin + std::ptrdiff_t(n) * per_sample);
    };
    EXPECT_EQ(model(packed.logits, 0, kClasses), once.logits) << describe(config);
    EXPECT_EQ(model(packed.logits, 1, kClasses), alone.logits) << describe(config);
    EXPECT_EQ(model(packed.loss, 1, 1), alone.loss) << describe(config);
    EXPECT_EQ(model(packed.predicted, 1, 1), alone.predicted) << describe(config);
    EXPECT_NE(once.logits, alone.logits) << "the two models' weights differ";
  }
}

// make_images as a Dataset, for the engines.
Dataset as_dataset(const Images& images) {
  Dataset data;
  data.count = int(images.labels.size());
  data.images = images.pixels;
  data.labels = images.labels;
  return data;
}

// --kernels tensor: the GPU engine's training step takes its gradient from the tensor cores
// (TensorBackward, tested against the CPU reference in test_tensor_backward.cpp) and applies the
// same SGD update, so it trains close to whole-step, not to its bits; and it evaluates with the
// tensor cores' forward pass (TensorForward's own bits, not whole-step's fp32 ones), lone or packed
// in a group of models.
//
// How close: each step's gradient differs from fp32's by TF32's rounding, which for this network
// (relu, max subsampling) reaches about 2e-2 of a tensor's norm where a rounding moves a unit
// across relu's kink or a window's maximum to another position (test_tensor_backward.cpp), and
// the 7 steps' displacement, a sum of such gradients taken at slightly different weights, differs
// by about as much. kTrainedTolerance, 0.25 of each tensor's displacement, only catches what is
// grossly wrong: a tensor whose gradient is missing, of the wrong sign or scale (not divided by
// the batch), or a short last batch mishandled (its step is a seventh of the displacement).
constexpr double kTrainedTolerance = 0.25;

TEST(TensorForward, KernelsTensorTrainAndEvaluateOnTheTensorCores) {
  LENET5_REQUIRE_GPU();
  LENET5_REQUIRE_TF32();
  NetConfig config;
  config.activation = Activation::relu;
  config.subsampling = Subsampling::max;
  config.kernels = GpuKernels::tensor;
  NetConfig whole_step = config;
  whole_step.kernels = GpuKernels::whole_step;
  const SgdSettings sgd{0.9, false, 0.0};
  constexpr int kBatch = 32;  // 200 images: 6 steps of 32 and a short last one of 8
  const Dataset train = as_dataset(make_images(200, 11)), test = as_dataset(make_images(150, 12));
  std::vector<float> initial;
  const auto trained = [&](const NetConfig& net, EpochTotals& totals) {
    std::unique_ptr<Engine> engine = make_gpu_engine(net, sgd, kBatch);
    engine->initialise(7);
    initial = engine->parameters();
    engine->set_training_data(train, Augmentation{});
    const int steps = (train.count + kBatch - 1) / kBatch;
    engine->begin_epoch(0, epoch_permutation(7, 0, train.count), std::vector<float>(steps, 0.05f));
    engine->train_steps(0, steps);
    totals = engine->take_epoch_totals();
    return engine;
  };
  EpochTotals tensor_totals, fp32_totals;
  const std::unique_ptr<Engine> tensor = trained(config, tensor_totals),
                                fp32 = trained(whole_step, fp32_totals);
  const std::vector<float> params = tensor->parameters();
  ASSERT_NE(params, fp32->parameters()) << "--kernels tensor trained on whole-step's fp32 kernels";
  test::expect_same_displacement(tensor->layout(), initial, params, fp32->parameters(),
                                 kTrainedTolerance, "--kernels tensor against whole-step");
  // The epoch's statistics, counted from the tensor cores' logits: every sample once, and the
  // mean loss within twice the logits' tolerance of whole-step's, as the evaluation's below.
  EXPECT_EQ(tensor_totals.seen, train.count);
  EXPECT_EQ(fp32_totals.seen, train.count);
  EXPECT_NEAR(tensor_totals.loss_sum / double(train.count),
              fp32_totals.loss_sum / double(train.count), 2 * kLogitTolerance * 10);
  const Evaluation got = tensor->evaluate(test), fp32_got = fp32->evaluate(test);
  const ParamLayout layout = lenet5_layout(config);
  const cuda::TensorForward forward(config, layout);
  DeviceDataset set;
  set.upload(test);
  EvaluationSlots slots;
  const Buffer<float> device_params = test::upload(params);
  const Evaluation want = evaluate_models(forward, set, test, device_params.data(), 0, 1, slots)[0];
  EXPECT_EQ(got.loss_sum, want.loss_sum);
  EXPECT_EQ(got.correct, want.correct);
  EXPECT_EQ(got.confusion, want.confusion);
  EXPECT_NE(got.loss_sum, fp32_got.loss_sum) << "whole-step's fp32 stages evaluated, not TF32";
  // Each loss within twice the logits' tolerance (MatchesTheCpuReferenceWithinTf32Rounding), for
  // logits of a scale well under 10 here.
  EXPECT_NEAR(got.mean_loss(), fp32_got.mean_loss(), 2 * kLogitTolerance * 10);
  // Packed: model 1 of a group gets the lone engine's evaluation, bit for bit.
  const std::unique_ptr<EngineGroup> group = make_gpu_engine_group(config, sgd, kBatch, 2);
  group->model(0).initialise(3);
  group->model(1).set_state(params, tensor->optimizer_state());
  const Evaluation packed = group->model(1).evaluate(test);
  EXPECT_EQ(packed.loss_sum, got.loss_sum);
  EXPECT_EQ(packed.correct, got.correct);
}

TEST(TensorForward, RefusesWhatItDoesNotCompute) {
  LENET5_REQUIRE_GPU();
  const auto refused = [](const NetConfig& config, int tile, const std::string& words) {
    try {
      const cuda::TensorForward forward(config, lenet5_layout(config), tile);
      ADD_FAILURE() << "accepted: " << words;
    } catch (const UsageError& error) {
      EXPECT_NE(std::string(error.what()).find(words), std::string::npos) << error.what();
    }
  };
  NetConfig trainable;
  trainable.subsampling = Subsampling::trainable;
  refused(trainable, 32, "trainable subsampling");
  NetConfig squashed;
  squashed.conv_units = ConvUnits::squashed;
  refused(squashed, 32, "squashed C1 and C3 units");
  NetConfig rbf;
  rbf.output = OutputLayer::rbf;
  refused(rbf, 32, "RBF output layer");
  refused(NetConfig{}, 24, "a tile of 24");
  EXPECT_EQ(cuda::tensor_forward_refusal(NetConfig{}), "");
}

}  // namespace
}  // namespace lenet5
