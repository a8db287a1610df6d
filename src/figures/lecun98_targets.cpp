// LeCun, Bottou, Bengio and Haffner 1998's Figure 5 redone from runs of configs/lecun1998.toml:
// the training and the test error against passes over the training set, as the mean, min and max
// over the runs given with --lecun98-runs, beside the two values the paper prints (section
// III.C): "the test error rate stabilizes after around 10 passes through the training set at
// 0.95 %. The error rate on the training set reaches 0.35 % after 19 passes." No curve of the
// paper's is drawn: only those two printed numbers, labelled as the paper's.
//
// The runs are read from their folders alone (metrics.csv, config.toml), so that a sweep, a
// single run, or runs trained elsewhere and copied here all give the same figure. The training
// error is the one evaluated on the undistorted training set after each pass where the runs
// recorded it (--evaluate-training-set, on in the LeCun configs), else the running error during
// the pass, and the table's column names say which.
#include <algorithm>
#include <fstream>

#include "core/error.hpp"
#include "figures/figure_util.hpp"
#include "figures/figures.hpp"
#include "io/atomic_file.hpp"
#include "pictures/svg_chart.hpp"
#include "train/bench.hpp"
#include "train/run_folder.hpp"
#include "train/run_pictures.hpp"
#include "train/settings.hpp"

