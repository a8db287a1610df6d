// The augmentation's double-precision reference: affine draws, the smoothed elastic field, the
// resampling, and the settings' names and checks.
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

// One separable pass of the Gaussian along x or y, edges clamped. Each output is
// sum_k taps[k] * in[clamped neighbour k], added from k = -radius up, as a plain loop over k would:
// the edge-replicated row (or the clamped row pointers) let the loop over pixels run innermost,
// where the compiler vectorises it, without changing any sum's order or value.
// Compiled twice, for AVX2 where the machine has it: the same operations in the same order (no
// FMA), twice as many lanes.
__attribute__((target_clones("avx2", "default"))) std::array<double, kImageBytes> smoothed(
    const std::array<double, kImageBytes>& in, const std::vector<double>& taps, bool along_x) {
  const int radius = int(taps.size() / 2);
  std::array<double, kImageBytes> out{};
  if (along_x) {
    std::vector<double> row(std::size_t(kImageSide + 2 * radius));
    for (int y = 0; y < kImageSide; ++y) {
      const double* in_row = in.data() + y * kImageSide;
      std::fill(row.begin(), row.begin() + radius, in_row[0]);
      std::copy(in_row, in_row + kImageSide, row.begin() + radius);
      std::fill(row.begin() + radius + kImageSide, row.end(), in_row[kImageSide - 1]);
      double* out_row = out.data() + y * kImageSide;
      for (std::size_t k = 0; k < taps.size(); ++k) {
        const double tap = taps[k];
        const double* from = row.data() + k;
        for (int x = 0; x < kImageSide; ++x) out_row[x] += tap * from[x];
      }
    }
    return out;
  }
  for (int y = 0; y < kImageSide; ++y) {
    double* out_row = out.data() + y * kImageSide;
    for (int k = -radius; k <= radius; ++k) {
      const double tap = taps[std::size_t(k + radius)];
      const double* in_row = in.data() + std::clamp(y + k, 0, kImageSide - 1) * kImageSide;
      for (int x = 0; x < kImageSide; ++x) out_row[x] += tap * in_row[x];
    }
  }
  return out;
}

// The image's grey levels with the background around it that bilinear sampling can read, as
// doubles: the values image_value gives, without a bounds test (and its mispredicted branch) per
// neighbour.
class PaddedImage {
 public:
  explicit PaddedImage(const std::uint8_t* image) {
    for (int y = 0; y < kImageSide; ++y)
      for (int x = 0; x < kImageSide; ++x)
        m_values[std::size_t((y - kBilinearLow) * kSide + x - kBilinearLow)] =
            image[y * kImageSide + x];
  }
  double operator()(int x, int y) const {
    return m_values[std::size_t((y - kBilinearLow) * kSide + x - kBilinearLow)];
  }

 private:
  static constexpr int kSide = kBilinearHigh + 2 - kBilinearLow;  // -2 .. 30
  std::array<double, std::size_t(kSide* kSide)> m_values{};
};

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
  check(s.low_resolution, 0, true, 1, "the share of low-resolution samples");
  check(s.low_resolution_scan, kMinScanPixels, true, kMaxScanPixels,
        "the smallest simulated scan (pixels)");
  if (s.kind == AugmentKind::none && s.low_resolution > 0)
    throw UsageError(
        "--augment-low-resolution follows the transform: it needs --augment affine "
        "or elastic");
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

AugmentPlan::AugmentPlan(const AugmentSettings& s) : settings(s) {
  validate(s);
  if (s.kind != AugmentKind::elastic) return;
  taps = gaussian_taps(s.elastic_sigma);
  const int radius = gaussian_radius(s.elastic_sigma);
  float sum = 0.0f;  // in tap order, as one device thread sums them
  for (int k = -radius; k <= radius; ++k) {
    float_taps.push_back(float(gaussian_weight(k, s.elastic_sigma)));
    sum += float_taps.back();
  }
  field_scale = float(s.elastic_alpha) / (sum * sum);
}

DisplacementField draw_elastic_field(const AugmentPlan& plan, std::uint64_t seed,
                                     std::uint32_t epoch, std::uint32_t sample) {
  const AugmentSettings& s = plan.settings;
  std::array<double, kImageBytes> noise_x{}, noise_y{};
  const AugmentRandom random(seed, epoch, sample);
  for (std::uint32_t i = 0; i < kImageBytes; ++i) {
    noise_x[i] = random.symmetric_uniform(kDrawFieldNoise + i);
    noise_y[i] = random.symmetric_uniform(kDrawFieldNoise + kImageBytes + i);
  }
  const std::vector<double>& taps = plan.taps;
  DisplacementField field;
  field.dx = smoothed(smoothed(noise_x, taps, true), taps, false);
  field.dy = smoothed(smoothed(noise_y, taps, true), taps, false);
  for (std::size_t i = 0; i < kImageBytes; ++i) {
    field.dx[i] *= s.elastic_alpha;
    field.dy[i] *= s.elastic_alpha;
  }
  return field;
}

// Compiled twice too: with SSE4.1's rounding, in AVX2's clone, floor() is one instruction instead
// of a call into the C library for every neighbour. The same values.
__attribute__((target_clones("avx2", "default"))) void resample_cpu(const std::uint8_t* image,
                                                                    const AffineMap& m,
                                                                    const DisplacementField* field,
                                                                    double* out) {
  const PaddedImage padded(image);
  for (int y = 0; y < kImageSide; ++y)
    for (int x = 0; x < kImageSide; ++x) {
      const std::size_t i = std::size_t(y * kImageSide + x);
      double sx, sy;
      affine_source(m, x, y, sx, sy);
      if (field) {
        sx += field->dx[i];
        sy += field->dy[i];
      }
      out[i] = bilinear_sample_of(padded, sx, sy);
    }
}

void seen_at_low_resolution(double* image, int side) {
  std::vector<double> low(std::size_t(side * side));
  for (int oy = 0; oy < side; ++oy)
    for (int ox = 0; ox < side; ++ox)
      low[std::size_t(oy * side + ox)] =
          area_mean<double>(RowMajorValues<double>{image, kImageSide}, side, ox, oy);
  for (int y = 0; y < kImageSide; ++y)
    for (int x = 0; x < kImageSide; ++x)
      image[y * kImageSide + x] =
          enlarged_bilinear<double>(RowMajorValues<double>{low.data(), side}, side, x, y);
}

void augment_image_cpu(const std::uint8_t* image, const AugmentPlan& plan, std::uint64_t seed,
                       std::uint32_t epoch, std::uint32_t sample, double* out) {
  const AugmentSettings& s = plan.settings;
  if (s.kind == AugmentKind::none) {
    std::copy(image, image + kImageBytes, out);
    return;
  }
  const AffineMap map = draw_affine(s, seed, epoch, sample);
  if (s.kind == AugmentKind::affine) {
    resample_cpu(image, map, nullptr, out);
  } else {
    const DisplacementField field = draw_elastic_field(plan, seed, epoch, sample);
    resample_cpu(image, map, &field, out);
  }
  const int side = low_resolution_side(s, AugmentRandom(seed, epoch, sample));
  if (side > 0) seen_at_low_resolution(out, side);
}

}  // namespace lenet5
