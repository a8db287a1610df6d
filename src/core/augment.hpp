// What an augmentation is, and the arithmetic of it that the CPU reference (data/augment.hpp) and
// the CUDA kernels (cuda/kernels/augment.cuh) share: the settings and their limits, the
// counter-based generator keyed by (seed, epoch, sample), the affine map drawn from it, the
// Gaussian that smooths the elastic field, and bilinear resampling. One definition each, so the
// GPU's images can differ from the reference only by the precision it computes in.
//
// A random affine transform (rotation, scale, shear, translation) and an elastic distortion
// (Simard, Steinkraus & Platt 2003: a random displacement field smoothed by a Gaussian of width
// sigma and scaled by alpha), both resampled bilinearly. The randomness of sample i in epoch e of
// a run with seed s is a pure function of the key (s, e, i) and a draw counter (SplitMix64's mixer
// over the key and the counter), so an augmented image does not depend on the order in which
// samples are processed, and a run resumed at any epoch sees exactly the images an uninterrupted
// run would have seen.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/host_device.hpp"
#include "core/rng.hpp"
#include "core/shapes.hpp"

namespace lenet5 {

enum class AugmentKind { none, affine, elastic };  // elastic: the affine map, then the field

// Ranges of the random transform; each drawn value is uniform in [-range, range].
struct AugmentSettings {
  AugmentKind kind = AugmentKind::none;
  double rotation_degrees = 0;    // rotation about the image centre
  double scale = 0;               // relative: 0.1 draws a factor in [0.9, 1.1]
  double shear_degrees = 0;       // horizontal shear
  double translation_pixels = 0;  // each axis
  double elastic_alpha = 0;       // pixels of displacement per unit of the smoothed field
  double elastic_sigma = 4;       // pixels, the Gaussian's standard deviation (> 0)
  // The share of samples (0 to 1) seen as a small scan enlarged: after the transform above, the
  // image area-averaged down to a side drawn from low_resolution_side's range and enlarged back
  // bilinearly, as an image editor enlarges a digit scanned at a few pixels (blocky edges
  // smoothed into blur). The digit, 20 px tall in MNIST's field, is then as if scanned at between
  // low_resolution_scan and 20 px.
  double low_resolution = 0;
  double low_resolution_scan = 8;
};

// The largest value each range accepts (the settings table and validate() both read these): a
// half turn, a shear that keeps the digit readable, half the image, a displacement of several
// images, and a Gaussian as wide as the image. The scale stays below 1 so the factor stays
// positive; sigma must be above 0.
constexpr double kMaxRotationDegrees = 180;
constexpr double kMaxShearDegrees = 60;
constexpr double kMaxTranslationPixels = 14;
constexpr double kMaxElasticAlpha = 100;
constexpr double kMaxElasticSigma = 28;
constexpr double kScaleBelow = 1;
// The smallest scan the resolution stage may simulate, and the largest that still changes the
// image (the digit's 20 px in MNIST's field).
constexpr double kMinScanPixels = 4;
constexpr double kMaxScanPixels = 19;
constexpr double kDigitPixels = 20;

// A run's augmentation: the transform, and the seed whose (epoch, sample) keys draw it.
struct Augmentation {
  AugmentSettings settings;
  std::uint64_t seed = 0;
  LENET5_HD bool enabled() const { return settings.kind != AugmentKind::none; }
};

// Draw counters of one sample: the affine transform's five numbers, then the elastic field's
// noise, x for every pixel and then y.
// After the field's noise, the resolution stage's two draws: whether the sample is seen as a small
// scan, and at which side.
enum AugmentDraw : std::uint32_t {
  kDrawRotation,
  kDrawScale,
  kDrawShear,
  kDrawShiftX,
  kDrawShiftY,
  kDrawFieldNoise,
  kDrawLowResolution = kDrawFieldNoise + 2 * std::uint32_t(kImageBytes),
  kDrawScanSide
};

// The counter-based generator of one sample: draw `counter` of it without the draws before it.
// The key's mixing is done once, when the generator is made.
class AugmentRandom {
 public:
  LENET5_HD AugmentRandom(std::uint64_t seed, std::uint32_t epoch, std::uint32_t sample)
      : m_base(stream_seed(seed, RngStream::augment, (std::uint64_t(epoch) << 32) | sample)) {}
  // SplitMix64 adds its increment before mixing, so draw `counter` of the stream that starts at
  // the key's base is one mix of the state base + (counter + 1) * increment; the states of
  // successive draws differ by the increment. Generic over the counters' type: 64-bit words, or
  // a vector of them (data/augment_fast.cpp draws four at once).
  template <class Words>
  LENET5_HD Words state_of(Words counter) const {
    return m_base + counter * kSplitMix64Increment + kSplitMix64Increment;
  }
  LENET5_HD std::uint64_t bits(std::uint32_t counter) const {
    return splitmix64_mix(state_of(std::uint64_t(counter)));
  }
  // In [-1, 1), 52 bits. The 53-bit integer converts as a signed one, which has an instruction of
  // its own on x86-64 (unsigned 64-bit conversion takes several): the same value.
  LENET5_HD double symmetric_uniform(std::uint32_t counter) const {
    return double(std::int64_t(bits(counter) >> 11)) * 0x1.0p-52 - 1.0;
  }

