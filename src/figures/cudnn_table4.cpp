// cudnn.tab4's phase arithmetic and tables, and the cuDNN paper's own Table 4.
#include "figures/cudnn_table4.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "core/shapes.hpp"
#include "figures/figure_util.hpp"

namespace lenet5::figures {

Dataset random_dataset(int count, std::uint64_t seed) {
  if (count < 0) throw Error("internal: a data set of " + std::to_string(count) + " images");
  Dataset data;
  data.count = count;
  data.images.resize(std::size_t(count) * kImageBytes);
  data.labels.resize(std::size_t(count));
  SplitMix64 rng(seed);
  for (std::uint8_t& pixel : data.images) pixel = std::uint8_t(rng.next() >> 56);  // top 8 bits
  for (std::uint8_t& label : data.labels) label = std::uint8_t(rng.below(kClasses));
  return data;
}

const char* phase_name(Phase phase) {
  static constexpr const char* kNames[kPhases] = {"Backward", "Forward", "Testing", "Update"};
  if (std::size_t(phase) >= kPhases)
    throw Error("internal: unknown phase " + std::to_string(int(phase)));
  return kNames[std::size_t(phase)];  // in the enum's order
}

double PhaseTimes::phase_sum() const {
  double sum = 0;
  for (Phase p : kAllPhases) sum += (*this)[p];
  return sum;
}

PhaseTimes phase_times(double backward, double forward, double testing, double update,
                       double overall) {
  PhaseTimes t;
  t[Phase::backward] = backward;
  t[Phase::forward] = forward;
  t[Phase::testing] = testing;
  t[Phase::update] = update;
  t.overall_ms = overall;
  return t;
}

PhaseTimes cdnn_table4_caffe() {
  return phase_times(156270, 109310, 21600, 2926, 290106);
}
PhaseTimes cdnn_table4_caffe_cudnn() {
  return phase_times(120651, 75330, 14529, 2920, 213431);
}

// ---- the measurement's arithmetic ---------------------------------------------------------------

int interval_count(int iterations) {
  return 3 * iterations + 1;
}

PhaseTimes sum_phase_intervals(const std::vector<float>& intervals_ms, int iterations,
                               double overall_ms) {
  if (iterations < 1 || intervals_ms.size() != std::size_t(interval_count(iterations)))
    throw Error("internal: " + std::to_string(intervals_ms.size()) + " timed intervals for " +
                std::to_string(iterations) + " iterations (expected 3 per iteration + testing)");
  const Phase per_step[3] = {Phase::forward, Phase::backward, Phase::update};
  PhaseTimes t;
  for (std::size_t i = 0; i + 1 < intervals_ms.size(); ++i) t[per_step[i % 3]] += intervals_ms[i];
  t[Phase::testing] = intervals_ms.back();
  t.overall_ms = overall_ms;
  return t;
}

double overall_sum_bound_ms(int intervals, double overall_ms) {
  const double float_rounding = 0x1.0p-24;  // relative, round to nearest
  return (intervals + 1) * kEventResolutionMs + 2.0 * std::fabs(overall_ms) * float_rounding;
}

double speedup(double baseline_ms, double variant_ms) {
  return baseline_ms / variant_ms;
}

bool positive_and_finite(const PhaseTimes& t) {
  const auto ok = [](double ms) { return std::isfinite(ms) && ms > 0; };
  return std::all_of(t.ms.begin(), t.ms.end(), ok) && ok(t.overall_ms);
}

namespace {

// The largest difference(a[i], b[i]), or the first NaN one: a NaN is never close, it fails any
// tolerance.
template <class T, class Difference>
double worst_difference(const std::vector<T>& a, const std::vector<T>& b, Difference difference) {
  if (a.size() != b.size())
    throw Error("internal: compared " + std::to_string(a.size()) + " values with " +
                std::to_string(b.size()));
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = difference(double(a[i]), double(b[i]));
    if (std::isnan(d)) return d;
    worst = std::max(worst, d);
  }
  return worst;
}

}  // namespace

double max_relative_difference(const std::vector<double>& a, const std::vector<double>& b) {
  return worst_difference(a, b, [](double x, double reference) {
    return std::fabs(x - reference) /
           std::max(std::fabs(reference), std::numeric_limits<double>::min());
  });
}

double max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  return worst_difference(a, b, [](double x, double y) { return std::fabs(x - y); });
}

// ---- tables -------------------------------------------------------------------------------------

namespace {

// The table's rows: the phases, then Overall, with the time of each in a column.
constexpr int kRows = kPhases + 1;
const char* row_name(int row) {
  return row < kPhases ? phase_name(kAllPhases[row]) : "Overall";
}
double row_ms(const PhaseTimes& t, int row) {
  return row < kPhases ? t[kAllPhases[row]] : t.overall_ms;
}

std::string ms_text(double ms) {
  return fixed(ms, kMsDecimals);
}
std::string speedup_text(double baseline_ms, double variant_ms) {
  return fixed(speedup(baseline_ms, variant_ms), kSpeedupDecimals);
}

// Whether `printed` can be the ratio of two times printed as B and V: each printed time is within
// half a unit of its last place of the true one, and the printed speedup within half a unit of
// its own last place of the true ratio (1e-9: exact halves in binary, as figure_util's agrees()).
bool consistent_with_printed_times(double printed, double B, double V) {
  const double h = 0.5 * std::pow(10.0, -kMsDecimals), s = 0.5 * std::pow(10.0, -kSpeedupDecimals);
  const double lo = (B - h) / (V + h);
  const double hi = V - h > 0 ? (B + h) / (V - h) : std::numeric_limits<double>::infinity();
  return printed >= lo - s - 1e-9 && printed <= hi + s + 1e-9;
}

}  // namespace

