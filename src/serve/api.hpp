// The JSON of `lenet5 serve`'s API (/api/...), apart from HTTP so that it is tested on its own:
// what a classify request's body becomes, and what each route answers. server.hpp wires these to
// routes; a request the client got wrong throws BadRequest, which the server answers with its
// status and {"error": "..."}. Answers that are no fault of the client's but that the server can
// explain (503: the test set is missing) travel the same way.
#pragma once

#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "data/datasets.hpp"
#include "engine/engine.hpp"
#include "image/image_io.hpp"
#include "image/preprocess.hpp"
#include "serve/http.hpp"
#include "train/checkpoint.hpp"

namespace lenet5::serve {

// An uploaded image or a drawing wider or taller than this is refused (422) from its header or
// its stated size, before any pixel is decoded: a 4 MB PNG can claim 30000x30000 pixels, 3.6 GB.
inline constexpr int kMaxUploadSide = 4096;

// The grey image a classify request carries: an image file's bytes (content type image/...), or
// JSON {"pixels": [...], "width": W, "height": H} with W*H grey values 0..255 (0 black, 255
// white; width and height may be left out for 784 values, a 28x28 image).
GrayImage request_image(const std::string& content_type, const std::string& body);
// "auto" unless the request's "invert" parameter says yes or no (classify's --invert).
InvertMode request_invert(const std::string& parameter);

// The answer to a classify request: the prediction, the ten probabilities, the 28x28 digit the
// network read (bytes, 0 background) and its normalised, padded 32x32 input, and every layer's
// outputs ({"name", "shape": [c, h, w], "values"}), values rounded to 4 decimals (the page draws
// them in 256 shades; full precision would triple the answer's size).
nlohmann::json classification_json(const Digit28& digit, const Activations& activations);

// POST /api/classify whole: the request's Content-Type, its ?invert= value and its body, read as
// request_image and request_invert say, preprocessed as `classify` does (422 when nothing reads
// as a digit) and run through `engine`, holding `engine_mutex` for the forward pass only.
nlohmann::json classify_request(const std::string& content_type, const std::string& invert,
                                const std::string& body, Engine& engine, std::mutex& engine_mutex);

// What the page calls a checkpoint's outputs, from its data set (data/datasets.hpp): {"dataset":
// "fashion-mnist", "dataset_title": "Fashion-MNIST", "class_noun": "class", "classes": [ten
// names]}; MNIST's classes are "0".."9" and its noun "digit". Part of model_json and of a run's
// evaluation (run_evaluation.hpp).
nlohmann::json dataset_json(const DatasetDescription& dataset);

// The checkpoint: its network settings and settings text, epoch, accuracies, the layers' shapes,
// and the C1 (6, 1, 5, 5) and C3 (16, 6, 5, 5) filters with C3's table ([16][6] booleans).
nlohmann::json model_json(const Checkpoint& checkpoint, const std::string& name);

// {"runs": [...], "links": {...}}: every run folder directly under `runs` (one holding metrics.csv,
// config.toml or a checkpoint), with its epochs so far, its last test accuracy (%) and that row's
// epoch, and the checkpoint its evaluation reads ({"file", "epoch", "test_accuracy"} as recorded
// in it, or null); every sweep folder (one holding sweep.toml), with its models and how many have
// trained all their epochs; each marked "sweep": false or true. A link there to one of those
// folders (runs/latest, which `train` points at its newest run) is no entry of its own: "links"
// maps its name to the folder's.
nlohmann::json runs_json(const std::filesystem::path& runs);
// One run: its config.toml text, its metrics.csv rows (test values, and the training set's
// train_eval_loss and train_eval_accuracy of --evaluate-training-set, null where not evaluated)
// and its checkpoint ({"file", "stamp"} of run_checkpoint, or null): the page fetches the run's
// evaluation again when the stamp changes. For a sweep folder, sweep_json.
nlohmann::json run_json(const std::filesystem::path& runs, const std::string& name);
// One sweep folder as it stands (sweep/summary.hpp's read_sweep_folder): its sweep.toml text, and
// per setting its models, its summary (summary.json's entry, null until a model has finished) and
// per epoch the number of models, mean, min and max of the test accuracy (%) and train loss.
nlohmann::json sweep_json(const std::filesystem::path& folder, const std::string& name);

// The checkpoint that stands for a run: best.safetensors, else last.safetensors (a run that has
// not improved on its first test yet, or trains without evaluating), with a stamp of the file
// (its size and modification time) that changes whenever training replaces it. None before the
// first epoch ends.
struct RunCheckpoint {
  std::filesystem::path file;
  std::string stamp;
};
std::optional<RunCheckpoint> run_checkpoint(const std::filesystem::path& folder);

// The folder of run `name`: a plain name (letters, digits, '.', '_', '-'; not "." or ".."), a
// folder directly under `runs` once links are resolved. Throws BadRequest 400 for a name that is
// not one, 404 for a run that does not exist; no other path from a request reaches the disk.
std::filesystem::path run_folder(const std::filesystem::path& runs, const std::string& name);
// The same for a run or a sweep folder (what the runs list shows).
std::filesystem::path listed_folder(const std::filesystem::path& runs, const std::string& name);

}  // namespace lenet5::serve
