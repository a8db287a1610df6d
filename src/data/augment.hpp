// The augmentation's reference, in double (core/augment.hpp says what the transform is): the
// elastic field, the resampled image, and the settings' names and checks. The GPU's version
// (cuda/kernels/augment.cuh) is tested against this, and so is the float version the CPU engine
// trains on (augment_image_fast), which computes as the device does.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/augment.hpp"
#include "core/shapes.hpp"

namespace lenet5 {

AugmentKind parse_augment_kind(const std::string& name);  // UsageError listing the names
const std::vector<std::string>& augment_kind_names();     // "none", "affine", "elastic"
const char* to_string(AugmentKind kind);
// UsageError naming the first setting outside its range (core/augment.hpp's limits); every value
// finite.
void validate(const AugmentSettings& settings);

// What the augmentation of every sample under one set of settings shares, made once: the settings
// (validated) and the elastic field's Gaussian, its taps from -radius to radius summing to 1.
// Implicit, so that a call with plain settings makes one for itself.
struct AugmentPlan {
  AugmentPlan(const AugmentSettings& settings);  // NOLINT(google-explicit-constructor)
  AugmentSettings settings;
  std::vector<double> taps;
  // The float version's Gaussian, as the device makes it: the taps unnormalised, and the scale
  // alpha / (their float sum)^2 that normalises both passes at once.
  std::vector<float> float_taps;
  float field_scale = 0;
};

AffineMap draw_affine(const AugmentSettings& settings, std::uint64_t seed, std::uint32_t epoch,
                      std::uint32_t sample);

// The elastic displacement (dx, dy) of every output pixel, row-major 28 x 28 each: uniform noise
// in [-1, 1) per pixel and axis, smoothed by the Gaussian of core/augment.hpp (edges clamped),
// times alpha.
struct DisplacementField {
  std::array<double, kImageBytes> dx{}, dy{};
};
DisplacementField draw_elastic_field(const AugmentPlan& plan, std::uint64_t seed,
                                     std::uint32_t epoch, std::uint32_t sample);

// Output pixel (x, y) takes the input at A * (x, y) + t (+ the field's displacement), bilinear
// between the four neighbours, 0 (background) outside the image. `field` may be null.
void resample_cpu(const std::uint8_t* image, const AffineMap& map, const DisplacementField* field,
                  double* out);

// The resolution stage on a 28 x 28 image (core/augment.hpp): reduced to side x side by area
// averaging, then enlarged back bilinearly, in place.
void seen_at_low_resolution(double* image, int side);

// Sample `sample` of epoch `epoch`, augmented as the plan's settings say (a copy for kind none):
// the transform, then the resolution stage for the samples it draws.
void augment_image_cpu(const std::uint8_t* image, const AugmentPlan& plan, std::uint64_t seed,
                       std::uint32_t epoch, std::uint32_t sample, double* out);

// The same image in float, computed as the device computes it (cuda/kernels/augment.cuh): the
// same draws, the unnormalised taps summed in the same order, the field scaled once, bilinear
// resampling in float. Vectorised for the CPU engine (several times faster than the reference),
// and within the float bound of tests/common/augment_tolerance.hpp of it. grey: 28 x 28, in
// [0, 255].
void augment_image_fast(const std::uint8_t* image, const AugmentPlan& plan, std::uint64_t seed,
                        std::uint32_t epoch, std::uint32_t sample, float* grey);

}  // namespace lenet5
