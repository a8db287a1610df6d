// The training loop: run folders, their logs and metrics, epochs of one model or of models packed
// in lockstep, checkpoints, resume, and the end of training.
#include "train/trainer.hpp"

#include <spdlog/fmt/fmt.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <fstream>
#include <future>
#include <memory>
#include <set>
#include <sstream>
#include <system_error>

#include "backend/backend.hpp"
#include "core/cpu_threads.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"
#include "core/rng.hpp"
#include "core/stop_signals.hpp"
#include "data/mnist.hpp"
#include "io/atomic_file.hpp"
#include "train/evaluate.hpp"
#include "train/progress.hpp"
#include "train/report.hpp"
#include "train/run_folder.hpp"
#include "train/run_pictures.hpp"
#include "train/side_by_side.hpp"

namespace lenet5 {
namespace fs = std::filesystem;
namespace {

// train.log in the run folder: a sink that joins the default logger while the run's work is being
// done (an Active scope), so that the models of a packed group each log into their own file.
class RunLog {
 public:
  explicit RunLog(const fs::path& file)
      : m_sink(std::make_shared<spdlog::sinks::basic_file_sink_mt>(file.string())) {
    m_sink->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] %v");
  }

  class Active {
   public:
    explicit Active(const RunLog& log) : m_sink(log.m_sink) {
      spdlog::default_logger()->sinks().push_back(m_sink);
      // One line per epoch at most: flush each, so `tail -f train.log` shows progress as it
      // happens.
      spdlog::default_logger()->flush_on(spdlog::level::info);
    }
    ~Active() {
      auto& sinks = spdlog::default_logger()->sinks();
      sinks.erase(std::remove(sinks.begin(), sinks.end(), m_sink), sinks.end());
    }
    Active(const Active&) = delete;
    Active& operator=(const Active&) = delete;

   private:
    spdlog::sink_ptr m_sink;
  };

 private:
  spdlog::sink_ptr m_sink;
};

// metrics.csv, rewritten atomically after every epoch (add forms the text, write puts it on disk,
// on any thread); a resumed run keeps the rows up to its checkpoint's epoch. Images held out for
// validation add two columns, val_loss and val_acc, after train_acc; --evaluate-training-set two
// at the end, train_eval_loss and train_eval_acc; without either the file is what it always was.
// The readers find the columns by the header's names (run_pictures.hpp). A resumed run holds out
// what its checkpoint's run held out, so its rows and the kept ones have the same columns.
class MetricsFile {
 public:
  MetricsFile(fs::path file, int keep_epochs, bool validation_columns, bool training_set_columns)
      : m_file(std::move(file)),
        m_header(std::string(kLeadingColumns) + (validation_columns ? kValidationColumns : "") +
                 kTrailingColumns + (training_set_columns ? kTrainingSetColumns : "") + "\n") {
    if (keep_epochs == 0 || !fs::exists(m_file)) return;
    const MetricsLines lines = read_metrics_lines(m_file);
    const std::vector<MetricsRow> rows = parse_metrics_lines(lines, m_file);  // refuses damage
    for (std::size_t i = 0; i < rows.size(); ++i)
      if (rows[i].epoch <= keep_epochs) m_rows += lines.rows[i] + "\n";
  }
  // The file's text with `row` added.
  std::string add(const std::string& row) {
    m_rows += row + "\n";
    return m_header + m_rows;
  }
  void write(const std::string& text) const { write_file_atomically(m_file, text); }

