// The API's answers as JSON: classify, the model, and the run and sweep folders under the runs
// folder.
#include "serve/api.hpp"

#include <cmath>
#include <fstream>
#include <sstream>

#include "core/layout.hpp"
#include "core/net_config.hpp"
#include "core/topology.hpp"
#include "data/datasets.hpp"
#include "sweep/summary.hpp"
#include "train/run_folder.hpp"
#include "train/run_pictures.hpp"

namespace lenet5::serve {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

json rounded(const float* values, std::size_t n) {
  json array = json::array();
  for (std::size_t i = 0; i < n; ++i) array.push_back(std::round(double(values[i]) * 1e4) / 1e4);
  return array;
}

// A grey value of the JSON drawing: a number in 0..255.
float grey_value(const json& value) {
  if (!value.is_number()) throw BadRequest(400, "\"pixels\" must hold numbers 0..255");
  const double v = value.get<double>();
  if (!(v >= 0 && v <= 255)) throw BadRequest(400, "\"pixels\" values must lie in 0..255");
  return float(v / 255.0);
}

int side(const json& request, const char* key, int default_side) {
  if (!request.contains(key)) return default_side;
  const json& v = request[key];
  if (!v.is_number_integer() || v.get<long long>() < 1 || v.get<long long>() > kMaxUploadSide)
    throw BadRequest(422, std::string("\"") + key + "\" must be an integer 1.." +
                              std::to_string(kMaxUploadSide));
  return v.get<int>();
}

GrayImage image_from_json(const std::string& body) {
  const json request = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (request.is_discarded()) throw BadRequest(400, "the body is not valid JSON");
  if (!request.is_object() || !request.contains("pixels") || !request["pixels"].is_array())
    throw BadRequest(400,
                     "expected {\"pixels\": [grey values 0..255], \"width\": W, \"height\": H}");
  GrayImage image;
  image.width = side(request, "width", kImageSide);
  image.height = side(request, "height", kImageSide);
  const json& pixels = request["pixels"];
  if (pixels.size() != std::size_t(image.width) * image.height)
    throw BadRequest(422, "\"pixels\" holds " + std::to_string(pixels.size()) + " values; " +
                              std::to_string(image.width) + "x" + std::to_string(image.height) +
                              " needs " + std::to_string(image.width * image.height));
  image.pixels.reserve(pixels.size());
  for (const json& value : pixels) image.pixels.push_back(grey_value(value));
  return image;
}

json metrics_json(const std::vector<MetricsRow>& rows) {
  const auto absent_as_null = [](double v) { return v < 0 ? json(nullptr) : json(v); };
  json array = json::array();
  for (const MetricsRow& row : rows)
    array.push_back({{"epoch", row.epoch},
                     {"train_loss", row.train_loss},
                     {"train_accuracy", row.train_accuracy},
                     // null unless the run held training images out (--validation)
                     {"validation_loss", absent_as_null(row.validation_loss)},
                     {"validation_accuracy", absent_as_null(row.validation_accuracy)},
                     {"test_loss", absent_as_null(row.test_loss)},
                     {"test_accuracy", absent_as_null(row.test_accuracy)},
                     // null unless the run was trained with --evaluate-training-set
                     {"train_eval_loss", absent_as_null(row.train_eval_loss)},
                     {"train_eval_accuracy", absent_as_null(row.train_eval_accuracy)}});
  return array;
}

std::string file_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// metrics.csv's rows, none when it is absent; a run being written may end in half a line, which
// the reader refuses: the rows are then those read before it was written (empty) until the next
// poll. Never throws for a damaged file: the page shows the run without curves.
std::vector<MetricsRow> metrics_or_none(const fs::path& run) {
  std::error_code ec;
  if (!fs::is_regular_file(run / kMetricsFile, ec)) return {};
  try {
    return read_metrics_csv(run / kMetricsFile);
  } catch (const Error&) {
    return {};
  }
}

// The checkpoint a run's evaluation reads (run_checkpoint: best, else last) with the epoch, the
// test accuracy (%) and, where the run held training images out, their accuracy (%) and number
// recorded in it: best.safetensors is the epoch they read best. Null before the first epoch ends.
// One that cannot be read is named with the rest null: the evaluation says what is wrong with it.
json checkpoint_entry(const fs::path& folder) {
  const std::optional<RunCheckpoint> checkpoint = run_checkpoint(folder);
  if (!checkpoint) return nullptr;
  json entry{{"file", checkpoint->file.filename().string()},
             {"epoch", nullptr},
             {"test_accuracy", nullptr},
             {"validation_accuracy", nullptr},
             {"validation_images", nullptr}};
  try {
    const Checkpoint loaded = load_checkpoint(checkpoint->file);
    entry["epoch"] = loaded.position.epoch;
    if (loaded.test_accuracy >= 0) entry["test_accuracy"] = 100 * loaded.test_accuracy;
    if (loaded.validation_accuracy >= 0)
      entry["validation_accuracy"] = 100 * loaded.validation_accuracy;
    entry["validation_images"] = loaded.validation_images;
  } catch (const Error&) {
  }
  return entry;
}

json run_entry(const fs::path& folder) {
  std::error_code ec;
  const std::vector<MetricsRow> rows = metrics_or_none(folder);
  json last_test = nullptr, last_test_epoch = nullptr;
  for (const MetricsRow& row : rows)
    if (row.test_accuracy >= 0) {
      last_test = row.test_accuracy;
      last_test_epoch = row.epoch;
    }
  return {{"name", folder.filename().string()},
          {"sweep", false},
          {"epochs", rows.size()},
          {"test_accuracy", last_test},
          {"test_accuracy_epoch", last_test_epoch},
          {"checkpoint", checkpoint_entry(folder)},
          {"has_best", fs::is_regular_file(folder / kBestCheckpointFile, ec)}};
}

// A sweep in the list: its models and how many finished. A sweep folder that cannot be read is
// listed with the reason, so that one damaged folder does not hide the others.
json sweep_entry(const fs::path& folder) {
  json entry{{"name", folder.filename().string()}, {"sweep", true}};
  try {
    const std::vector<SweepModelResult> results = read_sweep_folder(folder);
    int finished = 0;
    for (const SettingSummary& summary : summarise_sweep(results)) finished += summary.models;
    entry["models"] = results.size();
    entry["finished"] = finished;
  } catch (const Error& e) {
    entry["error"] = e.what();
  }
  return entry;
}

json spreads_json(const std::vector<EpochSpread>& spreads) {
  json array = json::array();
  for (const EpochSpread& s : spreads)
    array.push_back({{"epoch", s.epoch},
                     {"models", s.models},
                     {"mean", s.mean},
                     {"min", s.min},
                     {"max", s.max}});
  return array;
}

json filters_json(const ParamLayout& layout, const std::vector<float>& parameters,
                  const std::string& tensor) {
  const ParamSpec& spec = layout.find(tensor);
  return {{"shape", spec.shape}, {"values", rounded(parameters.data() + spec.offset, spec.count)}};
}

}  // namespace

