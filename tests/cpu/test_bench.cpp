// `lenet5 bench`: the arithmetic of its report (time to an accuracy, steady epochs, spreads over
// seeds), its table, the command on the CPU with a few images, and the PyTorch peer's defaults.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "data/datasets.hpp"
#include "test_util.hpp"
#include "tiny_mnist.hpp"
#include "train/bench.hpp"

namespace lenet5 {
namespace {

using testing::mentions;
using testing::run_lenet5;
using testing::TempDir;

// Epochs of `seconds` each, with these test accuracies (-1: not evaluated).
std::vector<EpochReport> epochs_with(const std::vector<double>& accuracies,
                                     const std::vector<double>& seconds,
                                     const std::vector<double>& validation = {}) {
  std::vector<EpochReport> epochs;
  for (std::size_t i = 0; i < accuracies.size(); ++i) {
    EpochReport e;
    e.epoch = int(i) + 1;
    e.test_accuracy = accuracies[i];
    if (i < validation.size()) e.validation_accuracy = validation[i];
    e.seconds = seconds[i];
    epochs.push_back(e);
  }
  return epochs;
}

// Times are sums of small binary fractions, exact in double, so they compare with EXPECT_EQ.
TEST(Bench, TimeToAnAccuracyCountsTrainingUpToTheFirstEpochThatReachesIt) {
  const auto epochs = epochs_with({0.985, 0.9899, 0.992, 0.991}, {1.5, 0.5, 0.25, 0.25});
  EXPECT_EQ(time_to_accuracy(epochs, 0.99), 2.25);   // the third epoch; later dips do not matter
  EXPECT_EQ(time_to_accuracy(epochs, 0.992), 2.25);  // reached at exactly the target
  EXPECT_EQ(time_to_accuracy(epochs, 0.98), 1.5);
  EXPECT_EQ(time_to_accuracy(epochs, 0.995), std::nullopt);
  EXPECT_EQ(time_to_accuracy({}, 0.99), std::nullopt);
  EXPECT_EQ(time_to_accuracy(epochs_with({-1, -1}, {1, 1}), 0.99), std::nullopt);
}

// Accuracies are correct / 10,000 as the evaluation computes them: 9,900 correct is 99 %, 9,919
// is short of 99.2 % (the division rounds to the nearest double, as the literal does).
TEST(Bench, AnAccuracyOfExactlyTheTargetCountsAsReached) {
  const auto epochs = epochs_with({9919.0 / 10000, 9900.0 / 10000}, {1, 1});
  EXPECT_EQ(time_to_accuracy(epochs, 0.99), 1.0);
  EXPECT_EQ(time_to_accuracy(epochs, 0.992), std::nullopt);
  EXPECT_EQ(time_to_accuracy(epochs_with({9920.0 / 10000}, {1}), 0.992), 1.0);
}

TEST(Bench, TheMedianEpochLeavesOutTheFirstUnlessItIsTheOnlyOne) {
  EXPECT_EQ(median_steady_epoch_seconds(epochs_with({-1, -1, -1, -1}, {9, 1, 3, 2})), 2.0);
  EXPECT_EQ(median_steady_epoch_seconds(epochs_with({-1, -1, -1}, {9, 1, 2})), 1.5);
  EXPECT_EQ(median_steady_epoch_seconds(epochs_with({-1}, {9})), 9.0);
}

TEST(Bench, ASeedsSummaryHasItsFinalAndChosenAccuracyAndBothTimes) {
  std::vector<EpochReport> epochs = epochs_with({0.98, 0.9921, 0.991}, {2, 1, 1});
  // The held-out images read epoch 3 best, though the test set reads epoch 2 best: the chosen
  // epoch's test accuracy is epoch 3's, never the test set's maximum.
  for (const auto& [epoch, validation] : {std::pair{0, 0.97}, {1, 0.985}, {2, 0.99}})
    epochs[std::size_t(epoch)].validation_accuracy = validation;
  const SeedBench s = summarise_epochs(7, epochs);
  EXPECT_EQ(s.seed, 7u);
  EXPECT_EQ(s.final_accuracy, 0.991);
  EXPECT_EQ(s.final_validation_accuracy, 0.99);
  EXPECT_EQ(s.chosen_accuracy, 0.991);
  // A tie keeps the first epoch of the highest accuracy, as the trainer's best.safetensors does.
  epochs[2].validation_accuracy = 0.985;
  EXPECT_EQ(summarise_epochs(7, epochs).chosen_accuracy, 0.9921);
  EXPECT_EQ(s.time_to_99_s, 3.0);
  EXPECT_EQ(s.time_to_99_2_s, 3.0);
  EXPECT_EQ(s.training_s, 4.0);
  EXPECT_EQ(s.median_epoch_s, 1.0);
  // Left for the benchmark to measure.
  EXPECT_EQ(s.median_epoch_s_no_augment, std::nullopt);
  EXPECT_EQ(s.augment_epoch_ratio(), std::nullopt);
  EXPECT_EQ(s.peak_allocated_mb, std::nullopt);

  const SeedBench unevaluated = summarise_epochs(1, epochs_with({-1, -1}, {1, 1}));
  EXPECT_EQ(unevaluated.final_accuracy, std::nullopt);
  EXPECT_EQ(unevaluated.chosen_accuracy, std::nullopt);
  EXPECT_EQ(unevaluated.final_validation_accuracy, std::nullopt);
  EXPECT_EQ(unevaluated.time_to_99_s, std::nullopt);
  EXPECT_EQ(unevaluated.training_s, 2.0);
}

TEST(Bench, TheAugmentationRatioIsTheEpochOverTheEpochWithoutIt) {
  SeedBench s;
  s.median_epoch_s = 0.75;
  s.median_epoch_s_no_augment = 0.5;
  EXPECT_EQ(s.augment_epoch_ratio(), 1.5);
}

TEST(Bench, ASpreadIsOverTheSeedsThatHaveAValue) {
  const std::optional<Spread> s = spread_of({1.0, std::nullopt, 4.0, 2.5});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->mean, 2.5);
  EXPECT_EQ(s->min, 1.0);
  EXPECT_EQ(s->max, 4.0);
  EXPECT_EQ(s->count, 3);
  EXPECT_FALSE(spread_of({std::nullopt, std::nullopt}));
  EXPECT_FALSE(spread_of({}));
}

// The table's rows, split into cells: "| 1 | 99.10 |" -> {"1", "99.10"}.
std::vector<std::vector<std::string>> table_cells(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '|') continue;
    std::vector<std::string> cells;
    std::istringstream parts(line.substr(1));
    for (std::string cell; std::getline(parts, cell, '|');) {
      const std::size_t first = cell.find_first_not_of(' '), last = cell.find_last_not_of(' ');
      cells.push_back(first == std::string::npos ? "" : cell.substr(first, last - first + 1));
    }
    rows.push_back(cells);
  }
  return rows;
}