 private:
  static constexpr const char* kLeadingColumns = "epoch,lr,train_loss,train_acc";
  static constexpr const char* kValidationColumns = ",val_loss,val_acc";
  static constexpr const char* kTrailingColumns = ",test_loss,test_acc,seconds,images_per_s";
  static constexpr const char* kTrainingSetColumns = ",train_eval_loss,train_eval_acc";
  fs::path m_file;
  std::string m_header;
  std::string m_rows;
};

// ---- the data ---------------------------------------------------------------------------------
void limit_training_set(Dataset& train, int limit) {
  if (limit == 0 || limit >= train.count) return;
  train.count = limit;
  train.images.resize(std::size_t(limit) * kImageSide * kImageSide);
  train.labels.resize(std::size_t(limit));
}

DataChecksums checksums(const Mnist& data) {
  return {data.train.images_crc32, data.train.labels_crc32, data.test.images_crc32,
          data.test.labels_crc32};
}

EpochTotals operator+(const EpochTotals& a, const EpochTotals& b) {
  return {a.loss_sum + b.loss_sum, a.correct + b.correct, a.seen + b.seen};
}

// ---- one training run ---------------------------------------------------------------------------
// One model's run: its folder, log, metrics, checkpoints and position, trained by `engine` (one
// model of an engine group). The epoch is split into begin_epoch, train_steps and end_epoch so
// that train_models can step the models of a packed group in lockstep (train_lockstep).
class Run {
 public:
  Run(const TrainSettings& settings, const std::string& config_toml, const fs::path& dir,
      const Mnist& data, Engine& engine, bool show_progress)
      : m_settings(settings),
        m_config_toml(config_toml),
        m_dir(dir),
        m_log(dir / kTrainLogFile),
        m_data(data),
        m_net(settings.net_config()),
        m_schedule(settings.schedule_config()),
        m_engine(engine),
        m_show_progress(show_progress) {
    m_engine.set_training_data(m_data.train, settings.augmentation());
  }

  const RunLog& log() const { return m_log; }

  void start_fresh() {
    m_engine.initialise(m_settings.seed);
    m_metrics.emplace(m_dir / kMetricsFile, 0, holds_out(), m_settings.evaluate_training_set);
  }

  void resume_from(const Checkpoint& checkpoint) {
    m_engine.set_state(checkpoint.parameters, checkpoint.optimizer_state);
    m_position = checkpoint.position;
    m_last_lr = checkpoint.learning_rate;
    if (!(checkpoint.data == checksums(m_data)))
      spdlog::warn(
          "the checkpoint was trained on different data files than {} (CRC-32 differ)",
          resolve_data_dir(m_settings.data_dir, find_dataset(m_settings.dataset)).string());
    spdlog::info("resuming at epoch {} step {}", m_position.epoch + 1, m_position.step);
    m_metrics.emplace(m_dir / kMetricsFile, m_position.epoch, holds_out(),
                      m_settings.evaluate_training_set);
  }

  int steps_per_epoch() const {
    return (m_data.train.count + m_settings.batch_size - 1) / m_settings.batch_size;
  }
  bool epochs_left() const { return m_position.epoch < m_settings.epochs; }
  // Where the epoch starts: a run resumed mid-epoch continues at its checkpoint's step.
  int first_step() const { return m_position.step; }
  int steps_per_call() const {
    return std::max(1, m_engine.preferred_steps_per_call(steps_per_epoch()));
  }

  void begin_epoch() {
    const int epoch = m_position.epoch, steps = steps_per_epoch();
    m_carried = m_position.step > 0 ? m_position.partial : EpochTotals{};
    m_rates = learning_rates(epoch, steps);
    m_engine.begin_epoch(epoch, epoch_permutation(m_settings.seed, epoch, m_data.train.count),
                         m_rates);
    m_progress = std::make_unique<ProgressBar>(m_show_progress && progress_wanted());
    m_epoch_start = std::chrono::steady_clock::now();
  }

  void train_steps(int step, int end) {
    m_engine.train_steps(step, end);
    m_last_lr = m_rates[end - 1];
    m_progress->update(end, steps_per_epoch(),
                       fmt::format("epoch {}/{}", m_position.epoch + 1, m_settings.epochs));
  }

  // The epoch's files: metrics.csv's text with the epoch's row, and the checkpoint made from the
  // engine's state at the epoch's end, with whether it is also the best so far. end_epoch forms
  // them; write_epoch_files puts them on disk, on any thread.
  struct EpochFiles {
    std::string metrics;
    Checkpoint checkpoint;
    bool improved = false;
  };