 private:
  std::uint64_t m_base;
};

constexpr double kAugmentCentre = (kImageSide - 1) / 2.0;  // 13.5: rotation and scale about it

// The inverse map of the affine transform, output pixel -> input position, both measured from
// the image centre: input = A * output + t.
struct AffineMap {
  double a11 = 1, a12 = 0, a21 = 0, a22 = 1, tx = 0, ty = 0;
};

// The six numbers the affine map is made of, each from one draw: the rotation's cosine and sine,
// the shear's tangent, the scale, and the shift. Apart from affine_map so that the device can
// compute them on six threads at once: one after another, the three trigonometric functions in
// double are the longest chain of a sample's augmentation.
enum AffineTerm {
  kAffineCos,
  kAffineSin,
  kAffineShear,
  kAffineScale,
  kAffineShiftX,
  kAffineShiftY
};
constexpr int kAffineTerms = 6;

// The draw a term is made of (the rotation's cosine and sine share one).
LENET5_HD inline std::uint32_t affine_draw(int term) {
  switch (term) {
    case kAffineCos:
    case kAffineSin:
      return kDrawRotation;
    case kAffineShear:
      return kDrawShear;
    case kAffineScale:
      return kDrawScale;
    case kAffineShiftX:
      return kDrawShiftX;
    default:
      return kDrawShiftY;
  }
}

// One draw, chosen by the term before it is made: with a draw in each case, the device's loop
// over a thread's terms hoisted all five draws out of it (about 150 instructions on each of the
// six threads that make one term each).
LENET5_HD inline double affine_term(const AugmentSettings& s, const AugmentRandom& random,
                                    int term) {
  constexpr double kRadiansPerDegree = 3.14159265358979323846 / 180.0;
  const double draw = random.symmetric_uniform(affine_draw(term));
  switch (term) {
    case kAffineCos:
      return ::cos(s.rotation_degrees * draw * kRadiansPerDegree);
    case kAffineSin:
      return ::sin(s.rotation_degrees * draw * kRadiansPerDegree);
    case kAffineShear:
      return ::tan(s.shear_degrees * draw * kRadiansPerDegree);
    case kAffineScale:
      return 1 + s.scale * draw;
    case kAffineShiftX:
    default:
      return s.translation_pixels * draw;
  }
}

// The inverse map from its terms (affine_term).
LENET5_HD inline AffineMap affine_map(const double (&term)[kAffineTerms]) {
  const double c = term[kAffineCos], sn = term[kAffineSin], shear = term[kAffineShear],
               scale = term[kAffineScale];
  // Forward map: output = R * Sh * (scale * input) + shift; stored is its inverse.
  // R * Sh = [[c, c*shear - sn], [sn, sn*shear + c]], scaled by `scale`.
  const double f11 = scale * c, f12 = scale * (c * shear - sn);
  const double f21 = scale * sn, f22 = scale * (sn * shear + c);
  const double det = f11 * f22 - f12 * f21;
  AffineMap m;
  m.a11 = f22 / det;
  m.a12 = -f12 / det;
  m.a21 = -f21 / det;
  m.a22 = f11 / det;
  const double shift_x = term[kAffineShiftX], shift_y = term[kAffineShiftY];
  m.tx = -(m.a11 * shift_x + m.a12 * shift_y);
  m.ty = -(m.a21 * shift_x + m.a22 * shift_y);
  return m;
}

LENET5_HD inline AffineMap draw_affine(const AugmentSettings& s, const AugmentRandom& random) {
  double term[kAffineTerms];
  for (int t = 0; t < kAffineTerms; ++t) term[t] = affine_term(s, random, t);
  return affine_map(term);
}

// The elastic field's Gaussian: cut at 3 sigma, tap k (|k| <= radius) weighs
// exp(-k^2 / (2 sigma^2)) before the taps are normalised to sum 1.
LENET5_HD inline int gaussian_radius(double sigma) {
  return int(::ceil(3 * sigma));
}
LENET5_HD inline double gaussian_weight(int k, double sigma) {
  return ::exp(-0.5 * k * k / (sigma * sigma));
}

// a * b + c. On the device, one FMA whose product is a's and b's: nvcc fuses a sum of two
// products into an FMA by itself, but which product it fuses was its choice, made per kernel it
// inlines the sum into, so that two kernels gathering the same sample could round it differently
// (a bilinear sample inlined into bf16's dense forward kernels fused the other product, a rounding
// apart from the other kernels). Called in the form those kernels compiled to, so that every
// kernel rounds as they did. On the host, the two roundings of the expression, as before.
template <class T>
LENET5_HD inline T multiply_add(T a, T b, T c) {
#ifdef __CUDA_ARCH__
  return ::fma(a, b, c);
#else
  return a * b + c;
#endif
}

// Where output pixel (x, y) reads the input, before any elastic displacement.
template <class T>
LENET5_HD inline void affine_source(const AffineMap& m, int x, int y, T& sx, T& sy) {
  const T ox = T(x - kAugmentCentre), oy = T(y - kAugmentCentre);
  sx = multiply_add(T(m.a11), ox, T(m.a12) * oy) + T(m.tx) + T(kAugmentCentre);
  sy = multiply_add(T(m.a21), ox, T(m.a22) * oy) + T(m.ty) + T(kAugmentCentre);
}

// The image's value at integer (x, y), 0 (background) outside it.
template <class T>
LENET5_HD inline T image_value(const std::uint8_t* image, int x, int y) {
  if (x < 0 || y < 0 || x >= kImageSide || y >= kImageSide) return T(0);
  return T(image[y * kImageSide + x]);
}

// The lowest and highest whole coordinate bilinear sampling reads (kBilinearLow and
// kBilinearHigh + 1): beyond one pixel outside the image every neighbour is background, so the
// position is clamped to [-2, 29] first, which also keeps the integer conversion defined for any
// displacement (validated settings give finite ones).
constexpr int kBilinearLow = -2;
constexpr int kBilinearHigh = kImageSide + 1;

// value(x, y) at (sx, sy), bilinear between the four neighbours; value is read at whole
// coordinates from kBilinearLow to kBilinearHigh + 1 and must be image_value's there.
template <class T, class Values>
LENET5_HD inline T bilinear_sample_of(const Values& value, T sx, T sy) {
  const T low = T(kBilinearLow), high = T(kBilinearHigh);
  sx = sx < low ? low : sx > high ? high : sx;
  sy = sy < low ? low : sy > high ? high : sy;
  const T fx = ::floor(sx), fy = ::floor(sy);
  const int x0 = int(fx), y0 = int(fy);
  const T wx = sx - fx, wy = sy - fy;
  const T top = multiply_add(1 - wx, value(x0, y0), wx * value(x0 + 1, y0));
  const T bottom = multiply_add(wx, value(x0 + 1, y0 + 1), (1 - wx) * value(x0, y0 + 1));
  return multiply_add(1 - wy, top, wy * bottom);
}

// image_value as the function bilinear_sample_of reads.
template <class T>
struct ImageValues {
  const std::uint8_t* image;
  LENET5_HD T operator()(int x, int y) const { return image_value<T>(image, x, y); }
};

// The image at (sx, sy), bilinear between the four neighbours.
template <class T>
LENET5_HD inline T bilinear_sample(const std::uint8_t* image, T sx, T sy) {
  return bilinear_sample_of(ImageValues<T>{image}, sx, sy);
}

// ---- the resolution stage -------------------------------------------------------------------
// The side (kImageSide down to the smallest scan's, 28 * low_resolution_scan / 20 rounded) that
// the sample keyed by `random` is reduced to, or 0 when it is seen as it is. Uniform in [0, 1)
// draws: the first below low_resolution applies the stage, the second picks the side evenly.
LENET5_HD inline int low_resolution_side(const AugmentSettings& s, const AugmentRandom& random) {
  if (s.low_resolution <= 0) return 0;
  if (0.5 * (random.symmetric_uniform(kDrawLowResolution) + 1.0) >= s.low_resolution) return 0;
  const int smallest = int(kImageSide * s.low_resolution_scan / kDigitPixels + 0.5);
  const double pick = 0.5 * (random.symmetric_uniform(kDrawScanSide) + 1.0);  // [0, 1)
  return smallest + int(pick * (kImageSide - smallest));  // smallest .. kImageSide - 1
}

// A row-major image of `width` columns as the functions below read it: values(x, y).
template <class T>
struct RowMajorValues {
  const T* values;
  int width;
  LENET5_HD T operator()(int x, int y) const { return values[y * width + x]; }
};

// Pixel (ox, oy) of the image reduced to side x side: the mean of value(x, y) over the pixel's
// footprint [o * 28 / side, (o + 1) * 28 / side) on each axis, each source pixel weighed by the
// length it shares (a box filter, separable: each row's weighted sum, then the rows'), as
// image/resample.hpp's resample_area reduces a digit.
template <class T, class Values>
LENET5_HD inline T area_mean(const Values& value, int side, int ox, int oy) {
  const T step = T(kImageSide) / T(side);
  const T x0 = T(ox) * step, x1 = T(ox + 1) * step, y0 = T(oy) * step, y1 = T(oy + 1) * step;
  T total = 0;
  for (int y = int(y0); y < kImageSide && T(y) < y1; ++y) {
    const T wy = (y1 < T(y + 1) ? y1 : T(y + 1)) - (y0 > T(y) ? y0 : T(y));
    T row = 0;
    for (int x = int(x0); x < kImageSide && T(x) < x1; ++x) {
      const T wx = (x1 < T(x + 1) ? x1 : T(x + 1)) - (x0 > T(x) ? x0 : T(x));
      row += wx * value(x, y);
    }
    total += wy * row;
  }
  return total / (step * step);
}

// Pixel (x, y) of the side x side image `low` enlarged back to 28 x 28: the output pixel's centre
// mapped onto low's ((x + 0.5) * side / 28 - 0.5, edges clamped), between the four nearest of its
// pixels, as image/resample.hpp's resample_bilinear enlarges.
template <class T, class Values>
LENET5_HD inline T enlarged_bilinear(const Values& low, int side, int x, int y) {
  const T scale = T(side) / T(kImageSide), last = T(side - 1);
  T u = (T(x) + T(0.5)) * scale - T(0.5), v = (T(y) + T(0.5)) * scale - T(0.5);
  u = u < T(0) ? T(0) : u > last ? last : u;
  v = v < T(0) ? T(0) : v > last ? last : v;
  const int i = int(u), j = int(v);  // u, v >= 0: truncation is floor
  const int i1 = i + 1 < side ? i + 1 : side - 1, j1 = j + 1 < side ? j + 1 : side - 1;
  const T fu = u - T(i), fv = v - T(j);
  const T top = multiply_add(1 - fu, low(i, j), fu * low(i1, j));
  const T bottom = multiply_add(1 - fu, low(i, j1), fu * low(i1, j1));
  return multiply_add(1 - fv, top, fv * bottom);
}

}  // namespace lenet5
