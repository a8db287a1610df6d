// A sweep's results, gathered per setting (every value but the seed): how many models, the final
// test accuracy's mean, standard deviation, min and max, and the time to 99 % test accuracy. Read
// from the models' metrics.csv, so that a sweep, its shards merged, and a resumed sweep all
// summarise the same way. Printed, and written as summary.csv and summary.json.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "sweep/sweep.hpp"
#include "train/run_pictures.hpp"

namespace lenet5 {

// One model's metrics.csv, read from its run folder.
struct SweepModelResult {
  SweepModel model;
  int epochs = 0;                // the epochs the model is to train
  std::vector<MetricsRow> rows;  // empty: not trained (yet)
};

struct SettingSummary {
  std::string setting;  // "lr=0.1" ("(all)" when only the seed varies)
  int models = 0;       // models of this setting that finished their epochs and were evaluated
  // The final epoch's test accuracy, in percent, over those models. The standard deviation is the
  // sample one (divided by models - 1), 0 for a single model.
  double mean = 0, stddev = 0, min = 0, max = 0;
  // The first epoch whose test accuracy reached 99 %, and the training seconds up to its end
  // (evaluation excluded), averaged over the models that reached it.
  int reached_99 = 0;
  double epoch_to_99 = 0, seconds_to_99 = 0;
};

// The metrics of each model, from its run folder's metrics.csv in `sweep_dir` (a model with no
// file has no rows).
std::vector<SweepModelResult> read_sweep_results(const std::filesystem::path& sweep_dir,
                                                 const std::vector<SweepModelRun>& runs);

// One summary per setting, in the order of the models' indices (the sweep's order, whichever
// shards they came from). Models that have not trained all their epochs, or whose last epoch was
// not evaluated, count nowhere.
std::vector<SettingSummary> summarise_sweep(std::vector<SweepModelResult> results);

// A sweep folder read back (a shard's, for `lenet5 sweep --merge`).
struct SweepShardFolder {
  std::filesystem::path dir;
  SweepSpec spec;
  std::string computed_settings;  // computed_settings() of its base settings' config text
  std::vector<SweepModelRun> runs;
};

// The settings of a config text as far as they decide what the models compute: the checkpoints'
// text (train/settings.hpp's checkpoint_config) without the data folder and the device, which may
// differ between the machines that ran the shards.
std::string computed_settings(const std::string& config_toml);

// The results of the shards of one sweep, every model read from its shard's folder. UsageError for
// folders of different sweeps (other settings, lists or number of shards) or a shard given twice;
// a missing shard is a warning (the summary then covers the others).
std::vector<SweepModelResult> merge_sweep_shards(const std::vector<SweepShardFolder>& shards);

std::string format_summary_table(const std::vector<SettingSummary>& summaries);
std::string summary_csv(const std::vector<SettingSummary>& summaries);
std::string summary_json(const std::vector<SettingSummary>& summaries);

// summary.csv and summary.json into `dir`, each written atomically.
void write_sweep_summary(const std::filesystem::path& dir,
                         const std::vector<SettingSummary>& summaries);

}  // namespace lenet5