  EpochFiles end_epoch() {
    const EpochTotals fresh = m_engine.take_epoch_totals();  // the epoch's one synchronisation
    const double seconds = seconds_since(m_epoch_start);
    m_progress.reset();
    return finish_epoch(m_position.epoch, m_carried + fresh, fresh.seen, seconds);
  }

  // metrics.csv, then best, then last. A run killed before last resumes from the previous last,
  // keeps metrics.csv's rows up to that checkpoint's epoch, and trains this epoch again, to the
  // same weights: it rewrites best identically, and the row with its own timings. Best after last
  // would leave a last whose best_accuracy counts an improvement that best.safetensors never
  // received. A failure names the epoch: it may surface while the next epoch trains.
  void write_epoch_files(const EpochFiles& files) const {
    try {
      m_metrics->write(files.metrics);
      if (files.improved) save(m_dir / kBestCheckpointFile, files.checkpoint);
      save(m_dir / kLastCheckpointFile, files.checkpoint);
    } catch (const Error& e) {
      throw Error(fmt::format("epoch {}'s files: {}", files.checkpoint.position.epoch, e.what()));
    }
  }

  // After the last epoch, first: the run's pictures, drawn on a host thread of their own while
  // best checkpoints are read back and evaluated (finish; on the GPU, or by the CPU's other
  // threads), so that they cost the command next to no wall time. The weights are copied first,
  // since report_final replaces them. The future gives draw_pictures' outcome, for
  // report_pictures; its get() rethrows what draw_pictures does not catch itself.
  std::future<std::string> begin_pictures() {
    return std::async(std::launch::async,
                      [this, weights = m_engine.parameters()] { return draw_pictures(weights); });
  }

  // After the last epoch, after begin_pictures (which copies the weights that this replaces): the
  // run's result and its evaluation (report_final).
  TrainOutcome finish() {
    TrainOutcome outcome = outcome_so_far(m_position.epoch);
    report_final(outcome);
    return outcome;
  }

  // What draw_pictures gave: the files drawn (failure empty), or why not.
  void report_pictures(const std::string& failure) const {
    if (failure.empty())
      spdlog::info("pictures: {}, {}, {} in {}", kCurvesFile, kFiltersC1File, kFiltersC3File,
                   m_dir.string());
    else
      spdlog::warn("could not draw the run's pictures: {}", failure);
  }

  // Stopped by a signal before `step` of the current epoch: saves where it stands.
  TrainOutcome interrupt(int step, int stop_signal) {
    const int epoch = m_position.epoch;
    m_progress.reset();
    m_position = {epoch, step, m_carried + m_engine.take_epoch_totals(), m_position.best_accuracy};
    const fs::path last = m_dir / kLastCheckpointFile;
    save(last, make_checkpoint(-1, -1));
    report_pictures(draw_pictures(m_engine.parameters()));
    spdlog::warn("stopped by signal {} at epoch {} step {}: saved {}; continue with --resume {}",
                 stop_signal, epoch + 1, step, last.string(), last.string());
    TrainOutcome outcome = outcome_so_far(epoch);
    outcome.interrupted = true;
    outcome.stop_signal = stop_signal;
    return outcome;
  }

 private:
  // The schedule is a pure function of the position, so a whole epoch's rates are known upfront.
  std::vector<float> learning_rates(int epoch, int steps) const {
    std::vector<float> rates(steps);
    for (int step = 0; step < steps; ++step)
      rates[step] = float(m_schedule.rate(epoch + double(step) / steps));
    return rates;
  }

