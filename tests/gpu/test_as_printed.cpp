// The as-printed kernels (cuda/figures/as_printed.cuh) reproduce the deterministic bug signatures of
// textbook-figures.md §2.2 and §1.17, so that `lenet5 figures` demonstrates real behaviour:
//   E10: with a 2x2-tile grid only the top-left 17x17 of each 32x32 map is written (735 of 1,024
//        unwritten); LeNet C1 (N=2) leaves 6,336 unwritten with the printed grid, 5,940 with ceil;
//   E11: C3 and C5 get Z = 0 (cudaErrorInvalidConfiguration, Y untouched); with the ceil grid
//        4,992 and 61,200 threads fall outside the map;
//   E15/E16: LeNet C1 (N=2) has 210,000 out-of-tile shared reads with E16; with distinct float
//        inputs 7,680 / 2,496 / 6,336 outputs are wrong (both / E15 only / E16 only);
//   E23: zero blocks for every LeNet layer (invalid configuration, nothing unrolled); C=40, 28x28
//        gets 30 blocks, and the missing 640 threads leave 16,000 cells unwritten.
// Outputs are NaN-poisoned before every launch.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cuda/figures/as_printed.cuh"
#include "gpu_test_util.hpp"
#include "layers/reference_cpu.hpp"

namespace {

using lenet5::ConvShape;
using namespace lenet5::test;
namespace ap = lenet5::cuda::as_printed;

const ConvShape kC1{2, 1, 32, 32, 6, 5};
const ConvShape kC3{2, 6, 14, 14, 16, 5};
const ConvShape kC5{2, 16, 5, 5, 120, 5};
const ConvShape kTwoByTwo{1, 3, 36, 36, 2, 5};

// Integer inputs and the exact CPU output.
struct Data {
  std::vector<float> x, w, y;
};
Data integer_data(const ConvShape& s, unsigned seed) {
  Data d{random_integers(x_count(s), -3, 3, seed), random_integers(weight_count(s), -3, 3, seed + 1),
         std::vector<float>(y_count(s))};
  lenet5::conv_forward_cpu(s, d.x.data(), d.w.data(), static_cast<const float*>(nullptr), d.y.data());
  return d;
}

struct Result {
  ap::Launch launch;
  std::vector<float> y;
};
Result fig16_12(const ConvShape& s, const Data& d, ap::GridRule rule, bool printed_index) {
  auto x = upload(d.x), w = upload(d.w);
  auto y = poisoned(y_count(s));
  Result r{ap::conv_forward_fig16_12(s, rule, printed_index, x.data(), w.data(), y.data()), {}};
  r.y = download(y);
  return r;
}
Result fig16_13(const ConvShape& s, const std::vector<float>& xh, const std::vector<float>& wh,
                ap::Fig16_13Errata errata) {
  auto x = upload(xh), w = upload(wh);
  auto y = poisoned(y_count(s));
  Result r{ap::conv_forward_fig16_13(s, ap::GridRule::ceil, errata, x.data(), w.data(), y.data()), {}};
  r.y = download(y);
  return r;
}

// Written outputs equal the reference; returns how many are unwritten.
std::size_t unwritten_if_rest_correct(const std::vector<float>& y, const std::vector<float>& ref) {
  std::size_t nans = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (std::isnan(y[i])) ++nans;
    else EXPECT_EQ(y[i], ref[i]) << "at " << i;
  }
  return nans;
}

TEST(AsPrinted, Fig16_12_E10_LeavesAll_But_The17x17Corner_Of_Each_32x32_Map) {
  LENET5_REQUIRE_GPU();
  const Data d = integer_data(kTwoByTwo, 11);
  const Result r = fig16_12(kTwoByTwo, d, ap::GridRule::ceil, true);
  ASSERT_TRUE(r.launch.launched());
  for (int map = 0; map < 2; ++map) {
    int unwritten = 0;
    for (int h = 0; h < 32; ++h)
      for (int w = 0; w < 32; ++w) {
        const std::size_t i = (std::size_t(map) * 32 + h) * 32 + w;
        const bool nan = std::isnan(r.y[i]);
        unwritten += nan;
        EXPECT_EQ(nan, h > 16 || w > 16) << "map " << map << " (" << h << ", " << w << ")";
        if (!nan) EXPECT_EQ(r.y[i], d.y[i]);
      }
    EXPECT_EQ(unwritten, 735) << "map " << map;
  }
}

TEST(AsPrinted, Fig16_12_LeNetC1_PrintedAndCeilGrids) {
  LENET5_REQUIRE_GPU();
  const Data d = integer_data(kC1, 12);
  EXPECT_EQ(unwritten_if_rest_correct(fig16_12(kC1, d, ap::GridRule::printed, true).y, d.y), 6336u);
  EXPECT_EQ(unwritten_if_rest_correct(fig16_12(kC1, d, ap::GridRule::ceil, true).y, d.y), 5940u);
  EXPECT_TRUE(all_equal(fig16_12(kC1, d, ap::GridRule::ceil, false).y, d.y));  // E10 fixed
}

