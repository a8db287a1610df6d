// The pieces of src/image/ink.hpp on synthetic inputs whose answers are known exactly: Otsu's
// threshold on hand-made histograms, the paper's surface under a known lighting, connected
// components, stroke widths of bars and the square dilation against a brute-force maximum.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "image/ink.hpp"

namespace lenet5 {
namespace {

// ---- Otsu's threshold --------------------------------------------------------------------------

// Two normal populations, each spread over +-3 sigma of whole bins.
std::vector<double> two_bumps(int n_bins, double mean_a, double weight_a, double mean_b,
                              double weight_b, double sigma) {
  std::vector<double> h(static_cast<std::size_t>(n_bins), 0.0);
  for (int i = 0; i < n_bins; ++i) {
    const auto bump = [&](double mean, double weight) {
      const double z = (i - mean) / sigma;
      return std::abs(z) > 3.0 ? 0.0 : weight * std::exp(-0.5 * z * z);
    };
    h[static_cast<std::size_t>(i)] = bump(mean_a, weight_a) + bump(mean_b, weight_b);
  }
  return h;
}

TEST(Otsu, TwoSpikesSplitHalfwayAcrossTheGap) {
  std::vector<double> h(256, 0.0);
  h[40] = 900, h[200] = 100;
  // Every t from 41 to 200 (the class above being bins t and up) separates the spikes equally
  // well; the middle of that run, (41 + 200 + 1) / 2, puts the split halfway between 40 and 200.
  EXPECT_EQ(otsu_threshold(h), 121);
}

TEST(Otsu, SymmetricBumpsSplitAtTheMiddle) {
  const auto h = two_bumps(256, 60.0, 1.0, 180.0, 1.0, 10.0);
  // The bumps end at 90 and 150 (3 sigma): any t in [91, 150] separates them completely.
  EXPECT_EQ(otsu_threshold(h), 121);
}

TEST(Otsu, OverlappingUnequalBumpsSplitBetweenTheMeans) {
  // Paper (90%) around 40 and ink (10%) around 170, close enough to overlap: no empty gap, so
  // the threshold comes from the variance itself. It must misplace few of either population:
  // at the optimum (bin 104 by a direct NumPy search) 1.7% of the paper and 1.2% of the ink
  // land on the wrong side; 3% leaves room for a bin either way, not for a wrong optimum.
  const auto paper = two_bumps(256, 40.0, 9.0, 1e9, 0.0, 30.0);
  const auto ink = two_bumps(256, 1e9, 0.0, 170.0, 1.0, 30.0);
  std::vector<double> h(256);
  for (std::size_t i = 0; i < h.size(); ++i) h[i] = paper[i] + ink[i];
  const int t = otsu_threshold(h);
  double paper_above = 0, paper_all = 0, ink_below = 0, ink_all = 0;
  for (int i = 0; i < 256; ++i) {
    paper_all += paper[static_cast<std::size_t>(i)];
    ink_all += ink[static_cast<std::size_t>(i)];
    if (i >= t) paper_above += paper[static_cast<std::size_t>(i)];
    if (i < t) ink_below += ink[static_cast<std::size_t>(i)];
  }
  EXPECT_LT(paper_above / paper_all, 0.03) << "t = " << t;
  EXPECT_LT(ink_below / ink_all, 0.03) << "t = " << t;
}

TEST(Otsu, NothingToSplitGivesZero) {
  EXPECT_EQ(otsu_threshold(std::vector<double>(256, 0.0)), 0);
  std::vector<double> one(256, 0.0);
  one[77] = 1000;
  EXPECT_EQ(otsu_threshold(one), 0);
}

// ---- the paper's surface -----------------------------------------------------------------------

GrayImage lit_page(int width, int height, double left, double right) {
  GrayImage image{width, height, std::vector<float>(static_cast<std::size_t>(width) * height)};
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      const double t = (x + 0.5) / width;
      image.pixels[static_cast<std::size_t>(y) * width + x] =
          static_cast<float>(left + (right - left) * t);
    }
  }
  return image;
}

TEST(PaperSurface, FollowsALinearShadowUnderTheInk) {
  // Paper lit from 0.95 on the left to 0.35 on the right, with a dark bar across the middle that
  // covers a fifth of the width and most of the height: the surface must report the paper
  // beneath the bar, not the bar.
  GrayImage image = lit_page(200, 160, 0.95, 0.35);
  for (int y = 20; y < 140; ++y) {
    for (int x = 80; x < 120; ++x) image.pixels[static_cast<std::size_t>(y) * 200 + x] = 0.05f;
  }
  const PaperSurface paper(image);
  for (const int x : {0, 50, 100, 150, 199}) {
    const double expected = 0.95 + (0.35 - 0.95) * (x + 0.5) / 200;
    // A linear ramp is fitted exactly, but a cell's median of an even number of pixels is the
    // upper of the middle two, half a pixel's step (0.0015) off the cell's centre.
    EXPECT_NEAR(paper.at(x, 80), expected, 0.002) << "x = " << x;
  }
  EXPECT_LT(paper.paper_fraction(), 0.85) << "the bar's cells are not paper";
  EXPECT_GT(paper.paper_fraction(), 0.7);
}