  static double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  // The epoch's row: its log line, its metrics.csv row (the two training-set columns only when
  // they are being recorded), its report; then its files, to be written.
  EpochFiles finish_epoch(int epoch, const EpochTotals& totals, std::int64_t trained,
                          double seconds) {
    std::optional<Evaluation> validation, test, training_set;
    if (m_settings.evaluate_every_epoch) {
      if (holds_out()) validation = m_engine.evaluate(m_data.validation);
      test = m_engine.evaluate(m_data.test);
    }
    // The images the epoch trained on, as they are: without the epoch's distortions.
    if (m_settings.evaluate_training_set) training_set = m_engine.evaluate(m_data.train);
    const double images_per_s = seconds > 0 ? double(trained) / seconds : 0;
    const double train_loss = totals.loss_sum / double(std::max<std::int64_t>(totals.seen, 1));
    const auto loss = [](const std::optional<Evaluation>& e) { return e ? e->mean_loss() : -1; };
    const auto accuracy = [](const std::optional<Evaluation>& e) { return e ? e->accuracy() : -1; };
    m_reports.push_back({epoch + 1, m_last_lr, train_loss,
                         double(totals.correct) / double(std::max<std::int64_t>(totals.seen, 1)),
                         loss(validation), accuracy(validation), loss(test), accuracy(test),
                         loss(training_set), accuracy(training_set), seconds, images_per_s});
    const auto percent = [](const std::optional<Evaluation>& e) {
      return e ? format_percent(e->correct, e->count) : "";
    };
    const auto loss_field = [](const std::optional<Evaluation>& e) {
      return e ? fmt::format("{:.6f}", e->mean_loss()) : "";
    };
    const std::string train_acc = format_percent(totals.correct, totals.seen);
    std::string row =
        fmt::format("{},{:.6g},{:.6f},{}", epoch + 1, m_last_lr, train_loss, train_acc);
    if (holds_out()) row += fmt::format(",{},{}", loss_field(validation), percent(validation));
    row +=
        fmt::format(",{},{},{:.3f},{:.0f}", loss_field(test), percent(test), seconds, images_per_s);
    if (training_set) row += fmt::format(",{},{}", loss_field(training_set), percent(training_set));
    std::string metrics = m_metrics->add(row);
    spdlog::info("epoch {}/{} | loss {:.4f} | train {}%{} | test {} | {:.2f} s | {} img/s{}",
                 epoch + 1, m_settings.epochs, train_loss, train_acc,
                 validation ? " | validation " + percent(validation) + "%" : "",
                 test ? percent(test) + "%" : "-", seconds, format_rate(images_per_s),
                 training_set ? " | training set " + percent(training_set) + "%" : "");
    m_position = {epoch + 1, 0, {}, m_position.best_accuracy};
    // The best epoch is the one the held-out images read best; the test set only reports.
    const bool improved = validation && validation->accuracy() > m_position.best_accuracy;
    if (improved) m_position.best_accuracy = validation->accuracy();
    return {std::move(metrics), make_checkpoint(accuracy(test), accuracy(validation)), improved};
  }

  // A failed save (a full disk, a folder made read-only) leaves the file as it was: the error
  // says so, and how to go on once the cause is fixed.
  void save(const fs::path& file, const Checkpoint& checkpoint) const {
    try {
      save_checkpoint(file, checkpoint);
    } catch (const Error& e) {
      const fs::path last = m_dir / kLastCheckpointFile;
      std::error_code error;
      const std::string kept = fs::is_regular_file(file, error)
                                   ? file.string() + " still holds its previous, complete save"
                                   : file.string() + " was not written";
      throw Error(fmt::format("{}; {}{}", e.what(), kept,
                              fs::is_regular_file(last, error)
                                  ? "; once fixed, continue with --resume " + last.string()
                                  : ""));
    }
  }

  // The run folder's pictures of what it holds now: metrics.csv's epochs and `weights`, those of
  // last.safetensors. They are a view of the run, not part of it: a failure to draw them is
  // returned (empty when they were drawn), for report_pictures, not thrown. Logs nothing, so that
  // it may run on any thread (kSideBySide says why).
  std::string draw_pictures(const std::vector<float>& weights) const {
    try {
      write_run_pictures(m_dir, m_net, weights);
      return "";
    } catch (const Error& e) {
      return e.what();
    }
  }

