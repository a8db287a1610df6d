// `lenet5 train`: mini-batch SGD over MNIST with a seeded reshuffle every epoch, evaluation after
// each epoch, a run folder (config.toml, metrics.csv, train.log, last/best checkpoints) and exact
// resumption from any checkpoint, including one written on SIGINT/SIGTERM in mid-epoch.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "train/checkpoint.hpp"
#include "train/settings.hpp"

namespace lenet5 {

struct TrainOutcome {
  std::filesystem::path run_dir;
  int epochs_done = 0;
  double best_accuracy = -1;  // fraction, -1 when never evaluated
  bool interrupted = false;   // stopped by a signal after saving last.safetensors
};

// config_toml: the effective settings, written to the run folder and into every checkpoint.
// resume: the checkpoint to continue from (its weights, momentum and position).
TrainOutcome train(const TrainSettings& settings, const std::string& config_toml,
                   const std::optional<Checkpoint>& resume = std::nullopt,
                   const std::filesystem::path& resume_file = {});

}  // namespace lenet5
