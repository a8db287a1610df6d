// The whole-step kernels (cuda/engine/whole_step.cuh) against the CPU reference: the batch gradient
// of every parameter tensor, for every activation, subsampling kind and C3 table, through the
// permutation gather and with a short last batch; and the SGD update they apply. (The engine
// launches on cudaStreamPerThread, cuda/kernels/dense.cuh's kDefaultStream; so do these tests.)
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
#include "core/error.hpp"
#include "core/net_config.hpp"
#include "core/rng.hpp"
#include "core/sgd.hpp"
#include "cuda/engine/whole_step.cuh"
#include "cuda/kernels/batch.cuh"
#include "cuda/runtime/buffer.hpp"
#include "cuda/runtime/runtime.hpp"
#include "data/batch.hpp"
#include "engine/network.hpp"
#include "gpu_test_util.hpp"
#include "layers/reference_cpu.hpp"
#include "layers/sgd_cpu.hpp"
#include "network_test_util.hpp"

namespace lenet5 {
namespace {

// The scaling these tests gather under (the gathers only pass it to the normalisation).
const PixelScaling kMnistScaling = pixel_scaling(InputScaling::mnist);

struct Batch {
  std::vector<std::uint8_t> images, labels;  // a small "data set"
  std::vector<std::int32_t> indices;         // the step's samples, in a shuffled order
};

// test::digit_like_images as a small data set, and a step's samples drawn from it.
Batch make_batch(int set_size, int n, std::uint64_t seed) {
  test::DigitImages images = test::digit_like_images(set_size, seed);
  Batch batch{std::move(images.pixels), std::move(images.labels), {}};
  for (int i = 0; i < n; ++i) batch.indices.push_back(std::int32_t((i * 7 + 3) % set_size));
  return batch;
}

std::vector<float> initial_parameters(const NetConfig& config, std::uint64_t seed) {
  return test::test_parameters(config, seed);
}

// The reference: the CPU network in double, from the same float weights, on a step's input: the
// batch-mean gradient and the loss statistics. `input` and `labels` hold m distinct samples and
// copies[i] says how many of the step's n samples are sample i: backward is linear in dL/dlogits,
// so weighting each distinct sample's (softmax - onehot) by copies[i] / n gives the gradient of
// the whole batch while running only the distinct samples (a batch of 1,000 drawn from 100 images
// costs 100).
struct ReferenceStep {
  std::vector<double> gradients;
  LossStats loss;
};
ReferenceStep reference_on(const NetConfig& config, const std::vector<float>& params,
                           const std::vector<double>& input,
                           const std::vector<std::uint8_t>& labels, const std::vector<int>& copies,
                           int n) {
  const int m = int(labels.size());
  const auto reference = test::reference_network(config, params, input, m);
  Network<double>& net = *reference;
  std::vector<double> dL_dlogits(std::size_t(m) * 10);  // (softmax - onehot) / m
  softmax_cross_entropy_cpu(net.logits(), labels.data(), m, 10, dL_dlogits.data(), nullptr);
  ReferenceStep result;
  for (int i = 0; i < m; ++i) {
    for (int k = 0; k < 10; ++k) dL_dlogits[std::size_t(i) * 10 + k] *= double(copies[i]) * m / n;
    const LossStats one = softmax_cross_entropy_cpu(net.logits() + std::size_t(i) * 10, &labels[i],
                                                    1, 10, static_cast<double*>(nullptr), nullptr);
    result.loss.loss_sum += copies[i] * one.loss_sum;
    result.loss.correct += copies[i] * one.correct;
  }
  net.backward(dL_dlogits.data(), m);
  result.gradients = net.gradients().to_vector();
  return result;
}

std::vector<double> widened(const std::vector<float>& values) {
  return std::vector<double>(values.begin(), values.end());
}

// The reference step on the batch's images, normalised and padded as gather_batch_cpu does.
ReferenceStep reference_step(const NetConfig& config, const std::vector<float>& params,
                             const Batch& batch) {
  std::vector<std::int32_t> distinct;
  std::vector<int> copies;
  for (const std::int32_t index : batch.indices) {
    const auto at = std::find(distinct.begin(), distinct.end(), index);
    if (at != distinct.end()) {
      ++copies[std::size_t(at - distinct.begin())];
      continue;
    }
    distinct.push_back(index);
    copies.push_back(1);
  }
  const int m = int(distinct.size());
  const std::vector<double> input =
      test::reference_input(config, batch.images.data(), distinct.data(), m);
  std::vector<std::uint8_t> labels;
  for (const std::int32_t i : distinct) labels.push_back(batch.labels[i]);
  return reference_on(config, params, input, labels, copies, int(batch.indices.size()));
}

struct DeviceBatch {
  Buffer<std::uint8_t> images, labels;
  Buffer<std::int32_t> indices;
  explicit DeviceBatch(const Batch& b)
      : images(Device::gpu, b.images.size()),
        labels(Device::gpu, b.labels.size()),
        indices(Device::gpu, b.indices.size()) {
    images.copy_from_host(b.images.data());
    labels.copy_from_host(b.labels.data());
    indices.copy_from_host(b.indices.data());
  }
};

// A tensor's largest |got - want|, relative to its largest |want|.
template <class T>
double relative_difference(const ParamSpec& spec, const std::vector<T>& got,
                           const std::vector<double>& want) {
  double scale = 0, worst = 0;
  for (std::size_t i = spec.offset; i < spec.offset + spec.count; ++i) {
    scale = std::max(scale, std::fabs(want[i]));
    worst = std::max(worst, std::fabs(double(got[i]) - want[i]));
  }
  return scale > 0 ? worst / scale : worst;
}

// Each tensor's largest difference, relative to the tensor's largest reference gradient. The
// kernels sum in float, in other orders than the double reference (up to 64 samples x 784
// positions for C1), which leaves relative differences of about 1e-6; 1e-4 is far above that and
// far below what a missing term, a wrong index or a wrong 1/n would give (1e-2 and more).
// `allowance` (one per tensor, in layout order; empty: none) adds what the step's input itself
// may contribute (WholeStepAugmented).
void expect_gradients_match(const ParamLayout& layout, const std::vector<float>& got,
                            const std::vector<double>& want, const std::string& what,
                            const std::vector<double>& allowance = {}) {
  constexpr double kTolerance = 1e-4;
  for (std::size_t t = 0; t < layout.tensors.size(); ++t) {
    const ParamSpec& spec = layout.tensors[t];
    double scale = 0;
    for (std::size_t i = 0; i < spec.count; ++i)
      scale = std::max(scale, std::fabs(want[spec.offset + i]));
    ASSERT_GT(scale, 0.0) << what << " " << spec.name << ": the reference gradient is all zero";
    const double extra = allowance.empty() ? 0.0 : allowance[t];
    EXPECT_LE(relative_difference(spec, got, want), kTolerance + extra)
        << what << " " << spec.name << " (largest |g| " << scale << ", allowance " << extra << ")";
  }
}

// WholeStep::gradients on the GPU for the batch's n samples: the gradient (the padding between
// tensors poisoned with NaN, which the comparisons never read) and the step's statistics. The
// WholeStep is sized for max_batch samples (the engine sizes it for its batch size), and augments
// as `augmentation` says.
struct GpuStep {
  std::vector<float> gradients;
  cuda::StepStats stats;
};
GpuStep gpu_gradients(const NetConfig& config, const std::vector<float>& params, const Batch& batch,
                      int max_batch = 64,
                      const cuda::DeviceAugmentation& augmentation = cuda::DeviceAugmentation{},
                      cuda::SampleBuild build = cuda::SampleBuild::by_grid,
                      cuda::DenseTiles tiles = cuda::DenseTiles::by_batch) {
  const ParamLayout layout = lenet5_layout(config);
  const int n = int(batch.indices.size());
  DeviceBatch device(batch);
  cuda::WholeStep step(config, layout, max_batch);
  Buffer<float> device_params = test::upload(params);
  Buffer<float> gradients(Device::gpu, layout.buffer_floats);
  test::poison(gradients);
  Buffer<cuda::StepStats> stats(Device::gpu, 1);
  stats.zero();
  step.gradients(device.images.data(), device.labels.data(), device.indices.data(), n, augmentation,
                 device_params.data(), gradients.data(), stats.data(), cudaStreamPerThread, build,
                 tiles);
  return {test::download(gradients), stats.to_vector()[0]};
}

std::string describe(const NetConfig& c) {
  return std::string(to_string(c.activation)) + "/" + to_string(c.subsampling) + "/" +
         to_string(c.c3_table);
}

// Every option the whole-step kernels compute: activation, subsampling and C3 table, as test
// parameters, and each combination's test name ("tanh_average_full": alphanumeric or '_').
using NetworkOption = std::tuple<Activation, Subsampling, C3Table>;
auto every_network_option() {
  return ::testing::Combine(::testing::Values(Activation::tanh, Activation::sigmoid,
                                              Activation::scaled_tanh, Activation::relu),
                            ::testing::Values(Subsampling::average, Subsampling::max),
                            ::testing::Values(C3Table::full, C3Table::lecun));
}
std::string network_test_name(const ::testing::TestParamInfo<NetworkOption>& info) {
  NetConfig config;
  std::tie(config.activation, config.subsampling, config.c3_table) = info.param;
  std::string name = describe(config);
  for (char& c : name)
    if (c == '/' || c == '-') c = '_';
  return name;
}

// Two gradients from the GPU equal in every value of every tensor (the padding between tensors,
// poisoned with NaN, is not compared); stops at the first that differs.
void expect_same_gradients(const ParamLayout& layout, const std::vector<float>& a,
                           const std::vector<float>& b, const std::string& what) {
  for (const ParamSpec& spec : layout.tensors)
    for (std::size_t i = 0; i < spec.count; ++i)
      ASSERT_EQ(a[spec.offset + i], b[spec.offset + i])
          << what << " " << spec.name << "[" << i << "]";
}

// The sample kernel's two versions (one and two samples per SM; the grid's size picks one, so a
// lone model and a packed one, or an epoch's full and short batches, may run different ones) give
// the same bits: which one ran must never show in the weights.
void expect_sample_builds_agree(const NetConfig& config, const std::vector<float>& params,
                                const Batch& batch, int max_batch, const std::string& what) {
  const ParamLayout layout = lenet5_layout(config);
  const GpuStep one =
      gpu_gradients(config, params, batch, max_batch, {}, cuda::SampleBuild::one_per_sm);
  const GpuStep two =
      gpu_gradients(config, params, batch, max_batch, {}, cuda::SampleBuild::two_per_sm);
  ASSERT_NO_FATAL_FAILURE(expect_same_gradients(layout, one.gradients, two.gradients, what));
  EXPECT_EQ(one.stats.loss_sum, two.stats.loss_sum) << what;
  EXPECT_EQ(one.stats.correct, two.stats.correct) << what;
}

class WholeStepGradients : public ::testing::TestWithParam<NetworkOption> {};

TEST_P(WholeStepGradients, MatchTheCpuReference) {
  LENET5_REQUIRE_GPU();
  NetConfig config;
  config.kernels = GpuKernels::whole_step;
  std::tie(config.activation, config.subsampling, config.c3_table) = GetParam();
  const ParamLayout layout = lenet5_layout(config);
  const std::vector<float> params = initial_parameters(config, 11);
  for (const int n : {64, 37}) {  // a full batch and a short last one
    const Batch batch = make_batch(100, n, 3 + n);
    const GpuStep result = gpu_gradients(config, params, batch);
    const std::vector<float>& got = result.gradients;
    expect_gradients_match(layout, got, reference_step(config, params, batch).gradients,
                           describe(config) + " n=" + std::to_string(n));
    const cuda::StepStats totals = result.stats;
    EXPECT_GE(totals.correct, 0);
    EXPECT_LE(totals.correct, n);
    EXPECT_TRUE(std::isfinite(totals.loss_sum) && totals.loss_sum > 0);
    // The C3 weights that the LeCun table disconnects get exactly no gradient.
    const std::vector<float> mask = c3_weight_mask(config);
    const std::size_t c3 = layout.find("c3.weight").offset;
    for (std::size_t i = 0; i < mask.size(); ++i)
      if (mask[i] == 0.0f) ASSERT_EQ(got[c3 + i], 0.0f) << "c3.weight[" << i << "]";
    ASSERT_NO_FATAL_FAILURE(expect_sample_builds_agree(
        config, params, batch, 64, describe(config) + " n=" + std::to_string(n)));
  }
}

INSTANTIATE_TEST_SUITE_P(EveryOption, WholeStepGradients, every_network_option(),
                         network_test_name);

// ---- --precision tf32: C3's stages on the tensor cores, and from batch 256 the dense weights' --
// ---- gradient sums (whole_step_tf32.cuh, whole_step_update.cuh) -------------------------------

// A tensor's ||got - want|| / ||want|| (L2 norms over the tensor).
double relative_l2(const ParamSpec& spec, const std::vector<float>& got,
                   const std::vector<double>& want) {
  double difference = 0, norm = 0;
  for (std::size_t i = spec.offset; i < spec.offset + spec.count; ++i) {
    difference += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    norm += want[i] * want[i];
  }
  return std::sqrt(difference / norm);
}

class WholeStepTf32 : public ::testing::TestWithParam<NetworkOption> {};

// The gradients against the same double CPU reference as WholeStepGradients, each tensor in the
// L2 norm relative to the reference's. C3's operands, and from a batch of 256 on the dense weight
// gradients' (in the update kernel), are rounded to TF32's 10-bit mantissa (a relative error of up
// to 2^-11 = 4.9e-4 each), and every tensor inherits C3's: for the smooth networks (average
// subsampling, tanh, sigmoid or scaled tanh) the difference measured 1.8e-4 to 5.1e-4 on the H200
// (2026-11-27; recorded in --gtest_output's XML), and kSmooth allows 2e-3, far below what a wrong
// index gives (a tap off by one: about 0.2, in an emulation of these stages on the host) or a
// wrong 1/n (1/63 for 1/64: 1.6e-2). With max subsampling or relu a rounding may move a window's
// maximum to its neighbour or a unit across relu's kink, which moves that element's gradient
// whole: 3e-3 to 0.11 measured on these small random batches, so kKinked, 0.25, only catches what
// is grossly wrong there; the stages are the same code in every network, which the smooth ones
// check closely. Also, in every network: the tensor cores ran (C3's weight gradient is not fp32's,
// bit for bit, and from a batch of 256 on the dense weights' tiles change exactly those three
// tensors), the LeCun table's disconnected weights get exactly no gradient, and the two versions
// of the sample kernel give the same bits.
TEST_P(WholeStepTf32, GradientsMatchTheCpuReferenceWithinTf32Rounding) {
  LENET5_REQUIRE_GPU();
  LENET5_REQUIRE_TF32();
  constexpr double kSmooth = 2e-3, kKinked = 0.25;
  NetConfig config;
  config.kernels = GpuKernels::whole_step;
  std::tie(config.activation, config.subsampling, config.c3_table) = GetParam();
  NetConfig fp32 = config;
  config.precision = Precision::tf32;
  const bool kinked =
      config.subsampling == Subsampling::max || config.activation == Activation::relu;
  const double tolerance = kinked ? kKinked : kSmooth;
  const ParamLayout layout = lenet5_layout(config);
  const std::vector<float> params = initial_parameters(config, 11);
  // 256 and 300: the dense weights' sums on the tensor cores too (kMmaMinBatch; 300 in a WholeStep
  // sized for 512, with steps of 8 samples that end inside a part of the batch); 64 and 37 (a short
  // last batch): C3's stages only.
  for (const auto& [n, max_batch] : {std::pair{256, 256}, {300, 512}, {64, 64}, {37, 64}}) {
    const Batch batch = make_batch(100, n, 3 + n);
    const std::string what = describe(config) + " n=" + std::to_string(n);
    const GpuStep result = gpu_gradients(config, params, batch, max_batch);
    const std::vector<double> want = reference_step(config, params, batch).gradients;
    double largest = 0;
    for (const ParamSpec& spec : layout.tensors) {
      const double difference = relative_l2(spec, result.gradients, want);
      largest = std::max(largest, difference);
      EXPECT_LE(difference, tolerance) << what << " " << spec.name;
    }
    // In --gtest_output's XML: what the tolerances above were chosen from.
    char text[32];
    std::snprintf(text, sizeof text, "%.2e", largest);
    RecordProperty("largest_relative_l2_n" + std::to_string(n), text);
    const auto same_bits = [&](const std::vector<float>& other, const ParamSpec& spec) {
      return std::equal(other.begin() + std::ptrdiff_t(spec.offset),
                        other.begin() + std::ptrdiff_t(spec.offset + spec.count),
                        result.gradients.begin() + std::ptrdiff_t(spec.offset));
    };
    const std::vector<float> floats = gpu_gradients(fp32, params, batch, max_batch).gradients;
    EXPECT_FALSE(same_bits(floats, layout.find("c3.weight")))
        << what << ": C3's weight gradient is fp32's to the bit; did the tensor cores run?";
    // The same step with the dense weights summed by the fp32 tiles: from a batch of 256 on, the
    // tensor cores' tiles changed those three tensors and nothing else; below, nothing.
    const std::vector<float> fp32_tiles =
        gpu_gradients(config, params, batch, max_batch, {}, cuda::SampleBuild::by_grid,
                      cuda::DenseTiles::fp32)
            .gradients;
    for (const ParamSpec& spec : layout.tensors) {
      const bool dense =
          spec.name == "c5.weight" || spec.name == "f6.weight" || spec.name == "output.weight";
      EXPECT_EQ(same_bits(fp32_tiles, spec), !(dense && n >= 256)) << what << " " << spec.name;
    }
    const ParamSpec& c3 = layout.find("c3.weight");
    const std::vector<float> mask = c3_weight_mask(config);
    for (std::size_t i = 0; i < mask.size(); ++i)
      if (mask[i] == 0.0f) ASSERT_EQ(result.gradients[c3.offset + i], 0.0f) << what << " " << i;
    ASSERT_NO_FATAL_FAILURE(expect_sample_builds_agree(config, params, batch, max_batch, what));
  }
}

INSTANTIATE_TEST_SUITE_P(EveryOption, WholeStepTf32, every_network_option(), network_test_name);

// The loss statistics are the reference's: the batch's loss sum and correct count.
TEST(WholeStep, StatisticsMatchTheCpuReference) {
  LENET5_REQUIRE_GPU();
  NetConfig config;
  config.kernels = GpuKernels::whole_step;
  const std::vector<float> params = initial_parameters(config, 4);
  const Batch batch = make_batch(80, 64, 8);
  const cuda::StepStats got = gpu_gradients(config, params, batch).stats;
  const LossStats want = reference_step(config, params, batch).loss;
  // Float logits against double ones: the loss sum of 64 samples agrees to ~1e-6 relative.
  EXPECT_NEAR(got.loss_sum, want.loss_sum, 1e-4 * want.loss_sum);
  EXPECT_EQ(got.correct, want.correct);
}

// The update's fp32 dense tiles in their three forms (one, two or four rows a warp, which
// launch_update picks by the grid) sum each weight in the same parts and sample order: the same
// bits, for batches with empty parts (1), parts of unequal size (7, 37), a grid that fits the SMs
// (130) and one that does not (256). Every other tensor comes from the same kernels in all three,
// so it is compared too.
TEST(WholeStep, DenseTileFormsGiveTheSameBits) {
  LENET5_REQUIRE_GPU();
  NetConfig config;
  config.kernels = GpuKernels::whole_step;
  const ParamLayout layout = lenet5_layout(config);
  const std::vector<float> params = initial_parameters(config, 6);
  for (const int n : {1, 7, 37, 130, 256}) {
    const Batch batch = make_batch(100, n, 90 + std::uint64_t(n));
    const GpuStep one = gpu_gradients(config, params, batch, n, {}, cuda::SampleBuild::by_grid,
                                      cuda::DenseTiles::fp32_one_row);
    for (const cuda::DenseTiles form :
         {cuda::DenseTiles::fp32_two_rows, cuda::DenseTiles::fp32_four_rows}) {
      const GpuStep other =
          gpu_gradients(config, params, batch, n, {}, cuda::SampleBuild::by_grid, form);
      ASSERT_NO_FATAL_FAILURE(expect_same_gradients(
          layout, one.gradients, other.gradients,
          "n=" + std::to_string(n) + (form == cuda::DenseTiles::fp32_two_rows ? " two" : " four")));
    }
  }
}

// The whole-step kernels have no trainable subsampling (LeCun et al. 1998): TrainSettings refuses
// the combination for users (tests/cpu/test_cli.cpp); should anything construct it anyway, it is
// an error, never a silent run of average subsampling.
TEST(WholeStep, RefusesTrainableSubsampling) {
  LENET5_REQUIRE_GPU();
  NetConfig config;
  config.kernels = GpuKernels::whole_step;
  config.subsampling = Subsampling::trainable;
  EXPECT_THROW(cuda::WholeStep(config, lenet5_layout(config), 64), Error);
}

// Every network the whole-step kernels compute, as far as their code paths go: each activation
// with each subsampling kind (the C3 table only masks weights), in each precision (tf32 where this
// GPU runs it). `check` gets the network and its name for the failure messages.
template <class Check>
void for_each_whole_step_network(Check check) {
  for (const Activation activation :
       {Activation::tanh, Activation::sigmoid, Activation::scaled_tanh, Activation::relu})
    for (const Subsampling subsampling : {Subsampling::average, Subsampling::max})
      for (const Precision precision : {Precision::fp32, Precision::tf32}) {
        if (precision == Precision::tf32 && !test::tf32_runs_here()) continue;
        NetConfig config;
        config.kernels = GpuKernels::whole_step;
        config.activation = activation;
        config.subsampling = subsampling;
        config.precision = precision;
        check(config, std::string(to_string(activation)) + "/" + to_string(subsampling) + "/" +
                          to_string(precision));
      }
}

// On sm_90 the sample kernel's two versions hold one and two samples per SM, for every activation
// and subsampling kind: the registers and the working set of version 2 leave room for
// both. A change that grows either past that takes back what large batches and packed sweeps
// gain from the second sample without changing a single result, so no other test would notice.
TEST(WholeStep, TwoSamplesShareAnSmOnHopper) {
  LENET5_REQUIRE_GPU();
  int device = 0, major = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), cudaSuccess);
  if (major != 9) GTEST_SKIP() << "the two-sample fit is sized for sm_90; this GPU is sm_" << major;
  for_each_whole_step_network([](const NetConfig& config, const std::string& what) {
    const cuda::WholeStep step(config, lenet5_layout(config), 64);
    EXPECT_EQ(step.samples_per_sm(cuda::SampleBuild::one_per_sm), 1) << what;
    EXPECT_EQ(step.samples_per_sm(cuda::SampleBuild::two_per_sm), 2) << what;
  });
}