TEST(PaperSurface, LevelsAreEveryPixelsAt) {
  GrayImage image = lit_page(37, 23, 0.9, 0.3);
  for (int y = 0; y < 23; ++y) {
    image.pixels[static_cast<std::size_t>(y) * 37 + 5] = 0.0f;  // ink, so the fit is not trivial
    image.pixels[static_cast<std::size_t>(y) * 37 + y] *= 0.7f;
  }
  const PaperSurface paper(image);
  const std::vector<float> levels = paper.levels();
  ASSERT_EQ(levels.size(), image.pixels.size());
  for (int y = 0; y < 23; ++y) {
    for (int x = 0; x < 37; ++x) {
      // The row form a + (b + c u) u sums the same terms in another order: a few float ulps.
      EXPECT_NEAR(levels[static_cast<std::size_t>(y) * 37 + x], paper.at(x, y), 1e-6f);
    }
  }
}

TEST(PaperSurface, IsFlatForACleanScan) {
  GrayImage image = lit_page(60, 80, 0.9, 0.9);
  for (int y = 10; y < 70; ++y) image.pixels[static_cast<std::size_t>(y) * 60 + 30] = 0.0f;
  const PaperSurface paper(image);
  EXPECT_FLOAT_EQ(paper.at(30, 40), 0.9f);
  EXPECT_FLOAT_EQ(paper.at(0, 0), 0.9f);
}

TEST(PaperSurface, HandlesImagesSmallerThanItsGrid) {
  const PaperSurface one_pixel(GrayImage{1, 1, {0.25f}});
  EXPECT_FLOAT_EQ(one_pixel.at(0, 0), 0.25f);
  const PaperSurface one_row(lit_page(5, 1, 0.2, 0.6));
  // Five one-pixel cells of a linear ramp: the fit reproduces them (float rounding only).
  EXPECT_NEAR(one_row.at(0, 0), 0.24f, 1e-4);
  EXPECT_NEAR(one_row.at(4, 0), 0.56f, 1e-4);
}

// ---- connected pieces and stroke width ---------------------------------------------------------

std::vector<std::uint8_t> mask_from(const std::vector<const char*>& rows) {
  std::vector<std::uint8_t> mask;
  for (const char* row : rows) {
    for (const char* c = row; *c; ++c) mask.push_back(*c == '#');
  }
  return mask;
}

TEST(LabelInk, DiagonalsJoinAndGapsSeparate) {
  const auto mask = mask_from({
      "#.....#", ".#...#.", "..#.#..",
      "...#...",  // a V: diagonal neighbours only, one piece
      ".......",
      "##...#.",  // two more pieces
  });
  const InkLabels ink = label_ink(mask, 7, 6);
  ASSERT_EQ(ink.components.size(), 3u);
  const InkComponent& v = ink.components[static_cast<std::size_t>(ink.labels[0])];
  EXPECT_EQ(v.pixels, 7);
  EXPECT_EQ(v.box.x0, 0);
  EXPECT_EQ(v.box.x1, 7);
  EXPECT_EQ(v.box.y1, 4);
  EXPECT_EQ(ink.components[static_cast<std::size_t>(ink.labels[5 * 7])].pixels, 2);
  EXPECT_EQ(ink.labels[5 * 7 + 5], ink.labels[5 * 7 + 5]);
  EXPECT_NE(ink.labels[5 * 7 + 5], ink.labels[5 * 7]);
  EXPECT_EQ(ink.labels[4 * 7], -1);
}

TEST(LabelInk, AUShapeMergesTwoProvisionalLabels) {
  // The two arms get different labels on the first rows and meet only at the bottom.
  const auto mask = mask_from({
      "#...#",
      "#...#",
      "#####",
  });
  const InkLabels ink = label_ink(mask, 5, 3);
  ASSERT_EQ(ink.components.size(), 1u);
  EXPECT_EQ(ink.components[0].pixels, 9);
}

TEST(StrokeWidth, MatchesABarsWidth) {
  for (const int width : {1, 2, 3, 6}) {
    std::vector<std::uint8_t> mask(100 * 100, 0);
    for (int y = 0; y < 100; ++y) {
      for (int x = 40; x < 40 + width; ++x) mask[static_cast<std::size_t>(y) * 100 + x] = 1;
    }
    // A full-height bar: area 100 w, outline 200 (its sides) + 2 w (top and bottom edges of the
    // image count as outline), so 2A/P = 100 w / (100 + w), within 6% of w for w <= 6.
    EXPECT_NEAR(mean_stroke_width(mask, 100, 100), 100.0 * width / (100 + width), 1e-12);
  }
  EXPECT_EQ(mean_stroke_width(std::vector<std::uint8_t>(25, 0), 5, 5), 0.0);
}

// ---- dilation ----------------------------------------------------------------------------------

TEST(DilateSquare, EqualsTheBruteForceMaximum) {
  const int w = 23, h = 17;
  std::vector<float> image(static_cast<std::size_t>(w) * h);
  for (std::size_t i = 0; i < image.size(); ++i) {
    image[i] = static_cast<float>((i * 7919) % 101) / 100.0f;  // a fixed scatter of levels
  }
  for (const int r : {0, 1, 2, 5, 12}) {
    const std::vector<float> fast = dilate_square(image, w, h, r);
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) {
        float expected = 0.0f;
        for (int yy = std::max(0, y - r); yy <= std::min(h - 1, y + r); ++yy) {
          for (int xx = std::max(0, x - r); xx <= std::min(w - 1, x + r); ++xx) {
            expected = std::max(expected, image[static_cast<std::size_t>(yy) * w + xx]);
          }
        }
        // A maximum copies one of the inputs: exact.
        ASSERT_EQ(fast[static_cast<std::size_t>(y) * w + x], expected)
            << "r " << r << " at (" << x << ", " << y << ")";
      }
    }
  }
}

}  // namespace
}  // namespace lenet5
