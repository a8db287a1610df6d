// The augmentation on the device (core/augment.hpp says what it is; data/augment.hpp holds the
// double reference it is tested against). One block augments one sample: the same draws from the
// same keys, the affine map in double as on the host, the elastic field and the resampling in
// float. Two callers share it: the whole-step kernels fold it into their input gather, and
// gather_augmented_batch (cuda/kernels/batch.cuh) serves the book and fast kernel sets.
#pragma once

#include <cstdint>

#include "core/augment.hpp"
#include "core/shapes.hpp"

namespace lenet5::cuda {

// What a kernel needs to augment its samples. The epoch is read from device memory, so that an
// epoch captured once in a CUDA graph replays with each epoch's own value.
struct DeviceAugmentation {
  AugmentSettings settings;
  std::uint64_t seed = 0;
  const std::uint32_t* epoch = nullptr;  // device; one value
  LENET5_HD bool enabled() const { return settings.kind != AugmentKind::none; }
};

// The widest Gaussian the settings accept: radius ceil(3 * 28) = 84 on each side.
constexpr int kAugmentMaxTaps = 2 * 84 + 1;
static_assert(3 * kMaxElasticSigma <= 84, "kAugmentMaxTaps covers the widest Gaussian");

// The shared memory augment_sample works in, in floats: the field's noise and its smoothed
// version (x and y each), the taps, the image's bytes and the affine map.
struct AugmentScratch {
  float noise[2 * kImageBytes];   // uniform noise, then the smoothed field (x, then y)
  float along_x[2 * kImageBytes];  // the first pass of the separable Gaussian
  float taps[kAugmentMaxTaps];     // unnormalised weights
  std::uint8_t image[kImageBytes];
  AffineMap map;
};

// The device code below is compiled by nvcc only; host files (tests among them) see the types.
#ifdef __CUDACC__
namespace augment_detail {

__device__ inline int clamp_to_image(int v) {
  return v < 0 ? 0 : v >= kImageSide ? kImageSide - 1 : v;
}

// One pass of the Gaussian over both fields, along x (step 1) or y (step 28), edges clamped.
__device__ inline void smooth(const float* in, float* out, const float* taps, int radius,
                              bool along_x) {
  for (int i = threadIdx.x; i < 2 * int(kImageBytes); i += blockDim.x) {
    const int axis = i / int(kImageBytes), p = i % int(kImageBytes);
    const int y = p / kImageSide, x = p % kImageSide;
    const float* plane = in + axis * kImageBytes;
    float sum = 0.0f;
    for (int k = -radius; k <= radius; ++k) {
      const int xs = along_x ? clamp_to_image(x + k) : x;
      const int ys = along_x ? y : clamp_to_image(y + k);
      sum += taps[k + radius] * plane[ys * kImageSide + xs];
    }
    out[i] = sum;
  }
}

}  // namespace augment_detail

// Augments `image` (28 x 28 bytes in global memory), sample `sample` of the current epoch, and
// calls store(p, grey) for every pixel p of the 28 x 28 result (grey in [0, 255], not rounded).
// Every thread of the block must call it (it synchronises the block). aug must be enabled.
template <class Store>
__device__ void augment_sample(const std::uint8_t* image, const DeviceAugmentation& aug,
                               std::uint32_t sample, AugmentScratch& scratch, Store store) {
  const AugmentSettings& s = aug.settings;
  const AugmentRandom random(aug.seed, *aug.epoch, sample);
  const bool elastic = s.kind == AugmentKind::elastic;
  const int radius = elastic ? gaussian_radius(s.elastic_sigma) : 0;
  if (threadIdx.x == 0) scratch.map = draw_affine(s, random);
  for (int p = threadIdx.x; p < int(kImageBytes); p += blockDim.x) scratch.image[p] = image[p];
  if (elastic) {
    for (int i = threadIdx.x; i < 2 * int(kImageBytes); i += blockDim.x)
      scratch.noise[i] = float(random.symmetric_uniform(kDrawFieldNoise + std::uint32_t(i)));
    for (int k = threadIdx.x; k <= 2 * radius; k += blockDim.x)
      scratch.taps[k] = float(gaussian_weight(k - radius, s.elastic_sigma));
  }
  __syncthreads();
  float field_scale = 0.0f;  // alpha / (sum of taps)^2: each of the two passes normalises once
  if (elastic) {
    augment_detail::smooth(scratch.noise, scratch.along_x, scratch.taps, radius, true);
    __syncthreads();
    augment_detail::smooth(scratch.along_x, scratch.noise, scratch.taps, radius, false);
    __syncthreads();
    float sum = 0.0f;
    for (int k = 0; k <= 2 * radius; ++k) sum += scratch.taps[k];
    field_scale = float(s.elastic_alpha) / (sum * sum);
  }
  const AffineMap map = scratch.map;
  for (int p = threadIdx.x; p < int(kImageBytes); p += blockDim.x) {
    float sx, sy;
    affine_source(map, p % kImageSide, p / kImageSide, sx, sy);
    if (elastic) {
      sx += field_scale * scratch.noise[p];
      sy += field_scale * scratch.noise[kImageBytes + p];
    }
    store(p, bilinear_sample(scratch.image, sx, sy));
  }
}
#endif  // __CUDACC__

}  // namespace lenet5::cuda
