// `lenet5 train`: mini-batch SGD over MNIST with a seeded reshuffle every epoch, evaluation after
// each epoch, a run folder (config.toml, metrics.csv, train.log, last/best checkpoints) and exact
// resumption from any checkpoint, including one written on SIGINT/SIGTERM in mid-epoch.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.hpp"
#include "train/checkpoint.hpp"
#include "train/settings.hpp"

namespace lenet5 {

// One row of metrics.csv.
struct EpochReport {
  int epoch = 0;  // 1-based
  double lr = 0, train_loss = 0, train_accuracy = 0;
  // The held-out training images (--validation), which choose the best epoch; -1: none held out,
  // or not evaluated.
  double validation_loss = -1, validation_accuracy = -1;
  double test_loss = -1, test_accuracy = -1;  // -1: not evaluated
  // The undistorted training set evaluated after the epoch (--evaluate-training-set); -1: not.
  double train_eval_loss = -1, train_eval_accuracy = -1;
  double seconds = 0, images_per_s = 0;       // training only: evaluation is not timed
};

struct TrainOutcome {
  std::filesystem::path run_dir;
  std::vector<EpochReport> epochs;  // the epochs this call trained
  int epochs_done = 0;
  int validation_images = 0;  // held out of the training set (--validation)
  // The best epoch's accuracy on them (fraction): -1 when none are held out or none evaluated.
  double best_validation_accuracy = -1;
  bool interrupted = false;   // stopped by a signal after saving last.safetensors
  int stop_signal = 0;        // that signal (SIGINT, SIGTERM), when interrupted
  // The run's result, when it evaluated and was not interrupted: best.safetensors (the epoch the
  // held-out images read best), or last.safetensors where none are held out, read back from the
  // run folder and evaluated on the test set as `lenet5 evaluate` would report it: one process
  // trains and reports, without paying for a second GPU context.
  std::optional<Evaluation> final_evaluation;
  std::filesystem::path final_checkpoint;  // best.safetensors or last.safetensors
  int final_epoch = 0;  // the epoch it was saved after (1-based)
};

// What `train` prints when a run ends: the epochs, the run folder, and which checkpoint is the
// run's result and how it was chosen, with that checkpoint's test evaluation as `lenet5 evaluate`
// reports it.
std::string format_outcome(const TrainOutcome& outcome, int epochs,
                           const DatasetDescription& dataset);

// config_toml: the effective settings, written to the run folder and into every checkpoint.
// resume: the checkpoint to continue from (its weights, optimizer state and position).
TrainOutcome train(const TrainSettings& settings, const std::string& config_toml,
                   const std::optional<Checkpoint>& resume = std::nullopt,
                   const std::filesystem::path& resume_file = {});

// What train() takes, for one model of train_models.
struct TrainJob {
  TrainSettings settings;
  std::string config_toml;
  std::optional<Checkpoint> resume;
  std::filesystem::path resume_file;
};

// Whether two models may train together in one engine group: their settings differ at most in
// the seed and the learning-rate schedule (--seed, --lr, --schedule and its parameters; --out and
// --threads too), and they start at the same epoch and step.
bool packable_together(const TrainJob& a, const TrainJob& b);

// Trains models that are packable_together in one process, in lockstep through one engine group
// (backend.hpp's make_engine_group: on the GPU with the whole-step kernels, their steps share
// launches). Each model's run folder, checkpoints included, is what train() makes of its job; a
// signal stops them all at the same step, each saving. One outcome per job, in order. train() is
// train_models of one job.
std::vector<TrainOutcome> train_models(const std::vector<TrainJob>& jobs);

}  // namespace lenet5
