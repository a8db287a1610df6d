// `evaluate --report`: index.html, confusion.png and errors.png written into the report folder.
#include "train/evaluation_report.hpp"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <set>
#include <vector>

#include "core/error.hpp"
#include "io/atomic_file.hpp"
#include "pictures/evaluation_pictures.hpp"
#include "pictures/svg_chart.hpp"
#include "train/mistakes.hpp"
#include "train/report.hpp"

namespace lenet5 {
namespace fs = std::filesystem;
namespace {

std::string index_html(const Evaluation& e, const std::string& checkpoint, std::size_t mistakes,
                       const DatasetDescription& classes) {
  const std::string name = pictures::markup_escaped(checkpoint);
  const std::string key = pictures::class_key(classes.class_names);
  const std::string key_html =
      key.empty() ? "" : "<p>Classes: " + pictures::markup_escaped(key) + ".</p>\n";
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<title>lenet5 evaluation: {0}</title>\n"
      "<style>body {{ font-family: sans-serif; margin: 2em; }} img {{ max-width: 100%; "
      "border: 1px solid #ccc; }}</style>\n</head>\n<body>\n"
      "<h1>Evaluation of {0}</h1>\n"
      "<p>Test accuracy <b>{1}%</b> ({2}/{3}), mean loss {4:.6f}, {5} images misclassified.</p>\n"
      "<h2>Confusion matrix</h2>\n<p>Rows: the true {9}; columns: the {9} predicted.</p>\n{10}"
      "<p><img src=\"{6}\" alt=\"confusion matrix\"></p>\n"
      "<h2>Misclassified test images</h2>\n<p>The network's most confident mistakes first.</p>\n"
      "<p><img src=\"{7}\" alt=\"misclassified test images\"></p>\n"
      "<p>Written by lenet5 {8} evaluate --report.</p>\n</body>\n</html>\n",
      name, format_percent(e.correct, e.count), e.correct, e.count, e.mean_loss(), mistakes,
      kConfusionFile, kErrorsFile, LENET5_VERSION, classes.class_noun, key_html);
}

}  // namespace

void check_report_folder(const fs::path& dir) {
  std::error_code error;
  if (!fs::exists(dir, error)) return;
  if (!fs::is_directory(dir, error))
    throw UsageError(
        fmt::format("--report {}: it is a file, not a folder; name a new folder", dir.string()));
  const std::set<std::string> own{kConfusionFile, kErrorsFile, kReportIndexFile};
  for (const auto& entry : fs::directory_iterator(dir))
    if (!own.count(entry.path().filename().string()))
      throw UsageError(fmt::format(
          "--report {}: the folder holds {}, which an evaluation report did not write; name a new "
          "or empty folder (a report replaces only an earlier report's files)",
          dir.string(), entry.path().filename().string()));
}

void write_evaluation_report(const fs::path& dir, Engine& engine, const Dataset& test,
                             const Evaluation& evaluation, const std::string& checkpoint,
                             const DatasetDescription& classes) {
  check_report_folder(dir);
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) throw Error("cannot create report folder " + dir.string() + ": " + error.message());
  const std::vector<pictures::Mistake> mistakes = find_mistakes(engine, test);
  pictures::write_png(dir / kConfusionFile,
                      pictures::confusion_picture(evaluation.confusion, classes.class_names));
  pictures::write_png(
      dir / kErrorsFile,
      pictures::mistakes_picture(mistakes, int(mistakes.size()), test.count, classes.class_names));
  write_file_atomically(dir / kReportIndexFile,
                        index_html(evaluation, checkpoint, mistakes.size(), classes));
}

}  // namespace lenet5
