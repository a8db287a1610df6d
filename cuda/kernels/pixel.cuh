// MNIST pixel normalisation on the device, shared by the batch gather (cuda/kernels/batch.cu) and the
// whole-step kernels (cuda/engine/whole_step.cu), which gathers its sample itself.
#pragma once

#include <cstdint>

#include "core/shapes.hpp"

namespace lenet5::cuda {

// normalise_intensity and normalise_pixel of core/shapes.hpp, (pixel * (1/255) - mean) / std, with each operation rounded
// as on the host: __fmul_rn/__fsub_rn stop nvcc from contracting the multiply and the subtraction
// into one FMA (a single rounding, which would differ in the last bit), and __fdiv_rn is the same
// IEEE division the host performs.
__device__ inline float normalise_intensity_device(float intensity) {
  return __fdiv_rn(__fsub_rn(__fmul_rn(intensity, 1.0f / 255.0f), kPixelMean), kPixelStd);
}
__device__ inline float normalise_pixel_device(std::uint8_t pixel) {
  return normalise_intensity_device(float(pixel));
}

}  // namespace lenet5::cuda
