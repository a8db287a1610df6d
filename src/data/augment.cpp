#include "data/augment.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "core/error.hpp"
#include "core/rng.hpp"

namespace lenet5 {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kCentre = (kImageSide - 1) / 2.0;  // 13.5: rotation and scale about the centre
constexpr const char* kKindNames[] = {"none", "affine", "elastic"};  // in AugmentKind's order

// Draw counters of one sample: the affine transform's five numbers, then the elastic field's
// noise, x then y, one per pixel.
enum Draw : std::uint32_t { kRotation, kScale, kShear, kShiftX, kShiftY, kFieldNoise };

double radians(double degrees) {
  return degrees * kPi / 180.0;
}

// The Gaussian's taps from -radius to radius, normalised to sum 1 (radius = ceil(3 sigma)).
std::vector<double> gaussian_taps(double sigma) {
  const int radius = int(std::ceil(3 * sigma));
  std::vector<double> taps(std::size_t(2 * radius + 1));
  double sum = 0;
  for (int k = -radius; k <= radius; ++k)
    sum += taps[std::size_t(k + radius)] = std::exp(-0.5 * k * k / (sigma * sigma));
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

// The image's value at (x, y), 0 outside it.
double pixel(const std::uint8_t* image, int x, int y) {
  if (x < 0 || y < 0 || x >= kImageSide || y >= kImageSide) return 0;
  return image[y * kImageSide + x];
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
  check(s.rotation_degrees, 0, true, 180, "the rotation range (degrees)");
  check(s.shear_degrees, 0, true, 60, "the shear range (degrees)");
  check(s.translation_pixels, 0, true, 14, "the translation range (pixels)");
  check(s.elastic_alpha, 0, true, 100, "the elastic alpha (pixels)");
  check(s.elastic_sigma, 0, false, 28, "the elastic sigma (pixels)");
  if (!(std::isfinite(s.scale) && s.scale >= 0 && s.scale < 1))
    throw UsageError(
        "the scale range must be at least 0 and below 1 (the factor stays "
        "positive), not " +
        std::to_string(s.scale));
}

const char* to_string(AugmentKind kind) {
  return kKindNames[std::size_t(kind)];
}

AugmentRandom::AugmentRandom(std::uint64_t seed, std::uint32_t epoch, std::uint32_t sample)
    : m_base(stream_seed(seed, RngStream::augment, (std::uint64_t(epoch) << 32) | sample)) {}

// Draw `counter` of a SplitMix64 stream whose state starts at the key's base: SplitMix64 adds its
// constant before mixing, so any draw can be computed without the ones before it.
std::uint64_t AugmentRandom::bits(std::uint32_t counter) const {
  return SplitMix64(m_base + std::uint64_t(counter) * 0x9E3779B97F4A7C15ull).next();
}

double AugmentRandom::symmetric_uniform(std::uint32_t counter) const {
  return double(bits(counter) >> 11) * 0x1.0p-52 - 1.0;
}

AffineMap draw_affine(const AugmentSettings& s, std::uint64_t seed, std::uint32_t epoch,
                      std::uint32_t sample) {
  const AugmentRandom random(seed, epoch, sample);
  const auto draw = [&](Draw d) { return random.symmetric_uniform(d); };
  const double angle = radians(s.rotation_degrees * draw(kRotation));
  const double scale = 1 + s.scale * draw(kScale);
  const double shear = std::tan(radians(s.shear_degrees * draw(kShear)));
  // Forward map: output = R * Sh * (scale * input) + shift; stored is its inverse.
  // R * Sh = [[c, c*shear - sn], [sn, sn*shear + c]], scaled by `scale`.
  const double c = std::cos(angle), sn = std::sin(angle);
  const double f11 = scale * c, f12 = scale * (c * shear - sn);
  const double f21 = scale * sn, f22 = scale * (sn * shear + c);
  const double det = f11 * f22 - f12 * f21;
  AffineMap m;
  m.a11 = f22 / det;
  m.a12 = -f12 / det;
  m.a21 = -f21 / det;
  m.a22 = f11 / det;
  const double shift_x = s.translation_pixels * draw(kShiftX);
  const double shift_y = s.translation_pixels * draw(kShiftY);
  m.tx = -(m.a11 * shift_x + m.a12 * shift_y);
  m.ty = -(m.a21 * shift_x + m.a22 * shift_y);
  return m;
}

DisplacementField draw_elastic_field(const AugmentSettings& s, std::uint64_t seed,
                                     std::uint32_t epoch, std::uint32_t sample) {
  std::array<double, kImageBytes> noise_x{}, noise_y{};
  const AugmentRandom random(seed, epoch, sample);
  for (std::uint32_t i = 0; i < kImageBytes; ++i) {
    noise_x[i] = random.symmetric_uniform(kFieldNoise + i);
    noise_y[i] = random.symmetric_uniform(kFieldNoise + kImageBytes + i);
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
      const double ox = x - kCentre, oy = y - kCentre;
      double sx = m.a11 * ox + m.a12 * oy + m.tx + kCentre;
      double sy = m.a21 * ox + m.a22 * oy + m.ty + kCentre;
      if (field) {
        sx += field->dx[i];
        sy += field->dy[i];
      }
      // Beyond one pixel outside the image every neighbour is background; clamping there keeps
      // the integer conversion below defined for any displacement (validated settings give
      // finite ones).
      sx = std::clamp(sx, -2.0, double(kImageSide + 1));
      sy = std::clamp(sy, -2.0, double(kImageSide + 1));
      const double fx = std::floor(sx), fy = std::floor(sy);
      const int x0 = int(fx), y0 = int(fy);
      const double wx = sx - fx, wy = sy - fy;
      out[i] = (1 - wy) * ((1 - wx) * pixel(image, x0, y0) + wx * pixel(image, x0 + 1, y0)) +
               wy * ((1 - wx) * pixel(image, x0, y0 + 1) + wx * pixel(image, x0 + 1, y0 + 1));
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