BenchReport two_seeds(bool augments, bool on_gpu) {
  BenchReport report;
  report.heading = "lenet5 on the test";
  report.augments = augments;
  report.on_gpu = on_gpu;
  // Seed 1's held-out images read its last epoch best, seed 2's its first.
  SeedBench a = summarise_epochs(1, epochs_with({0.985, 0.9925}, {0.5, 0.25}, {0.98, 0.99}));
  SeedBench b = summarise_epochs(2, epochs_with({0.99, 0.9911}, {0.5, 0.25}, {0.99, 0.985}));
  if (augments) {
    a.median_epoch_s_no_augment = b.median_epoch_s_no_augment = 0.125;
  }
  if (on_gpu) {
    a.peak_allocated_mb = 72.5;
    b.peak_allocated_mb = 70.5;
    a.device_used_at_end_mb = b.device_used_at_end_mb = 580;
  }
  report.seeds = {a, b};
  return report;
}

TEST(Bench, TheTableHasARowPerSeedThenMeanMinAndMax) {
  const std::string text = format_bench_table(two_seeds(true, true));
  EXPECT_EQ(text.rfind("lenet5 on the test\n", 0), 0u) << text;
  const auto rows = table_cells(text);
  ASSERT_EQ(rows.size(), 7u) << text;  // header, rule, 2 seeds, mean, min, max
  EXPECT_EQ(rows[0], (std::vector<std::string>{"seed", "final %", "validation %", "chosen %",
                                               "to 99 % (s)", "to 99.2 % (s)", "epoch (ms)",
                                               "no-augment epoch (ms)", "epoch / no-augment",
                                               "training (s)", "peak (MB)", "device at end (MB)"}));
  EXPECT_EQ(rows[2],
            (std::vector<std::string>{"1", "99.25", "99.00", "99.25", "0.750", "0.750", "250.0",
                                      "125.0", "2.00x", "0.750", "72.5", "580.0"}));
  EXPECT_EQ(rows[3],
            (std::vector<std::string>{"2", "99.11", "98.50", "99.00", "0.500", "-", "250.0",
                                      "125.0", "2.00x", "0.750", "70.5", "580.0"}));
  // Seed 2 never reached 99.2 %: the mean is seed 1's, marked as over one seed of two.
  EXPECT_EQ(rows[4][0], "mean");
  EXPECT_EQ(rows[4][1], "99.18");  // (99.25 + 99.11) / 2
  EXPECT_EQ(rows[4][3], "99.12");  // (99.25 + 99.00) / 2
  EXPECT_EQ(rows[4][4], "0.625");
  EXPECT_EQ(rows[4][5], "0.750 (1/2)");
  EXPECT_EQ(rows[4][10], "71.5");
  EXPECT_EQ(rows[5][0], "min");
  EXPECT_EQ(rows[5][4], "0.500");
  EXPECT_EQ(rows[6][0], "max");
  EXPECT_EQ(rows[6][10], "72.5");
  EXPECT_TRUE(mentions(text, "cudaMemGetInfo")) << text;  // says what the device column counts
}

