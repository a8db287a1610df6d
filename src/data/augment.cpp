#include "data/augment.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "core/error.hpp"
#include "core/rng.hpp"

namespace lenet5 {
namespace {

constexpr const char* kKindNames[] = {"none", "affine", "elastic"};  // in AugmentKind's order

// The Gaussian's taps from -radius to radius, normalised to sum 1.
std::vector<double> gaussian_taps(double sigma) {
  const int radius = gaussian_radius(sigma);
  std::vector<double> taps(std::size_t(2 * radius + 1));
  double sum = 0;
  for (int k = -radius; k <= radius; ++k)
    sum += taps[std::size_t(k + radius)] = gaussian_weight(k, sigma);
  for (double& t : taps) t /= sum;
  return taps;
}

// One separable pass of the Gaussian along x (step 1) or y (step 28), edges clamped.
std::array<double, kImageBytes> smoothed(const std::array<double, kImageBytes>& in,
                                         const std::vector<double>& taps, bool along_x) {
  const int radius = int(taps.size() / 2);
  std::array<double, kImageBytes> out{};
  for (int y = 0; y < kImageSide; ++y)
    for (int x = 0; x < kImageSide; ++x) {
      double sum = 0;
      for (int k = -radius; k <= radius; ++k) {
        const int xs = along_x ? std::clamp(x + k, 0, kImageSide - 1) : x;
        const int ys = along_x ? y : std::clamp(y + k, 0, kImageSide - 1);
        sum += taps[std::size_t(k + radius)] * in[std::size_t(ys * kImageSide + xs)];
      }
      out[std::size_t(y * kImageSide + x)] = sum;
    }
  return out;
}

}  // namespace

AugmentKind parse_augment_kind(const std::string& name) {
  for (std::size_t i = 0; i < std::size(kKindNames); ++i)
    if (name == kKindNames[i]) return AugmentKind(i);
  throw UsageError("unknown augmentation '" + name + "' (accepted: none, affine, elastic)");
}

void validate(const AugmentSettings& s) {
  const auto check = [](double value, double low, bool low_included, double high,
                        const char* what) {
    const bool above = low_included ? value >= low : value > low;
    if (!(std::isfinite(value) && above && value <= high))  // also refuses NaN
      throw UsageError(std::string(what) + " must be " + (low_included ? "from " : "above ") +
                       std::to_string(int(low)) + (low_included ? " to " : " and at most ") +
                       std::to_string(int(high)) + ", not " + std::to_string(value));
  };
  check(s.rotation_degrees, 0, true, kMaxRotationDegrees, "the rotation range (degrees)");
  check(s.shear_degrees, 0, true, kMaxShearDegrees, "the shear range (degrees)");
  check(s.translation_pixels, 0, true, kMaxTranslationPixels, "the translation range (pixels)");
  check(s.elastic_alpha, 0, true, kMaxElasticAlpha, "the elastic alpha (pixels)");
  check(s.elastic_sigma, 0, false, kMaxElasticSigma, "the elastic sigma (pixels)");
  if (!(std::isfinite(s.scale) && s.scale >= 0 && s.scale < kScaleBelow))
    throw UsageError(
        "the scale range must be at least 0 and below 1 (the factor stays "
        "positive), not " +
        std::to_string(s.scale));
}

const std::vector<std::string>& augment_kind_names() {
  static const std::vector<std::string> names(std::begin(kKindNames), std::end(kKindNames));
  return names;
}

const char* to_string(AugmentKind kind) {
  return kKindNames[std::size_t(kind)];
}

AffineMap draw_affine(const AugmentSettings& s, std::uint64_t seed, std::uint32_t epoch,
                      std::uint32_t sample) {
  return draw_affine(s, AugmentRandom(seed, epoch, sample));
}

DisplacementField draw_elastic_field(const AugmentSettings& s, std::uint64_t seed,
                                     std::uint32_t epoch, std::uint32_t sample) {
  std::array<double, kImageBytes> noise_x{}, noise_y{};
  const AugmentRandom random(seed, epoch, sample);
  for (std::uint32_t i = 0; i < kImageBytes; ++i) {
    noise_x[i] = random.symmetric_uniform(kDrawFieldNoise + i);
    noise_y[i] = random.symmetric_uniform(kDrawFieldNoise + kImageBytes + i);
  }
  const std::vector<double> taps = gaussian_taps(s.elastic_sigma);
  DisplacementField field;
  field.dx = smoothed(smoothed(noise_x, taps, true), taps, false);
  field.dy = smoothed(smoothed(noise_y, taps, true), taps, false);
  for (std::size_t i = 0; i < kImageBytes; ++i) {
    field.dx[i] *= s.elastic_alpha;
    field.dy[i] *= s.elastic_alpha;
  }
  return field;
}

void resample_cpu(const std::uint8_t* image, const AffineMap& m, const DisplacementField* field,
                  double* out) {
  for (int y = 0; y < kImageSide; ++y)
    for (int x = 0; x < kImageSide; ++x) {
      const std::size_t i = std::size_t(y * kImageSide + x);
      double sx, sy;
      affine_source(m, x, y, sx, sy);
      if (field) {
        sx += field->dx[i];
        sy += field->dy[i];
      }
      out[i] = bilinear_sample(image, sx, sy);
    }
}

void augment_image_cpu(const std::uint8_t* image, const AugmentSettings& s, std::uint64_t seed,
                       std::uint32_t epoch, std::uint32_t sample, double* out) {
  validate(s);
  if (s.kind == AugmentKind::none) {
    std::copy(image, image + kImageBytes, out);
    return;
  }
  const AffineMap map = draw_affine(s, seed, epoch, sample);
  if (s.kind == AugmentKind::affine) return resample_cpu(image, map, nullptr, out);
  const DisplacementField field = draw_elastic_field(s, seed, epoch, sample);
  resample_cpu(image, map, &field, out);
}

}  // namespace lenet5
