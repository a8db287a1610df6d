#include "serve/run_evaluation.hpp"

#include <future>
#include <optional>

#include "core/error.hpp"
#include "train/checkpoint.hpp"
#include "train/evaluate.hpp"
#include "train/mistakes.hpp"

namespace lenet5::serve {
namespace fs = std::filesystem;
using nlohmann::json;

using Answer = std::shared_ptr<const std::string>;

struct RunEvaluations::Entry {
  std::string stamp;                  // of the checkpoint evaluated
  std::shared_future<Answer> answer;  // ready once evaluated; waited on meanwhile
};

std::string base64(const std::uint8_t* bytes, std::size_t n) {
  static constexpr char kDigits[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string text;
  text.reserve((n + 2) / 3 * 4);
  for (std::size_t i = 0; i < n; i += 3) {
    const std::uint32_t group = std::uint32_t(bytes[i]) << 16 |
                                (i + 1 < n ? std::uint32_t(bytes[i + 1]) << 8 : 0) |
                                (i + 2 < n ? std::uint32_t(bytes[i + 2]) : 0);
    text += kDigits[group >> 18 & 63];
    text += kDigits[group >> 12 & 63];
    text += i + 1 < n ? kDigits[group >> 6 & 63] : '=';
    text += i + 2 < n ? kDigits[group & 63] : '=';
  }
  return text;
}

json evaluation_json(const RunCheckpoint& checkpoint, int epoch, const Evaluation& evaluation,
                     const std::vector<pictures::Mistake>& mistakes) {
  json misreads = json::array();
  const std::size_t sent = std::min(mistakes.size(), std::size_t(kMaxMisreadsSent));
  for (std::size_t i = 0; i < sent; ++i) {
    const pictures::Mistake& m = mistakes[i];
    misreads.push_back({{"index", m.test_index},
                        {"truth", m.truth},
                        {"predicted", m.predicted},
                        {"probability", m.probability},
                        {"pixels", base64(m.image.data(), m.image.size())}});
  }
  return {{"checkpoint", checkpoint.file.filename().string()},
          {"stamp", checkpoint.stamp},
          {"epoch", epoch},
          {"images", evaluation.count},
          {"correct", evaluation.correct},
          {"accuracy", evaluation.accuracy()},
          {"mean_loss", evaluation.mean_loss()},
          {"confusion", evaluation.confusion},
          {"misreads_total", mistakes.size()},
          {"misreads_cap", kMaxMisreadsSent},
          {"misreads", misreads}};
}

RunEvaluations::RunEvaluations(fs::path data_dir) : m_data_dir(std::move(data_dir)) {}

int RunEvaluations::evaluations() const {
  const std::lock_guard<std::mutex> lock(m_mutex);
  return m_evaluations;
}

Answer RunEvaluations::answer(const fs::path& folder) {
  const std::optional<RunCheckpoint> checkpoint = run_checkpoint(folder);
  if (!checkpoint)
    throw BadRequest(404, "run '" + folder.filename().string() +
                              "' has no checkpoint yet; it can be evaluated once its first "
                              "epoch has ended");
  std::promise<Answer> promise;
  std::shared_ptr<Entry> entry;
  bool evaluate_here = false;
  {
    const std::lock_guard<std::mutex> lock(m_mutex);
    std::shared_ptr<Entry>& slot = m_entries[folder.string()];
    if (!slot || slot->stamp != checkpoint->stamp) {
      slot = std::make_shared<Entry>(Entry{checkpoint->stamp, promise.get_future().share()});
      evaluate_here = true;
    }
    entry = slot;
  }
  if (evaluate_here) try {
      promise.set_value(evaluate(*checkpoint));
    } catch (...) {
      // Those waiting get the same error; the entry goes, so that the next request tries again
      // (the test set fetched meanwhile, say) instead of being answered the old error.
      promise.set_exception(std::current_exception());
      const std::lock_guard<std::mutex> lock(m_mutex);
      const auto it = m_entries.find(folder.string());
      if (it != m_entries.end() && it->second == entry) m_entries.erase(it);
    }
  return entry->answer.get();
}

Answer RunEvaluations::evaluate(const RunCheckpoint& run) {
  const std::shared_ptr<const Dataset> test = test_set();
  Checkpoint checkpoint;
  try {
    checkpoint = load_checkpoint(run.file);
  } catch (const Error& e) {
    throw BadRequest(500, e.what());  // names the file and what is wrong with it
  }
  if (checkpoint.dataset != mnist_dataset().name)
    throw BadRequest(422, "run " + run.file.string() + " was trained on " +
                              find_dataset(checkpoint.dataset).title +
                              ", and the runs view evaluates on the MNIST test set only: use "
                              "`lenet5 evaluate --checkpoint` for it");
  const std::unique_ptr<Engine> engine = engine_for(checkpoint, Device::cpu);
  const Evaluation evaluation = engine->evaluate(*test);
  const std::vector<pictures::Mistake> mistakes = find_mistakes(*engine, *test);
  {
    const std::lock_guard<std::mutex> lock(m_mutex);
    ++m_evaluations;
  }
  return std::make_shared<const std::string>(
      evaluation_json(run, checkpoint.position.epoch, evaluation, mistakes).dump());
}

std::shared_ptr<const Dataset> RunEvaluations::test_set() {
  const std::lock_guard<std::mutex> lock(m_data_mutex);
  if (!m_test) try {
      m_test =
          std::make_shared<const Dataset>(load_split(mnist_dataset(), m_data_dir, Split::test));
    } catch (const Error& e) {
      throw BadRequest(503, std::string("the runs view evaluates each run on the MNIST test set, "
                                        "which serve could not read: ") +
                                e.what());
    }
  return m_test;
}

}  // namespace lenet5::serve
