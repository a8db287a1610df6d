// cudnn.tab4 on the CPU (src/figures/cudnn_table4.hpp): the bookkeeping of the timed intervals,
// the bound on overall vs the sum of the phases, the speedup column and the check that catches
// the paper's D01, all with fixed numbers; the paper's own Table 4 (textbook-figures.md §3.7)
// through the same functions; the random data the target trains on; and the target's place in
// `lenet5 figures` (listed, and SKIPPED without a GPU). The measurement itself is tested in
// tests/gpu/test_phase_timing.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "figures/cudnn_table4.hpp"
#include "figures/figures.hpp"
#include "figures/phase_timing.hpp"
#include "test_util.hpp"

namespace lenet5 {
namespace {

using figures::Phase;
using figures::PhaseTimes;
using figures::Table;

// ---- the phase arithmetic -----------------------------------------------------------------------

TEST(CudnnTable4, IntervalsGoToTheirPhasesInMarkOrder) {
  // Two iterations: forward, backward, update of step 0, the same of step 1, then testing.
  // Powers of two, so that every sum is exact and a misplaced interval shows in its bit.
  const std::vector<float> intervals{1, 2, 4, 8, 16, 32, 64};
  ASSERT_EQ(figures::interval_count(2), 7);
  const PhaseTimes t = figures::sum_phase_intervals(intervals, 2, 127.5);
  EXPECT_EQ(t[Phase::forward], 1 + 8);
  EXPECT_EQ(t[Phase::backward], 2 + 16);
  EXPECT_EQ(t[Phase::update], 4 + 32);
  EXPECT_EQ(t[Phase::testing], 64);
  EXPECT_EQ(t.overall_ms, 127.5);  // the caller's reading, not the sum
  EXPECT_EQ(t.phase_sum(), 127);
  EXPECT_EQ(figures::interval_count(200), 601);  // the target's 200 iterations
}

TEST(CudnnTable4, WrongIntervalCountIsAnError) {
  EXPECT_THROW(figures::sum_phase_intervals(std::vector<float>(6), 2, 0), Error);
  EXPECT_THROW(figures::sum_phase_intervals(std::vector<float>(8), 2, 0), Error);
  EXPECT_THROW(figures::sum_phase_intervals(std::vector<float>(1), 0, 0), Error);
}

TEST(CudnnTable4, OverallSumBoundCountsEveryReading) {
  // 601 intervals and the overall: 602 readings of 0.5 us each, 0.301 ms.
  EXPECT_NEAR(figures::overall_sum_bound_ms(601, 0.0), 0.301, 1e-15);
  // Float rounding: 2^-24 of the overall for the intervals' readings, as much for its own.
  EXPECT_DOUBLE_EQ(
      figures::overall_sum_bound_ms(601, 1000.0) - figures::overall_sum_bound_ms(601, 0.0),
      2000.0 * 0x1.0p-24);
}

TEST(CudnnTable4, PositiveAndFinite) {
  EXPECT_TRUE(figures::positive_and_finite(figures::phase_times(1, 2, 3, 4, 10)));
  EXPECT_FALSE(figures::positive_and_finite(figures::phase_times(1, 2, 3, 0, 6)));
  EXPECT_FALSE(figures::positive_and_finite(figures::phase_times(1, -2, 3, 4, 6)));
  EXPECT_FALSE(figures::positive_and_finite(figures::phase_times(1, std::nan(""), 3, 4, 8)));
  EXPECT_FALSE(figures::positive_and_finite(
      figures::phase_times(1, 2, 3, 4, std::numeric_limits<double>::infinity())));
}

TEST(CudnnTable4, Differences) {
  EXPECT_DOUBLE_EQ(figures::max_relative_difference({2.0, 4.5, 1.0}, {2.0, 4.0, 1.0}), 0.125);
  EXPECT_EQ(figures::max_relative_difference({0.0}, {0.0}), 0.0);
  EXPECT_TRUE(std::isnan(figures::max_relative_difference({1.0, std::nan("")}, {1.0, 1.0})));
  EXPECT_THROW(figures::max_relative_difference({1.0}, {1.0, 2.0}), Error);
  EXPECT_EQ(figures::max_abs_difference({1.0f, -0.5f, 2.0f}, {1.0f, 0.25f, 2.0f}), 0.75);
  EXPECT_TRUE(std::isnan(figures::max_abs_difference({std::nanf("")}, {0.0f})));
  EXPECT_THROW(figures::max_abs_difference({1.0f}, {}), Error);
}

// ---- the paper's table through the same functions (§3.7) ----------------------------------------

TEST(CudnnTable4, PaperColumnsSumAndSpeedupsAsTheSpecificationDerives) {
  const PhaseTimes caffe = figures::cdnn_table4_caffe(), cudnn = figures::cdnn_table4_caffe_cudnn();
  EXPECT_EQ(caffe.phase_sum(), 290106);  // = its printed overall
  EXPECT_EQ(caffe.overall_ms, 290106);
  EXPECT_EQ(cudnn.phase_sum(), 213430);  // D02: printed 213,431
  EXPECT_EQ(cudnn.overall_ms, 213431);
  const Table t = figures::table4("Caffe", caffe, "Caffe+cuDNN", cudnn);
  std::vector<std::string> speedups;
  for (const auto& row : t.rows) speedups.push_back(row.at(3));
  EXPECT_EQ(speedups, (std::vector<std::string>{"1.295", "1.451", "1.487", "1.002", "1.359"}));
}

// ---- the tables ---------------------------------------------------------------------------------

TEST(CudnnTable4, TableHasThePapersLayout) {
  const PhaseTimes base = figures::phase_times(8, 4, 2, 1, 15.0004),
                   fast = figures::phase_times(4, 2, 1, 0.5, 7.5);
  const Table t = figures::table4("book + 1 direct", base, "fast + 5 staged", fast);
  EXPECT_EQ(t.columns, (std::vector<std::string>{"phase", "book + 1 direct ms",
                                                 "fast + 5 staged ms", "speedup"}));
  ASSERT_EQ(t.rows.size(), 5u);
  EXPECT_EQ(t.rows[0], (std::vector<std::string>{"Backward", "8.000", "4.000", "2.000"}));
  EXPECT_EQ(t.rows[1], (std::vector<std::string>{"Forward", "4.000", "2.000", "2.000"}));
  EXPECT_EQ(t.rows[2], (std::vector<std::string>{"Testing", "2.000", "1.000", "2.000"}));
  EXPECT_EQ(t.rows[3], (std::vector<std::string>{"Update", "1.000", "0.500", "2.000"}));
  EXPECT_EQ(t.rows[4], (std::vector<std::string>{"Overall", "15.000", "7.500", "2.000"}));
  std::string detail;
  EXPECT_TRUE(figures::speedups_as_printed(t, base, fast, detail)) << detail;
}

// The speedup check refuses `t`, a table of `base` and `fast` with a cell changed, and names
// the first wrong cell as `expected_detail`.
void expect_refused(const Table& t, const PhaseTimes& base, const PhaseTimes& fast,
                    const std::string& expected_detail) {
  std::string detail;
  EXPECT_FALSE(figures::speedups_as_printed(t, base, fast, detail));
  EXPECT_EQ(detail, expected_detail);
}

TEST(CudnnTable4, SpeedupCheckCatchesThePapersD01) {
  const PhaseTimes caffe = figures::cdnn_table4_caffe(), cudnn = figures::cdnn_table4_caffe_cudnn();
  Table t = figures::table4("Caffe", caffe, "Caffe+cuDNN", cudnn);
  std::string detail;
  ASSERT_TRUE(figures::speedups_as_printed(t, caffe, cudnn, detail)) << detail;
  // The paper's printed column: Backward 1.52 where the times give 1.295.
  const char* printed[] = {"1.520", "1.700", "1.487", "1.002", "1.359"};
  for (std::size_t row = 0; row < 5; ++row) t.rows[row][3] = printed[row];
  expect_refused(t, caffe, cudnn, "Backward: speedup printed 1.520, baseline / variant = 1.295");
}

TEST(CudnnTable4, SpeedupComesFromTheUnroundedTimes) {
  // Both forward times print as 1.000, but 1.0004 / 0.9996 = 1.0008: the table says 1.001, which
  // a reader can also get from 1.000 / 1.000 within their rounding; 1.000 (the ratio of the
  // rounded times) is refused.
  const PhaseTimes base = figures::phase_times(1, 1.0004, 1, 1, 4.0004),
                   fast = figures::phase_times(1, 0.9996, 1, 1, 3.9996);
  Table t = figures::table4("a", base, "b", fast);
  EXPECT_EQ(t.rows[1], (std::vector<std::string>{"Forward", "1.000", "1.000", "1.001"}));
  std::string detail;
  EXPECT_TRUE(figures::speedups_as_printed(t, base, fast, detail)) << detail;
  t.rows[1][3] = "1.000";
  expect_refused(t, base, fast, "Forward: speedup printed 1.000, baseline / variant = 1.001");
}

TEST(CudnnTable4, SpeedupCheckRefusesOtherTimesAndLayouts) {
  const PhaseTimes base = figures::phase_times(8, 4, 2, 1, 15),
                   fast = figures::phase_times(4, 2, 1, 0.5, 7.5);
  const Table t = figures::table4("a", base, "b", fast);
  Table wrong_time = t;
  wrong_time.rows[3][2] = "0.600";
  expect_refused(wrong_time, base, fast,
                 "Update: times printed 1.000 and 0.600, measured 1.000 and 0.500");
  std::string detail;
  Table swapped = t;
  std::swap(swapped.rows[0], swapped.rows[1]);
  EXPECT_FALSE(figures::speedups_as_printed(swapped, base, fast, detail));
  Table short_table = t;
  short_table.rows.pop_back();
  EXPECT_FALSE(figures::speedups_as_printed(short_table, base, fast, detail));
}

TEST(CudnnTable4, LongTableHasFiveRowsPerConfigurationAndTheBaselineFirst) {
  const Table t = figures::table4_long({{"book + 1 direct", figures::phase_times(8, 4, 2, 1, 15)},
                                        {"fast + 2 tiled", figures::phase_times(2, 1, 1, 1, 5)}});
  EXPECT_EQ(t.columns, (std::vector<std::string>{"configuration", "phase", "ms",
                                                 "speedup over book + 1 direct"}));
  ASSERT_EQ(t.rows.size(), 10u);
  EXPECT_EQ(t.rows[0], (std::vector<std::string>{"book + 1 direct", "Backward", "8.000", "1.000"}));
  EXPECT_EQ(t.rows[5], (std::vector<std::string>{"fast + 2 tiled", "Backward", "2.000", "4.000"}));
  EXPECT_EQ(t.rows[9], (std::vector<std::string>{"fast + 2 tiled", "Overall", "5.000", "3.000"}));
  EXPECT_EQ(t.csv().substr(0, t.csv().find('\n')),
            "configuration,phase,ms,speedup over book + 1 direct");
  EXPECT_THROW(figures::table4_long({}), Error);
}

// ---- the data and the command -------------------------------------------------------------------

TEST(CudnnTable4, RandomDataIsSeededAndMnistShaped) {
  const Dataset a = figures::random_dataset(300, 7), b = figures::random_dataset(300, 7);
  EXPECT_EQ(a.count, 300);
  EXPECT_EQ(a.images.size(), 300u * 28 * 28);
  ASSERT_EQ(a.labels.size(), 300u);
  EXPECT_EQ(a.images, b.images);
  EXPECT_EQ(a.labels, b.labels);
  std::vector<int> per_label(10, 0);
  for (std::uint8_t label : a.labels) {
    ASSERT_LT(label, 10);
    ++per_label[label];
  }
  for (int n : per_label) EXPECT_GT(n, 0);  // 300 draws of 10 labels: each is there
  EXPECT_NE(figures::random_dataset(300, 8).images, a.images);
}

TEST(CudnnTable4, ListedAsAGpuTargetAndSkippedWithoutOne) {
  testing::TempDir dir;
  const auto list = testing::run_lenet5("figures --list", dir);
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find("cudnn.tab4  GPU"), std::string::npos) << list.out;
  const auto run = testing::run_lenet5(
      "figures cudnn.tab4 --device cpu --out '" + (dir / "figs").string() + "'", dir);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("SKIPPED cudnn.tab4: --device cpu"), std::string::npos) << run.out;
}

}  // namespace
}  // namespace lenet5
