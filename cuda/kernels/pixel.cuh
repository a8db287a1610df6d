// MNIST pixel normalisation and the padded input field on the device, shared by the batch gathers
// (cuda/kernels/batch.cu, cuda/kernels/gather_sample.cuh) and the whole-step kernels
// (cuda/engine/whole_step.cu), which gather their sample themselves.
#pragma once

#include <cstdint>

#include "core/shapes.hpp"
#include "cuda/kernels/block_team.cuh"

namespace lenet5::cuda {

// normalise_intensity and normalise_pixel of core/shapes.hpp, (pixel * (1/255) - mean) / std under
// the network's PixelScaling, with each operation rounded as on the host: __fmul_rn/__fsub_rn stop
// nvcc from contracting the multiply and the subtraction into one FMA (a single rounding, which
// would differ in the last bit), and __fdiv_rn is the same IEEE division the host performs.
__device__ inline float normalise_intensity_device(float intensity, PixelScaling scaling) {
  return __fdiv_rn(__fsub_rn(__fmul_rn(intensity, 1.0f / 255.0f), scaling.mean), scaling.std);
}
__device__ inline float normalise_pixel_device(std::uint8_t pixel, PixelScaling scaling) {
  return normalise_intensity_device(float(pixel), scaling);
}

// The field pixel (row-major, kInputSide wide) that holds pixel p of the unpadded image.
__device__ inline int field_index(int image_pixel) {
  const int y = image_pixel / kImageSide + kPad, x = image_pixel % kImageSide + kPad;
  return y * kInputSide + x;
}

// The field's border (rows 0-1 and 30-31 whole, then columns 0-1 and 30-31 of the rows between:
// 240 values) through store(i, background), by a team's threads (thread t takes values t,
// t + team.size, ...): each border value found from its own index, where a walk over the 1,024
// tested each whether it was inside.
template <class Store>
__device__ void fill_field_border(float background, const BlockTeam& team, Store store) {
  constexpr int kBandValues = 2 * kPad * kInputSide;  // rows 0-1 and 30-31
  constexpr int kSideValues = kImageSide * 2 * kPad;  // rows 2-29's four border columns
  for (int b = int(team.thread()); b < kBandValues + kSideValues; b += int(team.size)) {
    int y, x;
    if (b < kBandValues) {
      y = b / kInputSide;
      x = b % kInputSide;
      if (y >= kPad) y += kImageSide;
    } else {
      y = kPad + (b - kBandValues) / (2 * kPad);
      x = (b - kBandValues) % (2 * kPad);
      if (x >= kPad) x += kImageSide;
    }
    store(y * kInputSide + x, background);
  }
}

// A team's threads (thread t takes pixels t, t + team.size, ...) write the padded input field
// through store(i, value): the background in the border and, unless the caller writes the image
// itself (an augmented one, through field_index), the normalised image inside it.
template <class Store>
__device__ void fill_input_field(const std::uint8_t* image, bool border_only, PixelScaling scaling,
                                 const BlockTeam& team, Store store) {
  const float background = normalise_pixel_device(0, scaling);
  if (border_only) {
    fill_field_border(background, team, store);
    return;
  }
  for (int i = int(team.thread()); i < kInputSide * kInputSide; i += int(team.size)) {
    const int y = i / kInputSide - kPad, x = i % kInputSide - kPad;
    const bool inside = y >= 0 && y < kImageSide && x >= 0 && x < kImageSide;
    if (!inside)
      store(i, background);
    else
      store(i, normalise_pixel_device(image[y * kImageSide + x], scaling));
  }
}

}  // namespace lenet5::cuda
