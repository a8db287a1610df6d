// The folder a training writes into: claimed (runs/<date-time>, --out, or a resumed checkpoint's
// folder), locked for the run's life, its config.toml written, runs/latest moved to it.
#pragma once

#include <filesystem>
#include <string>

#include "io/folder_lock.hpp"
#include "train/settings.hpp"

namespace lenet5 {

// runs/<prefix><date-time>, created here (runs/ too): create_directory answers false when the
// folder exists, so two runs or sweeps started in the same second never share one (the second
// gets a -2 suffix). The default folder of `train` (prefix "") and of `sweep` ("sweep-").
std::filesystem::path claim_dated_folder(const std::string& prefix);

// A run folder, claimed and prepared, and the lock that keeps other trainings out of it.
struct PreparedFolder {
  std::filesystem::path dir;
  FolderLock lock;
};

// The run folder of a training with `settings` (resume_file: the checkpoint it continues, or
// empty), with config_toml written into it. A fresh run refuses a folder that already holds one.
PreparedFolder prepare_run_folder(const TrainSettings& settings, const std::string& config_toml,
                                  const std::filesystem::path& resume_file);

}  // namespace lenet5
