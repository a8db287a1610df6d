#include "sweep/sweep.hpp"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include "core/error.hpp"
#include "core/stop_signals.hpp"
#include "io/atomic_file.hpp"
#include "io/folder_lock.hpp"
#include "train/checkpoint.hpp"
#include "train/trainer.hpp"

namespace lenet5 {
namespace fs = std::filesystem;
namespace {

// A fresh sweep may not write into a folder that holds one: its models' folders would be refused
// one by one (train() refuses a folder with a checkpoint) after the first ones had trained.
FolderLock claim_sweep_dir(const fs::path& dir, bool resume) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) throw Error("cannot create sweep folder " + dir.string() + ": " + error.message());
  FolderLock lock(dir,
                  "wait for that sweep to end, or stop it (on SIGTERM each model saves) and "
                  "continue it with lenet5 sweep --resume " +
                      dir.string());
  if (!resume && fs::exists(dir / kSweepFile))
    throw UsageError("sweep folder " + dir.string() +
                     " already holds a sweep: continue it with "
                     "lenet5 sweep --resume " +
                     dir.string() + " or choose another --out");
  if (resume && !fs::exists(dir / kSweepFile))
    throw UsageError(dir.string() + " holds no " + kSweepFile +
                     ": --resume takes the folder of a sweep that lenet5 sweep started");
  return lock;
}

// Whether the model's run folder holds a run that has trained all its epochs.
bool finished(const SweepModelRun& run, const Checkpoint& last) {
  return last.position.epoch >= run.settings.epochs && last.position.step == 0;
}

std::string result_text(const TrainOutcome& outcome) {
  if (outcome.best_accuracy < 0) return "not evaluated";
  const EpochReport& last = outcome.epochs.empty() ? EpochReport{} : outcome.epochs.back();
  return fmt::format("final test {:.2f}%, best {:.2f}%", 100 * last.test_accuracy,
                     100 * outcome.best_accuracy);
}

}  // namespace

std::vector<SweepModelRun> prepare_sweep(const SweepSpec& spec, const SweepSettingsMaker& make) {
  std::vector<SweepModelRun> runs;
  for (const SweepModel& model : models_of_shard(spec)) {
    SweepModelRun run = make(model);
    try {
      run.settings.validate();
    } catch (const UsageError& e) {
      throw UsageError(fmt::format("model {} ({}): {}", model.index + 1, model.name, e.what()));
    }
    runs.push_back(std::move(run));
  }
  return runs;
}

SweepOutcome run_sweep(const fs::path& sweep_dir, const std::string& sweep_toml,
                       const std::vector<SweepModelRun>& runs, bool resume,
                       const SweepProgress& progress) {
  const FolderLock lock = claim_sweep_dir(sweep_dir, resume);
  if (!resume) write_file_atomically(sweep_dir / kSweepFile, sweep_toml);
  StopSignals stop;  // train()'s own handlers nest inside: a signal between two models counts
  SweepOutcome outcome;
  const int n = int(runs.size());
  for (int i = 0; i < n; ++i) {
    SweepModelRun run = runs[i];
    run.settings.out = model_run_dir(sweep_dir, run.model).string();
    if (stop.requested()) {
      outcome.interrupted = true;
      outcome.stop_signal = stop.signal();
      break;
    }
    const fs::path last = fs::path(run.settings.out) / "last.safetensors";
    std::optional<Checkpoint> checkpoint;
    if (resume && fs::exists(last)) {
      checkpoint = load_checkpoint(last);
      if (finished(run, *checkpoint)) {
        ++outcome.skipped;
        progress(fmt::format("model {}/{} {}: already trained", i + 1, n, run.model.name));
        continue;
      }
    }
    progress(fmt::format("model {}/{} {}: {}", i + 1, n, run.model.name,
                         checkpoint ? "continuing" : "training"));
    const TrainOutcome trained =
        train(run.settings, run.config_toml, checkpoint, checkpoint ? last : fs::path());
    if (trained.interrupted) {
      outcome.interrupted = true;
      outcome.stop_signal = trained.stop_signal;
      break;
    }
    ++outcome.trained;
    progress(fmt::format("model {}/{} {}: {}", i + 1, n, run.model.name, result_text(trained)));
  }
  return outcome;
}

fs::path model_run_dir(const fs::path& sweep_dir, const SweepModel& model) {
  return sweep_dir / model.name;
}

}  // namespace lenet5
