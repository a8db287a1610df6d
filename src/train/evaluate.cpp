// `evaluate` and `classify`: a checkpoint's engine, the test set's evaluation, and the user's
// images preprocessed and read.
#include "train/evaluate.hpp"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <numeric>

#include "backend/backend.hpp"
#include "core/error.hpp"
#include "data/datasets.hpp"
#include "image/image_io.hpp"
#include "pictures/image.hpp"
#include "train/report.hpp"

namespace lenet5 {
namespace fs = std::filesystem;
namespace {

struct ClassRates {
  double precision = 0, recall = 0;
};

ClassRates class_rates(const Evaluation& e, int digit) {
  std::int64_t predicted = 0, actual = 0;
  for (int k = 0; k < 10; ++k) {
    predicted += e.confusion[k][digit];
    actual += e.confusion[digit][k];
  }
  const double hits = double(e.confusion[digit][digit]);
  return {predicted ? hits / double(predicted) : 0.0, actual ? hits / double(actual) : 0.0};
}

// The predicted class first (with an RBF output far from every prototype, all ten probabilities
// can round to 0 and only the distances tell), then the others by probability, ties in class order.
std::vector<int> ranked_digits(const Classification& r) {
  std::vector<int> order(r.probabilities.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if ((a == r.predicted) != (b == r.predicted)) return a == r.predicted;
    return r.probabilities[a] > r.probabilities[b];
  });
  return order;
}

// "" with the softmax output; with an RBF output, the MAP criterion's rest.
std::string none_of_these_text(const Classification& r) {
  if (r.none_of_these < 0) return "";
  return fmt::format("  none of these {:.1f}%", 100 * r.none_of_these);
}

// The width of a confusion-matrix column: MNIST's six, or the longest class name and a space.
int column_width(const DatasetDescription& dataset) {
  std::size_t longest = 0;
  for (const std::string& name : dataset.class_names) longest = std::max(longest, name.size());
  return std::max(6, int(longest) + 1);
}

// --save-preprocessed: for one image the named file, for several a folder of <stem>.png files.
fs::path preprocessed_path(const ClassifyOptions& options, const std::string& file,
                           bool several) {
  if (!several) return options.save_preprocessed;
  return options.save_preprocessed / (fs::path(file).stem().string() + ".28x28.png");
}

}  // namespace

std::unique_ptr<Engine> engine_for(const Checkpoint& checkpoint, Device device) {
  auto engine = make_engine(device, checkpoint.net, SgdSettings{}, 1);
  engine->set_state(checkpoint.parameters, {});  // evaluation takes no optimizer steps
  return engine;
}

std::string format_evaluation(const Evaluation& e, const DatasetDescription& dataset) {
  const std::vector<std::string>& names = dataset.class_names;
  const std::string& noun = dataset.class_noun;
  const int width = column_width(dataset);
  std::string out =
      fmt::format("test accuracy {}% ({}/{})\nmean loss {:.6f}\n",
                  format_percent(e.correct, e.count), e.correct, e.count, e.mean_loss());
  if (e.output == OutputLayer::rbf)
    out +=
        "(RBF output, LeCun 1998: the loss is the MAP criterion of the paper's equation (9), "
        "the predicted class the nearest prototype's)\n";
  out += "\n";
  out += fmt::format("confusion matrix (rows: true {0}, columns: predicted {0})\n{1:>{2}}", noun,
                     "", width);
  for (int k = 0; k < 10; ++k) out += fmt::format("{:>{}}", names[k], width);
  out += "\n";
  for (int t = 0; t < 10; ++t) {
    out += fmt::format("{:>{}}", names[t], width);
    for (int k = 0; k < 10; ++k) out += fmt::format("{:>{}}", e.confusion[t][k], width);
    out += "\n";
  }
  const int name_width = std::max(int(noun.size()), width - 1);
  out += fmt::format("\n{:<{}}  precision  recall\n", noun, name_width);
  for (int d = 0; d < 10; ++d) {
    const ClassRates rates = class_rates(e, d);
    out += fmt::format("{:>{}}  {:>8.2f}%  {:>5.2f}%\n", names[d], name_width,
                       100 * rates.precision, 100 * rates.recall);
  }
  return out;
}