// WholeStep::evaluate runs the training step's forward stages: from the same weights and images
// its per-sample losses, summed in sample order, are bit for bit the step's loss statistics (both
// doubles summed in that order from the same floats), and its predictions give the step's correct
// count; for every activation and subsampling kind, and for each model of a group as alone.
TEST(WholeStep, EvaluationSeesTheTrainingStepsLosses) {
  LENET5_REQUIRE_GPU();
  constexpr int n = 50;
  for_each_whole_step_network([](const NetConfig& config, const std::string& what) {
    const ParamLayout layout = lenet5_layout(config);
    const Batch batch = make_batch(n, n, 5);
    DeviceBatch device(batch);
    cuda::WholeStep step(config, layout, n);
    // Two models' weights side by side, as a packed group keeps them.
    const std::size_t stride = (layout.buffer_floats + 31) / 32 * 32;
    std::vector<float> both(2 * stride, 0.0f);
    for (int m = 0; m < 2; ++m) {
      const std::vector<float> params = initial_parameters(config, 13 + std::uint64_t(m));
      std::copy(params.begin(), params.end(), both.begin() + std::ptrdiff_t(m * stride));
    }
    Buffer<float> device_params = test::upload(both);
    Buffer<double> loss(Device::gpu, 2 * n);
    Buffer<std::int32_t> predicted(Device::gpu, 2 * n);
    cuda::ModelGroup group;
    group.models = 2;
    group.params_stride = stride;
    step.evaluate(device.images.data(), device.labels.data(), n, device_params.data(), group,
                  loss.data(), predicted.data(), cudaStreamPerThread);
    cuda::synchronize();
    const std::vector<double> losses = loss.to_vector();
    const std::vector<std::int32_t> classes = predicted.to_vector();
    for (int m = 0; m < 2; ++m) {
      Buffer<float> gradients(Device::gpu, layout.buffer_floats);
      Buffer<cuda::StepStats> stats(Device::gpu, 1);
      stats.zero();
      // indices null: the first n images, in order, as evaluate reads them.
      step.gradients(device.images.data(), device.labels.data(), nullptr, n,
                     cuda::DeviceAugmentation{}, device_params.data() + m * stride,
                     gradients.data(), stats.data(), cudaStreamPerThread);
      cuda::synchronize();
      const cuda::StepStats trained = stats.to_vector()[0];
      double sum = 0;
      std::int64_t correct = 0;
      for (int i = 0; i < n; ++i) {
        sum += losses[std::size_t(m * n + i)];
        correct += classes[std::size_t(m * n + i)] == batch.labels[std::size_t(i)];
      }
      EXPECT_EQ(sum, trained.loss_sum) << what << " model " << m;
      EXPECT_EQ(correct, trained.correct) << what << " model " << m;
    }
    EXPECT_NE(losses[0], losses[std::size_t(n)]) << what << ": the two models should differ";
  });
}

