// Running a sweep: its folder claimed, the pending models found, grouped for packing, and
// trained group by group.
#include "sweep/sweep.hpp"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include "backend/backend.hpp"
#include "core/error.hpp"
#include "core/stop_signals.hpp"
#include "io/atomic_file.hpp"
#include "io/folder_lock.hpp"
#include "train/checkpoint.hpp"
#include "train/run_folder.hpp"
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

// A refusal of one model's settings, naming the model.
UsageError about_model(const SweepModel& model, const UsageError& e) {
  return UsageError(fmt::format("model {} ({}): {}", model.index + 1, model.name, e.what()));
}

// Whether the model's run folder holds a run that has trained all its epochs.
bool finished(const SweepModelRun& run, const Checkpoint& last) {
  return last.position.epoch >= run.settings.epochs && last.position.step == 0;
}

std::string result_text(const TrainOutcome& outcome) {
  const EpochReport& last = outcome.epochs.empty() ? EpochReport{} : outcome.epochs.back();
  if (last.test_accuracy < 0) return "not evaluated";
  std::string text = fmt::format("final test {:.2f}%", 100 * last.test_accuracy);
  if (outcome.best_validation_accuracy >= 0)
    text += fmt::format(", best validation {:.2f}%", 100 * outcome.best_validation_accuracy);
  return text;
}

}  // namespace

std::vector<SweepModelRun> prepare_sweep(const SweepSpec& spec, const SweepSettingsMaker& make) {
  std::vector<SweepModelRun> runs;
  for (const SweepModel& model : models_of_shard(spec)) {
    SweepModelRun run = make(model);
    try {
      run.settings.validate();
    } catch (const UsageError& e) {
      throw about_model(model, e);
    }
    runs.push_back(std::move(run));
  }
  return runs;
}

void check_sweep_device(const std::vector<SweepModelRun>& runs) {
  if (runs.empty()) return;
  // --device may not vary: the first model's is every model's.
  const Device device =
      resolve_device(runs.front().settings.device, /*warn_on_cpu_fallback=*/false);
  for (const SweepModelRun& run : runs) {
    try {
      check_runs_on(device, run.settings.net_config());
    } catch (const UsageError& e) {
      throw about_model(run.model, e);
    }
  }
}

namespace {

// A model of the sweep with where it starts: fresh, or from its run folder's last.safetensors.
struct PendingModel {
  int index = 0;  // in `runs`
  TrainJob job;
  bool packs = false;  // its engine packs models (backend.hpp's packs_models)
};

// The models to train, in the sweep's order, each starting where its folder says (a resumed
// sweep); those already finished are counted and reported, not returned.
std::vector<PendingModel> pending_models(const fs::path& sweep_dir,
                                         const std::vector<SweepModelRun>& runs, bool resume,
                                         SweepOutcome& outcome, const SweepProgress& progress) {
  std::vector<PendingModel> pending;
  const int n = int(runs.size());
  for (int i = 0; i < n; ++i) {
    TrainJob job{runs[i].settings, runs[i].config_toml, std::nullopt, {}};
    job.settings.out = model_run_dir(sweep_dir, runs[i].model).string();
    const fs::path last = fs::path(job.settings.out) / kLastCheckpointFile;
    if (resume && fs::exists(last)) {
      job.resume = load_checkpoint(last);
      job.resume_file = last;
      if (finished(runs[i], *job.resume)) {
        ++outcome.skipped;
        progress(fmt::format("model {}/{} {}: already trained", i + 1, n, runs[i].model.name));
        continue;
      }
      // Only the position is needed until the model's group trains (pack() compares positions):
      // the weights are read again then, so that a sweep of many models holds one group's.
      job.resume->parameters.clear();
      job.resume->parameters.shrink_to_fit();
      job.resume->optimizer_state.clear();
    }
    const Device device = resolve_device(job.settings.device, /*warn_on_cpu_fallback=*/false);
    const bool packs = packs_models(device, job.settings.net_config());
    pending.push_back({i, std::move(job), packs});
  }
  return pending;
}

// The models in groups that train together: on an engine that packs models (the GPU's whole-step
// kernels), each model joins the first group it is packable_together with, up to kMaxPackedModels;
// elsewhere each model is a group of its own, trained with all of the machine.
std::vector<std::vector<PendingModel>> pack(std::vector<PendingModel> pending) {
  std::vector<std::vector<PendingModel>> groups;
  for (PendingModel& model : pending) {
    std::vector<PendingModel>* home = nullptr;
    for (std::vector<PendingModel>& group : groups)
      if (model.packs && group.front().packs && int(group.size()) < kMaxPackedModels &&
          packable_together(group.front().job, model.job)) {
        home = &group;
        break;
      }
    if (home)
      home->push_back(std::move(model));
    else
      groups.push_back({std::move(model)});
  }
  return groups;
}

std::string group_text(const std::vector<PendingModel>& group,
                       const std::vector<SweepModelRun>& runs) {
  const int n = int(runs.size());
  if (group.size() == 1) {
    const PendingModel& model = group.front();
    return fmt::format("model {}/{} {}: {}", model.index + 1, n, runs[model.index].model.name,
                       model.job.resume ? "continuing" : "training");
  }
  std::string names;
  for (const PendingModel& model : group)
    names += (names.empty() ? "" : ", ") + std::to_string(model.index + 1);
  return fmt::format("models {} of {}: {}, {} packed into one GPU run", names, n,
                     group.front().job.resume ? "continuing" : "training", group.size());
}

}  // namespace

SweepOutcome run_sweep(const fs::path& sweep_dir, const std::string& sweep_toml,
                       const std::vector<SweepModelRun>& runs, bool resume,
                       const SweepProgress& progress) {
  const FolderLock lock = claim_sweep_dir(sweep_dir, resume);
  if (!resume) write_file_atomically(sweep_dir / kSweepFile, sweep_toml);
  StopSignals stop;  // train_models' own handlers nest inside: a signal between groups counts
  SweepOutcome outcome;
  const int n = int(runs.size());
  for (const std::vector<PendingModel>& group :
       pack(pending_models(sweep_dir, runs, resume, outcome, progress))) {
    if (stop.requested()) {
      outcome.interrupted = true;
      outcome.stop_signal = stop.signal();
      break;
    }
    progress(group_text(group, runs));
    std::vector<TrainJob> jobs;
    for (const PendingModel& model : group) {
      jobs.push_back(model.job);
      if (model.job.resume) jobs.back().resume = load_checkpoint(model.job.resume_file);
    }
    const std::vector<TrainOutcome> trained = train_models(jobs);
    for (std::size_t k = 0; k < group.size(); ++k) {
      if (trained[k].interrupted) {
        outcome.interrupted = true;
        outcome.stop_signal = trained[k].stop_signal;
        continue;
      }
      ++outcome.trained;
      const int i = group[k].index;
      progress(
          fmt::format("model {}/{} {}: {}", i + 1, n, runs[i].model.name, result_text(trained[k])));
    }
    if (outcome.interrupted) break;
  }
  return outcome;
}

fs::path model_run_dir(const fs::path& sweep_dir, const SweepModel& model) {
  return sweep_dir / model.name;
}

}  // namespace lenet5