std::string format_evaluation_json(const Evaluation& e, const std::string& checkpoint,
                                   const DatasetDescription& dataset) {
  nlohmann::json json;
  json["checkpoint"] = checkpoint;
  json["dataset"] = dataset.name;
  json["classes"] = dataset.class_names;
  json["images"] = e.count;
  json["correct"] = e.correct;
  json["accuracy"] = e.accuracy();
  json["accuracy_percent"] = format_percent(e.correct, e.count);
  json["mean_loss"] = e.mean_loss();
  // Only for an RBF output, so the softmax output's JSON stays as it was.
  if (e.output == OutputLayer::rbf) {
    json["output"] = to_string(e.output);
    json["loss"] = "MAP criterion (LeCun 1998, equation (9))";
  }
  json["confusion"] = e.confusion;
  for (int d = 0; d < 10; ++d) {
    const ClassRates rates = class_rates(e, d);
    json["precision"].push_back(rates.precision);
    json["recall"].push_back(rates.recall);
  }
  return json.dump() + "\n";
}

int Classification::digit() const {
  return predicted;
}

std::vector<Classification> classify_images(Engine& engine, const std::vector<std::string>& files,
                                            const ClassifyOptions& options) {
  std::vector<Classification> results;
  for (const std::string& file : files) {
    Classification result;
    result.file = file;
    try {
      const Digit28 digit = preprocess_digit(load_gray_image(file), options.invert, file);
      result.inverted = digit.inverted;
      if (!options.save_preprocessed.empty())
        pictures::write_gray_png(
            preprocessed_path(options, file, files.size() > 1), 28, 28,
            std::vector<std::uint8_t>(digit.pixels.begin(), digit.pixels.end()));
      std::vector<std::int32_t> predicted;
      result.probabilities = engine.classify(digit.pixels.data(), 1, predicted);
      result.predicted = predicted.at(0);
      if (options.output == OutputLayer::rbf)
        result.none_of_these = std::max(
            0.0f,
            1.0f - std::accumulate(result.probabilities.begin(), result.probabilities.end(), 0.0f));
    } catch (const Error& e) {
      result.error = e.what();
    }
    results.push_back(std::move(result));
  }
  return results;
}

std::string format_classification(const Classification& r, int top,
                                  const DatasetDescription& dataset) {
  if (!r.error.empty()) return fmt::format("{}: error: {}\n", r.file, r.error);
  const std::vector<std::string>& names = dataset.class_names;
  const std::vector<int> order = ranked_digits(r);
  std::string line =
      fmt::format("{}: {} ({:.1f}%)", r.file, names.at(order[0]), 100 * r.probabilities[order[0]]);
  if (top > 1) {
    line += "  top:";
    for (int i = 0; i < std::min<int>(top, 10); ++i)
      line += fmt::format(" {} {:.1f}%", names.at(order[i]), 100 * r.probabilities[order[i]]);
  }
  return line + none_of_these_text(r) + "\n";
}

std::string format_classifications_json(const std::vector<Classification>& results, int top,
                                        const DatasetDescription& dataset) {
  nlohmann::json json = nlohmann::json::array();
  for (const Classification& r : results) {
    nlohmann::json item{{"file", r.file}};
    if (!r.error.empty()) {
      item["error"] = r.error;
    } else {
      item["digit"] = r.digit();  // the class's number, whatever the data set
      item["class"] = dataset.class_names.at(std::size_t(r.digit()));
      item["probability"] = r.probabilities[r.digit()];
      item["inverted"] = r.inverted;
      const std::vector<int> order = ranked_digits(r);
      for (int i = 0; i < std::min<int>(std::max(top, 1), 10); ++i)
        item["top"].push_back({{"digit", order[i]},
                               {"class", dataset.class_names.at(std::size_t(order[i]))},
                               {"probability", r.probabilities[order[i]]}});
      item["probabilities"] = r.probabilities;
      if (r.none_of_these >= 0) item["none_of_these"] = r.none_of_these;
    }
    json.push_back(item);
  }
  return json.dump() + "\n";
}

}  // namespace lenet5
