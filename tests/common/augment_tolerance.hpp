// What the tests of the float augmentations (the GPU's and the fast CPU one) share: the settings
// they augment with (moderate ones, as a run would use, and every range at its limit) and how far
// a float version's augmented input may lie from the double reference's (data/augment.hpp,
// gather_augmented_batch_reference), with the derivation.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/augment.hpp"
#include "core/net_config.hpp"
#include "core/shapes.hpp"
#include "data/augment.hpp"

namespace lenet5::test {

// The ranges of a typical run (the defaults' order of magnitude, Simard's alpha 34 and sigma 4).
inline AugmentSettings moderate_augmentation(AugmentKind kind) {
  AugmentSettings s;
  s.kind = kind;
  s.rotation_degrees = 15;
  s.scale = 0.15;
  s.shear_degrees = 10;
  s.translation_pixels = 2;
  s.elastic_alpha = 34;
  s.elastic_sigma = 4;
  return s;
}

// Every affine range at (or, for the scale, just below) its limit: the inverse map's entries and
// the source positions reach their largest, and so do their rounding errors.
inline AugmentSettings extreme_affine() {
  AugmentSettings s;
  s.kind = AugmentKind::affine;
  s.rotation_degrees = kMaxRotationDegrees;
  s.scale = 0.9;
  s.shear_degrees = kMaxShearDegrees;
  s.translation_pixels = kMaxTranslationPixels;
  return s;
}

// The largest displacement with the widest Gaussian (169 taps: the longest float sums) or the
// narrowest (sigma 0.5: 5 taps, a field as rough as the noise), on moderate affine ranges.
inline AugmentSettings extreme_elastic(double sigma) {
  AugmentSettings s = moderate_augmentation(AugmentKind::elastic);
  s.elastic_alpha = kMaxElasticAlpha;
  s.elastic_sigma = sigma;
  return s;
}

// The largest difference, in normalised input units, between a float version's augmented pixel
// (the GPU's, cuda/kernels/augment.cuh, or the CPU's augment_image_fast) and the reference's, for
// sample `sample` of `epoch`. Both draw the same numbers from the same key and the same affine map
// in double; they differ only where the float version computes in float (unit roundoff u =
// 2^-24), and every step of the bound is first order in u:
//  - the source position. sx = a11 * ox + a12 * oy + tx + 13.5 (+ the field), |ox|, |oy| <= 13.5:
//    rounding the map's three coefficients to float, the five operations and the addition of
//    the field each err by at most u * `reach`, the largest magnitude any term or partial sum
//    can take: at most 9 u * reach pixels.
//  - the elastic field, with n = 2 * radius + 1 taps of total weight W and noise |r| < 1: the
//    first pass errs by at most (n + 3) u W (the taps' and the noise's rounding, the products'
//    rounding where no fused multiply-add keeps them exact, as on the CPU, and n roundings of the
//    sum), the second by (2n + 5) u W^2 (its input's error carried, plus its own n + 2), the
//    normalisation alpha / (sum of taps)^2 by (2n + 5) u relative, the final product by u: at
//    most (4n + 11) u alpha pixels. (A sum of n random roundings usually errs by ~sqrt(n) u, far
//    less: this is the worst case, so the test cannot fail on a correct version.)
//  - bilinear interpolation: the grey level changes by at most 255 per pixel the source moves
//    along each axis (neighbouring pixels differ by at most 255; clamping only shortens moves),
//    so both axes' errors cost 255 * 2 * (position error); the float evaluation itself (a few
//    operations on values up to 255) and the reference's rounding of its double to float add
//    at most 10 u * 255 grey levels.
//  - the resolution stage, where the sample draws it: its area means and its bilinear enlargement
//    are weighted averages (weights summing to 1), which carry the error of their inputs
//    unchanged, plus their own rounding: a weight is a difference of positions up to 28 computed
//    in a few operations (at most 4 u * 28 off), a mean sums at most 4 x 4 such products of
//    values up to 255, and the enlargement's fractions err as much: under 2000 u * 255 grey
//    levels in all.
//  - normalisation: (grey / 255 - mean) / std moves by 1 / (255 * 0.3081) per grey level; both
//    sides round its three operations on values up to 2.83, under 2e-6 between them.
// Moderate elastic settings give 1.7e-3 (0.13 grey levels); alpha 100 with sigma 28, 2.7e-2.
inline double augmented_pixel_tolerance(const AugmentSettings& s, std::uint64_t seed,
                                        std::uint32_t epoch, std::uint32_t sample) {
  constexpr double u = 0x1.0p-24;
  const AffineMap m = draw_affine(s, seed, epoch, sample);
  const bool elastic = s.kind == AugmentKind::elastic;
  const double alpha = elastic ? s.elastic_alpha : 0;
  const double reach =
      std::max(std::fabs(m.a11) + std::fabs(m.a12), std::fabs(m.a21) + std::fabs(m.a22)) *
          kAugmentCentre +
      std::max(std::fabs(m.tx), std::fabs(m.ty)) + kAugmentCentre + alpha;
  const int taps = elastic ? 2 * gaussian_radius(s.elastic_sigma) + 1 : 0;
  const double position_error = 9 * u * reach + (4 * taps + 11) * u * alpha;
  const bool low_resolution = low_resolution_side(s, AugmentRandom(seed, epoch, sample)) > 0;
  const double grey_error =
      255 * 2 * position_error + 10 * u * 255 + (low_resolution ? 2000 * u * 255 : 0);
  // Divided by the smallest std of the input scalings (core/net_config.hpp): the largest error.
  double smallest_std = 1;
  for (const InputScalingInfo& info : input_scalings())
    smallest_std = std::min(smallest_std, double(info.pixels.std));
  return grey_error / (255 * smallest_std) + 2e-6;
}

}  // namespace lenet5::test
