// The dense layers' backward pass on the tensor cores (cuda/engine/tensor_backward.cuh) against
// the CPU reference: the batch-mean gradients of C5, F6 and the output layer and each sample's
// dL/d(S4's activation), for the default config's network and the book's, at a full and a short
// last tile; the same bits on every run; the other tensors untouched.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "core/activation_math.hpp"
#include "core/layout.hpp"
#include "core/net_config.hpp"
#include "core/rng.hpp"
#include "cuda/engine/tensor_backward.cuh"
#include "cuda/runtime/buffer.hpp"
#include "data/batch.hpp"
#include "engine/network.hpp"
#include "gpu_test_util.hpp"
#include "layers/reference_cpu.hpp"

namespace lenet5 {
namespace {

struct Batch {
  std::vector<std::uint8_t> pixels, labels;
};

// Digit-like images (a random blob of ink on a zero background) and random labels.
Batch make_batch(int n, std::uint64_t seed) {
  SplitMix64 rng(seed);
  Batch batch;
  batch.pixels.assign(std::size_t(n) * kImageBytes, 0);
  for (int i = 0; i < n; ++i) {
    const int top = int(rng.next() % 10), left = int(rng.next() % 10);
    for (int y = top; y < top + 16; ++y)
      for (int x = left; x < left + 14; ++x)
        batch.pixels[std::size_t(i) * kImageBytes + y * 28 + x] = std::uint8_t(rng.next() % 256);
    batch.labels.push_back(std::uint8_t(rng.next() % 10));
  }
  return batch;
}

std::vector<float> parameters(const NetConfig& config, std::uint64_t seed) {
  const ParamLayout layout = lenet5_layout(config);
  std::vector<float> params(layout.buffer_floats);
  initialise_parameters(layout, config, seed, params.data());
  for (const ParamSpec& spec : layout.tensors)
    if (spec.fan_in == 0)
      for (std::size_t i = 0; i < spec.count; ++i)
        params[spec.offset + i] = 0.05f * float(int(i % 7) - 3);
  return params;
}

// The reference in double from the same float weights: the batch-mean gradient of every tensor
// (Network::backward), and dL/d(S4's activation) per sample, from the layer outputs:
// dL/dlogits = (softmax - onehot) / n, then back through the output layer, F6 and C5.
struct Reference {
  std::vector<double> gradients;
  std::vector<double> d4;                  // (n, 400)
  std::vector<double> c5_bias_from_chain;  // dL/dC5 summed over the samples
};
Reference reference(const NetConfig& config, const std::vector<float>& params, const Batch& batch,
                    int n) {
  std::vector<double> input(std::size_t(n) * kInputFloats);
  gather_batch_cpu(batch.pixels.data(), nullptr, n, pixel_scaling(config.input_scaling),
                   input.data());
  Network<double> net(config, Device::cpu, n);
  const std::vector<double> wide(params.begin(), params.end());
  net.parameters().copy_from_host(wide.data());
  net.forward(input.data(), n);
  std::vector<double> d7(std::size_t(n) * kClasses);
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

struct GpuResult {
  std::vector<float> gradients, d4;
};
GpuResult run(const NetConfig& config, const std::vector<float>& params, const Batch& batch, int n,
              int max_batch) {
  const ParamLayout layout = lenet5_layout(config);
  cuda::TensorDenseBackward backward(config, layout, max_batch);
  Buffer<std::uint8_t> pixels(Device::gpu, batch.pixels.size()),
      labels(Device::gpu, std::size_t(n));
  pixels.copy_from_host(batch.pixels.data());
  labels.copy_from_host(batch.labels.data());
  const Buffer<float> device_params = test::upload(params);
  Buffer<float> gradients = test::poisoned(layout.buffer_floats);
  Buffer<float> d4 = test::poisoned(std::size_t(n) * 400);
  backward.dense_gradients(pixels.data(), labels.data(), n, device_params.data(), gradients.data(),
                           d4.data(), cudaStreamPerThread);
  return {test::download(gradients), test::download(d4)};
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

TEST(TensorDenseBackward, MatchesTheCpuReferenceWithinTf32Rounding) {
  LENET5_REQUIRE_GPU();
  LENET5_REQUIRE_TF32();
  for (const auto& [activation, subsampling] :
       {std::pair{Activation::tanh, Subsampling::average}, {Activation::relu, Subsampling::max}}) {
    NetConfig config;
    config.activation = activation;
    config.subsampling = subsampling;
    const double tolerance = activation == Activation::relu ? kKinked : kSmooth;
    const ParamLayout layout = lenet5_layout(config);
    const std::vector<float> params = parameters(config, 13);
    for (const int n : {64, 37}) {  // whole tiles, and a short last one
      const std::string what = std::string(to_string(activation)) + "/" + to_string(subsampling) +
                               " n=" + std::to_string(n);
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
      RecordProperty(std::string(to_string(activation)) + "_n" + std::to_string(n), text);
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

}  // namespace
}  // namespace lenet5