TEST(Bench, TheTableLeavesOutTheColumnsThatDoNotApply) {
  const std::string text = format_bench_table(two_seeds(false, false));
  const auto rows = table_cells(text);
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(rows[0],
            (std::vector<std::string>{"seed", "final %", "validation %", "chosen %", "to 99 % (s)",
                                      "to 99.2 % (s)", "epoch (ms)", "training (s)"}));
  EXPECT_FALSE(mentions(text, "no-augment")) << text;
  EXPECT_FALSE(mentions(text, "cudaMemGetInfo")) << text;
}

// Every JSON line of `text`, in order.
std::vector<nlohmann::json> json_lines(const std::string& text) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

// The whole command on the CPU: 64 images, two seeds, augmented, so each seed also runs the
// comparison without augmentation. Evaluating 10,000 test images is most of a CPU run's time, so
// this one does not (the table's test below does).
TEST(Bench, OnTheCpuEachSeedReportsEveryFieldAndTheSummarySpreadsThem) {
  LENET5_REQUIRE_MNIST();
  TempDir dir;
  const auto result = run_lenet5(
      "bench --device cpu --train-limit 64 --epochs 2 --seeds 3,4 "
      "--augment affine --evaluate false --data '" +
          testing::mnist_dir().string() + "'",
      dir);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::vector<nlohmann::json> lines = json_lines(result.out);
  ASSERT_EQ(lines.size(), 1u + 2 * (2 + 1) + 1)
      << result.out;  // setup, 2 x (2 epochs, seed), summary
  EXPECT_EQ(lines[0]["event"], "setup");
  EXPECT_EQ(lines[0]["augment"], "affine");
  EXPECT_EQ(lines[0]["parameters"], 61706);  // the book's network (core/layout.hpp's count)
  // --validation's default, held out before --train-limit takes its first images.
  EXPECT_EQ(lines[0]["validation_images"], 5000);
  for (const std::size_t at : {3u, 6u}) {
    const nlohmann::json& seed = lines[at];
    ASSERT_EQ(seed["event"], "seed") << seed;
    for (const char* unevaluated : {"final_test_accuracy", "final_validation_accuracy",
                                    "chosen_test_accuracy", "time_to_99_s", "time_to_99_2_s"})
      EXPECT_TRUE(seed[unevaluated].is_null()) << unevaluated << ": " << seed;
    EXPECT_GT(seed["median_epoch_s"].get<double>(), 0.0) << seed;
    EXPECT_GT(seed["median_epoch_s_no_augment"].get<double>(), 0.0) << seed;
    EXPECT_DOUBLE_EQ(
        seed["augment_epoch_ratio"].get<double>(),
        seed["median_epoch_s"].get<double>() / seed["median_epoch_s_no_augment"].get<double>());
    EXPECT_DOUBLE_EQ(seed["training_s"].get<double>(), lines[at - 2]["seconds"].get<double>() +
                                                           lines[at - 1]["seconds"].get<double>());
    EXPECT_TRUE(seed["peak_allocated_mb"].is_null()) << seed;  // no device memory on the CPU
    EXPECT_TRUE(seed["device_used_at_end_mb"].is_null()) << seed;
  }
  EXPECT_EQ(lines[3]["seed"], 3);
  EXPECT_EQ(lines[6]["seed"], 4);
  const nlohmann::json& summary = lines.back();
  EXPECT_EQ(summary["event"], "summary");
  EXPECT_EQ(summary["over_seeds"]["training_s"]["count"], 2);
  EXPECT_EQ(summary["over_seeds"]["augment_epoch_ratio"]["count"], 2);
  EXPECT_DOUBLE_EQ(
      summary["over_seeds"]["training_s"]["max"].get<double>(),
      std::max(lines[3]["training_s"].get<double>(), lines[6]["training_s"].get<double>()));
  EXPECT_TRUE(summary["over_seeds"]["final_test_accuracy"].is_null());
  EXPECT_TRUE(summary["over_seeds"]["peak_allocated_mb"].is_null());
  EXPECT_TRUE(summary["mean_final_test_accuracy"].is_null());
}

