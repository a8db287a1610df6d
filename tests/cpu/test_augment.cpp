// The augmentation's CPU reference (data/augment.hpp): identity at zero strength, determinism by
// key, bounds, exact resampling of known maps, and the elastic field's size and smoothness; the
// float version the CPU engine trains on (augment_image_fast) against it; and the two augmented
// gathers (data/batch.hpp), the reference's and the fast one.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "common/augment_tolerance.hpp"
#include "core/error.hpp"
#include "core/net_config.hpp"
#include "core/rng.hpp"
#include "data/augment.hpp"
#include "data/batch.hpp"

namespace lenet5 {
namespace {

// A digit-like test image: a bright bar and a gradient, no symmetry a bug could hide behind.
std::vector<std::uint8_t> test_image() {
  std::vector<std::uint8_t> image(kImageBytes, 0);
  for (int y = 4; y < 24; ++y)
    for (int x = 10; x < 14; ++x) image[std::size_t(y * kImageSide + x)] = 255;
  for (int x = 4; x < 24; ++x) image[std::size_t(20 * kImageSide + x)] = std::uint8_t(10 * x);
  return image;
}

std::vector<double> augmented(const AugmentSettings& s, std::uint32_t epoch, std::uint32_t sample,
                              std::uint64_t seed = 7) {
  const std::vector<std::uint8_t> image = test_image();
  std::vector<double> out(kImageBytes);
  augment_image_cpu(image.data(), s, seed, epoch, sample, out.data());
  return out;
}

// The shared moderate ranges with a milder field (alpha 8), so the digit stays where the bounds
// tests look for it.
AugmentSettings strong(AugmentKind kind) {
  AugmentSettings s = test::moderate_augmentation(kind);
  s.elastic_alpha = 8;
  return s;
}

TEST(Augment, ZeroStrengthIsTheIdentityForEveryKind) {
  const std::vector<std::uint8_t> image = test_image();
  const std::vector<double> original(image.begin(), image.end());
  for (AugmentKind kind : {AugmentKind::none, AugmentKind::affine, AugmentKind::elastic}) {
    AugmentSettings s;
    s.kind = kind;  // every range 0, alpha 0
    EXPECT_EQ(augmented(s, 3, 11), original) << to_string(kind);
  }
}

TEST(Augment, SameKeyGivesTheSameImageAndOtherKeysOtherImages) {
  for (AugmentKind kind : {AugmentKind::affine, AugmentKind::elastic}) {
    const AugmentSettings s = strong(kind);
    const std::vector<double> first = augmented(s, 2, 5);
    EXPECT_EQ(augmented(s, 2, 5), first) << to_string(kind);
    EXPECT_NE(augmented(s, 2, 6), first) << to_string(kind) << ": another sample";
    EXPECT_NE(augmented(s, 3, 5), first) << to_string(kind) << ": another epoch";
    EXPECT_NE(augmented(s, 2, 5, 8), first) << to_string(kind) << ": another seed";
  }
}

// Bilinear resampling takes convex combinations of pixels and background, so every output lies in
// [0, 255], and a transform this mild keeps most of the ink (the bar is far from the border).
TEST(Augment, OutputStaysInThePixelRangeAndKeepsTheDigit) {
  const std::vector<std::uint8_t> image = test_image();
  double ink = 0;
  for (std::uint8_t v : image) ink += v;
  for (AugmentKind kind : {AugmentKind::affine, AugmentKind::elastic})
    for (std::uint32_t sample = 0; sample < 50; ++sample) {
      const std::vector<double> out = augmented(strong(kind), 1, sample);
      EXPECT_GE(*std::min_element(out.begin(), out.end()), 0.0);
      EXPECT_LE(*std::max_element(out.begin(), out.end()), 255.0);
      double total = 0;
      for (double v : out) total += v;
      // Scale up to 1.15 changes the area by up to 1.32x either way; the field moves ink locally.
      EXPECT_GT(total, 0.6 * ink) << to_string(kind) << " sample " << sample;
      EXPECT_LT(total, 1.6 * ink) << to_string(kind) << " sample " << sample;
    }
}

TEST(Augment, IntegerTranslationMovesEveryPixelExactly) {
  const std::vector<std::uint8_t> image = test_image();
  AffineMap shift;  // input = output - (3, -2): the image moves 3 right and 2 up
  shift.tx = -3;
  shift.ty = 2;
  std::vector<double> out(kImageBytes);
  resample_cpu(image.data(), shift, nullptr, out.data());
  for (int y = 0; y < kImageSide; ++y)
    for (int x = 0; x < kImageSide; ++x) {
      const int sx = x - 3, sy = y + 2;
      const bool inside = sx >= 0 && sy >= 0 && sx < kImageSide && sy < kImageSide;
      const double expected = inside ? image[std::size_t(sy * kImageSide + sx)] : 0.0;
      ASSERT_EQ(out[std::size_t(y * kImageSide + x)], expected) << x << ", " << y;
    }
}

// Half a pixel to the right: each output is the mean of two horizontal neighbours.
TEST(Augment, HalfPixelShiftAveragesNeighbours) {
  const std::vector<std::uint8_t> image = test_image();
  AffineMap shift;
  shift.tx = 0.5;
  std::vector<double> out(kImageBytes);
  resample_cpu(image.data(), shift, nullptr, out.data());
  const int y = 20, x = 8;  // on the gradient row: 80 and 90
  EXPECT_DOUBLE_EQ(out[std::size_t(y * kImageSide + x)], 85.0);
}

// The drawn transform stays within the ranges: a pure rotation keeps lengths, and its angle is at
// most the range.
TEST(Augment, DrawnRotationStaysWithinItsRange) {
  AugmentSettings s;
  s.kind = AugmentKind::affine;
  s.rotation_degrees = 20;
  double largest = 0;
  for (std::uint32_t sample = 0; sample < 200; ++sample) {
    const AffineMap m = draw_affine(s, 1, 0, sample);
    EXPECT_NEAR(m.a11 * m.a22 - m.a12 * m.a21, 1.0, 1e-12);  // rounding of a few operations
    const double degrees = std::fabs(std::atan2(m.a21, m.a11)) * 180 / 3.14159265358979323846;
    EXPECT_LE(degrees, 20.0 + 1e-9);
    largest = std::max(largest, degrees);
  }
  EXPECT_GT(largest, 15.0) << "200 draws should come near the end of the range";
}

TEST(Augment, SymmetricUniformCoversItsRangeWithMeanNearZero) {
  double sum = 0, lo = 1, hi = -1;
  const int n = 20000;
  const AugmentRandom random(3, 4, 5);
  for (int i = 0; i < n; ++i) {
    const double u = random.symmetric_uniform(std::uint32_t(i));
    ASSERT_GE(u, -1.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    lo = std::min(lo, u);
    hi = std::max(hi, u);
  }
  // The mean of 20,000 uniforms on [-1, 1) has standard deviation 0.0041; 0.02 is 5 of them.
  EXPECT_LT(std::fabs(sum / n), 0.02);
  EXPECT_LT(lo, -0.99);
  EXPECT_GT(hi, 0.99);
}

// Smoothing averages the noise: the field is at most alpha in size, and neighbouring pixels move
// together (their difference is far below that of raw uniform noise, about 0.8 on average).
TEST(Augment, ElasticFieldIsBoundedAndSmooth) {
  AugmentSettings s = strong(AugmentKind::elastic);
  s.elastic_alpha = 1;
  const DisplacementField field = draw_elastic_field(s, 9, 2, 4);
  double step = 0;
  for (int y = 0; y < kImageSide; ++y)
    for (int x = 0; x < kImageSide; ++x) {
      const std::size_t i = std::size_t(y * kImageSide + x);
      EXPECT_LE(std::fabs(field.dx[i]), 1.0);
      EXPECT_LE(std::fabs(field.dy[i]), 1.0);
      if (x > 0) step += std::fabs(field.dx[i] - field.dx[i - 1]);
    }
  EXPECT_LT(step / (kImageSide * (kImageSide - 1)), 0.1);
}

TEST(Augment, UnknownKindIsAUsageErrorNamingTheAcceptedOnes) {
  EXPECT_EQ(parse_augment_kind("elastic"), AugmentKind::elastic);
  try {
    parse_augment_kind("rotate");
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("none, affine, elastic"), std::string::npos);
  }
}

// Ranges that would give NaN (sigma 0, a scale factor reaching 0, infinite angles) or a mirrored
// digit are refused before any drawing, naming the setting.
TEST(Augment, SettingsOutsideTheirRangesAreUsageErrors) {
  EXPECT_NO_THROW(validate(strong(AugmentKind::elastic)));
  const auto refused = [](void (*change)(AugmentSettings&), const char* named) {
    AugmentSettings s = strong(AugmentKind::elastic);
    change(s);
    try {
      validate(s);
      ADD_FAILURE() << "accepted, expected an error naming " << named;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << e.what();
    }
  };
  refused([](AugmentSettings& s) { s.elastic_sigma = 0; }, "sigma");
  refused([](AugmentSettings& s) { s.elastic_sigma = -1; }, "sigma");
  refused([](AugmentSettings& s) { s.elastic_alpha = std::nan(""); }, "alpha");
  refused([](AugmentSettings& s) { s.scale = 1; }, "scale");
  refused([](AugmentSettings& s) { s.rotation_degrees = 181; }, "rotation");
  refused([](AugmentSettings& s) { s.rotation_degrees = INFINITY; }, "rotation");
  refused([](AugmentSettings& s) { s.shear_degrees = -5; }, "shear");
  refused([](AugmentSettings& s) { s.translation_pixels = 15; }, "translation");
  const std::vector<std::uint8_t> image = test_image();
  std::vector<double> out(kImageBytes);
  AugmentSettings zero_sigma = strong(AugmentKind::elastic);
  zero_sigma.elastic_sigma = 0;
  EXPECT_THROW(augment_image_cpu(image.data(), zero_sigma, 1, 0, 0, out.data()), UsageError);
}

// ---- the augmented gather -------------------------------------------------------------------

// Five distinct images: the test image moved right by 0..4 pixels.
std::vector<std::uint8_t> five_images() {
  const std::vector<std::uint8_t> image = test_image();
  std::vector<std::uint8_t> images(5 * kImageBytes, 0);
  for (int k = 0; k < 5; ++k)
    for (int y = 0; y < kImageSide; ++y)
      for (int x = k; x < kImageSide; ++x)
        images[std::size_t(k) * kImageBytes + std::size_t(y * kImageSide + x)] =
            image[std::size_t(y * kImageSide + x - k)];
  return images;
}

using Gather = void (*)(const std::uint8_t*, const std::int32_t*, int, const Augmentation&,
                        std::uint32_t, PixelScaling, float*);
// The scaling the gathers are tested under: each only passes it to normalise_intensity.
const PixelScaling kMnistScaling = pixel_scaling(InputScaling::mnist);

std::vector<float> gathered(Gather gather, const std::vector<std::uint8_t>& images,
                            const std::vector<std::int32_t>& indices,
                            const Augmentation& augmentation, std::uint32_t epoch) {
  std::vector<float> out(indices.size() * kInputFloats);
  gather(images.data(), indices.data(), int(indices.size()), augmentation, epoch, kMnistScaling,
         out.data());
  return out;
}

// Each gather with the augmentation of one image that it is made of, as floats.
struct GatherCase {
  const char* name;
  Gather gather;
  std::vector<float> (*augment_one)(const std::uint8_t* image, const AugmentSettings& s,
                                    std::uint64_t seed, std::uint32_t epoch, std::uint32_t sample);
};

std::vector<float> reference_grey(const std::uint8_t* image, const AugmentSettings& s,
                                  std::uint64_t seed, std::uint32_t epoch, std::uint32_t sample) {
  std::vector<double> grey(kImageBytes);
  augment_image_cpu(image, s, seed, epoch, sample, grey.data());
  return std::vector<float>(grey.begin(), grey.end());  // rounded as the gather rounds them
}

std::vector<float> fast_grey(const std::uint8_t* image, const AugmentSettings& s,
                             std::uint64_t seed, std::uint32_t epoch, std::uint32_t sample) {
  std::vector<float> grey(kImageBytes);
  augment_image_fast(image, s, seed, epoch, sample, grey.data());
  return grey;
}

const GatherCase kGathers[] = {
    {"reference", gather_augmented_batch_reference, reference_grey},
    {"fast", gather_augmented_batch_fast, fast_grey},
};

class AugmentedGather : public ::testing::TestWithParam<GatherCase> {
 protected:
  std::vector<float> gathered(const std::vector<std::uint8_t>& images,
                              const std::vector<std::int32_t>& indices,
                              const Augmentation& augmentation, std::uint32_t epoch) const {
    return lenet5::gathered(GetParam().gather, images, indices, augmentation, epoch);
  }
};

bool on_border(int h, int w) {
  const int y = h - kPad, x = w - kPad;
  return y < 0 || y >= kImageSide || x < 0 || x >= kImageSide;
}

// Sample i is the augmentation of image indices[i] (augment_image_cpu or augment_image_fast),
// keyed by that index, its grey levels as floats normalised by normalise_intensity, inside the
// border of a black pixel's value: the same operations in the same order, so equality is exact.
TEST_P(AugmentedGather, IsTheAugmentedImageNormalisedAndPadded) {
  const std::vector<std::uint8_t> images = five_images();
  const std::vector<std::int32_t> indices{3, 0, 4, 4, 1};
  for (AugmentKind kind : {AugmentKind::affine, AugmentKind::elastic}) {
    const Augmentation augmentation{strong(kind), 21};
    const std::vector<float> out = gathered(images, indices, augmentation, 5);
    for (std::size_t i = 0; i < indices.size(); ++i) {
      const std::vector<float> grey =
          GetParam().augment_one(images.data() + std::size_t(indices[i]) * kImageBytes,
                                 augmentation.settings, 21, 5, std::uint32_t(indices[i]));
      for (int h = 0; h < kInputSide; ++h)
        for (int w = 0; w < kInputSide; ++w) {
          const float want =
              on_border(h, w)
                  ? normalise_pixel(0, kMnistScaling)
                  : normalise_intensity(grey[std::size_t((h - kPad) * kImageSide + w - kPad)],
                                        kMnistScaling);
          ASSERT_EQ(out[i * kInputFloats + std::size_t(h * kInputSide + w)], want)
              << to_string(kind) << " sample " << i << " at (" << h << ", " << w << ")";
        }
    }
  }
}

// Without augmentation (kind none, whatever the ranges say) the gather is gather_batch_cpu; and
// at zero strength every kind resamples at whole pixels, so it is gather_batch_cpu bit for bit
// too (the grey levels are the bytes, and normalise_pixel is normalise_intensity of the byte).
TEST_P(AugmentedGather, WithoutAugmentationIsThePlainGather) {
  const std::vector<std::uint8_t> images = five_images();
  const std::vector<std::int32_t> indices{2, 4, 0, 1, 3, 2};
  std::vector<float> plain(indices.size() * kInputFloats);
  gather_batch_cpu(images.data(), indices.data(), int(indices.size()), kMnistScaling, plain.data());
  Augmentation none{strong(AugmentKind::none), 9};
  EXPECT_EQ(gathered(images, indices, none, 2), plain);
  EXPECT_EQ(gathered(images, indices, Augmentation{}, 0), plain);
  for (AugmentKind kind : {AugmentKind::affine, AugmentKind::elastic}) {
    Augmentation zero;
    zero.settings.kind = kind;  // every range 0
    zero.seed = 9;
    EXPECT_EQ(gathered(images, indices, zero, 2), plain) << to_string(kind);
  }
  // And the augmentation does change the batch when it has a strength.
  EXPECT_NE(gathered(images, indices, Augmentation{strong(AugmentKind::affine), 9}, 2), plain);
}

// A sample's image depends on its index in the data set (its key), not on its place in the
// batch: the same indices in another order give the same images, moved with them, and a
// repeated index gives the same image twice.
TEST_P(AugmentedGather, DependsOnTheIndexNotThePosition) {
  const std::vector<std::uint8_t> images = five_images();
  const std::vector<std::int32_t> forward{0, 1, 2, 3, 4}, backward{4, 3, 2, 1, 0, 4};
  for (AugmentKind kind : {AugmentKind::affine, AugmentKind::elastic}) {
    const Augmentation augmentation{strong(kind), 13};
    const std::vector<float> a = gathered(images, forward, augmentation, 1);
    const std::vector<float> b = gathered(images, backward, augmentation, 1);
    const auto sample = [](const std::vector<float>& batch, std::size_t position) {
      return std::vector<float>(batch.begin() + std::ptrdiff_t(position * kInputFloats),
                                batch.begin() + std::ptrdiff_t((position + 1) * kInputFloats));
    };
    for (std::size_t k = 0; k < 5; ++k)
      EXPECT_EQ(sample(a, k), sample(b, 4 - k)) << to_string(kind) << " image " << k;
    EXPECT_EQ(sample(b, 5), sample(b, 0)) << to_string(kind) << ": the repeated image";
    // Another epoch gives other images of the same indices.
    EXPECT_NE(gathered(images, forward, augmentation, 2), a) << to_string(kind);
  }
}

INSTANTIATE_TEST_SUITE_P(BothGathers, AugmentedGather, ::testing::ValuesIn(kGathers),
                         [](const ::testing::TestParamInfo<GatherCase>& info) {
                           return std::string(info.param.name);
                         });

// ---- the float version against the reference -------------------------------------------------

// Images whose resampling errors are as large as they get (neighbours differing by up to 255):
// the test image, and a block of random grey levels beside a full-intensity stroke.
std::vector<std::uint8_t> rough_images() {
  std::vector<std::uint8_t> images = test_image();
  images.resize(2 * kImageBytes, 0);
  SplitMix64 random(5);
  for (int y = 6; y < 22; ++y)
    for (int x = 6; x < 22; ++x)
      images[kImageBytes + std::size_t(y * kImageSide + x)] = std::uint8_t(random.next() >> 56);
  for (int y = 2; y < 26; ++y) images[kImageBytes + std::size_t(y * kImageSide + 24)] = 255;
  return images;
}

// ---- the resolution stage

// Moderate elastic settings with every sample seen as a scan of 8 to 20 px.
AugmentSettings every_sample_scanned_small() {
  AugmentSettings s = test::moderate_augmentation(AugmentKind::elastic);
  s.low_resolution = 1;
  s.low_resolution_scan = 8;
  return s;
}

TEST(LowResolution, ReachesItsShareOfSamplesAtEverySideOfItsRange) {
  AugmentSettings s = test::moderate_augmentation(AugmentKind::elastic);
  s.low_resolution = 0.3;
  s.low_resolution_scan = 8;  // the digit's 20 px at 8: the field's 28 at 11.2, so 11
  std::set<int> sides;
  int reduced = 0;
  constexpr int kSamples = 4000;
  for (std::uint32_t sample = 0; sample < kSamples; ++sample) {
    const int side = low_resolution_side(s, AugmentRandom(3, 1, sample));
    if (side == 0) continue;
    ++reduced;
    sides.insert(side);
  }
  // Binomial(4000, 0.3): a standard deviation of 29 samples; 5 of them either way.
  EXPECT_NEAR(reduced, 0.3 * kSamples, 5 * 29);
  EXPECT_EQ(*sides.begin(), 11);
  EXPECT_EQ(*sides.rbegin(), 27);
  EXPECT_EQ(sides.size(), 17u) << "every side from 11 to 27";
  s.low_resolution = 0;
  for (std::uint32_t sample = 0; sample < 100; ++sample)
    EXPECT_EQ(low_resolution_side(s, AugmentRandom(3, 1, sample)), 0);
}

// Area averaging keeps an image's mean exactly and bilinear enlargement nearly; both keep a flat
// image flat, and the stage blurs: the strongest pixel of a thin stroke falls.
TEST(LowResolution, KeepsTheInkAndBlursTheStrokes) {
  std::array<double, kImageBytes> flat;
  flat.fill(77);
  seen_at_low_resolution(flat.data(), 11);
  for (double v : flat) EXPECT_NEAR(v, 77, 1e-9);
  std::array<double, kImageBytes> stroke{};
  for (int y = 4; y < 24; ++y) stroke[std::size_t(y * kImageSide + 13)] = 255;
  const double before = std::accumulate(stroke.begin(), stroke.end(), 0.0);
  seen_at_low_resolution(stroke.data(), 11);
  const double after = std::accumulate(stroke.begin(), stroke.end(), 0.0);
  // Enlarging 11 to 28 weighs the reduced pixels unevenly near the edges of each: the ink's sum
  // moves by a few per cent, not more.
  EXPECT_NEAR(after, before, 0.05 * before);
  EXPECT_LT(*std::max_element(stroke.begin(), stroke.end()), 0.6 * 255);
}

// The stage follows the transform; with a share of 0 the images are those of a run without it.
TEST(LowResolution, AShareOfZeroLeavesEveryImageAsItWas) {
  const std::vector<std::uint8_t> images = rough_images();
  AugmentSettings with = test::moderate_augmentation(AugmentKind::elastic);
  with.low_resolution = 0;
  with.low_resolution_scan = 5;
  const AugmentSettings without = test::moderate_augmentation(AugmentKind::elastic);
  for (std::uint32_t sample = 0; sample < 4; ++sample) {
    std::array<float, kImageBytes> a{}, b{};
    augment_image_fast(images.data(), with, 9, 2, sample, a.data());
    augment_image_fast(images.data(), without, 9, 2, sample, b.data());
    EXPECT_EQ(a, b);
  }
  AugmentSettings none;
  none.low_resolution = 0.5;
  EXPECT_THROW(validate(none), UsageError) << "nothing to follow without a transform";
}

// The fast gather computes as the device does, in float, from the same draws: every input value
// lies within the float bound of tests/common/augment_tolerance.hpp (derived there) of the
// reference's, for moderate settings and every range at its limit, over several keys. Other
// draws, another Gaussian or a wrong key would be whole grey levels off.
TEST(FastAugmentation, IsWithinTheFloatBoundOfTheReference) {
  const std::vector<std::uint8_t> images = rough_images();
  const std::vector<std::int32_t> indices{0, 1};
  const AugmentSettings cases[] = {test::moderate_augmentation(AugmentKind::affine),
                                   test::moderate_augmentation(AugmentKind::elastic),
                                   test::extreme_affine(),
                                   test::extreme_elastic(28),
                                   test::extreme_elastic(0.5),
                                   every_sample_scanned_small()};
  double worst_share = 0;  // the largest error seen, as a fraction of its tolerance
  for (const AugmentSettings& settings : cases)
    for (std::uint64_t seed : {1ull, 977ull})
      for (std::uint32_t epoch : {0u, 7u, 0xFFFFFFFFu}) {
        const Augmentation augmentation{settings, seed};
        const std::vector<float> want = lenet5::gathered(gather_augmented_batch_reference, images,
                                                         indices, augmentation, epoch);
        const std::vector<float> got =
            lenet5::gathered(gather_augmented_batch_fast, images, indices, augmentation, epoch);
        for (std::size_t i = 0; i < indices.size(); ++i) {
          const double tolerance =
              test::augmented_pixel_tolerance(settings, seed, epoch, std::uint32_t(indices[i]));
          for (std::size_t p = 0; p < kInputFloats; ++p) {
            const std::size_t at = i * kInputFloats + p;
            const double error = std::fabs(double(got[at]) - double(want[at]));
            ASSERT_LE(error, tolerance)
                << to_string(settings.kind) << " sigma " << settings.elastic_sigma << " seed "
                << seed << " epoch " << epoch << " sample " << i << " value " << p;
            worst_share = std::max(worst_share, error / tolerance);
          }
        }
      }
  RecordProperty("largest_error_share_of_tolerance", std::to_string(worst_share));
}

}  // namespace
}  // namespace lenet5
