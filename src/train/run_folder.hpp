// The run folder as one module: the names of the files a run folder and a sweep folder hold, where
// they go by default, and how a training claims, locks and prepares its folder. `train` and each
// model of a sweep write these files; sweep's summary, serve's runs view, `figures lecun98.fig5`
// and the run's pictures read them, by these names and no others.
#pragma once

#include <filesystem>
#include <string>

#include "io/folder_lock.hpp"

namespace lenet5 {

struct TrainSettings;

// ---- a run folder -------------------------------------------------------------------------------
//   config.toml       the effective settings as a [train] section (`lenet5 --config FILE train`
//                     reads it back), written when the run starts and again when it resumes
//   metrics.csv       one row per epoch (run_pictures.hpp reads it back)
//   train.log         the run's log lines, info and above whatever --quiet says
//   last.safetensors  the checkpoint of the latest epoch's end, or of a stop (SIGINT, SIGTERM)
//   best.safetensors  the checkpoint of the epoch the held-out images read best (--validation N)
//   curves.svg, filters_c1.png, filters_c3.png   the pictures drawn at the end (run_pictures.hpp)
//   lock              held while a training writes the folder (io/folder_lock.hpp's
//                     kFolderLockFile)
inline constexpr const char* kConfigFile = "config.toml";
inline constexpr const char* kMetricsFile = "metrics.csv";
inline constexpr const char* kTrainLogFile = "train.log";
inline constexpr const char* kLastCheckpointFile = "last.safetensors";
inline constexpr const char* kBestCheckpointFile = "best.safetensors";
inline constexpr const char* kCurvesFile = "curves.svg";
inline constexpr const char* kFiltersC1File = "filters_c1.png";
inline constexpr const char* kFiltersC3File = "filters_c3.png";

// ---- a sweep folder -----------------------------------------------------------------------------
//   sweep.toml                 the sweep's lists of values, written when it starts
//   summary.csv, summary.json  per setting, the models' results (sweep/summary.hpp)
//   lock                       held while a sweep trains in it
//   <model name>/              a run folder per model (sweep/sweep.hpp's model_run_dir)
inline constexpr const char* kSweepFile = "sweep.toml";
inline constexpr const char* kSummaryCsvFile = "summary.csv";
inline constexpr const char* kSummaryJsonFile = "summary.json";

// ---- where they go by default -------------------------------------------------------------------
// runs/<date-time> for `train`, runs/sweep-<date-time> for `sweep` (claim_dated_folder), and
// runs/latest, a link to the newest run of runs/; `serve` shows the runs folder.
inline constexpr const char* kRunsFolder = "runs";
inline constexpr const char* kLatestLink = "latest";
inline constexpr const char* kSweepFolderPrefix = "sweep-";

// Whether `folder` holds a run (any of its settings, metrics or checkpoints: a run that has not
// ended an epoch yet has its config.toml alone) or a sweep (its sweep.toml). Never throw.
bool holds_run(const std::filesystem::path& folder);
bool holds_sweep(const std::filesystem::path& folder);

// The checkpoint a run's results are read from: its best.safetensors, else its last.safetensors
// (a run without held-out images keeps last only); empty before the run's first epoch has ended.
// What `evaluate`, `classify` and `serve` load when --checkpoint names a run folder, and the
// checkpoint the page evaluates for a run. Never throws.
std::filesystem::path run_checkpoint_file(const std::filesystem::path& folder);

// runs/<prefix><date-time>, created here (runs/ too): create_directory answers false when the
// folder exists, so two runs or sweeps started in the same second never share one (the second
// gets a -2 suffix). The default folder of `train` (prefix "") and of `sweep` (kSweepFolderPrefix).
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
