// `lenet5 sweep`: trains the models of a sweep (sweep/sweep_spec.hpp), each in its own run folder
// under the sweep folder, through the very function `lenet5 train` calls (train/trainer.hpp's
// train()), so that a model's checkpoints are byte-identical to those of `lenet5 train` with the
// same settings.
//
// On the GPU with the whole-step kernels, models that differ only in their seed and learning-rate
// schedule (train/trainer.hpp's packable_together) train together, up to kMaxPackedModels at a
// time, through train_models: their steps share the engine's launches (the data set uploaded once)
// and each keeps its own run folder. Elsewhere one model trains at a time, each with all of
// --threads (on the CPU, every core): a model already keeps every core busy.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "sweep/sweep_spec.hpp"
#include "train/settings.hpp"

namespace lenet5 {

// The most models packed into one run: beyond it a GPU gains no throughput (64 models of batch 128
// are 8,192 blocks a step, tens of waves), and each model holds two files open (its lock and its
// train.log).
inline constexpr int kMaxPackedModels = 64;

// One model, ready to train: its settings and the config text that `lenet5 train` would store for
// them. Its run folder is the sweep folder's <model name> (model_run_dir).
struct SweepModelRun {
  SweepModel model;
  TrainSettings settings;
  std::string config_toml;
};

// Turns a model's values into its settings and config text (the command does it with the same
// option parser as `lenet5 train`). UsageError for a value its setting cannot take.
using SweepSettingsMaker = std::function<SweepModelRun(const SweepModel&)>;

// The models of the spec's shard, each made and validated (every range, name and combination), so
// that a bad value is refused before anything trains.
std::vector<SweepModelRun> prepare_sweep(const SweepSpec& spec, const SweepSettingsMaker& make);

// Refuses (UsageError, naming the model) a sweep whose device cannot train its models as asked
// (backend.hpp's check_runs_on: --device auto that puts --kernels tensor on the CPU), so that a
// sweep that is to train is refused before its folder exists; merging shards trains nothing and
// does not ask.
void check_sweep_device(const std::vector<SweepModelRun>& runs);

std::filesystem::path model_run_dir(const std::filesystem::path& sweep_dir,
                                    const SweepModel& model);

struct SweepOutcome {
  int trained = 0;  // models trained (or continued) to their end by this call
  int skipped = 0;  // models a resumed sweep found already finished
  bool interrupted = false;
  int stop_signal = 0;  // SIGINT or SIGTERM when interrupted
};

// What a sweep reports as it goes: one line per model.
using SweepProgress = std::function<void(const std::string&)>;

// Trains `runs` in order. A fresh sweep (resume false) claims `sweep_dir` (refusing one that
// already holds a sweep) and writes `sweep_toml` there; a resumed one continues each model from its
// last.safetensors, skips those already finished and starts those not started. A SIGINT or SIGTERM
// stops the model in training after it saved last.safetensors (train() does), and the sweep with
// it.
SweepOutcome run_sweep(const std::filesystem::path& sweep_dir, const std::string& sweep_toml,
                       const std::vector<SweepModelRun>& runs, bool resume,
                       const SweepProgress& progress);

}  // namespace lenet5
