// The tensor-core backward pass (cuda/engine/tensor_backward.cuh) against the CPU reference: the
// dense layers' part (the batch-mean gradients of C5, F6 and the output layer and each sample's
// dL/d(S4's activation), the other tensors untouched) and the whole pass (the batch-mean gradient
// of every tensor, none at the C3 table's disconnected weights), for the default config's network
// and the book's, at whole tiles and with a short last tile, and with every unit driven into
// saturation; the same bits on every run; and the training step, which applies SGD's update
// inside its launches, against the separate SGD kernel.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/activation_math.hpp"
#include "core/layout.hpp"
#include "core/net_config.hpp"
#include "core/rng.hpp"
#include "cuda/engine/engine_parts.hpp"
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
// TensorDenseBackward's gradients and dL/dS4, in buffers poisoned with NaN before the call; with
// clusters false, from the forward kernel that GPUs without thread block clusters run.
GpuResult run(const NetConfig& config, const std::vector<float>& params, const Batch& batch, int n,
              int max_batch, bool clusters = true) {
  const ParamLayout layout = lenet5_layout(config);
  cuda::TensorConvBackward convolutions(config, layout, max_batch);  // S4's rows, as in a step
  cuda::TensorDenseBackward backward(config, layout, max_batch, clusters);
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

// `again`'s dense gradients (the tensors that are not NaN in `got`) and dL/dS4 are `got`'s, bit for
// bit.
void expect_same_dense_bits(const GpuResult& again, const GpuResult& got, const ParamLayout& layout,
                            const std::string& what) {
  for (const ParamSpec& spec : layout.tensors) {
    if (std::isnan(got.gradients[spec.offset])) continue;  // not one of the dense tensors
    for (std::size_t i = spec.offset; i < spec.offset + spec.count; ++i)
      ASSERT_EQ(again.gradients[i], got.gradients[i]) << what << " " << spec.name;
  }
  EXPECT_EQ(again.d4, got.d4) << what;
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
        // Deterministic: a second run gives the same bits; and so does the forward kernel of GPUs
        // without thread block clusters (a block a tile), whose products are the cluster's.
        expect_same_dense_bits(run(config, params, batch, n, 64), got, layout, what + " run twice");
        expect_same_dense_bits(run(config, params, batch, n, 64, false), got, layout,
                               what + " a block a tile");
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

// Every tensor's relative difference from the reference checked against `tolerance`, and returned
// as text for RecordProperty ("c1.weight 1.2e-03 s2.bias ...").
std::string expect_every_tensor_within(const ParamLayout& layout, const std::vector<float>& got,
                                       const std::vector<double>& want, double tolerance,
                                       const std::string& what) {
  std::string differences;
  for (const ParamSpec& spec : layout.tensors) {
    const double difference = relative_l2(got, want, spec.offset, spec.count);
    EXPECT_LE(difference, tolerance) << what << " " << spec.name;
    char text[64];
    std::snprintf(text, sizeof text, "%s %.2e ", spec.name.c_str(), difference);
    differences += text;
  }
  return differences;
}

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
        RecordProperty(std::string(to_string(precision)) + "_" + to_string(c.activation) + "_" +
                           to_string(c.subsampling) + "_" + to_string(c.table) + "_n" +
                           std::to_string(n),
                       expect_every_tensor_within(layout, got, want.gradients, tolerance, what));
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

// Beside a batch whose blocks leave no room for the dense ones (two an SM: the convolutions'
// backward kernel's registers and 65 KB of shared memory), the dense products run four tiles a
// block, in a second wave
// (TensorConvBackward::dense_tiles_a_block; eight beside a small batch): every gradient still
// matches the CPU reference as at 64 and 37, in every precision (a tile that no block took would
// stay the poisoned buffer's NaN).
TEST(TensorBackward, DenseBlocksOfFourTilesBesideAFullBatchMatchTheCpuReference) {
  LENET5_REQUIRE_GPU();
  LENET5_REQUIRE_TF32();
  int sms = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int n = 2 * sms;
  for (const Precision precision : kPrecisions) {
    NetConfig config;  // the book's network: smooth, so the close tolerance
    config.precision = precision;
    const ParamLayout layout = lenet5_layout(config);
    const cuda::TensorConvBackward conv(config, layout, n);
    const std::string what = std::string(to_string(precision)) + " n=" + std::to_string(n);
    ASSERT_EQ(conv.dense_tiles_a_block(8), 8) << what << ": beside a small batch";
    ASSERT_EQ(conv.dense_tiles_a_block(n), 4) << what;
    const std::vector<float> params = parameters(config, 13);
    const Batch batch = make_batch(n, 29);
    const Reference want = reference(config, params, batch, n);
    const std::vector<float> got = run_whole(config, params, batch, n, n);
    RecordProperty(std::string(to_string(precision)) + "_n" + std::to_string(n),
                   expect_every_tensor_within(layout, got, want.gradients,
                                              smooth_tolerance(precision, kSmoothWhole), what));
  }
}

// parameters(config, 13) with every unit of S2, S4, C5 and F6 driven into saturation: their
// biases pushed by atanh(0.995) in z (over the scaled tanh's S), alternately up and down, so that
// each sits at about 0.995 of the activation's bound; and the weights below the output layer a
// quarter of their size, so that the inputs' share of z spreads the units over 0.96 to 0.999 of
// the bound (measured, tests' batches) rather than back out of saturation. With the weights as
// they are, or scaled up instead (x8: 60 to 80% of the units past 0.95), the few unsaturated units
// carry the gradients' norm, and slopes taken from rounded activations hardly show in it.
std::vector<float> saturating_parameters(const NetConfig& config) {
  std::vector<float> params = parameters(config, 13);
  const double slope_scale = config.activation == Activation::scaled_tanh ? kScaledTanhS : 1.0;
  const double z = std::atanh(0.995) / slope_scale;
  for (const ParamSpec& spec : lenet5_layout(config).tensors) {
    if (spec.name.rfind("output.", 0) == 0) continue;  // linear: no slope to saturate
    for (std::size_t i = 0; i < spec.count; ++i) {
      float& value = params[spec.offset + i];
      value = spec.fan_in != 0 ? 0.25f * value : value + float(i % 2 ? z : -z);
    }
  }
  return params;
}

// The least share, over S2, S4, C5 and F6, of a layer's units in the batch (the reference's)
// whose activation is past 0.95 and past 0.99 of the activation's bound (1, or the scaled tanh's
// A), from one forward pass.
struct SaturatedShares {
  double past_95 = 1, past_99 = 1;
};
SaturatedShares least_saturated_shares(const NetConfig& config, const std::vector<float>& params,
                                       const Batch& batch, int n) {
  const std::vector<double> input = test::reference_input(config, batch.pixels.data(), nullptr, n);
  const auto net = test::reference_network(config, params, input, n);
  const double bound = config.activation == Activation::scaled_tanh ? kScaledTanhA : 1.0;
  SaturatedShares least;
  for (const char* name : {"s2", "s4", "c5", "f6"}) {
    std::size_t past_95 = 0, past_99 = 0, units = 0;
    for (int i = 0; i < n; ++i)
      for (const LayerOutput& out : net->layer_outputs(i)) {
        if (out.name != name) continue;
        for (const float a : out.values) {
          past_95 += std::fabs(a) >= 0.95 * bound;
          past_99 += std::fabs(a) >= 0.99 * bound;
        }
        units += out.values.size();
      }
    // A layer that no longer goes by its name would otherwise count as saturated (0 / 0).
    if (units == 0) throw Error(std::string("the reference network has no layer ") + name);
    least.past_95 = std::min(least.past_95, double(past_95) / double(units));
    least.past_99 = std::min(least.past_99, double(past_99) / double(units));
  }
  return least;
}

// The saturated network's tolerances. A unit's slope 1 - a^2 (the scaled tanh's alike, in a / A)
// moves by 2 a da / (1 - a^2) of itself when its activation a moves by da; here 1 - a^2 is 0.002
// to 0.08, so the slopes magnify what the activations they are taken from carry (measured on the
// H200, and alike in a CPU emulation of their roundings):
//   bf16 keeps the activations as floats, whose error is the pre-activation's, da = (1 - a^2) dz:
//   the slope moves by 2 a dz, and dz, BF16's operand rounding (2^-9) over the products' small
//   share of z, leaves each slope within a few 1e-3: 1.5e-3 to 1.7e-2 per tensor.
//   Slopes taken from activations rounded to BF16 (what the kernels did before 30bbd34) move by
//   2 a (2^-8 / sqrt(12)) / (1 - a^2) in RMS, 11% at a = 0.99 and 50% at 0.998 (2^-7 over A for
//   the scaled tanh's [1, 2)): 0.14 to 0.58 for every tensor below the output layer (the kernels
//   built with Operands<bf16>::stored rounding to BF16 again). bf16's 5e-2 sits between the two,
//   three times each.
//   tf32 stores the activations rounded to TF32 for its products and takes the slopes from them
//   (tensor_backward.cuh): the same magnification of an ulp 8x smaller (2^-11), 1.9e-2 to 9.7e-2,
//   past kSmoothWhole; 0.2 allows twice that and still fails a wrong index or transpose (a
//   tensor's whole norm).
//   fp32's slopes err by float's own rounding of a, 2^-24 magnified at most 1,000x: 1.4e-5 at
//   most, held to smooth_tolerance's 1e-4 as everywhere.
double saturated_tolerance(Precision precision) {
  if (precision == Precision::fp32) return smooth_tolerance(precision, kSmoothWhole);
  return precision == Precision::bf16 ? 5e-2 : 0.2;
}

// Near saturation, where a slope is a small difference 1 - a^2, every precision still gives the
// reference's gradients: the units of S2, S4, C5 and F6 driven to 0.96-0.999 of the bound, for the
// tanh and LeCun's scaled tanh (whose bound BF16 rounds past), with the smooth subsampling and the
// full C3 table, at whole tiles and with a short last one. The test fails if bf16 took its slopes
// from activations rounded to BF16.
TEST(TensorBackward, SaturatedUnitsKeepTheirSlopesInEveryPrecision) {
  LENET5_REQUIRE_GPU();
  LENET5_REQUIRE_TF32();
  for (const Activation activation : {Activation::tanh, Activation::scaled_tanh})
    for (const int n : {64, 37}) {
      NetConfig config;
      config.activation = activation;
      config.subsampling = Subsampling::average;
      config.c3_table = C3Table::full;
      const ParamLayout layout = lenet5_layout(config);
      const std::vector<float> params = saturating_parameters(config);
      const Batch batch = make_batch(n, 17 + n);
      // Every unit saturated (measured: the least at 0.957 of the bound): one unsaturated unit's
      // slope, near 1, would carry as much of a gradient's norm as thousands of saturated ones.
      // And most past 0.99 (measured: 81% to 98% per layer), where BF16's rounding of a moves the
      // slope by 10% and more.
      const std::string which = std::string(to_string(activation)) + " n=" + std::to_string(n);
      const SaturatedShares shares = least_saturated_shares(config, params, batch, n);
      ASSERT_EQ(shares.past_95, 1.0) << which;
      ASSERT_GE(shares.past_99, 0.75) << which;
      const Reference want = reference(config, params, batch, n);
      for (const Precision precision : kPrecisions) {
        config.precision = precision;
        const std::string what = std::string(to_string(precision)) + " saturated " + which;
        const std::vector<float> got = run_whole(config, params, batch, n, 64);
        RecordProperty(std::string("saturated_") + to_string(precision) + "_" +
                           to_string(activation) + "_n" + std::to_string(n),
                       expect_every_tensor_within(layout, got, want.gradients,
                                                  saturated_tolerance(precision), what));
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

// The network of the training-step test, in `precision`: ReLU and max subsampling, whose first
// maxima the convolutions' kernels keep.
NetConfig step_network(Precision precision) {
  NetConfig config;
  config.activation = Activation::relu;
  config.subsampling = Subsampling::max;
  config.precision = precision;
  return config;
}

// What a training step leaves on the device, downloaded: the parameters, velocity and gradient
// after SGD's update.
struct StepOutcome {
  std::vector<float> params, velocity, gradients;
};

// A case of the train-step test and its inputs: the network, SGD's settings, a batch of n, the
// parameters, a velocity that is not zero on any tensor (as after a few steps) and zero in the
// padding, as the engine keeps it, and the rate.
struct StepCase {
  NetConfig config;
  SgdSettings settings;
  int n;
  ParamLayout layout = lenet5_layout(config);
  std::vector<float> params = parameters(config, 23);
  std::vector<float> velocity = starting_velocity(layout);
  Batch batch = make_batch(n, 29);
  Buffer<float> lr = test::upload({0.07f});

  std::string what() const {
    return std::string(to_string(config.precision)) + " momentum " +
           std::to_string(settings.momentum) + (settings.nesterov ? " nesterov" : "") +
           " n=" + std::to_string(n);
  }
  float* velocity_or_null(Buffer<float>& buffer) const {
    return settings.momentum > 0 ? buffer.data() : nullptr;
  }

  static std::vector<float> starting_velocity(const ParamLayout& layout) {
    std::vector<float> velocity(layout.buffer_floats, 0.0f);
    for (const ParamSpec& spec : layout.tensors)
      for (std::size_t i = 0; i < spec.count; ++i)
        velocity[spec.offset + i] = 1e-3f * float(int(i % 11) - 5);
    return velocity;
  }
};

// The case's batch as the engine gives a step its own: gathered (gather_training_batch) into a
// field (n, 1, 32, 32) and labels.
struct GatheredBatch {
  Buffer<float> field;
  Buffer<std::uint8_t> labels;
  explicit GatheredBatch(const StepCase& c)
      : field(Device::gpu, std::size_t(c.n) * kInputFloats), labels(Device::gpu, std::size_t(c.n)) {
    const DeviceInputs in(c.batch, c.params);
    cuda::gather_training_batch({in.pixels.data(),
                                 in.labels.data(),
                                 nullptr,
                                 {},
                                 pixel_scaling(c.config.input_scaling),
                                 field.data(),
                                 labels.data()},
                                c.n, cudaStreamPerThread);
    CUDA_CHECK(cudaStreamSynchronize(cudaStreamPerThread));  // before `in` is freed
  }
};

StepOutcome download(const Buffer<float>& params, const Buffer<float>& velocity,
                     const Buffer<float>& gradients) {
  CUDA_CHECK(cudaStreamSynchronize(cudaStreamPerThread));
  return {test::download(params), test::download(velocity), test::download(gradients)};
}

// The step as every other kernel set takes it, in separate launches: the gradient, then
// cuda/kernels/optimizer.cu's SGD kernel.
StepOutcome separate_step(const StepCase& c, const GatheredBatch& batch,
                          cuda::TensorBackward& backward) {
  DeviceInputs in(c.batch, c.params);                            // its parameters take the step
  Buffer<float> gradients(Device::gpu, c.layout.buffer_floats);  // zeroed
  Buffer<float> velocity = test::upload(c.velocity);
  backward.gradients(nullptr, batch.labels.data(), c.n, in.params.data(), gradients.data(),
                     cudaStreamPerThread, batch.field.data());
  cuda::sgd_step(c.settings, c.lr.data(), gradients.data(), in.params.data(),
                 c.velocity_or_null(velocity), c.layout.buffer_floats, cudaStreamPerThread);
  return download(in.params, velocity, gradients);
}

// The step as train_step takes it: SGD's update in the gradient's last two launches.
StepOutcome fused_step(const StepCase& c, const GatheredBatch& batch,
                       cuda::TensorBackward& backward) {
  DeviceInputs in(c.batch, c.params);                            // its parameters take the step
  Buffer<float> gradients(Device::gpu, c.layout.buffer_floats);  // zeroed
  Buffer<float> velocity = test::upload(c.velocity);
  backward.train_step(batch.field.data(), batch.labels.data(), c.n,
                      {c.settings, c.lr.data(), in.params.data(), c.velocity_or_null(velocity)},
                      gradients.data(), cudaStreamPerThread);
  return download(in.params, velocity, gradients);
}

// train_step folds SGD's update into the gradient's last two launches: its parameters, velocity
// and gradient must be, bit for bit, those of the separate launches every other kernel set makes,
// for plain SGD, momentum, and Nesterov momentum with weight decay, with a whole and a short
// batch, in every precision; with the full C3 table every c3.weight is updated.
TEST(TensorBackward, TrainStepIsTheGradientThenTheSgdKernel) {
  LENET5_REQUIRE_GPU();
  LENET5_REQUIRE_TF32();
  SgdSettings plain, momentum, nesterov;
  momentum.momentum = 0.9;
  nesterov.momentum = 0.85;
  nesterov.nesterov = true;
  nesterov.weight_decay = 5e-4;
  for (const Precision precision : kPrecisions)
    for (const SgdSettings& settings : {plain, momentum, nesterov})
      for (const int n : {64, 37}) {
        const StepCase c{step_network(precision), settings, n};
        const GatheredBatch batch(c);
        cuda::TensorBackward backward(c.config, c.layout, 64);
        const StepOutcome want = separate_step(c, batch, backward);
        const StepOutcome got = fused_step(c, batch, backward);
        EXPECT_NE(want.params, c.params) << c.what() << ": the separate step moved nothing";
        EXPECT_EQ(got.params, want.params) << c.what();
        EXPECT_EQ(got.gradients, want.gradients) << c.what();
        EXPECT_EQ(got.velocity, want.velocity) << c.what();
      }
}

// Two training steps in a row on the same batch by `backward` (the second from the first's
// parameters and velocity), and then the gradient alone at the parameters they reached.
struct TwoSteps {
  StepOutcome steps;
  std::vector<float> gradient;
};
TwoSteps two_steps_then_the_gradient(const StepCase& c, const GatheredBatch& batch,
                                     cuda::TensorBackward& backward) {
  DeviceInputs in(c.batch, c.params);
  Buffer<float> gradients(Device::gpu, c.layout.buffer_floats);  // zeroed
  Buffer<float> velocity = test::upload(c.velocity);
  const cuda::SgdStep step{c.settings, c.lr.data(), in.params.data(), c.velocity_or_null(velocity)};
  for (int s = 0; s < 2; ++s)
    backward.train_step(batch.field.data(), batch.labels.data(), c.n, step, gradients.data(),
                        cudaStreamPerThread);
  TwoSteps got{download(in.params, velocity, gradients), {}};
  backward.gradients(nullptr, batch.labels.data(), c.n, in.params.data(), gradients.data(),
                     cudaStreamPerThread, batch.field.data());
  got.gradient = download(in.params, velocity, gradients).gradients;
  return got;
}

// The convolutions' slots added in their backward launch (SlotSum::in_backward_launch: the last
// samples' blocks to finish, once every slot is written) leave the parameters, velocity and
// gradients of a launch of their own, bit for bit: over two steps in a row (the second finds the
// counts that the first set back) and the gradient alone after them, in every precision, with
// fewer samples than blocks that add (37: each adds several chunks) and with more samples than the
// GPU has SMs, where SlotSum::by_batch adds them so (and below, in a launch of their own).
TEST(TensorBackward, SlotsAddedInTheBackwardLaunchAreThoseOfTheirOwnLaunch) {
  LENET5_REQUIRE_GPU();
  LENET5_REQUIRE_TF32();
  int sms = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  SgdSettings momentum;
  momentum.momentum = 0.9;
  momentum.weight_decay = 5e-4;
  for (const Precision precision : kPrecisions)
    for (const int n : {37, sms + 5}) {
      const StepCase c{step_network(precision), momentum, n};
      const GatheredBatch batch(c);
      cuda::TensorBackward own(c.config, c.layout, n, cuda::SlotSum::own_launch);
      cuda::TensorBackward in_backward(c.config, c.layout, n, cuda::SlotSum::in_backward_launch);
      const cuda::TensorBackward by_batch(c.config, c.layout, n);
      EXPECT_FALSE(own.adds_slots_in_backward(n)) << c.what();
      EXPECT_TRUE(in_backward.adds_slots_in_backward(n)) << c.what();
      EXPECT_EQ(by_batch.adds_slots_in_backward(n), n > sms) << c.what();
      const TwoSteps want = two_steps_then_the_gradient(c, batch, own);
      const TwoSteps got = two_steps_then_the_gradient(c, batch, in_backward);
      EXPECT_NE(want.steps.params, c.params) << c.what() << ": the steps moved nothing";
      EXPECT_EQ(got.steps.params, want.steps.params) << c.what();
      EXPECT_EQ(got.steps.velocity, want.steps.velocity) << c.what();
      EXPECT_EQ(got.steps.gradients, want.steps.gradients) << c.what();
      EXPECT_EQ(got.gradient, want.gradient) << c.what() << ": the gradient alone";
    }
}

// A step given no batch is refused before anything is launched.
TEST(TensorBackward, TrainStepWithoutItsBatchIsRefused) {
  LENET5_REQUIRE_GPU();
  LENET5_REQUIRE_TF32();
  const StepCase c{step_network(Precision::tf32), SgdSettings{}, 8};
  const GatheredBatch batch(c);
  DeviceInputs in(c.batch, c.params);
  Buffer<float> gradients(Device::gpu, c.layout.buffer_floats);
  cuda::TensorBackward backward(c.config, c.layout, 8);
  const cuda::SgdStep step{c.settings, c.lr.data(), in.params.data(), nullptr};
  EXPECT_THROW(backward.train_step(nullptr, batch.labels.data(), 8, step, gradients.data(),
                                   cudaStreamPerThread),
               Error);
  EXPECT_THROW(backward.train_step(batch.field.data(), nullptr, 8, step, gradients.data(),
                                   cudaStreamPerThread),
               Error);
  CUDA_CHECK(cudaStreamSynchronize(cudaStreamPerThread));
  EXPECT_EQ(test::download(in.params), c.params) << "a refused step changed the parameters";
}

// The pass as a CUDA graph captures it (as an epoch's graph does, capture_graph): its five kernels
// in a chain, each after the one before by a programmatic edge (cuda/engine/dependent_launch.cuh),
// so that the next kernel is scheduled as the one before ends. Where the edges were ordinary ones,
// the results would be the same, only the gaps between the kernels longer: no other test tells.
// Wherever the kernels carry compute capability 9.0 code (the dense forward's clusters run,
// which needs the same code), the launches must be programmatic.
TEST(TensorBackward, CapturedPassChainsItsKernelsByProgrammaticEdges) {
  LENET5_REQUIRE_GPU();
  LENET5_REQUIRE_TF32();
  const NetConfig config = step_network(Precision::tf32);
  const ParamLayout layout = lenet5_layout(config);
  const int n = 37;
  if (!cuda::TensorDenseBackward(config, layout, n).uses_clusters())
    GTEST_SKIP() << "the tensor-core kernels here carry no compute capability 9.0 code (a GPU "
                    "before 9.0, or CMAKE_CUDA_ARCHITECTURES without 90): they launch one after "
                    "another as any stream's";
  cuda::TensorBackward backward(config, layout, n);
  ASSERT_TRUE(backward.launches_programmatic()) << "sm_90 code, yet ordinary launches";
  const DeviceInputs in(make_batch(n, 61), parameters(config, 61));
  Buffer<float> gradients(Device::gpu, layout.buffer_floats);
  const OwnedGraph graph = capture_graph(cudaStreamPerThread, [&] {
    backward.gradients(in.pixels.data(), in.labels.data(), n, in.params.data(), gradients.data(),
                       cudaStreamPerThread);
  });
  std::size_t nodes = 0, edges = 16;
  std::vector<cudaGraphNode_t> from(edges), to(edges);
  std::vector<cudaGraphEdgeData> data(edges);
  CUDA_CHECK(cudaGraphGetNodes(graph.get(), nullptr, &nodes));
  // CUDA 13's signature (12.3-12.9 named it cudaGraphGetEdges_v2).
  CUDA_CHECK(cudaGraphGetEdges(graph.get(), from.data(), to.data(), data.data(), &edges));
  EXPECT_EQ(nodes, 5u) << "the pass is five kernels";
  ASSERT_EQ(edges, 4u) << "the five kernels in a chain";
  for (std::size_t e = 0; e < edges; ++e)
    EXPECT_EQ(int(data[e].type), int(cudaGraphDependencyTypeProgrammatic)) << "edge " << e;
  // Five nodes, four edges, no node with two edges out or two in: one chain (a graph has no cycle).
  const std::set<cudaGraphNode_t> before(from.begin(), from.begin() + 4),
      after(to.begin(), to.begin() + 4);
  EXPECT_EQ(before.size(), 4u) << "a kernel with two after it";
  EXPECT_EQ(after.size(), 4u) << "a kernel with two before it";
}

}  // namespace
}  // namespace lenet5
