// Turning MNIST bytes into the network's input: x = (pixel/255 - mean) / std, and the 28x28 image
// centred in a 32x32 field (padded by 2 on each side, book Fig 16.2) whose border is the
// normalised value of a black pixel.
#pragma once

#include <cstdint>

namespace lenet5 {

// MNIST training-set statistics (the usual values, mean 0.1307 and std 0.3081 of pixel/255).
constexpr float kPixelMean = 0.1307f;
constexpr float kPixelStd = 0.3081f;
constexpr int kPad = 2;

inline float normalise_pixel(std::uint8_t pixel) {
  return (float(pixel) * (1.0f / 255.0f) - kPixelMean) / kPixelStd;
}

// out (n, 1, 32, 32) <- images[indices[i]] (each 28*28 bytes). indices null means 0..n-1.
template <class T>
void gather_batch_cpu(const std::uint8_t* images, const std::int32_t* indices, int n, T* out);

}  // namespace lenet5
