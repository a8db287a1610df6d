// metrics.csv read back, and the run folder's pictures drawn from it and from the last weights.
#include "train/run_pictures.hpp"

#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "core/layout.hpp"
#include "io/atomic_file.hpp"
#include "pictures/network_pictures.hpp"
#include "train/run_folder.hpp"

namespace lenet5 {
namespace fs = std::filesystem;
namespace {

constexpr const char* kTrainColour = "#1f77b4";       // blue, solid
constexpr const char* kTestColour = "#d62728";        // red, dashed
constexpr const char* kValidationColour = "#2ca02c";  // green, dashed

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

// Where each column of a metrics.csv is, from its header: -1 for a column it does not have.
struct MetricsColumns {
  int epoch = -1, train_loss = -1, train_acc = -1, test_loss = -1, test_acc = -1, seconds = -1;
  int val_loss = -1, val_acc = -1, train_eval_loss = -1, train_eval_acc = -1;
};

MetricsColumns columns_of(const std::string& header) {
  const std::vector<std::string> names = csv_fields(header);
  MetricsColumns c;
  const std::pair<const char*, int*> wanted[] = {{"epoch", &c.epoch},
                                                 {"train_loss", &c.train_loss},
                                                 {"train_acc", &c.train_acc},
                                                 {"test_loss", &c.test_loss},
                                                 {"test_acc", &c.test_acc},
                                                 {"seconds", &c.seconds},
                                                 {"val_loss", &c.val_loss},
                                                 {"val_acc", &c.val_acc},
                                                 {"train_eval_loss", &c.train_eval_loss},
                                                 {"train_eval_acc", &c.train_eval_acc}};
  for (int i = 0; i < int(names.size()); ++i)
    for (const auto& [name, index] : wanted)
      if (names[std::size_t(i)] == name) *index = i;
  for (const int required :
       {c.epoch, c.train_loss, c.train_acc, c.test_loss, c.test_acc, c.seconds})
    if (required < 0)
      throw std::invalid_argument(
          "the header lacks one of epoch, train_loss, train_acc, "
          "test_loss, test_acc and seconds");
  return c;
}

MetricsRow parse_row(const std::string& line, const MetricsColumns& c) {
  const std::vector<std::string> f = csv_fields(line);
  const auto field = [&f](int column) -> const std::string& {
    if (column >= int(f.size())) throw std::invalid_argument("too few fields");
    return f[std::size_t(column)];
  };
  // A column the header has that a row lacks: a row kept from before a resume that turned
  // --evaluate-training-set on, which ends before it.
  const auto optional = [&](int column) {
    return column < 0 || column >= int(f.size()) ? -1 : number_or_absent(f[std::size_t(column)]);
  };
  MetricsRow row{std::stoi(field(c.epoch)),           std::stod(field(c.train_loss)),
                 std::stod(field(c.train_acc)),       number_or_absent(field(c.test_loss)),
                 number_or_absent(field(c.test_acc)), std::stod(field(c.seconds))};
  row.train_eval_loss = optional(c.train_eval_loss);
  row.train_eval_accuracy = optional(c.train_eval_acc);
  row.validation_loss = optional(c.val_loss);
  row.validation_accuracy = optional(c.val_acc);
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

MetricsLines read_metrics_lines(const fs::path& file) {
  std::error_code ec;
  const std::uintmax_t size = fs::file_size(file, ec);
  if (ec) throw Error("cannot read " + file.string() + ": the run folder has no metrics yet");
  if (size > kMaxMetricsBytes)
    throw Error("cannot read " + file.string() + ": it holds " + std::to_string(size) +
                " bytes, more than the 16 MiB lenet5 reads from a metrics file (a run writes "
                "about 100 bytes an epoch): it is not a run's; remove it or the run folder");
  std::ifstream in(file);
  if (!in) throw Error("cannot read " + file.string());
  MetricsLines lines;
  std::getline(in, lines.header);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) lines.rows.push_back(line);
  return lines;
}

std::vector<MetricsRow> read_metrics_csv(const fs::path& file) {
  return parse_metrics_lines(read_metrics_lines(file), file);
}

std::vector<MetricsRow> parse_metrics_lines(const MetricsLines& lines, const fs::path& file) {
  MetricsColumns columns;
  try {
    columns = columns_of(lines.header);
  } catch (const std::exception& e) {
    throw Error("cannot read " + file.string() + " line 1 ('" + lines.header + "'): " + e.what());
  }
  std::vector<MetricsRow> rows;
  int number = 1;  // the header's
  for (const std::string& line : lines.rows) {
    ++number;
    try {
      rows.push_back(parse_row(line, columns));
    } catch (const std::exception& e) {
      throw Error("cannot read " + file.string() + " line " + std::to_string(number) + " ('" +
                  line + "'): " + e.what());
    }
  }
  return rows;
}

std::vector<pictures::LineChart> training_curves(const std::vector<MetricsRow>& rows) {
  // The series of one measure: train, validation (where images were held out), test.
  const auto measured = [&rows](double MetricsRow::*train, double MetricsRow::*validation,
                                double MetricsRow::*test) {
    std::vector<pictures::Series> all{series("train", kTrainColour, false, rows, train)};
    pictures::Series held_out = series("validation", kValidationColour, true, rows, validation);
    if (!held_out.x.empty()) all.push_back(std::move(held_out));
    all.push_back(series("test", kTestColour, true, rows, test));
    return all;
  };
  pictures::LineChart loss{"Loss", "epoch", "mean cross-entropy", {}, {}, {}, 0.0, {}, true};
  loss.series =
      measured(&MetricsRow::train_loss, &MetricsRow::validation_loss, &MetricsRow::test_loss);
  pictures::LineChart accuracy{"Accuracy", "epoch", "accuracy (%)", {}, {}, {}, {}, 100.0, true};
  accuracy.series = measured(&MetricsRow::train_accuracy, &MetricsRow::validation_accuracy,
                             &MetricsRow::test_accuracy);
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
  const fs::path metrics = run_dir / kMetricsFile;
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