GrayImage request_image(const std::string& content_type, const std::string& body) {
  if (starts_with(content_type, "image/")) try {
      return decode_gray_image(body, kMaxUploadSide, "uploaded image");
    } catch (const Error& e) {
      throw BadRequest(422, e.what());
    }
  if (starts_with(content_type, "application/json")) return image_from_json(body);
  throw BadRequest(415,
                   "send an image file (Content-Type image/png, image/jpeg, ...) or JSON "
                   "(Content-Type application/json), not '" +
                       content_type + "'");
}

InvertMode request_invert(const std::string& parameter) {
  if (parameter.empty()) return InvertMode::automatic;
  try {
    return parse_invert_mode(parameter);
  } catch (const UsageError&) {
    throw BadRequest(400, "the invert parameter must be auto, yes or no, not '" + parameter + "'");
  }
}

json classification_json(const Digit28& digit, const Activations& activations) {
  json layers = json::array();
  for (const LayerOutput& layer : activations.layers)
    layers.push_back({{"name", layer.name},
                      {"shape", {layer.dims.c, layer.dims.h, layer.dims.w}},
                      {"values", rounded(layer.values.data(), layer.values.size())}});
  // The engine's class: the largest probability's, or with an RBF output the nearest prototype's
  // (whose probabilities may all round to 0 far from every prototype).
  return {{"prediction", activations.predicted},
          {"probabilities", activations.probabilities},
          {"inverted", digit.inverted},
          {"input28", digit.pixels},
          {"input32", rounded(activations.input.data(), activations.input.size())},
          {"layers", layers}};
}