// train_step applies exactly sgd_step_cpu to the gradient that gradients() computes: the update
// is the same formula, so the result must be bit for bit the CPU update of that gradient (with
// --precision tf32 at a batch of 256 too, where the tensor cores' dense tiles apply it).
void check_train_step_update(Precision precision, const SgdSettings& sgd) {
  NetConfig config;
  config.kernels = GpuKernels::whole_step;
  config.precision = precision;
  const int n = precision == Precision::tf32 ? 256 : 64;
  const std::string what =
      std::string(to_string(precision)) + ", momentum " + std::to_string(sgd.momentum);
  const ParamLayout layout = lenet5_layout(config);
  const std::vector<float> params = initial_parameters(config, 21);
  const Batch batch = make_batch(n, n, 2);
  DeviceBatch device(batch);
  cuda::WholeStep step(config, layout, n);
  Buffer<float> device_params = test::upload(params);
  Buffer<float> gradients(Device::gpu, layout.buffer_floats);
  gradients.zero();
  step.gradients(device.images.data(), device.labels.data(), device.indices.data(), n,
                 cuda::DeviceAugmentation{}, device_params.data(), gradients.data(), nullptr,
                 cudaStreamPerThread);
  // A non-zero velocity in every tensor (the padding between tensors stays zero, as in training).
  std::vector<float> velocity(layout.buffer_floats, 0.0f);
  for (const ParamSpec& spec : layout.tensors)
    for (std::size_t i = 0; i < spec.count; ++i) velocity[spec.offset + i] = 1e-3f * float(i % 5);
  Buffer<float> device_velocity = test::upload(velocity);
  const float lr = 0.05f;
  Buffer<float> device_lr = test::upload({lr});
  step.train_step(device.images.data(), device.labels.data(), device.indices.data(), n,
                  cuda::DeviceAugmentation{}, sgd, device_lr.data(), device_params.data(),
                  device_velocity.data(), nullptr, cudaStreamPerThread);
  std::vector<float> want_params = params, want_velocity = velocity;
  const std::vector<float> g = test::download(gradients);
  // The padding between tensors has no gradient: the update leaves it alone, as the CPU's
  // update of a zero gradient on zero weights does.
  sgd_step_cpu(sgd, lr, g.data(), want_params.data(), want_velocity.data(), g.size());
  EXPECT_EQ(test::download(device_params), want_params) << what;
  if (sgd.momentum != 0) EXPECT_EQ(test::download(device_velocity), want_velocity) << what;
}

