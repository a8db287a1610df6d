// The network's shapes and constants, defined once: every layer, kernel, engine and figure takes
// them from here. Layout NCHW, float32 throughout.
//   image  (28, 28) bytes        MNIST, 0 = background
//   input  (1, 32, 32)           the image normalised and padded by 2 on each side (Fig 16.2)
//   output (10)                  one logit per class
#pragma once

#include <cstddef>
#include <cstdint>

namespace lenet5 {

constexpr int kImageSide = 28;  // MNIST's images
constexpr int kPad = 2;         // padding on each side of the image
constexpr int kInputSide = kImageSide + 2 * kPad;  // 32
constexpr int kClasses = 10;
constexpr std::size_t kImageBytes = std::size_t(kImageSide) * kImageSide;   // 784
constexpr std::size_t kInputFloats = std::size_t(kInputSide) * kInputSide;  // 1,024
// Samples per forward pass when evaluating or classifying (both engines): large enough to keep
// the GPU busy, small enough that the activations of the CPU engine stay in cache.
constexpr int kEvalBatch = 256;

// How a grey level becomes the network's input: x = (grey/255 - mean) / std, and the padding is
// the value of a black pixel. Which mean and std a network uses is one of its settings
// (core/net_config.hpp's InputScaling); the weights mean nothing under another.
struct PixelScaling {
  float mean;
  float std;
};

// The same for a grey level that need not be an integer (an augmented image's resampled value).
inline float normalise_intensity(float intensity, PixelScaling scaling) {
  return (intensity * (1.0f / 255.0f) - scaling.mean) / scaling.std;
}
inline float normalise_pixel(std::uint8_t pixel, PixelScaling scaling) {
  return normalise_intensity(float(pixel), scaling);
}

// Per-sample shape (C, H, W); fully connected layers use (units, 1, 1).
struct Dims {
  int c = 1, h = 1, w = 1;
  std::size_t size() const { return std::size_t(c) * h * w; }
};

// Valid, stride-1 cross-correlation: C input maps of H x W, M output maps of H_out x W_out, a
// batch of N. Index convention (textbook-figures.md §0.2):
//   X[((n*C + c)*H + h)*W + w], W[((m*C + c)*K + p)*K + q], Y[((n*M + m)*H_out + h)*W_out + w].
struct ConvShape {
  int n = 1, c = 1, h = 1, w = 1, m = 1, k = 1;
  int h_out() const { return h - k + 1; }
  int w_out() const { return w - k + 1; }
};
inline std::size_t x_count(const ConvShape& s) { return std::size_t(s.n) * s.c * s.h * s.w; }
inline std::size_t weight_count(const ConvShape& s) { return std::size_t(s.m) * s.c * s.k * s.k; }
inline std::size_t y_count(const ConvShape& s) {
  return std::size_t(s.n) * s.m * s.h_out() * s.w_out();
}

// Subsampling of K x K windows with stride K.
struct PoolShape {
  int n = 1, c = 1, h = 1, w = 1, k = 2;
  int h_out() const { return h / k; }
  int w_out() const { return w / k; }
};

// Fully connected, Y = W X + b for each sample: W is (out, in), row-major, as F6's 84 x 120
// (the text's "120 x 84", erratum T02, has it transposed).
struct FcShape {
  int n = 1, in = 1, out = 1;
};

}  // namespace lenet5
