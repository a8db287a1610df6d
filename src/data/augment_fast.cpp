// The augmentation in float for the CPU engine (data/augment.hpp, augment_image_fast): the device's
// arithmetic (cuda/kernels/augment.cuh) laid out for the CPU's vector units. Rows of the field
// are padded from 28 to 32 floats, four vectors of eight, so that every loop over a row runs
// whole vectors; the padding columns are computed and never read. Compiled twice, for AVX2 where
// the machine has it (the same operations in the same order, no fused multiply-add, so both
// clones give the same bits) and for the baseline.
// GCC's -Wpsabi warns, for every use of a 32-byte vector in the baseline clone, that its calling
// convention differs from AVX2's; the functions that take or return vectors are always inlined,
// so no call is left for the difference to apply to.
#pragma GCC diagnostic ignored "-Wpsabi"

#include <algorithm>
#include <array>
#include <cmath>

#include "core/rng.hpp"
#include "data/augment.hpp"

namespace lenet5 {
namespace {

constexpr int kStride = 32;
constexpr int kPlaneFloats = kImageSide * kStride;
constexpr int kMaxRadius = 84;  // ceil(3 * kMaxElasticSigma)
static_assert(3 * kMaxElasticSigma <= kMaxRadius, "row buffers cover the widest Gaussian");

// Eight floats, one AVX2 register (two SSE registers in the baseline clone): GCC's vector
// extension, so that the row loops are vector code whatever the auto-vectoriser decides.
typedef float Floats8 __attribute__((vector_size(32)));

// An AVX2 and a baseline version of each row loop, picked at load time (they give the same bits:
// no fused multiply-adds). clang refuses calls that pass these 32-byte vectors by value between
// the AVX2 clone and the helpers below, compiled without AVX (GCC inlines the helpers first), so a
// clang build runs the baseline version only.
#if defined(__clang__)
#define LENET5_AVX2_CLONES
#else
#define LENET5_AVX2_CLONES __attribute__((target_clones("avx2", "default")))
#endif
constexpr int kVectorsPerRow = kStride / 8;

// One displacement component (x or y) of every pixel, rows padded to kStride.
struct alignas(32) Plane {
  float v[kPlaneFloats];
};

__attribute__((always_inline)) inline Floats8 load8(const float* p) {
  Floats8 v;
  __builtin_memcpy(&v, p, sizeof v);  // unaligned
  return v;
}

typedef std::uint64_t Words4 __attribute__((vector_size(32)));
typedef double Doubles4 __attribute__((vector_size(32)));
typedef float Floats4 __attribute__((vector_size(16)));

// Integers below 2^52 as doubles, exactly: the integer placed in the mantissa of 2^52, minus 2^52
// (x86-64 before AVX-512 has no instruction that converts 64-bit integers in a vector).
__attribute__((always_inline)) inline Doubles4 exact_doubles(Words4 below_2_52) {
  const Words4 biased = below_2_52 | 0x4330000000000000ull;  // the bits of 2^52 + value
  Doubles4 d;
  __builtin_memcpy(&d, &biased, sizeof d);
  return d - 0x1.0p52;
}

// The field's noise: uniform in [-1, 1) per pixel and axis, drawn as the reference and the device
// draw it (x for every pixel, then y), rounded to float as the device rounds it. Four draws at a
// time: AugmentRandom's states of four successive counters, advanced by four increments a step
// and mixed (splitmix64_mix), then symmetric_uniform's double(bits >> 11) * 2^-52 - 1 with the
// 53-bit integer converted exactly in two halves (their sum is below 2^53, so exact too): the
// same values as the scalar draws.
LENET5_AVX2_CLONES void draw_noise(const AugmentRandom& random, Plane& x, Plane& y) {
  static_assert(kImageBytes % 4 == 0 && kImageSide % 4 == 0, "rows split into groups of four");
  for (int plane = 0; plane < 2; ++plane) {
    float* out = (plane ? y : x).v;
    const std::uint64_t first = kDrawFieldNoise + std::uint64_t(plane) * kImageBytes;
    Words4 state = random.state_of(Words4{first, first + 1, first + 2, first + 3});
    for (int row = 0; row < kImageSide; ++row)
      for (int column = 0; column < kImageSide; column += 4) {
        const Words4 bits = splitmix64_mix(state) >> 11;
        state += 4 * kSplitMix64Increment;
        const Doubles4 value =
            exact_doubles(bits >> 32) * 0x1.0p32 + exact_doubles(bits & 0xFFFFFFFFull);
        const Floats4 noise = __builtin_convertvector(value * 0x1.0p-52 - 1.0, Floats4);
        __builtin_memcpy(out + row * kStride + column, &noise, sizeof noise);
      }
  }
}

// out(y, x) = sum over k of taps[k] * in(y, x + k - radius), x clamped to the image, summed from
// k = 0 up as a device thread sums it; both planes at once, for eight independent sums in
// flight. Each row is copied with its edge pixels repeated, so the loop has no bounds test.
LENET5_AVX2_CLONES void smooth_along_x(const Plane& in_x, const Plane& in_y,
                                       const std::vector<float>& taps, Plane& out_x, Plane& out_y) {
  const int radius = int(taps.size() / 2);
  float rows[2][kStride + 2 * kMaxRadius];
  for (int y = 0; y < kImageSide; ++y) {
    for (int plane = 0; plane < 2; ++plane) {
      const float* in_row = (plane ? in_y : in_x).v + y * kStride;
      float* row = rows[plane];
      std::fill(row, row + radius, in_row[0]);
      std::copy(in_row, in_row + kImageSide, row + radius);
      std::fill(row + radius + kImageSide, row + 2 * radius + kStride, in_row[kImageSide - 1]);
    }
    Floats8 sum[2][kVectorsPerRow] = {};  // in registers across the taps
    for (std::size_t k = 0; k < taps.size(); ++k) {
      const float tap = taps[k];
      for (int plane = 0; plane < 2; ++plane)
        for (int j = 0; j < kVectorsPerRow; ++j)
          sum[plane][j] += tap * load8(rows[plane] + k + 8 * j);
    }
    __builtin_memcpy(out_x.v + y * kStride, sum[0], sizeof sum[0]);
    __builtin_memcpy(out_y.v + y * kStride, sum[1], sizeof sum[1]);
  }
}

// out(y, x) = sum over k of taps[k] * in(y + k - radius, x), y clamped to the image; both planes.
LENET5_AVX2_CLONES void smooth_along_y(const Plane& in_x, const Plane& in_y,
                                       const std::vector<float>& taps, Plane& out_x, Plane& out_y) {
  const int radius = int(taps.size() / 2);
  for (int y = 0; y < kImageSide; ++y) {
    Floats8 sum[2][kVectorsPerRow] = {};
    for (int k = -radius; k <= radius; ++k) {
      const float tap = taps[std::size_t(k + radius)];
      const int from = std::clamp(y + k, 0, kImageSide - 1) * kStride;
      for (int j = 0; j < kVectorsPerRow; ++j) {
        sum[0][j] += tap * load8(in_x.v + from + 8 * j);
        sum[1][j] += tap * load8(in_y.v + from + 8 * j);
      }
    }
    __builtin_memcpy(out_x.v + y * kStride, sum[0], sizeof sum[0]);
    __builtin_memcpy(out_y.v + y * kStride, sum[1], sizeof sum[1]);
  }
}

// The image's grey levels as floats with the background around it that bilinear sampling reads
// (kBilinearLow to kBilinearHigh + 1): image_value's values without a bounds test per neighbour.
constexpr int kPaddedSide = kBilinearHigh + 2 - kBilinearLow;
struct PaddedGrey {
  explicit PaddedGrey(const std::uint8_t* image) {
    for (int y = 0; y < kImageSide; ++y)
      for (int x = 0; x < kImageSide; ++x)
        values[std::size_t((y - kBilinearLow) * kPaddedSide + x - kBilinearLow)] =
            image[y * kImageSide + x];
  }
  std::array<float, std::size_t(kPaddedSide* kPaddedSide)> values{};
};

typedef std::int32_t Ints8 __attribute__((vector_size(32)));

// grey(x, y) = the image at the affine map's source of (x, y), moved by scale * (dx, dy) when
// there is a field, bilinear: affine_source and bilinear_sample_of (core/augment.hpp) for eight
// pixels of a row at once, the same operations in the same order on each. floor is the integer
// conversion (towards zero) corrected for negative positions: exact, as positions are clamped
// to [-2, 29] first.
LENET5_AVX2_CLONES void resample_float(const PaddedGrey& image, const AffineMap& m, const Plane* dx,
                                       const Plane* dy, float scale, float* grey) {
  const float centre = float(kAugmentCentre), low = float(kBilinearLow);
  const float high = float(kBilinearHigh);
  const Floats8 lane = {0, 1, 2, 3, 4, 5, 6, 7};
  for (int y = 0; y < kImageSide; ++y) {
    alignas(32) float row[kStride];
    for (int j = 0; j < kVectorsPerRow; ++j) {
      const Floats8 ox = (lane + float(8 * j)) - centre;  // x - 13.5, exact
      const float oy = float(y - kAugmentCentre);
      Floats8 sx = float(m.a11) * ox + float(m.a12) * oy + float(m.tx) + centre;
      Floats8 sy = float(m.a21) * ox + float(m.a22) * oy + float(m.ty) + centre;
      if (dx) {
        sx += scale * load8(dx->v + y * kStride + 8 * j);
        sy += scale * load8(dy->v + y * kStride + 8 * j);
      }
      sx = sx < low ? low : sx > high ? high : sx;
      sy = sy < low ? low : sy > high ? high : sy;
      Floats8 fx = __builtin_convertvector(__builtin_convertvector(sx, Ints8), Floats8);
      Floats8 fy = __builtin_convertvector(__builtin_convertvector(sy, Ints8), Floats8);
      fx = fx > sx ? fx - 1.0f : fx;
      fy = fy > sy ? fy - 1.0f : fy;
      const Ints8 at = (__builtin_convertvector(fy, Ints8) - kBilinearLow) * kPaddedSide +
                       (__builtin_convertvector(fx, Ints8) - kBilinearLow);
      Floats8 v00, v10, v01, v11;
      for (int e = 0; e < 8; ++e) {
        const float* p = image.values.data() + at[e];
        v00[e] = p[0], v10[e] = p[1], v01[e] = p[kPaddedSide], v11[e] = p[kPaddedSide + 1];
      }
      const Floats8 wx = sx - fx, wy = sy - fy;
      const Floats8 top = (1 - wx) * v00 + wx * v10;
      const Floats8 bottom = (1 - wx) * v01 + wx * v11;
      const Floats8 value = (1 - wy) * top + wy * bottom;
      __builtin_memcpy(row + 8 * j, &value, sizeof value);
    }
    std::copy(row, row + kImageSide, grey + y * kImageSide);
  }
}

// The resolution stage in float, in the order a device thread computes each pixel (area_mean's,
// then enlarged_bilinear's).
void seen_at_low_resolution_float(float* grey, int side) {
  float low[kImageBytes];
  for (int oy = 0; oy < side; ++oy)
    for (int ox = 0; ox < side; ++ox)
      low[oy * side + ox] = area_mean<float>(RowMajorValues<float>{grey, kImageSide}, side, ox, oy);
  for (int y = 0; y < kImageSide; ++y)
    for (int x = 0; x < kImageSide; ++x)
      grey[y * kImageSide + x] =
          enlarged_bilinear<float>(RowMajorValues<float>{low, side}, side, x, y);
}

}  // namespace

void augment_image_fast(const std::uint8_t* image, const AugmentPlan& plan, std::uint64_t seed,
                        std::uint32_t epoch, std::uint32_t sample, float* grey) {
  const AugmentSettings& s = plan.settings;
  if (s.kind == AugmentKind::none) {
    std::copy(image, image + kImageBytes, grey);
    return;
  }
  const AugmentRandom random(seed, epoch, sample);
  const AffineMap map = draw_affine(s, random);
  const PaddedGrey padded(image);
  if (s.kind == AugmentKind::affine) {
    resample_float(padded, map, nullptr, nullptr, 0, grey);
  } else {
    Plane noise_x, noise_y, pass_x, pass_y;
    draw_noise(random, noise_x, noise_y);
    smooth_along_x(noise_x, noise_y, plan.float_taps, pass_x, pass_y);
    smooth_along_y(pass_x, pass_y, plan.float_taps, noise_x, noise_y);
    resample_float(padded, map, &noise_x, &noise_y, plan.field_scale, grey);
  }
  const int side = low_resolution_side(s, random);
  if (side > 0) seen_at_low_resolution_float(grey, side);
}

}  // namespace lenet5