// A run the CPU cannot compute as asked (the tensor-core kernels, or a precision other than fp32,
// which would silently train in fp32 there) is refused before bench writes its setup line, however
// the run came to the CPU (here the settings name it; --device auto on a machine without a GPU
// reaches the same check).
TEST(Bench, RefusesARunTheCpuCannotComputeBeforeItsSetupLine) {
  struct Case {
    const char* kernels;
    const char* precision;
    const char* message;
  };
  for (const Case& c :
       {Case{"tensor", "fp32", "--kernels tensor trains and evaluates on a GPU's"},
        Case{"tensor", "bf16", "--precision bf16 runs on a GPU's tensor cores"},
        Case{"whole-step", "tf32", "--precision tf32 runs on a GPU's tensor cores"}}) {
    TrainSettings settings;
    settings.device = "cpu";
    settings.kernels = c.kernels;
    settings.precision = c.precision;
    std::vector<std::string> lines;
    try {
      run_benchmark(settings, {1}, [&lines](const std::string& line) { lines.push_back(line); });
      ADD_FAILURE() << c.kernels << " " << c.precision << " ran on the CPU";
    } catch (const UsageError& e) {
      EXPECT_TRUE(mentions(e.what(), c.message)) << e.what();
    }
    EXPECT_TRUE(lines.empty()) << c.kernels << " " << c.precision << ": " << lines.front();
  }
}

// One evaluated seed on 64 images (no accuracy target is reached), as a table; --table and
// --layers are refused together.
TEST(Bench, TableIsTheSameReportAndExcludesLayers) {
  LENET5_REQUIRE_MNIST();
  TempDir dir;
  // A subset of MNIST (its first 564 training images, 500 of them held out, and 500 test images):
  // the full sets' 15,000 evaluated images would take most of the run's time.
  testing::write_tiny_mnist(dir / "data", 564, 500);
  const std::string data = " --data '" + (dir / "data").string() + "'";
  const auto result = run_lenet5(
      "bench --table --device cpu --train-limit 64 --validation 500 --epochs 1 --seeds 5" + data,
      dir);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto rows = table_cells(result.out);
  ASSERT_EQ(rows.size(), 6u) << result.out;  // header, rule, the seed, mean, min, max
  EXPECT_EQ(rows[2][0], "5");
  EXPECT_GT(std::stod(rows[2][1]), 0.0) << result.out;  // final %
  EXPECT_GT(std::stod(rows[2][2]), 0.0) << result.out;  // validation %
  EXPECT_EQ(rows[2][3], rows[2][1]);                    // one epoch: the chosen one is final
  EXPECT_EQ(rows[2][4], "-");                           // 99 % is not reached on 64 images
  EXPECT_EQ(rows[3][0], "mean");
  EXPECT_EQ(rows[3][1], rows[2][1]);
  EXPECT_FALSE(mentions(result.out, "\"event\"")) << result.out;  // no JSON lines with --table
  // The heading says which images an epoch trained on: the limit applies to those not held out.
  EXPECT_TRUE(mentions(result.out, ", the first 64 training images of those not held out (500),"))
      << result.out;

  const auto both = run_lenet5("bench --table --layers --device cpu" + data, dir);
  EXPECT_EQ(both.exit_code, 2) << both.err;
  EXPECT_TRUE(mentions(both.err, "--layers")) << both.err;
}

