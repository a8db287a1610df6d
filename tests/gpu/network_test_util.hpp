// Shared set-up of the GPU suite's tests of whole networks (test_whole_step.cpp,
// test_tensor_forward.cpp, test_tensor_backward.cpp): digit-like images, a network's test weights,
// and the CPU reference network in double with those weights.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/device.hpp"
#include "core/layout.hpp"
#include "core/net_config.hpp"
#include "core/rng.hpp"
#include "core/shapes.hpp"
#include "data/batch.hpp"
#include "engine/network.hpp"

namespace lenet5::test {

// Digit-like images: a random blob of ink on a zero background, so that the padding and the
// background give exact ties for max subsampling (as MNIST does) and the ink gives varied values;
// and random labels.
struct DigitImages {
  std::vector<std::uint8_t> pixels, labels;
};
inline DigitImages digit_like_images(int n, std::uint64_t seed) {
  SplitMix64 rng(seed);
  DigitImages images;
  images.pixels.assign(std::size_t(n) * kImageBytes, 0);
  for (int i = 0; i < n; ++i) {
    const int top = int(rng.next() % 10), left = int(rng.next() % 10);
    for (int y = top; y < top + 16; ++y)
      for (int x = left; x < left + 14; ++x)
        images.pixels[std::size_t(i) * kImageBytes + y * 28 + x] = std::uint8_t(rng.next() % 256);
    images.labels.push_back(std::uint8_t(rng.next() % 10));
  }
  return images;
}

// The initial weights of `seed`, with non-zero biases 0.05 ((i + bias_phase) % 7 - 3), so that a
// bias the kernels forgot to add would show.
inline std::vector<float> test_parameters(const NetConfig& config, std::uint64_t seed,
                                          std::uint64_t bias_phase = 0) {
  const ParamLayout layout = lenet5_layout(config);
  std::vector<float> params(layout.buffer_floats);
  initialise_parameters(layout, config, seed, params.data());
  for (const ParamSpec& spec : layout.tensors)
    if (spec.fan_in == 0)
      for (std::size_t i = 0; i < spec.count; ++i)
        params[spec.offset + i] = 0.05f * float(int((i + bias_phase) % 7) - 3);
  return params;
}

// Images[indices[i]] (indices null: images[i]) for i < n, normalised and padded as the network's
// input, in double.
inline std::vector<double> reference_input(const NetConfig& config, const std::uint8_t* pixels,
                                           const std::int32_t* indices, int n) {
  std::vector<double> input(std::size_t(n) * kInputFloats);
  gather_batch_cpu(pixels, indices, n, pixel_scaling(config.input_scaling), input.data());
  return input;
}

// The CPU reference network in double with the float weights `params`, after its forward pass over
// the m samples of `input` (which it keeps a pointer to: it must outlive the network's use).
inline std::unique_ptr<Network<double>> reference_network(const NetConfig& config,
                                                          const std::vector<float>& params,
                                                          const std::vector<double>& input, int m) {
  auto net = std::make_unique<Network<double>>(config, Device::cpu, m);
  const std::vector<double> wide(params.begin(), params.end());
  net->parameters().copy_from_host(wide.data());
  net->forward(input.data(), m);
  return net;
}

}  // namespace lenet5::test