TEST(WholeStep, TrainStepAppliesTheSgdUpdateToItsGradient) {
  LENET5_REQUIRE_GPU();
  for (const Precision precision : {Precision::fp32, Precision::tf32})
    for (const SgdSettings sgd :
         {SgdSettings{0, false, 0}, SgdSettings{0.9, false, 0}, SgdSettings{0.9, true, 5e-4}}) {
      if (precision == Precision::tf32 && !test::tf32_runs_here()) continue;
      check_train_step_update(precision, sgd);
    }
}

// Consecutive train_steps on one stream, as in training (with programmatic launches each kernel
// may start before the previous one ends, and must still see its writes): three steps on the
// first n images (no permutation), with another option set, equal bit for bit the same steps
// taken one at a time, each gradient from gradients() and each update by sgd_step_cpu.
TEST(WholeStep, ConsecutiveStepsSeeEachOthersUpdates) {
  LENET5_REQUIRE_GPU();
  NetConfig config;
  config.kernels = GpuKernels::whole_step;
  config.activation = Activation::relu;
  config.subsampling = Subsampling::max;
  config.c3_table = C3Table::lecun;
  const ParamLayout layout = lenet5_layout(config);
  constexpr int n = 37;
  const Batch batch = make_batch(n, n, 5);
  DeviceBatch device(batch);
  const SgdSettings sgd{0.9, true, 5e-4};
  const std::vector<float> rates{0.05f, 0.04f, 0.03f};
  const std::vector<float> params = initial_parameters(config, 7);
  const std::vector<float> velocity(layout.buffer_floats, 0.0f);
  cuda::WholeStep step(config, layout, n);

  Buffer<float> device_params = test::upload(params), device_velocity = test::upload(velocity),
                device_rates = test::upload(rates);
  for (std::size_t k = 0; k < rates.size(); ++k)
    step.train_step(device.images.data(), device.labels.data(), nullptr, n,
                    cuda::DeviceAugmentation{}, sgd, device_rates.data() + k, device_params.data(),
                    device_velocity.data(), nullptr, cudaStreamPerThread);
  const std::vector<float> got = test::download(device_params);
  const std::vector<float> got_velocity = test::download(device_velocity);

  std::vector<float> want = params, want_velocity = velocity;
  Buffer<float> gradients(Device::gpu, layout.buffer_floats);
  for (const float rate : rates) {
    Buffer<float> current = test::upload(want);
    gradients.zero();
    step.gradients(device.images.data(), device.labels.data(), nullptr, n,
                   cuda::DeviceAugmentation{}, current.data(), gradients.data(), nullptr,
                   cudaStreamPerThread);
    const std::vector<float> g = test::download(gradients);
    sgd_step_cpu(sgd, rate, g.data(), want.data(), want_velocity.data(), g.size());
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(got_velocity, want_velocity);
}

// The batch sizes the command line is tried with (--batch-size 1 to 60,000): one sample, the
// default, the powers of two around it and 1,000, and 7 and 130, which the update kernel sums in
// quarters of unequal length (1, 2, 2, 2 and 32, 33, 32, 33 samples). The WholeStep is sized for
// exactly n samples, as the engine sizes it for its batch, so that a record or statistics buffer
// one sample short shows. A batch above 100 samples repeats the 100 images of the set, each up to
// ceil(n / 100) times (the reference runs each distinct image once and weights it by its copies).
// The tolerance is expect_gradients_match's 1e-4 at every n: what grows with n is the update
// kernel's float sum of the n records in sample order, and emulating that sum on these images
// (each sample's double gradient rounded to float, added in order) left 2e-6 relative at
// n = 1,000 (3e-7 at 64), while one sample dropped or counted twice moves a tensor by about
// 1 / n of a per-sample gradient several times the mean, 5e-3 at n = 1,000.
class WholeStepBatchSizes : public ::testing::TestWithParam<int> {};

TEST_P(WholeStepBatchSizes, GradientsMatchTheCpuReference) {
  LENET5_REQUIRE_GPU();
  const int n = GetParam();
  NetConfig config;
  config.kernels = GpuKernels::whole_step;
  const ParamLayout layout = lenet5_layout(config);
  const std::vector<float> params = initial_parameters(config, 11);
  constexpr int kSetSize = 100;
  const Batch batch = make_batch(kSetSize, n, 40 + std::uint64_t(n));
  const GpuStep got = gpu_gradients(config, params, batch, /*max_batch=*/n);
  const ReferenceStep want = reference_step(config, params, batch);
  expect_gradients_match(layout, got.gradients, want.gradients, "n=" + std::to_string(n));
  // Float logits against double ones: the loss sum agrees to ~1e-6 relative, as in
  // StatisticsMatchTheCpuReference. A prediction flips only at a near tie of the top two logits
  // (1e-6 apart); allow one such image, with all its copies.
  EXPECT_NEAR(got.stats.loss_sum, want.loss.loss_sum, 1e-4 * want.loss.loss_sum);
  EXPECT_LE(std::abs(got.stats.correct - want.loss.correct), (n + kSetSize - 1) / kSetSize);
}

INSTANTIATE_TEST_SUITE_P(CommandLineBatchSizes, WholeStepBatchSizes,
                         ::testing::Values(1, 7, 64, 128, 130, 256, 1000));

// WholeStep with augmentation: each sample's image is augmented inside the sample kernel
// (load_image -> augment_sample), keyed by (seed, the epoch in device memory, the sample's index).
// Two references, both the CPU network in double:
//  - on the GPU's own augmented batch (gather_augmented_batch, the same device function,
//    augment_sample): only the network's arithmetic differs, so expect_gradients_match's 1e-4
//    holds as without augmentation (were the compiler to contract the two kernels' float
//    operations differently, their source positions would differ by a few roundings, ~1e-5 px,
//    far below what 1e-4 notices). A wrong key, epoch or sample index gives other images and
//    fails it.
//  - on the double reference's augmented batch (gather_augmented_batch_reference), as a run on the
//  CPU
//    engine would see it: the inputs now differ by the augmentation's float rounding too (within
//    augmented_pixel_tolerance, checked here), so each tensor is allowed 1e-4 plus the difference
//    that this input difference alone makes to the reference's gradient, computed exactly (both
//    references in double): |g_gpu - g_ref(x_cpu)| <= |g_gpu - g_ref(x_gpu)| +
//    |g_ref(x_gpu) - g_ref(x_cpu)|.
struct AugmentedStep {
  const char* name;
  AugmentSettings settings;
};
// Moderate affine and elastic settings, and elastic with every sample seen as a small scan (the
// resolution stage's staging in shared memory, inside the whole-step kernel).
const std::vector<AugmentedStep>& augmented_steps() {
  static const std::vector<AugmentedStep> steps = [] {
    AugmentSettings scanned = test::moderate_augmentation(AugmentKind::elastic);
    scanned.low_resolution = 1;
    scanned.low_resolution_scan = 8;
    return std::vector<AugmentedStep>{
        {"affine", test::moderate_augmentation(AugmentKind::affine)},
        {"elastic", test::moderate_augmentation(AugmentKind::elastic)},
        {"elastic_low_resolution", scanned}};
  }();
  return steps;
}

class WholeStepAugmented : public ::testing::TestWithParam<int> {};

TEST_P(WholeStepAugmented, GradientsMatchTheCpuReferenceOnTheAugmentedBatch) {
  LENET5_REQUIRE_GPU();
  NetConfig config;
  config.kernels = GpuKernels::whole_step;
  const ParamLayout layout = lenet5_layout(config);
  const std::vector<float> params = initial_parameters(config, 13);
  constexpr int n = 64;
  const Batch batch = make_batch(100, n, 17);  // 64 distinct images
  const AugmentedStep& step = augmented_steps()[std::size_t(GetParam())];
  const Augmentation augmentation{step.settings, 29};
  const std::uint32_t epoch = 3;  // not 0: the epoch must come from the device buffer
  const Buffer<std::uint32_t> device_epoch = test::upload<std::uint32_t>({epoch});
  const cuda::DeviceAugmentation on_device{augmentation.settings, augmentation.seed,
                                           device_epoch.data()};
  const std::string what = std::string(step.name) + " epoch 3";

  DeviceBatch device(batch);
  Buffer<float> gathered = test::poisoned(std::size_t(n) * kInputFloats);
  cuda::gather_augmented_batch(device.images.data(), nullptr, device.indices.data(), n, on_device,
                               kMnistScaling, gathered.data(), nullptr, cudaStreamPerThread);
  const std::vector<float> gpu_input = test::download(gathered);
  std::vector<float> cpu_input(std::size_t(n) * kInputFloats);
  gather_augmented_batch_reference(batch.images.data(), batch.indices.data(), n, augmentation,
                                   epoch, kMnistScaling, cpu_input.data());
  for (int i = 0; i < n; ++i) {
    const double tolerance = test::augmented_pixel_tolerance(
        augmentation.settings, augmentation.seed, epoch, std::uint32_t(batch.indices[i]));
    for (std::size_t p = 0; p < kInputFloats; ++p) {
      const std::size_t at = std::size_t(i) * kInputFloats + p;
      ASSERT_LE(std::fabs(double(gpu_input[at]) - double(cpu_input[at])), tolerance)
          << what << " sample " << i << " pixel " << p;
    }
  }

  std::vector<std::uint8_t> labels;
  for (const std::int32_t i : batch.indices) labels.push_back(batch.labels[i]);
  const std::vector<int> once(n, 1);
  const ReferenceStep on_gpu_input =
      reference_on(config, params, widened(gpu_input), labels, once, n);
  const ReferenceStep on_cpu_input =
      reference_on(config, params, widened(cpu_input), labels, once, n);
  const GpuStep got = gpu_gradients(config, params, batch, n, on_device);

  expect_gradients_match(layout, got.gradients, on_gpu_input.gradients,
                         what + ", reference on the GPU's augmented input");
  std::vector<double> allowance;
  for (const ParamSpec& spec : layout.tensors)
    allowance.push_back(relative_difference(spec, on_gpu_input.gradients, on_cpu_input.gradients));
  expect_gradients_match(layout, got.gradients, on_cpu_input.gradients,
                         what + ", reference on the CPU's augmented input", allowance);
  for (std::size_t t = 0; t < allowance.size(); ++t)
    RecordProperty(layout.tensors[t].name + ".augmentation_allowance",
                   std::to_string(allowance[t]));
  // The statistics, as in WholeStepBatchSizes (one near-tie prediction may flip).
  EXPECT_NEAR(got.stats.loss_sum, on_gpu_input.loss.loss_sum, 1e-4 * on_gpu_input.loss.loss_sum);
  EXPECT_LE(std::abs(got.stats.correct - on_gpu_input.loss.correct), 1);
  // The augmentation changes the step: the plain batch's gradient is far (over 1e-2 relative in
  // some tensor) from the augmented one, so the matches above are not the plain step's.
  const ReferenceStep plain = reference_step(config, params, batch);
  double largest = 0;
  for (const ParamSpec& spec : layout.tensors)
    largest = std::max(largest, relative_difference(spec, plain.gradients, on_gpu_input.gradients));
  EXPECT_GT(largest, 1e-2) << what << ": the augmented step's gradient is the plain step's";
}

INSTANTIATE_TEST_SUITE_P(AffineAndElastic, WholeStepAugmented,
                         ::testing::Range(0, int(augmented_steps().size())), [](const auto& info) {
                           return std::string(augmented_steps()[std::size_t(info.param)].name);
                         });

}  // namespace
}  // namespace lenet5
