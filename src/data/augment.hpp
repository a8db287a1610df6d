// Data augmentation of MNIST images: a random affine transform (rotation, scale, shear,
// translation) and an elastic distortion (Simard, Steinkraus & Platt 2003: a random displacement
// field smoothed by a Gaussian of width sigma and scaled by alpha), both resampled bilinearly.
// This is the reference in double that faster versions are tested against.
//
// The randomness of sample i in epoch e of a run with seed s is a pure function of the key
// (s, e, i) and a draw counter (a counter-based generator: SplitMix64's mixer over the key and the
// counter), so an augmented image does not depend on the order in which samples are processed,
// and a run resumed at any epoch sees exactly the images an uninterrupted run would have seen.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/shapes.hpp"

namespace lenet5 {

enum class AugmentKind { none, affine, elastic };  // elastic: affine, then the elastic field

// Ranges of the random transform; each drawn value is uniform in [-range, range].
struct AugmentSettings {
  AugmentKind kind = AugmentKind::none;
  double rotation_degrees = 0;    // rotation about the image centre
  double scale = 0;               // relative: 0.1 draws a factor in [0.9, 1.1]
  double shear_degrees = 0;       // horizontal shear
  double translation_pixels = 0;  // each axis
  double elastic_alpha = 0;       // pixels of displacement per unit of the smoothed field
  double elastic_sigma = 4;       // pixels, the Gaussian's standard deviation (> 0)
};

AugmentKind parse_augment_kind(const std::string& name);  // UsageError listing the names
// UsageError naming the first setting outside its range: rotation in [0, 180] degrees, scale in
// [0, 1) (a factor that stays positive), shear in [0, 60] degrees, translation in [0, 14] pixels,
// alpha in [0, 100] pixels, sigma in (0, 28] pixels; every value finite.
void validate(const AugmentSettings& settings);
const char* to_string(AugmentKind kind);

// The counter-based generator of one sample, keyed by (seed, epoch, sample): draw `counter` of it
// without the draws before it. The key's mixing is done once, when the generator is made.
class AugmentRandom {
 public:
  AugmentRandom(std::uint64_t seed, std::uint32_t epoch, std::uint32_t sample);
  std::uint64_t bits(std::uint32_t counter) const;        // 64 random bits
  double symmetric_uniform(std::uint32_t counter) const;  // uniform in [-1, 1)

 private:
  std::uint64_t m_base;  // SplitMix64's state before draw 0
};

// The inverse map of the affine transform, output pixel -> input position, both measured from
// the image centre (13.5, 13.5): input = A * output + t.
struct AffineMap {
  double a11 = 1, a12 = 0, a21 = 0, a22 = 1, tx = 0, ty = 0;
};
AffineMap draw_affine(const AugmentSettings& settings, std::uint64_t seed, std::uint32_t epoch,
                      std::uint32_t sample);

// The elastic displacement (dx, dy) of every output pixel, row-major 28 x 28 each: uniform noise
// in [-1, 1) per pixel and axis, smoothed by a Gaussian of width sigma (cut at 3 sigma, edges
// clamped), times alpha.
struct DisplacementField {
  std::array<double, kImageBytes> dx{}, dy{};
};
DisplacementField draw_elastic_field(const AugmentSettings& settings, std::uint64_t seed,
                                     std::uint32_t epoch, std::uint32_t sample);

// Output pixel (x, y) takes the input at A * (x, y) + t (+ the field's displacement), bilinear
// between the four neighbours, 0 (background) outside the image. `field` may be null.
void resample_cpu(const std::uint8_t* image, const AffineMap& map, const DisplacementField* field,
                  double* out);

// Sample `sample` of epoch `epoch`, augmented as the settings say (a copy for kind none). The
// settings must have passed validate().
void augment_image_cpu(const std::uint8_t* image, const AugmentSettings& settings,
                       std::uint64_t seed, std::uint32_t epoch, std::uint32_t sample, double* out);

}  // namespace lenet5