  // Reads the run's result back (so the report is of the file a user would evaluate, and proves
  // it loads) and evaluates it with the engine that trained it; the training is over, so the
  // engine's weights may be replaced. The result is best.safetensors where images are held out
  // (chosen on them), else last.safetensors.
  void report_final(TrainOutcome& outcome) {
    const fs::path file = m_dir / (holds_out() ? kBestCheckpointFile : kLastCheckpointFile);
    if (!m_settings.evaluate_every_epoch || !fs::exists(file)) return;
    const Checkpoint checkpoint = load_checkpoint(file);
    m_engine.set_state(checkpoint.parameters, checkpoint.optimizer_state);
    outcome.final_evaluation = m_engine.evaluate(m_data.test);
    outcome.final_checkpoint = file;
    outcome.final_epoch = checkpoint.position.epoch;
  }

  TrainOutcome outcome_so_far(int epochs_done) const {
    TrainOutcome outcome;
    outcome.run_dir = m_dir;
    outcome.epochs = m_reports;
    outcome.epochs_done = epochs_done;
    outcome.validation_images = m_data.validation.count;
    outcome.best_validation_accuracy = holds_out() ? m_position.best_accuracy : -1;
    return outcome;
  }

  bool holds_out() const { return m_data.validation.count > 0; }

  Checkpoint make_checkpoint(double test_accuracy, double validation_accuracy) const {
    Checkpoint c;
    c.net = m_net;
    c.config_toml = checkpoint_config(m_config_toml);
    c.parameters = m_engine.parameters();
    c.optimizer_state = m_engine.optimizer_state();  // none for plain SGD
    c.position = m_position;
    c.learning_rate = m_last_lr;
    c.seed = m_settings.seed;
    c.test_accuracy = test_accuracy;
    c.validation_accuracy = validation_accuracy;
    c.validation_images = m_data.validation.count;
    c.data = checksums(m_data);
    c.dataset = m_settings.dataset;
    return c;
  }

