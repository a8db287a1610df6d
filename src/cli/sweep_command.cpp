// lenet5 sweep [train settings] --seeds LIST [--set KEY=V1,V2,...]... [--shard K/N] [--out DIR]
// lenet5 sweep --resume DIR | --merge DIR...
// The lists are turned into models by src/sweep/; each model's settings are made here, by the same
// option parser as `lenet5 train`'s, so that its config text (stored in every checkpoint) is the
// text `lenet5 train` would store.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cli/commands.hpp"
#include "cli/train_options.hpp"
#include "core/error.hpp"
#include "sweep/summary.hpp"
#include "sweep/sweep.hpp"
#include "train/run_folder.hpp"

namespace lenet5::cli {
namespace fs = std::filesystem;
namespace {

// The [train] options given (on the command line, by --config's [train] section, or by a stored
// sweep.toml), by flag, with their values as written.
using GivenSettings = std::vector<std::pair<std::string, std::vector<std::string>>>;

GivenSettings given_settings(const CLI::App& command) {
  GivenSettings given;
  for (const CLI::Option* option : command.get_options())
    if (option->count() > 0 && option->get_configurable())
      given.emplace_back(option->get_name(), option->results());
  return given;
}

// Sets `flag` of the train-like `command` to `values`, as if given on its command line.
void set_option(CLI::App& command, const std::string& flag, const std::vector<std::string>& values,
                const std::string& origin) {
  CLI::Option* option = command.get_option_no_throw(flag);
  if (!option) throw UsageError(origin + ": there is no [train] setting " + flag);
  option->clear();
  option->add_result(values);
  try {
    option->run_callback();
  } catch (const CLI::Error& e) {
    throw UsageError(origin + ": " + e.what());
  }
}

// The model's settings and the config text `lenet5 train` would store for them: a train command
// given `base`, then the model's values.
SweepModelRun make_model_run(const GivenSettings& base, const SweepModel& model) {
  SweepModelRun run{model, TrainSettings{}, ""};
  CLI::App app;
  CLI::App* train = app.add_subcommand("train");
  bind_train_settings(*train, run.settings);
  for (const auto& [flag, values] : base) set_option(*train, flag, values, flag);
  for (const SweepList& value : model.values)
    set_option(*train, "--" + value.key, value.values,
               "--set " + value.key + "=" + value.values[0]);
  run.config_toml = effective_config(*train);
  return run;
}

// CLI11 would give a [sweep] table's items to the sweep command's options of the same name (lr =
// [0.05, 0.1] to --lr, as one value): the table is the command's own to read, so it is left out
// of what CLI11 applies.
class WithoutSweepTable : public CLI::ConfigTOML {
 public:
  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override {
    std::vector<CLI::ConfigItem> all = CLI::ConfigTOML::from_config(input);
    all.erase(std::remove_if(all.begin(), all.end(),
                             [](const CLI::ConfigItem& item) {
                               return !item.parents.empty() && item.parents[0] == "sweep";
                             }),
              all.end());
    return all;
  }
};

bool is_section_marker(const CLI::ConfigItem& item) {
  return item.name == "++" || item.name == "--";
}

std::string joined(const std::vector<std::string>& values) {
  std::string text;
  for (const std::string& value : values) text += (text.empty() ? "" : ",") + value;
  return text;
}

// A [sweep] table's lists (seeds = "1-16", lr = [0.05, 0.1]) and shard into `spec`.
void add_sweep_table(const std::vector<CLI::ConfigItem>& items, SweepSpec& spec, bool shard_given) {
  for (const CLI::ConfigItem& item : items) {
    if (item.parents != std::vector<std::string>{"sweep"} || is_section_marker(item)) continue;
    if (item.name == "shard") {
      if (!shard_given) spec.shard = parse_sweep_shard(joined(item.inputs));
      continue;
    }
    const std::string key = item.name == "seeds" ? "seed" : item.name;
    add_sweep_list(spec, parse_sweep_list(key, joined(item.inputs), "[sweep] " + item.name));
  }
}

struct SweepOptions {
  TrainSettings settings;  // bound for --help and the checks; the models are made from the flags
  std::string seeds, shard, resume;
  std::vector<std::string> sets, merge;
};

// --seeds, --set and --shard (and a [sweep] table in --config) into the sweep's spec.
SweepSpec spec_from_options(const CLI::App& parent, const CLI::App& command,
                            const SweepOptions& options) {
  SweepSpec spec;
  if (command.count("--seeds") > 0)
    add_sweep_list(spec, parse_sweep_list("seed", options.seeds, "--seeds"));
  for (const std::string& set : options.sets) {
    const std::size_t equals = set.find('=');
    if (equals == std::string::npos || equals == 0)
      throw UsageError("--set '" + set + "' is not KEY=V1,V2,...: e.g. --set lr=0.05,0.1");
    add_sweep_list(spec, parse_sweep_list(set.substr(0, equals), set.substr(equals + 1)));
  }
  if (!options.shard.empty()) spec.shard = parse_sweep_shard(options.shard);
  const CLI::Option* config = parent.get_option_no_throw("--config");
  if (config && config->count() > 0)
    add_sweep_table(CLI::ConfigTOML().from_file(config->as<std::string>()), spec,
                    !options.shard.empty());
  return spec;
}

// A sweep folder's sweep.toml: its [train] settings and its [sweep] spec.
struct StoredSweep {
  GivenSettings base;
  SweepSpec spec;
};

StoredSweep read_stored_sweep(const fs::path& dir) {
  const fs::path file = dir / kSweepFile;
  if (!fs::is_regular_file(file))
    throw UsageError(dir.string() + " holds no " + kSweepFile +
                     ": give the folder of a sweep that lenet5 sweep started (its --out)");
  StoredSweep stored;
  std::vector<CLI::ConfigItem> items;
  try {
    items = CLI::ConfigTOML().from_file(file.string());
  } catch (const CLI::Error& e) {
    throw Error("cannot read " + file.string() + ": " + e.what());
  }
  for (const CLI::ConfigItem& item : items)
    if (item.parents == std::vector<std::string>{"train"} && !is_section_marker(item))
      stored.base.emplace_back("--" + item.name, item.inputs);
  stored.spec = read_sweep_spec(dir);  // the [sweep] table, read as the page reads it
  return stored;
}

std::string sweep_file_text(const GivenSettings& base, const SweepSpec& spec) {
  const std::string train_table = make_model_run(base, SweepModel{}).config_toml;
  return "# lenet5 sweep: every model trains with these [train] settings and one combination of\n"
         "# the [sweep] lists (lenet5 sweep --resume reads this file back)\n" +
         train_table + "\n" + sweep_table_toml(spec);
}

void print_summary(const fs::path& dir, const std::vector<SweepModelResult>& results) {
  const std::vector<SettingSummary> summaries = summarise_sweep(results);
  write_sweep_summary(dir, summaries);
  std::fputs(format_summary_table(summaries).c_str(), stdout);
  std::printf("%s and %s in %s\n", kSummaryCsvFile, kSummaryJsonFile, dir.string().c_str());
}

// Runs (or continues) the sweep of `spec` in `out` (empty: runs/sweep-<date-time>); the exit code.
int sweep(const GivenSettings& base, const SweepSpec& spec, const std::string& out, bool resume) {
  const SweepSettingsMaker make = [&](const SweepModel& model) {
    return make_model_run(base, model);
  };
  const std::vector<SweepModelRun> runs = prepare_sweep(spec, make);  // before any folder exists
  check_sweep_device(runs);
  const fs::path dir = out.empty() ? claim_dated_folder(kSweepFolderPrefix) : fs::path(out);
  if (runs.empty())
    spdlog::warn("shard {}/{} of this sweep holds no model (it has fewer models than shards)",
                 spec.shard.index, spec.shard.count);
  const SweepOutcome outcome = run_sweep(dir, sweep_file_text(base, spec), runs, resume,
                                         [](const std::string& line) { spdlog::info("{}", line); });
  if (outcome.interrupted) {
    spdlog::warn(
        "sweep stopped by signal {}: the models in training saved their last checkpoints; "
        "continue the sweep with lenet5 sweep --resume {}",
        outcome.stop_signal, dir.string());
    return 128 + outcome.stop_signal;  // the shell's convention for a process ended by a signal
  }
  print_summary(dir, read_sweep_results(dir, runs));
  return 0;
}

// --merge DIR...: the shards' models, each read from its own folder, summarised as one sweep.
int merge(const std::vector<std::string>& dirs, const std::string& out) {
  std::vector<SweepShardFolder> shards;
  for (const std::string& dir : dirs) {
    const StoredSweep stored = read_stored_sweep(dir);
    const SweepSettingsMaker make = [&](const SweepModel& model) {
      return make_model_run(stored.base, model);
    };
    shards.push_back({dir, stored.spec,
                      computed_settings(make_model_run(stored.base, SweepModel{}).config_toml),
                      prepare_sweep(stored.spec, make)});
  }
  const std::vector<SweepModelResult> results = merge_sweep_shards(shards);
  const fs::path dir = out.empty() ? claim_dated_folder(kSweepFolderPrefix) : fs::path(out);
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) throw Error("cannot create folder " + dir.string() + ": " + error.message());
  print_summary(dir, results);
  return 0;
}

// With --resume or --merge, the settings are those stored: anything else given is refused.
// --merge also takes --out, the folder of the merged summary; --resume takes --threads, which
// changes no result (core/cpu_threads.hpp), only how many cores the continued sweep uses.
void refuse_other_options(const CLI::App& parent, const CLI::App& command, const char* mode) {
  const CLI::Option* config = parent.get_option_no_throw("--config");
  bool other = config && config->count() > 0;
  const bool merging = std::string(mode) == "--merge";
  const char* allowed = merging ? "--out" : "--threads";
  for (const CLI::Option* option : command.get_options())
    if (option->count() > 0 && !option->check_name(mode) && !option->check_name(allowed))
      other = true;
  if (other)
    throw UsageError(std::string(mode) + " takes the settings stored in the sweep folder's " +
                     kSweepFile + ": give no other settings or lists" +
                     (merging ? "" : " (--threads may still be given)"));
}

Command add_sweep_command(CLI::App& parent) {
  parent.config_formatter(std::make_shared<WithoutSweepTable>());
  auto* cmd = add_subcommand(
      parent, "sweep",
      "train a model per combination of seeds and settings, each in its own run folder, and "
      "summarise them per setting");
  cmd->footer(
      "The models: the product of the lists, the seed varying fastest, the other settings in the "
      "order of `lenet5 train --help` (the first slowest). Each model trains exactly as `lenet5 "
      "train` with the same settings would (same code, byte-identical checkpoints). On the GPU "
      "with --kernels whole-step, models that differ only in seed and learning-rate schedule "
      "are packed, up to 64, into the same kernel launches; otherwise models train one at a time "
      "with all --threads. --shard K/N trains models K, K+N, K+2N, ... (1-based).\n\n"
      "A --config file may hold a [sweep] table: seeds = \"1-16\", lr = [0.05, 0.1], shard = "
      "\"1/2\".\n\n"
      "Summary (printed, and " +
      std::string(kSummaryCsvFile) + ", " + kSummaryJsonFile +
      " in the sweep folder): per setting, the final epoch's test accuracy over its seeds (mean, "
      "sample standard deviation, min, max) and the mean epoch and training seconds to 99 % test "
      "accuracy.");
  auto options = std::make_shared<SweepOptions>();
  bind_train_settings(*cmd, options->settings);
  cmd->get_option("--out")->description(
      "sweep folder; each model's run folder is inside it (default: runs/sweep-<date-time>)");
  cmd->add_option("--seeds", options->seeds, "seeds to train, e.g. 1-16 or 1,2,5")
      ->configurable(false);
  cmd->add_option("--set", options->sets,
                  "KEY=V1,V2,...: values of a [train] setting (KEY is its flag without the "
                  "dashes; whole numbers also take ranges LOW-HIGH); repeat for more settings")
      ->configurable(false);
  cmd->add_option("--shard", options->shard, "train only the K-th of N slices of the sweep (K/N)")
      ->configurable(false);
  cmd->add_option("--resume", options->resume,
                  "continue the sweep in this folder: finished models are kept, the others "
                  "continue from their last checkpoint or start")
      ->configurable(false);
  cmd->add_option("--merge", options->merge,
                  "summarise these sweep folders (the shards of one sweep) as one sweep, into "
                  "--out")
      ->configurable(false)
      ->excludes("--resume");
  return {cmd, [&parent, cmd, options]() {
            if (!options->merge.empty()) {
              refuse_other_options(parent, *cmd, "--merge");
              return merge(options->merge, options->settings.out);
            }
            if (!options->resume.empty()) {
              refuse_other_options(parent, *cmd, "--resume");
              StoredSweep stored = read_stored_sweep(options->resume);
              if (cmd->count("--threads") > 0)
                stored.base.emplace_back(
                    "--threads",
                    std::vector<std::string>{std::to_string(options->settings.threads)});
              return sweep(stored.base, stored.spec, options->resume, true);
            }
            apply_train_section(parent, *cmd);
            const SweepSpec spec = spec_from_options(parent, *cmd, *options);
            return sweep(given_settings(*cmd), spec, options->settings.out, false);
          }};
}

const CommandRegistration kSweep{15, add_sweep_command};

}  // namespace

}  // namespace lenet5::cli