namespace lenet5::figures {
namespace {

namespace fs = std::filesystem;

// The paper's printed values (section III.C), in percent, and the passes they are given for.
constexpr double kPaperTestError = 0.95;
constexpr int kPaperTestFromPass = 10;  // "stabilizes after around 10 passes"
constexpr double kPaperTrainingError = 0.35;
constexpr int kPaperTrainingPass = 19;  // "reaches 0.35 % after 19 passes"

constexpr const char* kTrainColour = "#1f77b4";  // blue, as the run folders' curves.svg
constexpr const char* kTestColour = "#d62728";   // red

constexpr const char* kHowToMakeRuns =
    "give the runs with --lecun98-runs DIR (a run folder, or a folder of run folders such as a "
    "sweep's); make them with `lenet5 --config configs/lecun1998.toml sweep --seeds 1-5 --out "
    "runs/lecun1998` (20 passes of one sample per step on one CPU core: about 4 minutes a seed), "
    "then `lenet5 figures lecun98.fig5 --lecun98-runs runs/lecun1998`";

struct Run {
  fs::path folder;
  std::vector<MetricsRow> rows;
};

// `path` itself when it holds metrics.csv; else its sub-folders that hold a run (a sweep's models;
// one that has not ended an epoch yet fails when read), by name. Links are left out, so that
// runs/latest does not count its run twice.
std::vector<fs::path> run_folders(const fs::path& path) {
  if (fs::is_regular_file(path / kMetricsFile)) return {path};
  std::vector<fs::path> folders;
  for (const fs::directory_entry& entry : fs::directory_iterator(path)) {
    if (entry.is_symlink() || !entry.is_directory()) continue;
    if (holds_run(entry.path())) folders.push_back(entry.path());
  }
  std::sort(folders.begin(), folders.end());
  return folders;
}

// What keeps a run from being one of configs/lecun1998.toml's ("" when nothing does): its
// config.toml must say output rbf and optimizer sdlm (the paper's output layer and training).
std::string not_lecun1998(const fs::path& folder) {
  const fs::path config = folder / kConfigFile;
  if (!fs::is_regular_file(config)) return config.string() + " is missing";
  const std::string text = read_text_file(config);
  const std::string output = stored_setting(text, "output"),
                    optimizer = stored_setting(text, "optimizer");
  if (output == "rbf" && optimizer == "sdlm") return "";
  return config.string() + " says output " + (output.empty() ? "(unset)" : output) +
         " and optimizer " + (optimizer.empty() ? "(unset)" : optimizer) + ", not rbf and sdlm";
}

// Mean, min and max over the runs (bench's spread; every run has a value here, check_runs says).
Spread spread(const std::vector<double>& values) {
  return *spread_of(std::vector<std::optional<double>>(values.begin(), values.end()));
}

// The per-pass errors of every run: errors[pass - 1][run], in percent.
struct Errors {
  bool evaluated_training_set = false;  // train_eval_acc (else the running train_acc)
  std::vector<std::vector<double>> training, test;
};

Errors errors_of(const std::vector<Run>& runs) {
  Errors errors;
  errors.evaluated_training_set = true;
  for (const Run& run : runs)
    for (const MetricsRow& row : run.rows)
      errors.evaluated_training_set &= row.train_eval_accuracy >= 0;
  const std::size_t passes = runs.front().rows.size();
  errors.training.resize(passes);
  errors.test.resize(passes);
  for (const Run& run : runs)
    for (std::size_t p = 0; p < passes; ++p) {
      const MetricsRow& row = run.rows[p];
      errors.training[p].push_back(
          100.0 - (errors.evaluated_training_set ? row.train_eval_accuracy : row.train_accuracy));
      errors.test[p].push_back(100.0 - row.test_accuracy);
    }
  return errors;
}

// Reads every run; false (the check failed, naming the file) when one cannot be read.
bool read_runs(Block& b, const fs::path& path, std::vector<Run>& runs) {
  if (!b.check("the folder " + path.string() + " exists", fs::is_directory(path),
               "no such folder; " + std::string(kHowToMakeRuns)))
    return false;
  const std::vector<fs::path> folders = run_folders(path);
  if (!b.check("it holds run folders", !folders.empty(),
               std::string("no ") + kMetricsFile + " in " + path.string() +
                   " nor in any folder directly under it"))
    return false;
  std::string unreadable;
  for (const fs::path& folder : folders) {
    try {
      runs.push_back({folder, read_metrics_csv(folder / kMetricsFile)});
    } catch (const Error& e) {
      unreadable += (unreadable.empty() ? "" : "; ") + std::string(e.what());
    }
  }
  return b.check("every run's " + std::string(kMetricsFile) + " reads (" +
                     std::to_string(folders.size()) + " runs)",
                 unreadable.empty(), unreadable);
}

// The checks that the runs make one figure: LeCun 1998 runs, the same number of passes, each pass
// of each evaluated on the test set. False when the figure cannot be drawn.
bool check_runs(Block& b, const std::vector<Run>& runs) {
  std::string others, passes, unevaluated;
  bool same_passes = true, all_evaluated = true;
  for (const Run& run : runs) {
    const std::string why = not_lecun1998(run.folder);
    if (!why.empty()) others += (others.empty() ? "" : "; ") + why;
    same_passes &= run.rows.size() == runs.front().rows.size() && !run.rows.empty();
    passes += (passes.empty() ? "" : ", ") + run.folder.filename().string() + " " +
              std::to_string(run.rows.size());
    for (std::size_t p = 0; p < run.rows.size(); ++p) {
      const bool in_order = run.rows[p].epoch == int(p) + 1;
      if (run.rows[p].test_accuracy < 0 || !in_order) {
        all_evaluated = false;
        unevaluated +=
            (unevaluated.empty() ? "" : "; ") + (run.folder / kMetricsFile).string() + " row " +
            std::to_string(p + 1) +
            (in_order ? " has no test accuracy" : " is not pass " + std::to_string(p + 1));
      }
    }
  }
  // A figure of other runs would not be the paper's figure: a failure, not a warning.
  const bool lecun = b.check(
      "the runs are LeCun 1998 runs (" + std::string(kConfigFile) + ": output rbf, optimizer sdlm)",
      others.empty(), others + "; train them with configs/lecun1998.toml");
  const bool same = b.check("every run has the same number of passes, at least one", same_passes,
                            "passes per run: " + passes);
  const bool evaluated =
      b.check("every pass of every run is evaluated on the test set, passes 1, 2, ... in order",
              all_evaluated, unevaluated);
  return lecun && same && evaluated;
}

// Every error a percentage (an accuracy above 100 or below 0 is a damaged or foreign file).
bool errors_in_range(Block& b, const Errors& errors) {
  std::string outside;
  for (const auto* set : {&errors.training, &errors.test})
    for (std::size_t p = 0; p < set->size(); ++p)
      for (double e : (*set)[p])
        if (!(e >= 0 && e <= 100))
          outside += (outside.empty() ? "" : ", ") +
                     std::string(set == &errors.test ? "test" : "training") + " error " +
                     number(e) + " at pass " + std::to_string(p + 1);
  return b.check("every error is in [0, 100] %", outside.empty(), outside);
}

// pass, the training error's mean/min/max, the test error's, and the paper's two values on their
// rows: the test error on every pass from the 10th (where the paper says it stabilises), the
// training error on the 19th. Passes the runs did not reach get a row only for the paper's value.
// Errors in percent; the training error's columns say whether it was evaluated or running.
Table fig5_table(const Errors& errors) {
  const std::string train = errors.evaluated_training_set ? "train (evaluated)" : "train (running)";
  Table table{{"pass", train + " mean %", train + " min %", train + " max %", "test mean %",
               "test min %", "test max %", "paper train %", "paper test %"},
              {}};
  const int passes = int(errors.test.size());
  for (int pass = 1; pass <= std::max(passes, kPaperTrainingPass); ++pass) {
    const bool measured = pass <= passes;
    const bool paper_row = pass == kPaperTrainingPass || pass == kPaperTestFromPass;
    if (!measured && !paper_row) continue;
    std::vector<std::string> row{std::to_string(pass)};
    for (const auto* set : {&errors.training, &errors.test}) {
      if (!measured) {
        row.insert(row.end(), {"", "", ""});
        continue;
      }
      const Spread s = spread((*set)[std::size_t(pass) - 1]);
      row.insert(row.end(), {fixed(s.mean, 3), fixed(s.min, 2), fixed(s.max, 2)});
    }
    row.push_back(pass == kPaperTrainingPass ? fixed(kPaperTrainingError, 2) : "");
    row.push_back(pass >= kPaperTestFromPass && (measured || pass == kPaperTestFromPass)
                      ? fixed(kPaperTestError, 2)
                      : "");
    table.add(std::move(row));
  }
  return table;
}

// Error in percent (log scale) against pass: the means of the runs, solid, and the paper's two
// printed values as dashed horizontal lines across the passes, labelled as the paper's with the
// passes they are printed for.
std::string fig5_svg(const Errors& errors, int runs) {
  const int passes = int(errors.test.size());
  pictures::Series train{"train", kTrainColour, {}, {}, false};
  pictures::Series test{"test", kTestColour, {}, {}, false};
  for (int p = 0; p < passes; ++p) {
    for (auto [series, set] :
         {std::pair{&train, &errors.training}, std::pair{&test, &errors.test}}) {
      series->x.push_back(p + 1);
      series->y.push_back(spread((*set)[std::size_t(p)]).mean);
    }
  }
  if (!errors.evaluated_training_set) train.name = "train (running)";
  const double last = std::max(passes, 2);
  const pictures::Series paper_train{"paper: train 0.35 (pass 19)",
                                     kTrainColour,
                                     {1, last},
                                     {kPaperTrainingError, kPaperTrainingError},
                                     true};
  const pictures::Series paper_test{"paper: test 0.95 (from pass 10)",
                                    kTestColour,
                                    {1, last},
                                    {kPaperTestError, kPaperTestError},
                                    true};
  pictures::LineChart chart{
      "LeCun 1998 Fig. 5 redone: mean of " + std::to_string(runs) + (runs == 1 ? " run" : " runs"),
      "pass",
      "error (%), log scale",
      {train, test, paper_train, paper_test},
      1.0,
      last,
      {},
      {},
      true};
  // A few passes can err by ten times the final error (SDLM's second pass does, in some seeds):
  // on a log scale the last passes, where the paper's values are, stay readable.
  chart.log_y = true;
  return pictures::line_charts_svg({chart});
}

void lecun98_fig5(Block& b) {
  const fs::path path = b.settings().lecun98_runs;
  if (path.empty()) {
    b.skip(std::string("no runs given: ") + kHowToMakeRuns);
    return;
  }
  std::vector<Run> runs;
  if (!read_runs(b, path, runs) || !check_runs(b, runs)) return;
  const Errors errors = errors_of(runs);
  if (!errors_in_range(b, errors)) return;
  std::string names;
  for (const Run& run : runs) names += (names.empty() ? "" : ", ") + run.folder.filename().string();
  b.line(std::to_string(runs.size()) + " runs under " + path.string() + ": " + names);
  const std::string metrics = kMetricsFile;
  b.line(errors.evaluated_training_set
             ? "training error: the undistorted training set evaluated after each pass (" +
                   metrics + "'s train_eval_acc), as the paper's figure plots it"
             : "training error: the running error during each pass (" + metrics +
                   "'s train_acc: weights changing, distorted images when augmenting); the runs "
                   "did not record the training set's own (--evaluate-training-set), which the "
                   "paper's figure plots");
  b.table("fig5", fig5_table(errors));
  b.svg("fig5", fig5_svg(errors, int(runs.size())));
  const std::size_t last = errors.test.size() - 1;
  const Spread train = spread(errors.training[last]), test = spread(errors.test[last]);
  b.line("after pass " + std::to_string(last + 1) + ", mean of " + std::to_string(runs.size()) +
         ": training error " + fixed(train.mean, 3) + " % (" + fixed(train.min, 2) + "-" +
         fixed(train.max, 2) + "), the paper 0.35 % after 19 passes; test error " +
         fixed(test.mean, 3) + " % (" + fixed(test.min, 2) + "-" + fixed(test.max, 2) +
         "), the paper 0.95 % from about 10 passes on");
}

}  // namespace

std::vector<Target> lecun98_cpu_targets() {
  return {{"lecun98.fig5", "LeCun 1998 Fig. 5: training and test error against passes",
           "LeCun et al. 1998 §III.C", false, lecun98_fig5}};
}

}  // namespace lenet5::figures