json classify_request(const std::string& content_type, const std::string& invert,
                      const std::string& body, Engine& engine, std::mutex& engine_mutex) {
  const GrayImage image = request_image(content_type, body);
  const InvertMode invert_mode = request_invert(invert);
  Digit28 digit;
  try {
    digit = preprocess_digit(image, invert_mode, "the image");
  } catch (const Error& e) {
    throw BadRequest(422, e.what());  // blank, or nothing that reads as a digit
  }
  Activations activations;
  {
    const std::lock_guard<std::mutex> lock(engine_mutex);
    activations = engine.activations(digit.pixels.data());
  }
  return classification_json(digit, activations);
}

json dataset_json(const DatasetDescription& dataset) {
  return {{"dataset", dataset.name},
          {"dataset_title", dataset.title},
          {"class_noun", dataset.class_noun},
          {"classes", dataset.class_names}};
}

json model_json(const Checkpoint& checkpoint, const std::string& name) {
  const ParamLayout layout = lenet5_layout(checkpoint.net);
  json c3_table = json::array();
  for (int j = 0; j < 16; ++j) {
    json row = json::array();
    for (int i = 0; i < 6; ++i)
      row.push_back(checkpoint.net.c3_table == C3Table::full || lecun_c3_connected(j, i));
    c3_table.push_back(row);
  }
  json layers = json::array();
  for (const LayerSpec& spec : lenet5_topology(checkpoint.net))
    if (spec.kind != LayerKind::activation)
      layers.push_back({{"name", spec.name}, {"shape", {spec.out.c, spec.out.h, spec.out.w}}});
  const auto fraction_or_null = [](double v) { return v < 0 ? json(nullptr) : json(v); };
  json c3 = filters_json(layout, checkpoint.parameters, "c3.weight");
  c3["table"] = c3_table;
  json answer = {
      {"checkpoint", name},
      {"net",
       {{"activation", to_string(checkpoint.net.activation)},
        {"subsampling", to_string(checkpoint.net.subsampling)},
        {"c3_table", to_string(checkpoint.net.c3_table)},
        // rbf: the probabilities sum to less than 1, the rest being "none of these".
        {"output", to_string(checkpoint.net.output)},
        // squashed: C1 and C3 have a bias and an activation of their own (layers a1, a3).
        {"conv_units", to_string(checkpoint.net.conv_units)}}},
      {"config_toml", checkpoint.config_toml},
      {"epoch", checkpoint.position.epoch},
      {"test_accuracy", fraction_or_null(checkpoint.test_accuracy)},
      // The held-out training images' accuracy of these weights, and the best epoch's; null
      // without held-out images (a checkpoint from before them: best_accuracy is then the best
      // test accuracy, as it was chosen).
      {"validation_accuracy", fraction_or_null(checkpoint.validation_accuracy)},
      {"validation_images", checkpoint.validation_images},
      {"best_accuracy", fraction_or_null(checkpoint.position.best_accuracy)},
      {"layers", layers},
      {"c1", filters_json(layout, checkpoint.parameters, "c1.weight")},
      {"c3", c3}};
  // What the page calls output k: "7", or "Sneaker" for a Fashion-MNIST checkpoint.
  answer.update(dataset_json(find_dataset(checkpoint.dataset)));
  return answer;
}