Table table4(const std::string& baseline_name, const PhaseTimes& baseline,
             const std::string& variant_name, const PhaseTimes& variant) {
  Table t{{"phase", baseline_name + " ms", variant_name + " ms", "speedup"}, {}};
  for (int row = 0; row < kRows; ++row)
    t.add({row_name(row), ms_text(row_ms(baseline, row)), ms_text(row_ms(variant, row)),
           speedup_text(row_ms(baseline, row), row_ms(variant, row))});
  return t;
}

bool speedups_as_printed(const Table& table, const PhaseTimes& baseline, const PhaseTimes& variant,
                         std::string& detail) {
  if (table.rows.size() != std::size_t(kRows) || table.columns.size() != 4) {
    detail = "not a Table 4 layout (" + std::to_string(table.rows.size()) + " rows, " +
             std::to_string(table.columns.size()) + " columns)";
    return false;
  }
  for (int row = 0; row < kRows; ++row) {
    const std::vector<std::string>& cells = table.rows[row];
    const double b = row_ms(baseline, row), v = row_ms(variant, row);
    const std::string computed = speedup_text(b, v);
    std::string problem;
    if (cells.size() != 4 || cells[0] != row_name(row))
      problem = "row " + std::to_string(row + 1) + " is not " + row_name(row);
    else if (cells[1] != ms_text(b) || cells[2] != ms_text(v))
      problem = "times printed " + cells[1] + " and " + cells[2] + ", measured " + ms_text(b) +
                " and " + ms_text(v);
    else if (cells[3] != computed)
      problem = "speedup printed " + cells[3] + ", baseline / variant = " + computed;
    else if (!consistent_with_printed_times(std::strtod(cells[3].c_str(), nullptr),
                                            std::strtod(cells[1].c_str(), nullptr),
                                            std::strtod(cells[2].c_str(), nullptr)))
      problem = "speedup " + cells[3] + " is not " + cells[1] + " / " + cells[2] +
                " within their rounding";
    if (!problem.empty()) {
      detail = std::string(row_name(row)) + ": " + problem;
      return false;
    }
  }
  return true;
}

Table table4_long(const std::vector<PhaseColumn>& columns) {
  if (columns.empty()) throw Error("internal: a Table 4 needs at least its baseline");
  Table t{{"configuration", "phase", "ms", "speedup over " + columns.front().name}, {}};
  for (const PhaseColumn& c : columns)
    for (int row = 0; row < kRows; ++row)
      t.add({c.name, row_name(row), ms_text(row_ms(c.times, row)),
             speedup_text(row_ms(columns.front().times, row), row_ms(c.times, row))});
  return t;
}

// ---- the paper's table --------------------------------------------------------------------------

void paper_table4(Block& b, const std::string& table_name) {
  const PhaseTimes caffe = cdnn_table4_caffe(), cudnn = cdnn_table4_caffe_cudnn();
  // The printed speedups, with the decimals they are printed with ("1.7" has one).
  const double printed[kRows] = {1.52, 1.7, 1.49, 1.00, 1.36};
  const int printed_decimals[kRows] = {2, 1, 2, 2, 2};
  const double caffe_sum = caffe.phase_sum(), cudnn_sum = cudnn.phase_sum();
  b.line("Caffe column sums to " + grouped((long long)caffe_sum) + " (printed " +
         grouped((long long)caffe.overall_ms) + "), Caffe+cuDNN to " +
         grouped((long long)cudnn_sum) + " (printed " + grouped((long long)cudnn.overall_ms) + ")");
  b.check("the Caffe column sums exactly to 290,106", caffe_sum == caffe.overall_ms);
  b.check("D02: the cuDNN column sums to 213,430, not the printed 213,431", cudnn_sum == 213430);
  std::vector<double> computed;
  std::string mismatched;
  Table t{{"phase", "Caffe", "Caffe+cuDNN", "speedup printed", "speedup computed"}, {}};
  for (int row = 0; row < kRows; ++row) {
    const double a = row_ms(caffe, row), c = row_ms(cudnn, row);
    computed.push_back(speedup(a, c));
    t.add({row_name(row), grouped((long long)a), grouped((long long)c),
           fixed(printed[row], printed_decimals[row]), fixed(computed.back(), 3)});
    if (!agrees(computed.back(), printed[row], printed_decimals[row]))
      mismatched += std::string(" ") + row_name(row);
  }
  b.table(table_name, t);
  check_list(b, "speedups computed from the times", computed, {1.295, 1.451, 1.487, 1.002, 1.359},
             3);
  b.check("D01: the printed Backward (1.52) and Forward (1.7) speedups do not match the times",
          mismatched == " Backward Forward", mismatched);
  b.check("\"improves performance by 36 %\" matches the overall 1.359",
          agrees((computed[kPhases] - 1) * 100, 36, 0));
  const double hours = caffe.overall_ms / 3600;
  b.line("D05: 290,106 \"seconds\" for 200 iterations would be " + fixed(hours, 1) + " h (" +
         fixed(caffe.overall_ms / 200, 1) + " s per iteration); as milliseconds it is " +
         fixed(caffe.overall_ms / 200 / 1000, 2) + " s per iteration");
  b.check("D05: the unit seconds implies about 80 h for 200 iterations", agrees(hours, 80.6, 1));
}

}  // namespace lenet5::figures
