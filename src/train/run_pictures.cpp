#include "train/run_pictures.hpp"

#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "core/layout.hpp"
#include "io/atomic_file.hpp"
#include "pictures/network_pictures.hpp"

namespace lenet5 {
namespace fs = std::filesystem;
namespace {

constexpr const char* kTrainColour = "#1f77b4";  // blue, solid
constexpr const char* kTestColour = "#d62728";   // red, dashed

std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> fields;
  std::stringstream in(line);
  std::string field;
  while (std::getline(in, field, ',')) fields.push_back(field);
  if (!line.empty() && line.back() == ',') fields.emplace_back();
  return fields;
}

// An empty field (an epoch that was not evaluated) reads as -1.
double number_or_absent(const std::string& field) {
  return field.empty() ? -1 : std::stod(field);
}

// Fields 8 and 9 (from 0), train_eval_loss and train_eval_acc, are read where a row has them.
MetricsRow parse_row(const std::string& line) {
  const std::vector<std::string> f = csv_fields(line);
  if (f.size() < 7) throw std::invalid_argument("fewer than 7 fields");
  MetricsRow row{std::stoi(f[0]),        std::stod(f[2]),        std::stod(f[3]),
                 number_or_absent(f[4]), number_or_absent(f[5]), std::stod(f[6])};
  if (f.size() > 8) row.train_eval_loss = number_or_absent(f[8]);
  if (f.size() > 9) row.train_eval_accuracy = number_or_absent(f[9]);
  return row;
}

pictures::Series series(const std::string& name, const char* colour, bool dashed,
                        const std::vector<MetricsRow>& rows, double MetricsRow::*value) {
  pictures::Series s{name, colour, {}, {}, dashed};
  for (const MetricsRow& row : rows)
    if (row.*value >= 0) {
      s.x.push_back(row.epoch);
      s.y.push_back(row.*value);
    }
  return s;
}

}  // namespace

std::vector<std::string> read_metrics_lines(const fs::path& file) {
  std::error_code ec;
  const std::uintmax_t size = fs::file_size(file, ec);
  if (ec) throw Error("cannot read " + file.string() + ": the run folder has no metrics yet");
  if (size > kMaxMetricsBytes)
    throw Error("cannot read " + file.string() + ": it holds " + std::to_string(size) +
                " bytes, more than the 16 MiB lenet5 reads from a metrics file (a run writes "
                "about 100 bytes an epoch): it is not a run's; remove it or the run folder");
  std::ifstream in(file);
  if (!in) throw Error("cannot read " + file.string());
  std::vector<std::string> lines;
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line))
    if (!line.empty()) lines.push_back(line);
  return lines;
}

std::vector<MetricsRow> read_metrics_csv(const fs::path& file) {
  return parse_metrics_lines(read_metrics_lines(file), file);
}

std::vector<MetricsRow> parse_metrics_lines(const std::vector<std::string>& lines,
                                            const fs::path& file) {
  std::vector<MetricsRow> rows;
  int number = 1;  // the header's
  for (const std::string& line : lines) {
    ++number;
    try {
      rows.push_back(parse_row(line));
    } catch (const std::exception& e) {
      throw Error("cannot read " + file.string() + " line " + std::to_string(number) + " ('" +
                  line + "'): " + e.what());
    }
  }
  return rows;
}

std::vector<pictures::LineChart> training_curves(const std::vector<MetricsRow>& rows) {
  pictures::LineChart loss{"Loss", "epoch", "mean cross-entropy", {}, {}, {}, 0.0, {}, true};
  loss.series = {series("train", kTrainColour, false, rows, &MetricsRow::train_loss),
                 series("test", kTestColour, true, rows, &MetricsRow::test_loss)};
  pictures::LineChart accuracy{"Accuracy", "epoch", "accuracy (%)", {}, {}, {}, {}, 100.0, true};
  accuracy.series = {series("train", kTrainColour, false, rows, &MetricsRow::train_accuracy),
                     series("test", kTestColour, true, rows, &MetricsRow::test_accuracy)};
  for (pictures::LineChart* chart : {&loss, &accuracy})
    if (rows.size() == 1) {  // one epoch: an x axis from 0 so the single point is not an edge
      chart->x_min = 0;
      chart->x_max = 2;
    }
  return {loss, accuracy};
}

void write_run_pictures(const fs::path& run_dir, const NetConfig& net,
                        const std::vector<float>& parameters) {
  const ParamLayout layout = lenet5_layout(net);
  // A run stopped before its first epoch ended has no metrics.csv yet: its charts are empty. A
  // folder that cannot be looked into is an Error, which the trainer reports as a warning (the
  // pictures are a view of the run), where filesystem_error would stop the run.
  const fs::path metrics = run_dir / "metrics.csv";
  std::error_code error;
  const bool has_metrics = fs::exists(metrics, error);
  if (error) throw Error("cannot read " + metrics.string() + ": " + error.message());
  const std::vector<MetricsRow> rows =
      has_metrics ? read_metrics_csv(metrics) : std::vector<MetricsRow>{};
  write_file_atomically(run_dir / kCurvesFile, pictures::line_charts_svg(training_curves(rows)));
  pictures::write_png(run_dir / kFiltersC1File, pictures::c1_filters_picture(layout, parameters));
  pictures::write_png(run_dir / kFiltersC3File,
                      pictures::c3_filters_picture(layout, net, parameters));
}

}  // namespace lenet5
