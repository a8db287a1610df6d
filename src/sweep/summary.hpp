// A sweep's results, gathered per setting (every value but the seed): how many models, the final
// test accuracy's mean, standard deviation, min and max, and the time to 99 % test accuracy. Read
// from the models' metrics.csv, so that a sweep, its shards merged, and a resumed sweep all
// summarise the same way. Printed, and written as summary.csv and summary.json.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
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

// The spread of one setting's models at one epoch: how many models have a value there, and its
// mean, min and max over them.
struct EpochSpread {
  int epoch = 0;
  int models = 0;
  double mean = 0, min = 0, max = 0;
};

// The curves of one setting, every model that has trained an epoch counted (unfinished ones
// too, so that a sweep in training shows its progress): the test accuracy in percent per
// evaluated epoch, and the train loss per epoch.
struct SettingCurves {
  std::string setting;
  std::vector<std::string> models;  // the models' folder names, in the sweep's order
  std::vector<EpochSpread> test_accuracy, train_loss;
};

// The metrics of each model, from its run folder's metrics.csv in `sweep_dir` (a model with no
// file has no rows).
std::vector<SweepModelResult> read_sweep_results(const std::filesystem::path& sweep_dir,
                                                 const std::vector<SweepModelRun>& runs);

// The spec of a sweep folder's sweep.toml (parse_sweep_table_toml); Error when it cannot be read.
SweepSpec read_sweep_spec(const std::filesystem::path& sweep_dir);

// A sweep folder as it stands (training, stopped or finished), read from its files alone: the
// models of the shard its sweep.toml names, each with the epochs its config.toml sets and its
// metrics.csv so far. A model whose folder is missing, or is a link out of the sweep folder, has
// no rows (not started). Error (never UsageError) for a sweep.toml that is not lenet5 sweep's.
std::vector<SweepModelResult> read_sweep_folder(const std::filesystem::path& sweep_dir);

// One summary per setting, in the order of the models' indices (the sweep's order, whichever
// shards they came from). Models that have not trained all their epochs, or whose last epoch was
// not evaluated, count nowhere.
std::vector<SettingSummary> summarise_sweep(std::vector<SweepModelResult> results);

// One curve per setting that has a model with a trained epoch, in the order of the models' indices
// (that of summarise_sweep).
std::vector<SettingCurves> sweep_curves(std::vector<SweepModelResult> results);

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
// One setting's entry of summary.json.
nlohmann::json setting_summary_json(const SettingSummary& summary);

// summary.csv and summary.json into `dir`, each written atomically.
void write_sweep_summary(const std::filesystem::path& dir,
                         const std::vector<SettingSummary>& summaries);

}  // namespace lenet5