  const TrainSettings& m_settings;
  const std::string& m_config_toml;
  fs::path m_dir;
  RunLog m_log;
  const Mnist& m_data;
  NetConfig m_net;
  Schedule m_schedule;
  Engine& m_engine;
  bool m_show_progress;
  TrainingPosition m_position;
  double m_last_lr = 0;
  std::vector<EpochReport> m_reports;
  // The current epoch's: its rates, the totals a resumed epoch carries, its start, its bar.
  std::vector<float> m_rates;
  EpochTotals m_carried;
  std::chrono::steady_clock::time_point m_epoch_start;
  std::unique_ptr<ProgressBar> m_progress;
  std::optional<MetricsFile> m_metrics;  // from start_fresh or resume_from on
};

void check_resume_matches(const TrainSettings& settings, const Checkpoint& checkpoint) {
  const NetConfig net = settings.net_config();
  if (net.activation != checkpoint.net.activation ||
      net.subsampling != checkpoint.net.subsampling || net.c3_table != checkpoint.net.c3_table ||
      net.output != checkpoint.net.output || net.conv_units != checkpoint.net.conv_units)
    throw UsageError(
        "the network settings (activation, subsampling, c3-table, output, conv-units) differ from "
        "the checkpoint's; a resumed run must use the checkpoint's network");
  if (settings.dataset != checkpoint.dataset)
    throw UsageError("--dataset " + settings.dataset + " differs from the checkpoint's data set, " +
                     checkpoint.dataset + ": a resumed run trains on the data it started on");
  if (settings.validation != checkpoint.validation_images)
    throw UsageError("--validation " + std::to_string(settings.validation) +
                     " differs from the checkpoint's run, which held out " +
                     std::to_string(checkpoint.validation_images) +
                     " of the training images: a resumed run trains and chooses on the images "
                     "it started with (resume with --validation " +
                     std::to_string(checkpoint.validation_images) + ")");
  if (settings.seed != checkpoint.seed)
    spdlog::warn("--seed {} differs from the checkpoint's {}: the shuffling order changes",
                 settings.seed, checkpoint.seed);
  if (checkpoint.position.epoch >= settings.epochs)
    spdlog::warn(
        "the checkpoint has already trained {} of {} epochs: nothing to do (raise "
        "--epochs to train longer)",
        checkpoint.position.epoch, settings.epochs);
}

// The models' files at an epoch's end and after the last one, written side by side
// (side_by_side.hpp), at most kSideBySide models' at a time (for the checkpoints, 64 measured no
// faster than 16). That work logs nothing, and must not: the
// training thread adds and removes the logger's sinks at each model's RunLog::Active scope,
// unguarded.
constexpr std::size_t kSideBySide = 16;

std::vector<Run*> models_of(const std::vector<std::unique_ptr<Run>>& runs) {
  std::vector<Run*> models;
  for (const std::unique_ptr<Run>& run : runs) models.push_back(run.get());
  return models;
}

// A model's files of one epoch end (Run::EpochFiles), to be written.
struct ModelFiles {
  const Run* model;
  Run::EpochFiles files;
};

// Writes the models' files side by side; the first failing model's error leaves (in model order).
void write_side_by_side(std::vector<ModelFiles>& ends) {
  std::vector<ModelFiles*> items;
  for (ModelFiles& end : ends) items.push_back(&end);
  for_each_side_by_side<void>(
      items, kSideBySide,
      [](ModelFiles& end) {
        return std::async(std::launch::async, [&end] { end.model->write_epoch_files(end.files); });
      },
      [](ModelFiles&, std::future<void>& write) { write.get(); });
}

// The models' epoch ends, in two parts. First, on this thread, each model's report and files in
// turn (they read its engine: its evaluation, its weights). Then, on a thread of its own, which the
// returned future joins: the models' files written side by side, while this thread goes on to the
// next epoch (on the GPU, which trains it meanwhile; on the CPU, training it itself).
// train_lockstep joins the writes before the next epoch ends, before a stop saves, and before the
// models finish, so each model's files are written in epoch order and a stop or a crash finds
// them as writing them one at a time would leave them. If a model's end fails, the models before
// it still write theirs, and then the first error in model order leaves, as one at a time.
// Packed sweeps of 16 and 64 models measured faster with the writes side by side than one after
// the other, and faster again with them beside the next epoch than with every write of an epoch
// ended before the next began; a lone run's wall time fell a little too.
std::future<void> end_epochs(const std::vector<std::unique_ptr<Run>>& runs) {
  auto ends = std::make_shared<std::vector<ModelFiles>>();
  try {
    for (const std::unique_ptr<Run>& run : runs) {
      const RunLog::Active log(run->log());
      ends->push_back({run.get(), run->end_epoch()});
    }
  } catch (...) {
    write_side_by_side(*ends);
    throw;
  }
  try {
    return std::async(std::launch::async, [ends] { write_side_by_side(*ends); });
  } catch (const std::system_error&) {  // no thread to be had: written here and now
    write_side_by_side(*ends);
    return {};
  }
}

// After another error: joins the writes still in flight and logs their failure, which that error
// would otherwise hide (on the training thread, which may log).
void log_unfinished_writes(std::future<void>& writing) {
  if (!writing.valid()) return;
  try {
    writing.get();
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
  }
}

// The models' ends, after the last epoch: each model's pictures (three files, written as a
// checkpoint is) drawn side by side while this thread evaluates each model's best checkpoint in
// turn, and each model's line about its pictures logged, under its own log, as its drawing is
// joined. Packed sweeps of 16 and 64 models measured faster so than with each model's pictures
// drawn beside its own evaluation only.
std::vector<TrainOutcome> finish_models(const std::vector<std::unique_ptr<Run>>& runs) {
  std::vector<TrainOutcome> outcomes;
  for_each_side_by_side<std::string>(
      models_of(runs), kSideBySide,
      [&outcomes](Run& model) {
        const RunLog::Active log(model.log());
        std::future<std::string> pictures = model.begin_pictures();
        outcomes.push_back(model.finish());
        return pictures;
      },
      [](Run& model, std::future<std::string>& pictures) {
        const std::string failure = pictures.get();
        const RunLog::Active log(model.log());
        model.report_pictures(failure);
      });
  return outcomes;
}

// The models of one engine group, epoch by epoch in lockstep: every model begins its epoch, then
// every model asks for each chunk of steps (the group runs a chunk once all have asked), then
// every model ends its epoch (end_epochs), whose files are written while the next epoch trains.
// Each model's work happens with its own train.log joined to the log.
// A SIGINT or SIGTERM stops every model at the same step, each saving where it stands.
std::vector<TrainOutcome> train_lockstep(const std::vector<std::unique_ptr<Run>>& runs) {
  StopSignals stop;
  const auto each = [&runs](auto&& work) {
    for (const std::unique_ptr<Run>& run : runs) {
      const RunLog::Active log(run->log());
      work(*run);
    }
  };
  std::vector<TrainOutcome> outcomes;
  Run& lead = *runs.front();  // the models share their position and sizes (packable_together)
  std::future<void> writing;  // the previous epoch's files (end_epochs), written as this one trains
  const auto written = [&writing] {
    if (writing.valid()) writing.get();  // rethrows the first failing model's error
  };
  // A failed write stops the run at the next chunk of steps, not only at the epoch's end (on the
  // CPU, chunks are a few steps).
  const auto written_if_done = [&writing, &written] {
    if (writing.valid() && writing.wait_for(std::chrono::seconds(0)) == std::future_status::ready)
      written();
  };
  try {
    while (lead.epochs_left()) {
      const int steps = lead.steps_per_epoch(), chunk = lead.steps_per_call();
      const int first_step = lead.first_step();
      each([](Run& run) { run.begin_epoch(); });
      for (int step = first_step; step < steps; step += chunk) {
        written_if_done();
        if (stop.requested()) {
          written();
          each([&](Run& run) { outcomes.push_back(run.interrupt(step, stop.signal())); });
          return outcomes;
        }
        const int end = std::min(steps, step + chunk);
        each([&](Run& run) { run.train_steps(step, end); });
      }
      written();
      writing = end_epochs(runs);
    }
    written();
  } catch (...) {
    log_unfinished_writes(writing);
    throw;
  }
  return finish_models(runs);
}

// The settings a packed group's models may not differ in, beyond the network's (which the engine
// group is made for): the flags of train_setting_declarations() other than these may differ.
bool differ_only_where_packing_allows(const TrainSettings& a, const TrainSettings& b) {
  static const std::set<std::string> may_differ = {"--seed",
                                                   "--lr",
                                                   "--schedule",
                                                   "--lr-gamma",
                                                   "--lr-step-epochs",
                                                   "--min-lr",
                                                   "--warmup-epochs",
                                                   "--one-cycle-start",
                                                   "--out",
                                                   "--threads"};
  for (const SettingDeclaration& declaration : train_setting_declarations())
    if (!may_differ.count(declaration.flag) && !declaration.same_in(a, b)) return false;
  return true;
}

}  // namespace

