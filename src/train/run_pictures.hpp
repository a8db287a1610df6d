// The run folder's pictures (named in run_folder.hpp), drawn when `train` ends (finished, resumed
// to its end, or stopped by a signal), all from what the folder holds at that moment:
//   curves.svg       loss and accuracy per epoch, train and test, from metrics.csv (every epoch
//                    of the run, those before a resume included);
//   filters_c1.png   the six C1 filters of the weights just saved in last.safetensors;
//   filters_c3.png   C3's filters over S2's maps, laid out as the C3 table (pictures/).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/net_config.hpp"
#include "pictures/svg_chart.hpp"

namespace lenet5 {

// One row of metrics.csv as numbers; accuracies in percent, test values absent (-1) when the
// epoch was not evaluated. train_accuracy is the running accuracy during the epoch (weights
// changing, images distorted when augmenting); train_eval_* are the undistorted training set's
// evaluated after the epoch, present (not -1) only in the rows of runs with
// --evaluate-training-set, whose metrics.csv has the two trailing columns train_eval_loss and
// train_eval_acc (older files, and runs without it, have not).
struct MetricsRow {
  int epoch = 0;
  double train_loss = 0, train_accuracy = 0;
  double test_loss = -1, test_accuracy = -1;
  double seconds = 0;  // the epoch's training time (evaluation excluded)
  double train_eval_loss = -1, train_eval_accuracy = -1;
  double validation_loss = -1, validation_accuracy = -1;  // the held-out training images
};

// metrics.csv's header and its rows after it, empty lines left out. A file larger than this (some
// 150,000 epochs) is refused unread: no run writes one, and a damaged or planted one must not
// make a resumed run or `serve` read without end.
inline constexpr std::uintmax_t kMaxMetricsBytes = std::uintmax_t(16) << 20;
struct MetricsLines {
  std::string header;
  std::vector<std::string> rows;
};
MetricsLines read_metrics_lines(const std::filesystem::path& file);

// The rows of `lines` (read_metrics_lines' of `file`, which names it in errors), each field found
// by the header's name for it: epoch, train_loss, train_acc, test_loss, test_acc and seconds in
// every run's file; val_loss and val_acc where images were held out, train_eval_loss and
// train_eval_acc with --evaluate-training-set. Throws lenet5::Error naming the file and line when
// the header lacks a column every run writes, or a row cannot be read.
std::vector<MetricsRow> parse_metrics_lines(const MetricsLines& lines,
                                            const std::filesystem::path& file);
// read_metrics_lines, then parse_metrics_lines.
std::vector<MetricsRow> read_metrics_csv(const std::filesystem::path& file);

// The two charts of curves.svg: loss, and accuracy in percent, each with its train and test
// series, and its validation series where images were held out.
std::vector<pictures::LineChart> training_curves(const std::vector<MetricsRow>& rows);

// Writes the three pictures into `run_dir` (atomically, each replacing any older one).
void write_run_pictures(const std::filesystem::path& run_dir, const NetConfig& net,
                        const std::vector<float>& parameters);

}  // namespace lenet5