TEST(AsPrinted, Fig16_12_ZeroGridIsAnInvalidConfiguration_CeilGridCountsOutOfMapThreads) {
  LENET5_REQUIRE_GPU();
  const std::vector<std::pair<ConvShape, long long>> cases{{kC3, 4992}, {kC5, 61200}};
  for (const auto& [s, out_of_map] : cases) {
    const Data d = integer_data(s, 13);
    const Result printed = fig16_12(s, d, ap::GridRule::printed, true);
    EXPECT_EQ(printed.launch.grid.z, 0u);
    EXPECT_TRUE(ap::is_zero_grid_refusal(printed.launch.status))
        << cudaGetErrorName(printed.launch.status);
    EXPECT_EQ(count_nans(printed.y), y_count(s));  // nothing ran
    const Result ceil = fig16_12(s, d, ap::GridRule::ceil, true);  // the error did not stick
    ASSERT_TRUE(ceil.launch.launched());
    EXPECT_EQ(ceil.launch.tally.out_of_map_threads, out_of_map);
    EXPECT_TRUE(all_equal(ceil.y, d.y));
  }
}

TEST(AsPrinted, Fig16_13_E15_E16_Signatures_OnLeNetC1) {
  LENET5_REQUIRE_GPU();
  // Distinct float inputs: an output that reads a misplaced tile element is wrong (no chance
  // coincidences as with small integers), and right outputs are bit-identical to the fixed
  // variant's (same kernel, same summation order).
  const std::vector<float> x = random_floats(x_count(kC1), 21), w = random_floats(weight_count(kC1), 22);
  const Result fixed = fig16_13(kC1, x, w, {false, false, true});
  EXPECT_EQ(count_nans(fixed.y), 0u);
  EXPECT_EQ(fixed.launch.tally.shared_out_of_tile, 0);
  struct Expect {
    ap::Fig16_13Errata errata;
    std::size_t wrong;
    long long shared_out_of_tile;
  };
  for (const Expect& e : {Expect{{true, true, true}, 7680, 210000}, Expect{{true, false, true}, 2496, 0},
                          Expect{{false, true, true}, 6336, 210000}}) {
    const Result r = fig16_13(kC1, x, w, e.errata);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < r.y.size(); ++i) wrong += !(r.y[i] == fixed.y[i]);
    EXPECT_EQ(wrong, e.wrong) << "E15 " << e.errata.e15 << ", E16 " << e.errata.e16;
    EXPECT_EQ(count_nans(r.y), 0u);
    EXPECT_EQ(r.launch.tally.shared_out_of_tile, e.shared_out_of_tile);
  }
}

TEST(AsPrinted, Fig16_13_FixedVariant_And_E18_MatchTheCpuExactly) {
  LENET5_REQUIRE_GPU();
  for (const ConvShape& s : {kC1, kC3, kC5, kTwoByTwo}) {
    const Data d = integer_data(s, 31);
    EXPECT_TRUE(all_equal(fig16_13(s, d.x, d.w, {false, false, true}).y, d.y));
    EXPECT_TRUE(all_equal(fig16_13(s, d.x, d.w, {false, false, false}).y, d.y));
    const bool printed_right = bool(all_equal(fig16_13(s, d.x, d.w, {true, true, true}).y, d.y));
    EXPECT_EQ(printed_right, s.h_out() <= 12)
        << "E15/E16 are invisible exactly when the map fits in one tile with room for K";
  }
}

TEST(AsPrinted, Fig16_17_E23_ZeroBlocksFailAndC40Misses640Threads) {
  LENET5_REQUIRE_GPU();
  const std::vector<ConvShape> zero_block_cases{
      {1, 1, 32, 32, 6, 5}, {1, 6, 14, 14, 16, 5}, {1, 16, 5, 5, 120, 5}, {1, 3, 3, 3, 2, 2}};
  for (const ConvShape& s : zero_block_cases) {
    EXPECT_EQ(ap::fig16_17_printed_blocks(s), 0);
    EXPECT_EQ(ap::fig16_17_correct_blocks(s), 1);
    auto x = upload(random_integers(x_count(s), 0, 9, 41));
    auto unrolled = poisoned(std::size_t(s.c) * s.k * s.k * s.h_out() * s.w_out());
    const ap::Launch launch = ap::unroll_gpu_fig16_17(s, x.data(), unrolled.data());
    EXPECT_TRUE(ap::is_zero_grid_refusal(launch.status)) << cudaGetErrorName(launch.status);
    EXPECT_EQ(count_nans(download(unrolled)), unrolled.size());
  }
  const ConvShape c40{1, 40, 32, 32, 6, 5};
  EXPECT_EQ(ap::fig16_17_printed_blocks(c40), 30);
  EXPECT_EQ(ap::fig16_17_correct_blocks(c40), 31);
  const std::vector<float> xh = random_integers(x_count(c40), 0, 9, 42);
  std::vector<float> expected(std::size_t(40) * 25 * 784);
  lenet5::conv_unroll_cpu(c40, xh.data(), expected.data());
  auto x = upload(xh);
  auto unrolled = poisoned(expected.size());
  ASSERT_TRUE(ap::unroll_gpu_fig16_17(c40, x.data(), unrolled.data()).launched());
  const std::vector<float> got = download(unrolled);
  // Threads t >= 30*1024 = 30,720 are missing: channel 39, output positions 144..783.
  std::size_t misplaced = 0;
  for (int row = 0; row < 40 * 25; ++row)
    for (int col = 0; col < 784; ++col) {
      const std::size_t i = std::size_t(row) * 784 + col;
      const bool missing = row / 25 == 39 && col >= 144;
      misplaced += missing ? !std::isnan(got[i]) : !(got[i] == expected[i]);
    }
  EXPECT_EQ(misplaced, 0u) << "cells other than the missing threads' are unwritten or wrong";
  EXPECT_EQ(count_nans(got), 16000u);
}

}  // namespace