bool packable_together(const TrainJob& a, const TrainJob& b) {
  const TrainingPosition start_a = a.resume ? a.resume->position : TrainingPosition{};
  const TrainingPosition start_b = b.resume ? b.resume->position : TrainingPosition{};
  return differ_only_where_packing_allows(a.settings, b.settings) &&
         start_a.epoch == start_b.epoch && start_a.step == start_b.step;
}

std::vector<TrainOutcome> train_models(const std::vector<TrainJob>& jobs) {
  if (jobs.empty()) return {};
  const TrainSettings& lead = jobs.front().settings;
  for (const TrainJob& job : jobs) {
    job.settings.validate();
    if (!packable_together(jobs.front(), job))
      throw Error(
          "internal: models that differ beyond seed and learning rates, or start at "
          "different steps, cannot share an engine group");
    if (job.resume) check_resume_matches(job.settings, *job.resume);
  }
  use_cpu_threads(lead.threads);
  DeviceStart device_start(lead.device);
  const DatasetDescription& dataset = find_dataset(lead.dataset);
  const fs::path data_dir = resolve_data_dir(lead.data_dir, dataset);
  Mnist data = device_start.overlapping([&] { return load_dataset(dataset, data_dir); });
  require_dataset_files(dataset, data.train, Split::train, data_dir);
  require_dataset_files(dataset, data.test, Split::test, data_dir);
  HeldOut parts = hold_out_validation(std::move(data.train), lead.validation);
  data.train = std::move(parts.train);
  data.validation = std::move(parts.validation);
  limit_training_set(data.train, lead.train_limit);
  const Device device = device_start.wait();

  const int models = int(jobs.size());
  const std::unique_ptr<EngineGroup> engines =
      make_engine_group(device, lead.net_config(), lead.sgd(), lead.batch_size, models);
  std::vector<PreparedFolder> folders;
  std::vector<std::unique_ptr<Run>> runs;
  for (int i = 0; i < models; ++i) {
    const TrainJob& job = jobs[std::size_t(i)];
    folders.push_back(prepare_run_folder(job.settings, job.config_toml, job.resume_file));
    const fs::path& dir = folders.back().dir;
    runs.push_back(std::make_unique<Run>(job.settings, job.config_toml, dir, data,
                                         engines->model(i), /*show_progress=*/models == 1));
    const RunLog::Active log(runs.back()->log());
    spdlog::info(
        "run folder {}: {} trainable parameters, training on {} images ({}) for {} epoch{}, "
        "batch {}, on the {}{}{}",
        dir.string(), lenet5_layout(job.settings.net_config()).trainable_count, data.train.count,
        data.validation.count > 0
            ? fmt::format("{} more held out to choose the best epoch on", data.validation.count)
            : "none held out: no best epoch is chosen",
        job.settings.epochs, job.settings.epochs == 1 ? "" : "s", job.settings.batch_size,
        to_string(device),
        device == Device::cpu
            ? fmt::format(" ({} thread{})", job.settings.threads, job.settings.threads == 1 ? "" : "s")
            : "",
        models > 1 ? fmt::format(", packed with {} other model{}", models - 1, models == 2 ? "" : "s")
                   : "");
    if (job.resume)
      runs.back()->resume_from(*job.resume);
    else
      runs.back()->start_fresh();
  }
  return train_lockstep(runs);
}

