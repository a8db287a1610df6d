// Claiming, locking and preparing a run folder, and pointing runs/latest at it.
#include "train/run_folder.hpp"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <ctime>
#include <system_error>
#include <utility>

#include "core/error.hpp"
#include "io/atomic_file.hpp"
#include "train/settings.hpp"

namespace lenet5 {
namespace fs = std::filesystem;
namespace {

fs::path create_run_dir(const TrainSettings& settings, const fs::path& resume_file) {
  if (settings.out.empty() && resume_file.empty()) return claim_dated_folder("");
  fs::path dir = !settings.out.empty() ? fs::path(settings.out) : resume_file.parent_path();
  if (dir.empty()) dir = ".";
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) throw Error("cannot create run folder " + dir.string() + ": " + error.message());
  return dir;
}

// Two trainings writing one folder would overwrite each other's checkpoints: the folder is locked
// for the run's life (released by the kernel however the process ends). Then the temporary files
// of writes that a killed run left behind are removed, and a fresh run refuses a folder that
// already holds one. Checked after the lock, so that a live run is reported as live.
FolderLock lock_run_dir(const fs::path& dir, const fs::path& resume_file) {
  const std::string last = (dir / kLastCheckpointFile).string();
  FolderLock lock(dir, fmt::format("wait for that training to end, or stop it (on SIGTERM it saves "
                                   "{}) and continue it with --resume {}; or choose another --out",
                                   last, last));
  if (const int n_removed = remove_others_temporary_files(dir))
    spdlog::debug("removed {} temporary files that an interrupted run left in {}", n_removed,
                  dir.string());
  if (resume_file.empty() && fs::exists(dir / kLastCheckpointFile))
    throw UsageError(
        fmt::format("run folder {} already holds a run: continue it with --resume "
                    "{} or choose another --out",
                    dir.string(), last));
  return lock;
}

// runs/latest -> the newest run folder in runs/ (replaced atomically), for scripts and people.
void point_latest_at(const fs::path& dir) {
  const fs::path parent = dir.parent_path().empty() ? fs::path(".") : dir.parent_path();
  const fs::path link = parent / kLatestLink,
                 temporary = parent / (std::string(".") + kLatestLink + ".tmp");
  std::error_code error;
  fs::remove(temporary, error);
  fs::create_directory_symlink(dir.filename(), temporary, error);
  if (!error) fs::rename(temporary, link, error);
  if (error) spdlog::debug("could not update {}: {}", link.string(), error.message());
}

}  // namespace

bool holds_run(const fs::path& folder) {
  std::error_code error;
  for (const char* file : {kMetricsFile, kConfigFile, kBestCheckpointFile, kLastCheckpointFile})
    if (fs::is_regular_file(folder / file, error)) return true;
  return false;
}

bool holds_sweep(const fs::path& folder) {
  std::error_code error;
  return fs::is_regular_file(folder / kSweepFile, error);
}

fs::path run_checkpoint_file(const fs::path& folder) {
  std::error_code error;
  for (const char* file : {kBestCheckpointFile, kLastCheckpointFile})
    if (fs::is_regular_file(folder / file, error)) return folder / file;
  return {};
}

fs::path claim_dated_folder(const std::string& prefix) {
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
  std::error_code error;
  fs::create_directories(kRunsFolder, error);
  for (int i = 1;; ++i) {
    const std::string name = prefix + stamp + (i == 1 ? "" : fmt::format("-{}", i));
    const fs::path dir = fs::path(kRunsFolder) / name;
    if (fs::create_directory(dir, error)) return dir;
    if (error) throw Error("cannot create run folder " + dir.string() + ": " + error.message());
  }
}

PreparedFolder prepare_run_folder(const TrainSettings& settings, const std::string& config_toml,
                                  const fs::path& resume_file) {
  fs::path dir = create_run_dir(settings, resume_file);
  FolderLock lock = lock_run_dir(dir, resume_file);
  write_file_atomically(dir / kConfigFile, config_toml);
  // Only runs in the default place (runs/<date-time>) move runs/latest: a folder the user named
  // with --out is theirs, and a "latest" link beside it would be litter.
  if (settings.out.empty() && resume_file.empty()) point_latest_at(dir);
  return {std::move(dir), std::move(lock)};
}

}  // namespace lenet5
