// `lenet5 bench`: training time, accuracy and memory of one run per seed, as JSON lines (one per
// epoch, one per seed, one summary over the seeds) or as a table (a row per seed, then the mean,
// minimum and maximum). It trains exactly as `lenet5 train` does (same loop, same timing: the
// epoch's steps up to its one synchronisation, evaluation excluded), into a temporary folder that
// is removed afterwards. A run that augments is followed by a short one with the same settings
// and --augment none, so that the cost of augmentation is measured beside it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "train/settings.hpp"
#include "train/trainer.hpp"

namespace lenet5 {

// Called with each JSON line as it is produced.
using JsonLineSink = std::function<void(const std::string&)>;

// The epochs of the comparison run without augmentation: one that pays the one-time costs (as
// every run's first epoch does, see median_steady_epoch_seconds), then two timed ones.
constexpr int kNoAugmentEpochs = 3;

// What bench reports of one seed.
struct SeedBench {
  std::uint64_t seed = 0;
  // Fractions; none without evaluation. The last epoch's test accuracy; the last epoch's accuracy
  // on the held-out training images, and the test accuracy of the epoch they read best (what
  // best.safetensors scores), none without held-out images.
  std::optional<double> final_accuracy, final_validation_accuracy, chosen_accuracy;
  // Training seconds (evaluation excluded) to the end of the first epoch whose test accuracy
  // reached 99 % (99.2 %); none when no epoch did.
  std::optional<double> time_to_99_s, time_to_99_2_s;
  double median_epoch_s = 0;  // as configured (with its augmentation, if any); epochs 2 and later
  std::optional<double> median_epoch_s_no_augment;  // the same with --augment none, when it augments
  double training_s = 0;                            // every epoch's training time
  // GPU only. The peak of lenet5's own device buffers during this seed's run (data set, network,
  // scratch; the counter restarts for each seed), and the device's memory in use once the run's
  // buffers are freed (cudaMemGetInfo: every process on the GPU, CUDA context and cuBLAS included).
  std::optional<double> peak_allocated_mb, device_used_at_end_mb;

  // median_epoch_s / median_epoch_s_no_augment: 1.12 means augmentation costs 12 % of an epoch.
  std::optional<double> augment_epoch_ratio() const;
};

// Training seconds up to the end of the first epoch whose test accuracy is at least `target` (a
// fraction; an accuracy of exactly 9,900 of 10,000 reaches 0.99); none when no epoch reaches it
// or the epochs were not evaluated.
std::optional<double> time_to_accuracy(const std::vector<EpochReport>& epochs, double target);

// The median epoch time without the first epoch, which pays one-time costs (cuBLAS start-up,
// first-touch allocations, capturing the CUDA graph, clock ramp-up); with a single epoch, that one.
double median_steady_epoch_seconds(const std::vector<EpochReport>& epochs);

// The fields of SeedBench that follow from a run's epochs (accuracies, times to 99 % and 99.2 %,
// the median epoch and the training time); the others are left empty.
SeedBench summarise_epochs(std::uint64_t seed, const std::vector<EpochReport>& epochs);

// Mean, minimum and maximum of the seeds that have a value, and how many do; none when none does.
struct Spread {
  double mean = 0, min = 0, max = 0;
  int count = 0;
};
std::optional<Spread> spread_of(const std::vector<std::optional<double>>& values);

struct BenchReport {
  std::string heading;      // one line: program, device, the settings that matter
  bool augments = false;    // the runs augment: the table shows the epoch without augmentation
  bool on_gpu = false;      // the table shows device memory
  std::vector<SeedBench> seeds;
};

// Trains once per seed, emitting the JSON lines as it goes, and returns what it measured.
BenchReport run_benchmark(const TrainSettings& settings, const std::vector<std::uint64_t>& seeds,
                          const JsonLineSink& emit);

// The report as a Markdown table, a row per seed then mean, min and max, with a line of notes on
// what the columns measure.
std::string format_bench_table(const BenchReport& report);

// Per-layer GPU timing at the settings' batch size: forward, backward_input and backward_weights
// of every layer, one JSON line each (median of `repetitions` runs timed with CUDA events).
void run_layer_benchmark(const TrainSettings& settings, int repetitions, const JsonLineSink& emit);

}  // namespace lenet5
