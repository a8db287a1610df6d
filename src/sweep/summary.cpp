// A sweep's results read from its models' run folders and summarised per setting, printed and
// written as summary.csv and summary.json.
#include "sweep/summary.hpp"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.hpp"
#include "io/atomic_file.hpp"
#include "train/run_folder.hpp"
#include "train/settings.hpp"

namespace lenet5 {
namespace fs = std::filesystem;
namespace {

constexpr double kTargetPercent = 99.0;

// The final test accuracy of a model that trained all its epochs and evaluated the last; -1
// otherwise.
double final_accuracy(const SweepModelResult& result) {
  if (result.rows.empty() || result.rows.back().epoch < result.epochs) return -1;
  return result.rows.back().test_accuracy;
}

void add_time_to_99(const SweepModelResult& result, SettingSummary& summary) {
  double seconds = 0;
  for (const MetricsRow& row : result.rows) {
    seconds += row.seconds;
    if (row.test_accuracy >= kTargetPercent) {
      ++summary.reached_99;
      summary.epoch_to_99 += row.epoch;
      summary.seconds_to_99 += seconds;
      return;
    }
  }
}

// Mean, sample standard deviation, min and max of `values` (at least one).
void add_statistics(const std::vector<double>& values, SettingSummary& summary) {
  summary.models = int(values.size());
  double sum = 0;
  for (double value : values) sum += value;
  summary.mean = sum / values.size();
  double squares = 0;
  for (double value : values) squares += (value - summary.mean) * (value - summary.mean);
  summary.stddev = values.size() > 1 ? std::sqrt(squares / (values.size() - 1)) : 0;
  summary.min = *std::min_element(values.begin(), values.end());
  summary.max = *std::max_element(values.begin(), values.end());
}

std::string time_to_99_text(const SettingSummary& s) {
  if (s.reached_99 == 0) return "not reached";
  return fmt::format("epoch {:.1f}, {:.2f} s ({}/{})", s.epoch_to_99, s.seconds_to_99, s.reached_99,
                     s.models);
}

// The settings of `results` and their models that `counts` keeps, both in the order of the
// models' indices (`results` is sorted so).
using SettingGroups = std::vector<std::pair<std::string, std::vector<const SweepModelResult*>>>;
template <class Counts>
SettingGroups group_by_setting(std::vector<SweepModelResult>& results, Counts counts) {
  std::sort(results.begin(), results.end(),
            [](const auto& a, const auto& b) { return a.model.index < b.model.index; });
  SettingGroups groups;
  for (const SweepModelResult& result : results) {
    if (!counts(result)) continue;
    auto group = std::find_if(groups.begin(), groups.end(),
                              [&](const auto& g) { return g.first == result.model.setting; });
    if (group == groups.end()) {
      groups.emplace_back(result.model.setting, std::vector<const SweepModelResult*>{});
      group = std::prev(groups.end());
    }
    group->second.push_back(&result);
  }
  return groups;
}

// The spread per epoch of the values `value` gives for the models' rows (negative: no value).
template <class Value>
std::vector<EpochSpread> epoch_spreads(const std::vector<const SweepModelResult*>& models,
                                       Value value) {
  std::map<int, std::vector<double>> by_epoch;
  for (const SweepModelResult* result : models)
    for (const MetricsRow& row : result->rows)
      if (value(row) >= 0) by_epoch[row.epoch].push_back(value(row));
  std::vector<EpochSpread> spreads;
  for (const auto& [epoch, values] : by_epoch) {
    double sum = 0;
    for (double v : values) sum += v;
    spreads.push_back({epoch, int(values.size()), sum / values.size(),
                       *std::min_element(values.begin(), values.end()),
                       *std::max_element(values.begin(), values.end())});
  }
  return spreads;
}

// The epochs a model's config.toml sets; unknown (no file or no line) reads as never finished.
int configured_epochs(const fs::path& run_dir) {
  std::error_code ec;
  const fs::path config = run_dir / kConfigFile;
  if (!fs::is_regular_file(config, ec)) return std::numeric_limits<int>::max();
  try {
    return std::stoi(stored_setting(read_text_file(config), "epochs"));
  } catch (const std::exception&) {  // no such line, or not a number
    return std::numeric_limits<int>::max();
  }
}

SweepModelResult read_model_result(const fs::path& run_dir, const SweepModel& model, int epochs) {
  const fs::path metrics = run_dir / kMetricsFile;
  return {model, epochs,
          fs::exists(metrics) ? read_metrics_csv(metrics) : std::vector<MetricsRow>{}};
}

}  // namespace

std::vector<SweepModelResult> read_sweep_results(const fs::path& sweep_dir,
                                                 const std::vector<SweepModelRun>& runs) {
  std::vector<SweepModelResult> results;
  for (const SweepModelRun& run : runs)
    results.push_back(
        read_model_result(model_run_dir(sweep_dir, run.model), run.model, run.settings.epochs));
  return results;
}

SweepSpec read_sweep_spec(const fs::path& sweep_dir) {
  const fs::path file = sweep_dir / kSweepFile;
  return parse_sweep_table_toml(read_text_file(file), file.string());
}

std::vector<SweepModelResult> read_sweep_folder(const fs::path& sweep_dir) {
  const SweepSpec spec = read_sweep_spec(sweep_dir);
  std::error_code ec;
  const fs::path root = fs::canonical(sweep_dir, ec);
  if (ec) throw Error("cannot read " + sweep_dir.string() + ": " + ec.message());
  std::vector<SweepModel> models;
  try {
    models = models_of_shard(spec);
  } catch (const UsageError& e) {
    throw Error((sweep_dir / kSweepFile).string() + ": " + e.what());
  }
  std::vector<SweepModelResult> results;
  for (const SweepModel& model : models) {
    // Resolved as the server resolves a run's name: only a folder directly in the sweep folder.
    const fs::path dir = fs::canonical(model_run_dir(sweep_dir, model), ec);
    const bool inside = !ec && dir.parent_path() == root && fs::is_directory(dir, ec);
    results.push_back(inside ? read_model_result(dir, model, configured_epochs(dir))
                             : SweepModelResult{model, 0, {}});
  }
  return results;
}

std::vector<SettingCurves> sweep_curves(std::vector<SweepModelResult> results) {
  std::vector<SettingCurves> curves;
  const auto trained = [](const SweepModelResult& result) { return !result.rows.empty(); };
  for (const auto& [setting, models] : group_by_setting(results, trained)) {
    SettingCurves curve{setting, {}, {}, {}};
    for (const SweepModelResult* result : models) curve.models.push_back(result->model.name);
    curve.test_accuracy =
        epoch_spreads(models, [](const MetricsRow& row) { return row.test_accuracy; });
    curve.train_loss = epoch_spreads(models, [](const MetricsRow& row) { return row.train_loss; });
    curves.push_back(std::move(curve));
  }
  return curves;
}

std::vector<SettingSummary> summarise_sweep(std::vector<SweepModelResult> results) {
  const auto finished = [](const SweepModelResult& result) { return final_accuracy(result) >= 0; };
  std::vector<SettingSummary> summaries;
  for (const auto& [setting, models] : group_by_setting(results, finished)) {
    SettingSummary summary;
    summary.setting = setting;
    std::vector<double> accuracies;
    for (const SweepModelResult* result : models) {
      accuracies.push_back(final_accuracy(*result));
      add_time_to_99(*result, summary);
    }
    add_statistics(accuracies, summary);
    if (summary.reached_99 > 0) {
      summary.epoch_to_99 /= summary.reached_99;
      summary.seconds_to_99 /= summary.reached_99;
    }
    summaries.push_back(summary);
  }
  return summaries;
}

std::string computed_settings(const std::string& config_toml) {
  std::istringstream in(checkpoint_config(config_toml));
  std::string kept, line;
  while (std::getline(in, line))
    if (line.rfind("data=", 0) != 0 && line.rfind("device=", 0) != 0) kept += line + "\n";
  return kept;
}

std::vector<SweepModelResult> merge_sweep_shards(const std::vector<SweepShardFolder>& shards) {
  std::vector<SweepModelResult> results;
  if (shards.empty()) return results;
  const SweepShardFolder& first = shards.front();
  std::vector<bool> seen(first.spec.shard.count, false);
  for (const SweepShardFolder& shard : shards) {
    if (shard.computed_settings != first.computed_settings ||
        !(shard.spec.lists == first.spec.lists) || shard.spec.shard.count != first.spec.shard.count)
      throw UsageError(shard.dir.string() + " holds another sweep than " + first.dir.string() +
                       " (other settings, lists or number of shards): merge the shards of one "
                       "sweep");
    if (seen[shard.spec.shard.index - 1])
      throw UsageError(shard.dir.string() + " is shard " + std::to_string(shard.spec.shard.index) +
                       ", given twice: give each shard's folder once");
    seen[shard.spec.shard.index - 1] = true;
    for (SweepModelResult& result : read_sweep_results(shard.dir, shard.runs))
      results.push_back(std::move(result));
  }
  for (std::size_t k = 0; k < seen.size(); ++k)
    if (!seen[k])
      spdlog::warn("shard {}/{} is missing: the summary covers the other shards only", k + 1,
                   seen.size());
  return results;
}

std::string format_summary_table(const std::vector<SettingSummary>& summaries) {
  if (summaries.empty())
    return "no model has finished with an evaluated last epoch: nothing to summarise (the sweep "
           "trained with --evaluate false, or its models are still to train)\n";
  std::string text =
      "final test accuracy (%) per setting, over its seeds; time to 99 % test "
      "accuracy: mean epoch and training seconds of the seeds that reached it\n";
  text += fmt::format("{:<32} {:>6} {:>16} {:>7} {:>7}  {}\n", "setting", "models", "mean ± sd",
                      "min", "max", "time to 99 %");
  for (const SettingSummary& s : summaries)
    text += fmt::format("{:<32} {:>6} {:>16} {:>7.2f} {:>7.2f}  {}\n", s.setting, s.models,
                        fmt::format("{:.2f} ± {:.2f}", s.mean, s.stddev), s.min, s.max,
                        time_to_99_text(s));
  return text;
}

std::string summary_csv(const std::vector<SettingSummary>& summaries) {
  std::string text =
      "setting,models,final_test_acc_mean,final_test_acc_sd,final_test_acc_min,"
      "final_test_acc_max,reached_99,epoch_to_99_mean,seconds_to_99_mean\n";
  for (const SettingSummary& s : summaries) {
    const bool reached = s.reached_99 > 0;
    // The setting holds commas ("lr=0.1,batch-size=64"): quoted, as CSV does.
    text += fmt::format("\"{}\",{},{:.4f},{:.4f},{:.2f},{:.2f},{},{},{}\n", s.setting, s.models,
                        s.mean, s.stddev, s.min, s.max, s.reached_99,
                        reached ? fmt::format("{:.2f}", s.epoch_to_99) : "",
                        reached ? fmt::format("{:.3f}", s.seconds_to_99) : "");
  }
  return text;
}

nlohmann::json setting_summary_json(const SettingSummary& s) {
  const bool reached = s.reached_99 > 0;
  return {
      {"setting", s.setting},
      {"models", s.models},
      {"final_test_accuracy", {{"mean", s.mean}, {"sd", s.stddev}, {"min", s.min}, {"max", s.max}}},
      {"reached_99", s.reached_99},
      {"epoch_to_99", reached ? nlohmann::json(s.epoch_to_99) : nullptr},
      {"seconds_to_99", reached ? nlohmann::json(s.seconds_to_99) : nullptr}};
}

std::string summary_json(const std::vector<SettingSummary>& summaries) {
  nlohmann::json settings = nlohmann::json::array();
  for (const SettingSummary& s : summaries) settings.push_back(setting_summary_json(s));
  return nlohmann::json{{"settings", settings}}.dump(2) + "\n";
}

void write_sweep_summary(const fs::path& dir, const std::vector<SettingSummary>& summaries) {
  write_file_atomically(dir / kSummaryCsvFile, summary_csv(summaries));
  write_file_atomically(dir / kSummaryJsonFile, summary_json(summaries));
}

}  // namespace lenet5