json runs_json(const fs::path& runs) {
  std::error_code ec;
  const fs::path root = fs::canonical(runs, ec);
  std::vector<fs::path> folders;
  json links = json::object();
  for (fs::directory_iterator it(runs, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code entry_error;  // one unreadable entry (a dangling link) ends nothing
    const fs::path& entry = it->path();
    if (!it->is_directory(entry_error) || !(holds_run(entry) || holds_sweep(entry))) continue;
    if (!it->is_symlink(entry_error)) {
      folders.push_back(entry);
      continue;
    }
    // runs/latest: a pointer to a run, not a second run. A link out of the runs folder is not
    // shown (listed_folder refuses it too).
    const fs::path target = fs::canonical(entry, entry_error);
    if (!entry_error && target.parent_path() == root)
      links[entry.filename().string()] = target.filename().string();
  }
  std::sort(folders.begin(), folders.end());
  json list = json::array();
  for (const fs::path& folder : folders)
    list.push_back(holds_run(folder) ? run_entry(folder) : sweep_entry(folder));
  return {{"runs", list}, {"links", links}};
}

json run_json(const fs::path& runs, const std::string& name) {
  const fs::path folder = listed_folder(runs, name);
  if (!holds_run(folder)) return sweep_json(folder, name);
  std::error_code ec;
  const bool has_config = fs::is_regular_file(folder / kConfigFile, ec);
  const std::optional<RunCheckpoint> checkpoint = run_checkpoint(folder);
  return {{"name", name},
          {"sweep", false},
          {"config_toml", has_config ? json(file_text(folder / kConfigFile)) : json(nullptr)},
          {"metrics", metrics_json(metrics_or_none(folder))},
          {"has_best", fs::is_regular_file(folder / kBestCheckpointFile, ec)},
          {"checkpoint", checkpoint ? json{{"file", checkpoint->file.filename().string()},
                                           {"stamp", checkpoint->stamp}}
                                    : json(nullptr)}};
}

json sweep_json(const fs::path& folder, const std::string& name) {
  std::vector<SweepModelResult> results;
  try {
    results = read_sweep_folder(folder);
  } catch (const Error& e) {
    // A damaged folder, not the server's fault: said as such, not as an internal error.
    throw BadRequest(500, "the sweep folder '" + name + "' cannot be read: " + e.what());
  }
  const std::vector<SettingSummary> summaries = summarise_sweep(results);
  json settings = json::array();
  for (const SettingCurves& curves : sweep_curves(results)) {
    const auto summary = std::find_if(summaries.begin(), summaries.end(),
                                      [&](const auto& s) { return s.setting == curves.setting; });
    settings.push_back(
        {{"setting", curves.setting},
         {"runs", curves.models},
         {"summary", summary != summaries.end() ? setting_summary_json(*summary) : json(nullptr)},
         {"test_accuracy", spreads_json(curves.test_accuracy)},
         {"train_loss", spreads_json(curves.train_loss)}});
  }
  return {{"name", name},
          {"sweep", true},
          {"sweep_toml", file_text(folder / kSweepFile)},
          {"models", results.size()},
          {"settings", settings}};
}

std::optional<RunCheckpoint> run_checkpoint(const fs::path& folder) {
  const fs::path file = run_checkpoint_file(folder);
  std::error_code ec;
  const auto size = file.empty() ? 0 : fs::file_size(file, ec);
  if (file.empty() || ec) return std::nullopt;
  const auto modified = fs::last_write_time(file, ec);
  if (ec) return std::nullopt;
  // A checkpoint is written to a temporary file and renamed (io/atomic_file.hpp): a new one is a
  // new file with its own time, and a run's next best differs in time even where the size agrees.
  return RunCheckpoint{file, file.filename().string() + ":" + std::to_string(size) + ":" +
                                 std::to_string(modified.time_since_epoch().count())};
}

fs::path listed_folder(const fs::path& runs, const std::string& name) {
  const bool plain = !name.empty() && name.size() <= 255 && name != "." && name != ".." &&
                     std::all_of(name.begin(), name.end(), [](unsigned char c) {
                       return std::isalnum(c) || c == '.' || c == '_' || c == '-';
                     });
  if (!plain)
    throw BadRequest(400,
                     "a run name is a folder name under the runs folder (letters, digits, "
                     "'.', '_', '-')");
  std::error_code ec;
  const fs::path folder = fs::canonical(runs / name, ec);
  const fs::path root = fs::canonical(runs, ec);
  if (ec || folder.parent_path() != root || !fs::is_directory(folder, ec) ||
      !(holds_run(folder) || holds_sweep(folder)))
    throw BadRequest(404, "no run '" + name + "' in the runs folder");
  return folder;
}

fs::path run_folder(const fs::path& runs, const std::string& name) {
  const fs::path folder = listed_folder(runs, name);
  if (!holds_run(folder))
    throw BadRequest(404, "'" + name + "' is a sweep folder, whose models are runs of their own");
  return folder;
}

}  // namespace lenet5::serve
