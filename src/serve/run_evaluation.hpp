// The runs view's evaluation of a run (GET /api/runs/NAME/evaluation): its checkpoint on the MNIST
// test set, as `lenet5 evaluate` computes it (accuracy, mean loss, confusion matrix), and the
// digits it misreads, most confident first (train/mistakes.hpp, the same list as errors.png).
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
//  "misreads": [{"index", "truth", "predicted", "probability", "pixels"}]}: pixels are the 28x28
// test image's 784 bytes (0 background, 255 ink) in base64.
nlohmann::json evaluation_json(const RunCheckpoint& checkpoint, int epoch,
                               const Evaluation& evaluation,
                               const std::vector<pictures::Mistake>& mistakes);

std::string base64(const std::uint8_t* bytes, std::size_t n);

// Evaluations of runs, each kept until its checkpoint's stamp changes (a run still training gets a
// new best: the next request evaluates again). Requests for one run that arrive while it is being
// evaluated wait for that evaluation instead of starting their own. Each evaluation runs on a CPU
// engine of its own, so classify requests are not held up by its lock (only by the shared cores).
// The test set is read from `data_dir` when first needed and kept; if it cannot be read, the
// request is answered 503 with the reason and how to get it, and the next request tries again.
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
  std::shared_ptr<const std::string> evaluate(const RunCheckpoint& checkpoint);
  std::shared_ptr<const Dataset> test_set();

  std::filesystem::path m_data_dir;
  std::mutex m_data_mutex;  // held while the test set is read, so it is read once
  std::shared_ptr<const Dataset> m_test;
  // Guards the entries (one per run folder) and the count.
  mutable std::mutex m_mutex;
  std::map<std::string, std::shared_ptr<Entry>> m_entries;
  int m_evaluations = 0;
};

}  // namespace lenet5::serve
