// A run's evaluation for the page: its checkpoint on its data set's test set, kept until the
// checkpoint changes.
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

json evaluation_json(const RunCheckpoint& checkpoint, int epoch, const DatasetDescription& dataset,
                     const Evaluation& evaluation, const std::vector<pictures::Mistake>& mistakes) {
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
  json answer = {{"checkpoint", checkpoint.file.filename().string()},
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
  answer.update(dataset_json(dataset));
  return answer;
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
  Checkpoint checkpoint;
  try {
    checkpoint = load_checkpoint(run.file);
  } catch (const Error& e) {
    throw BadRequest(500, e.what());  // names the file and what is wrong with it
  }
  const DatasetDescription& dataset = find_dataset(checkpoint.dataset);
  const TestSet test = test_set(dataset);
  const std::unique_ptr<Engine> engine = engine_for(checkpoint, Device::cpu);
  const Evaluation evaluation = engine->evaluate(*test);
  const std::vector<pictures::Mistake> mistakes = find_mistakes(*engine, *test);
  {
    const std::lock_guard<std::mutex> lock(m_mutex);
    ++m_evaluations;
  }
  return std::make_shared<const std::string>(
      json_text(evaluation_json(run, checkpoint.position.epoch, dataset, evaluation, mistakes)));
}

namespace {

BadRequest unreadable(const DatasetDescription& dataset, const Error& error) {
  return BadRequest(503,
                    "the runs view evaluates each run on its data set's test set, and serve "
                    "could not read " +
                        dataset.title + "'s: " + error.what());
}

}  // namespace

RunEvaluations::TestSet RunEvaluations::test_set(const DatasetDescription& dataset) {
  const std::lock_guard<std::mutex> lock(m_data_mutex);
  if (!m_data_dir_read) read_data_dir(dataset);
  const auto kept = m_tests.find(dataset.name);
  if (kept != m_tests.end()) return kept->second;
  return m_tests[dataset.name] = read_own_folder(dataset);
}

// The --data folder's test set, kept as that of the data set its checksums name, or MNIST's where
// they name none (a subset, a set of one's own: --data has always named MNIST's folder). When it
// cannot be read, that is the answer for MNIST; another data set is looked for in its own folder.
void RunEvaluations::read_data_dir(const DatasetDescription& requested) {
  try {
    FoundTestSet found = find_test_set(mnist_dataset(), m_data_dir.string());
    m_tests[found.dataset->name] = std::make_shared<const Dataset>(std::move(found.test));
    m_data_dir_read = true;
  } catch (const Error& e) {
    if (&requested == &mnist_dataset()) throw unreadable(requested, e);
  }
}

// `dataset`'s test set where `evaluate` looks without --data: $LENET5_DATA, else its own folder.
RunEvaluations::TestSet RunEvaluations::read_own_folder(const DatasetDescription& dataset) {
  FoundTestSet found;
  try {
    found = find_test_set(dataset, "");
  } catch (const Error& e) {
    throw unreadable(dataset, e);
  }
  // Scored against another data set's labels, the run's accuracy would measure nothing.
  if (found.dataset != &dataset)
    throw BadRequest(503, "the runs view evaluates each run on its data set's test set, but " +
                              found.dir.string() + " holds " + found.dataset->title + "'s, not " +
                              dataset.title + "'s: " + dataset.fetch_hint + " with the " +
                              dataset.title + " folder");
  return std::make_shared<const Dataset>(std::move(found.test));
}

}  // namespace lenet5::serve
