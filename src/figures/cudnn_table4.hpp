// Table 4 of the cuDNN paper (Caffe vs Caffe+cuDNN, training time per phase, textbook-figures.md
// §3.7) and its LeNet analogue, cudnn.tab4: the phase arithmetic and the tables, free of any GPU
// so that tests/cpu checks them with fixed numbers; and the paper's own table with its findings
// D01, D02 and D05, which cudnn.printed prints and cudnn.tab4 prints again beside its measurement.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include "data/mnist.hpp"
#include "figures/figures.hpp"

namespace lenet5::figures {

// `count` images of random bytes (0..255) and random labels (0..9) from SplitMix64 with `seed`:
// MNIST's shapes without its files, for runs that measure only time (cudnn.tab4's).
Dataset random_dataset(int count, std::uint64_t seed);

// The phases, in the paper's row order (its Overall row follows them).
enum class Phase { backward, forward, testing, update };
constexpr int kPhases = 4;
constexpr std::array<Phase, kPhases> kAllPhases{Phase::backward, Phase::forward, Phase::testing,
                                                Phase::update};
const char* phase_name(Phase phase);  // "Backward", "Forward", "Testing", "Update"

// One column of Table 4, in milliseconds.
struct PhaseTimes {
  std::array<double, kPhases> ms{};  // indexed by Phase
  double overall_ms = 0;             // measured (or printed) for the whole run, NOT the sum

  double& operator[](Phase p) { return ms[std::size_t(p)]; }
  double operator[](Phase p) const { return ms[std::size_t(p)]; }
  double phase_sum() const;
};

// Times in the paper's row order (Backward, Forward, Testing, Update) and the overall time.
PhaseTimes phase_times(double backward, double forward, double testing, double update,
                       double overall);

// The paper's two columns [T CDNN:167-183], in the printed units (probably milliseconds, D05).
PhaseTimes cdnn_table4_caffe();        // 156,270 / 109,310 / 21,600 / 2,926; overall 290,106
PhaseTimes cdnn_table4_caffe_cudnn();  // 120,651 / 75,330 / 14,529 / 2,920; overall 213,431

// ---- the measurement's arithmetic ---------------------------------------------------------------

// cudnn.tab4 marks CUDA events back to back on one stream: before each of `iterations` steps'
// forward, backward and update, then after the last update (testing starts) and after testing.
// The 3 * iterations + 1 intervals between consecutive marks are therefore, in order, forward,
// backward and update of step 0, of step 1, ..., then testing.
int interval_count(int iterations);
// Sums those intervals per phase (in double, in order); overall_ms is copied as given: the
// caller's own reading from the first mark to the last. Throws Error on a wrong interval count.
PhaseTimes sum_phase_intervals(const std::vector<float>& intervals_ms, int iterations,
                               double overall_ms);

// cudaEventElapsedTime's documented resolution: "around 0.5 microseconds".
constexpr double kEventResolutionMs = 0.5e-3;
// The largest |overall - sum of the phases| that event timing alone explains, when `intervals`
// readings are summed and compared with one reading of the whole. The marks tile the run with
// no gap and no overlap, so with exact timestamps the intervals telescope to the overall exactly;
// each of the intervals + 1 readings may be off by one resolution step, and each is a float in
// milliseconds, rounded to within 2^-24 of itself: the roundings of the intervals add up to at
// most overall * 2^-24, the overall's own to as much again. 200 iterations: 602 readings, 301 us
// and a little more; a bookkeeping error moves the sum by whole intervals instead (200 of them for
// a phase left out or counted twice).
double overall_sum_bound_ms(int intervals, double overall_ms);

// baseline / variant: how many times faster the variant is (the paper's "Speedup").
double speedup(double baseline_ms, double variant_ms);
// Every phase and the overall are finite and > 0.
bool positive_and_finite(const PhaseTimes& t);

// max_i |a_i - b_i| / max(|b_i|, tiny); sizes must agree (Error otherwise). b is the reference.
double max_relative_difference(const std::vector<double>& a, const std::vector<double>& b);
// max_i |a_i - b_i|; sizes must agree (Error otherwise).
double max_abs_difference(const std::vector<float>& a, const std::vector<float>& b);

// ---- tables -------------------------------------------------------------------------------------

// Times print with 3 decimals (1 us in ms), speedups with 3 (the specification's computed column).
constexpr int kMsDecimals = 3, kSpeedupDecimals = 3;

// The paper's layout for one variant: rows Backward, Forward, Testing, Update, Overall; columns
// phase, "<baseline> ms", "<variant> ms", speedup, the speedup computed from the unrounded times.
Table table4(const std::string& baseline_name, const PhaseTimes& baseline,
             const std::string& variant_name, const PhaseTimes& variant);
// The check that the paper's table fails (D01), applied to a table4(): every time cell is the
// time given, every speedup cell is baseline / variant of the unrounded times, and is also what a
// reader gets from the printed (rounded) times, up to their rounding. `detail` names the first
// row that is not.
bool speedups_as_printed(const Table& table, const PhaseTimes& baseline, const PhaseTimes& variant,
                         std::string& detail);

// Every configuration in long format, easy to plot: configuration, phase, ms, speedup over the
// first configuration (the baseline); five rows each (the phases, then Overall).
struct PhaseColumn {
  std::string name;
  PhaseTimes times;
};
Table table4_long(const std::vector<PhaseColumn>& columns);

// ---- the paper's table --------------------------------------------------------------------------

// Prints the paper's Table 4 with its printed and computed speedups and checks the findings of
// §3.7: the Caffe column sums to its overall, the cuDNN column does not (D02), the printed
// Backward and Forward speedups do not match the times (D01), "36 %", and the unit (D05). The
// table is written as <table_name>.md and .csv.
void paper_table4(Block& b, const std::string& table_name = "table4");

}  // namespace lenet5::figures