std::string format_outcome(const TrainOutcome& outcome, int epochs,
                           const DatasetDescription& dataset) {
  std::string text = fmt::format("trained {} epoch{}; run folder {}\n", outcome.epochs_done,
                                 outcome.epochs_done == 1 ? "" : "s", outcome.run_dir.string());
  if (!outcome.final_evaluation) return text;
  const std::string how =
      outcome.validation_images > 0
          ? fmt::format(
                "after epoch {} of {}: the epoch that the {} training images held out for "
                "validation read best, {:.2f}%",
                outcome.final_epoch, epochs, outcome.validation_images,
                100 * outcome.best_validation_accuracy)
          : fmt::format(
                "after epoch {} of {}, the last: no training images were held out "
                "(--validation 0), so no best epoch was chosen",
                outcome.final_epoch, epochs);
  return text + fmt::format("\n{} ({}); on the test set, as `lenet5 evaluate` reports it:\n{}",
                            outcome.final_checkpoint.string(), how,
                            format_evaluation(*outcome.final_evaluation, dataset));
}

TrainOutcome train(const TrainSettings& settings, const std::string& config_toml,
                   const std::optional<Checkpoint>& resume, const fs::path& resume_file) {
  return train_models({TrainJob{settings, config_toml, resume, resume_file}}).front();
}

}  // namespace lenet5
