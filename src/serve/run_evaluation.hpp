// The runs view's evaluation of a run (GET /api/runs/NAME/evaluation): its checkpoint on the test
// set of the data set it was trained on, as `lenet5 evaluate` computes it (accuracy, mean loss,
// confusion matrix), and the images it misreads, most confident first (train/mistakes.hpp, the
// same list as errors.png).
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/mnist.hpp"
#include "engine/engine.hpp"
#include "pictures/evaluation_pictures.hpp"
#include "serve/api.hpp"

namespace lenet5::serve {

// The answer carries at most this many misreads (the most confident ones) and says how many
// there are in all: 200 digits are about 220 KB of JSON, and a checkpoint early in training can
// misread thousands.
inline constexpr int kMaxMisreadsSent = 200;

// {"checkpoint", "stamp", "epoch", "images", "correct", "accuracy", "mean_loss",
//  "confusion" [true][predicted], "misreads_total", "misreads_cap",
//  "misreads": [{"index", "truth", "predicted", "probability", "pixels"}]}, and the data set's
// dataset_json ("dataset", "dataset_title", "class_noun", "classes": what truth and predicted
// name): pixels are the 28x28 test image's 784 bytes (0 background, 255 ink) in base64.
nlohmann::json evaluation_json(const RunCheckpoint& checkpoint, int epoch,
                               const DatasetDescription& dataset, const Evaluation& evaluation,
                               const std::vector<pictures::Mistake>& mistakes);

std::string base64(const std::uint8_t* bytes, std::size_t n);

// Evaluations of runs, each kept until its checkpoint's stamp changes (a run still training gets a
// new best: the next request evaluates again). Requests for one run that arrive while it is being
// evaluated wait for that evaluation instead of starting their own. Each evaluation runs on a CPU
// engine of its own, so classify requests are not held up by its lock (only by the shared cores).
//
// A run is evaluated on the test set of the data set its checkpoint records, each test set read
// when first needed and kept. Where from: `data_dir` (serve's --data, as resolve_data_dir gave
// it) holds MNIST's, or the data set its files' checksums name (--data pointed at Fashion-MNIST's
// files serves the Fashion-MNIST runs). Every data set it does not hold is read as `evaluate`
// reads it without --data (find_test_set: $LENET5_DATA, else its own folder, data/fashion-mnist).
// A test set that cannot be read, or whose files are another data set's, answers the request 503
// with the reason and how to get it; the next request tries again.
class RunEvaluations {
 public:
  explicit RunEvaluations(std::filesystem::path data_dir);

  // The JSON text of the evaluation of the run in `folder` (run_folder's answer). Throws
  // BadRequest 404 when the run has no checkpoint yet, 503 when the test set cannot be read,
  // 500 when the checkpoint cannot be read.
  std::shared_ptr<const std::string> answer(const std::filesystem::path& folder);

  // How many evaluations have been computed (a cached answer is not one): for the tests.
  int evaluations() const;

 private:
  struct Entry;
  using TestSet = std::shared_ptr<const Dataset>;
  std::shared_ptr<const std::string> evaluate(const RunCheckpoint& checkpoint);
  TestSet test_set(const DatasetDescription& dataset);
  void read_data_dir(const DatasetDescription& requested);
  TestSet read_own_folder(const DatasetDescription& dataset);

  std::filesystem::path m_data_dir;
  // Held while a test set is looked up or read, so that each is read once.
  std::mutex m_data_mutex;
  bool m_data_dir_read = false;            // whether m_data_dir's test set is in m_tests
  std::map<std::string, TestSet> m_tests;  // by data set name
  // Guards the entries (one per run folder) and the count.
  mutable std::mutex m_mutex;
  std::map<std::string, std::shared_ptr<Entry>> m_entries;
  int m_evaluations = 0;
};

}  // namespace lenet5::serve