TEST(Bench, HelpDescribesTheOutput) {
  TempDir dir;
  const auto help = run_lenet5("bench --help", dir);
  EXPECT_EQ(help.exit_code, 0);
  for (const char* field : {"--table", "time_to_99_s", "time_to_99_2_s", "chosen_test_accuracy",
                            "median_epoch_s_no_augment", "augment_epoch_ratio", "peak_allocated_mb",
                            "device_used_at_end_mb", "over_seeds"})
    EXPECT_TRUE(mentions(help.out, field)) << field << " missing in\n" << help.out;
}

// The `"key": value` pairs of the Python dict or set literal `name = {...}` in the peer's source
// (a set's members map to "").
std::map<std::string, std::string> python_literal(const std::string& source,
                                                  const std::string& name) {
  const std::size_t begin = source.find("\n" + name + " = {");
  EXPECT_NE(begin, std::string::npos) << name << " not found in scripts/pytorch_peer.py";
  if (begin == std::string::npos) return {};
  const std::string body = source.substr(begin, source.find('}', begin) - begin);
  static const std::regex item(R"re("([a-z0-9-]+)"(?:\s*:\s*("[^"]*"|[^,\s]+))?)re");
  std::map<std::string, std::string> items;
  for (auto it = std::sregex_iterator(body.begin(), body.end(), item); it != std::sregex_iterator();
       ++it)
    items[(*it)[1]] = (*it)[2];
  return items;
}

// A setting's default as Python would write it.
std::string python_text(const SettingValue& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>)
          return "\"" + v + "\"";
        else if constexpr (std::is_same_v<T, bool>)
          return v ? "True" : "False";
        else
          return std::to_string(v);
      },
      value);
}

// scripts/pytorch_peer.py keeps its own copy of lenet5's defaults (it runs where lenet5 may not be
// built), for the keys a config file may leave out; a change of a default here must reach it.
TEST(Bench, ThePytorchPeersDefaultsAreTheSettingsTables) {
  const std::string source =
      testing::read_text(testing::source_dir() / "scripts" / "pytorch_peer.py");
  const auto defaults = python_literal(source, "DEFAULTS");
  const auto lenet5_only = python_literal(source, "LENET5_ONLY");
  std::set<std::string> keys;
  for (const SettingDeclaration& d : train_setting_declarations()) {
    const std::string key = d.flag.substr(2);
    keys.insert(key);
    if (lenet5_only.count(key)) continue;
    ASSERT_TRUE(defaults.count(key)) << key << " is missing from the peer's DEFAULTS";
    const std::string expected = python_text(d.default_value), peer = defaults.at(key);
    if (expected[0] == '"' || expected == "True" || expected == "False")
      EXPECT_EQ(peer, expected) << key;
    else  // numbers: 10 and 10.0 are the same default
      EXPECT_EQ(std::stod(peer), std::stod(expected)) << key;
  }
  for (const auto& [key, value] : defaults)
    EXPECT_TRUE(keys.count(key)) << key << " is not a setting";
  for (const auto& [key, value] : lenet5_only)
    EXPECT_TRUE(keys.count(key)) << key << " is not a setting";
}

// The peer resolves --augment dataset itself: its table must say what the data sets' table says.
TEST(Bench, ThePytorchPeerAugmentsEachDataSetAsLenet5Does) {
  const std::string source =
      testing::read_text(testing::source_dir() / "scripts" / "pytorch_peer.py");
  const auto peer = python_literal(source, "DATASET_AUGMENTS");
  EXPECT_EQ(peer.size(), datasets().size());
  for (const DatasetDescription& dataset : datasets()) {
    ASSERT_TRUE(peer.count(dataset.name)) << dataset.name << " is missing from DATASET_AUGMENTS";
    EXPECT_EQ(peer.at(dataset.name), "\"" + dataset.augment + "\"") << dataset.name;
  }
}

}  // namespace
}  // namespace lenet5
