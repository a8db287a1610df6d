// `lenet5 sweep` (src/sweep/): the lists and their product, shards, the summary, and the program
// as a user runs it: every bad input refused before anything trains, a model byte-identical to
// `lenet5 train`, merged shards equal to the whole sweep, and a resumed sweep equal to an
// uninterrupted one.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <set>
#include <thread>

#include "backend/backend.hpp"
#include "child_process.hpp"
#include "core/error.hpp"
#include "cuda/runtime/runtime.hpp"
#include "sweep/summary.hpp"
#include "sweep/sweep_spec.hpp"
#include "test_util.hpp"
#include "tiny_mnist.hpp"
#include "train/trainer.hpp"

namespace lenet5 {
namespace {

namespace fs = std::filesystem;
using testing::mentions;
using testing::read_text;
using testing::run_lenet5;
using testing::TempDir;

SweepSpec spec_of(const std::vector<std::pair<std::string, std::string>>& lists) {
  SweepSpec spec;
  for (const auto& [key, text] : lists) add_sweep_list(spec, parse_sweep_list(key, text));
  return spec;
}

std::vector<std::string> names(const std::vector<SweepModel>& models) {
  std::vector<std::string> out;
  for (const SweepModel& model : models) out.push_back(model.name);
  return out;
}

// The message of the UsageError `f` throws ("" when it throws none).
template <class F>
std::string usage_error_of(F f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

// A sweep packs its models where the whole-step kernels train them on the GPU, in fp32 or tf32;
// a bf16 model (--kernels tensor) trains alone, with the tensor cores' step, and the CPU never
// packs.
TEST(SweepPacking, PacksTheWholeStepKernelsFp32AndTf32ModelsOnTheGpuOnly) {
  NetConfig net;
  net.kernels = GpuKernels::whole_step;
  EXPECT_TRUE(packs_models(Device::gpu, net));
  EXPECT_FALSE(packs_models(Device::cpu, net));
  net.kernels = GpuKernels::tensor;
  for (const Precision precision : {Precision::fp32, Precision::tf32}) {
    net.precision = precision;
    EXPECT_TRUE(packs_models(Device::gpu, net)) << to_string(precision);
  }
  net.precision = Precision::bf16;
  EXPECT_FALSE(packs_models(Device::gpu, net));
  net.kernels = GpuKernels::fast;
  net.precision = Precision::fp32;
  EXPECT_FALSE(packs_models(Device::gpu, net));
}

TEST(SweepSpec, ListsAndRangesExpandInTheOrderWritten) {
  EXPECT_EQ(parse_sweep_list("seed", "1-3,7").values,
            (std::vector<std::string>{"1", "2", "3", "7"}));
  EXPECT_EQ(parse_sweep_list("lr", "0.1, 0.05").values, (std::vector<std::string>{"0.1", "0.05"}));
  // A double's exponent is not a range.
  EXPECT_EQ(parse_sweep_list("weight-decay", "1e-4").values, (std::vector<std::string>{"1e-4"}));
  EXPECT_EQ(parse_sweep_list("batch-size", "64-64").values, (std::vector<std::string>{"64"}));
}

// Whatever order the lists are given in: the declaration table's order, the seed last and fastest.
TEST(SweepSpec, TheProductRunsInTheDeclarationOrderWithTheSeedFastest) {
  const SweepSpec spec = spec_of({{"seed", "1,2"}, {"activation", "tanh,relu"}, {"lr", "0.1,0.2"}});
  const std::vector<SweepModel> models = expand_sweep(spec);
  EXPECT_EQ(names(models), (std::vector<std::string>{
                               "lr=0.1,activation=tanh,seed=1", "lr=0.1,activation=tanh,seed=2",
                               "lr=0.1,activation=relu,seed=1", "lr=0.1,activation=relu,seed=2",
                               "lr=0.2,activation=tanh,seed=1", "lr=0.2,activation=tanh,seed=2",
                               "lr=0.2,activation=relu,seed=1", "lr=0.2,activation=relu,seed=2"}));
  for (int i = 0; i < int(models.size()); ++i) EXPECT_EQ(models[i].index, i);
  EXPECT_EQ(models[3].setting, "lr=0.1,activation=relu");
  EXPECT_EQ(expand_sweep(spec_of({{"seed", "4-5"}}))[1].setting, "(all)");
}

TEST(SweepSpec, ShardsAreDisjointAndTogetherTheWholeSweep) {
  SweepSpec spec = spec_of({{"seed", "1-7"}, {"lr", "0.1,0.2"}});  // 14 models
  for (int n : {1, 3, 5, 14, 20}) {
    std::multiset<int> seen;
    for (int k = 1; k <= n; ++k) {
      spec.shard = {k, n};
      for (const SweepModel& model : models_of_shard(spec)) {
        EXPECT_EQ(model.index % n, k - 1) << "round-robin";
        seen.insert(model.index);
      }
    }
    EXPECT_EQ(seen.size(), 14u) << n << " shards";
    for (int i = 0; i < 14; ++i) EXPECT_EQ(seen.count(i), 1u) << "model " << i << ", " << n;
  }
  EXPECT_EQ(parse_sweep_shard("2/4"), (SweepShard{2, 4}));
}

TEST(SweepSpec, FolderNamesHoldOnlySafeCharacters) {
  // No value of a real setting holds one; the rule is checked on the spec itself.
  SweepSpec spec;
  spec.lists = {{"activation", {"a/b c"}}};
  EXPECT_EQ(expand_sweep(spec)[0].name, "activation=a_b_c");
}

TEST(SweepSpec, EachBadListIsAUsageErrorNamingTheProblem) {
  struct Case {
    std::string key, text, expected;
  };
  const std::vector<Case> cases{
      {"lr", "", "empty"},
      {"lr", "0.1,,0.2", "empty value"},
      {"seed", "5-1", "runs backwards"},
      {"seed", "1-", "not a range"},
      {"seed", "-3", "not a range"},
      {"seed", "a-b", "not a range"},
      {"seed", "1-5000", "more than 1024"},
      {"seed", "1,1", "listed twice"},
      {"learning-rate", "0.1", "no [train] setting 'learning-rate'"},
      {"out", "a,b", "may not vary"},
      {"device", "cpu,gpu", "may not vary"},
      {"threads", "1,2", "may not vary"},
      {"data", "x", "may not vary"},
      {"config", "x", "may not vary"},
      {"resume", "x", "may not vary"},
  };
  for (const Case& c : cases) {
    const std::string message = usage_error_of([&] { parse_sweep_list(c.key, c.text); });
    EXPECT_TRUE(mentions(message, c.expected)) << c.key << "=" << c.text << ": " << message;
  }
  for (const std::string shard : {"0/2", "3/2", "1/0", "2", "a/b", "1/-2", "/"})
    EXPECT_TRUE(mentions(usage_error_of([&] { parse_sweep_shard(shard); }), "--shard")) << shard;
  EXPECT_TRUE(mentions(usage_error_of([] { expand_sweep(SweepSpec{}); }), "nothing to sweep"));
  const SweepSpec big = spec_of({{"seed", "1-100"}, {"batch-size", "1-11"}});  // 1,100 models
  EXPECT_TRUE(mentions(usage_error_of([&] { expand_sweep(big); }), "more than 1024 models"));
  SweepSpec twice = spec_of({{"seed", "1"}});
  EXPECT_TRUE(mentions(
      usage_error_of([&] { add_sweep_list(twice, parse_sweep_list("seed", "2")); }), "two lists"));
}

TEST(SweepSpec, TheSweepTableListsEveryValueAndTheShard) {
  SweepSpec spec = spec_of({{"seed", "1-2"}, {"lr", "0.1"}});
  spec.shard = {2, 3};
  EXPECT_EQ(sweep_table_toml(spec),
            "[sweep]\nlr = [\"0.1\"]\nseed = [\"1\", \"2\"]\nshard = \"2/3\"\n");
}

MetricsRow row(int epoch, double test_accuracy, double seconds) {
  MetricsRow r;
  r.epoch = epoch;
  r.test_accuracy = test_accuracy;
  r.seconds = seconds;
  return r;
}

// sweep.toml's [sweep] table is read back into the spec that wrote it (the page and --resume read
// sweep folders so), its other tables skipped; anything but what it writes is an error naming
// the file.
TEST(SweepSpec, TheSweepTableReadsBackAsWritten) {
  SweepSpec spec = spec_of({{"lr", "0.05,0.1"}, {"activation", "relu,tanh"}, {"seed", "1-3"}});
  add_sweep_list(spec, {"schedule", {"a \"quoted\\ name\""}});  // escapes survive
  spec.shard = {2, 3};
  const std::string text = "[train]\nlr=0.1\nepochs=2\n\n" + sweep_table_toml(spec);
  const SweepSpec read = parse_sweep_table_toml(text, "sweep.toml");
  EXPECT_EQ(read.lists, spec.lists);
  EXPECT_EQ(read.shard, spec.shard);
  for (const std::string& bad :
       {std::string("[train]\nlr=0.1\n"), std::string("[sweep]\nlr = 0.1\n"),
        std::string("[sweep]\nlr = [\"0.1\"\n"), std::string("[sweep]\nlr = []\n"),
        std::string("[sweep]\nout = [\"x\"]\n")})
    try {
      parse_sweep_table_toml(bad, "here/sweep.toml");
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const Error& e) {
      EXPECT_TRUE(mentions(e.what(), "here/sweep.toml")) << e.what();
    }
}

// The curves gather every model with a trained epoch, finished or not, per epoch; a setting with
// no trained model has none. Exact: small binary fractions.
TEST(SweepSummary, CurvesSpreadEachSettingsModelsPerEpoch) {
  const std::vector<SweepModel> models =
      expand_sweep(spec_of({{"lr", "0.1,0.2,0.3"}, {"seed", "1-2"}}));
  std::vector<SweepModelResult> results{
      {models[1], 2, {row(1, 97, 1), row(2, 98, 1)}},
      {models[0], 2, {row(1, 95, 1)}},
      {models[3], 2, {row(1, 90, 1)}},
      {models[2], 2, {}},
      {models[4], 2, {}},
      {models[5], 2, {}},
  };
  const std::vector<SettingCurves> curves = sweep_curves(results);
  ASSERT_EQ(curves.size(), 2u);
  EXPECT_EQ(curves[0].setting, "lr=0.1");
  EXPECT_EQ(curves[0].models, (std::vector<std::string>{"lr=0.1,seed=1", "lr=0.1,seed=2"}));
  ASSERT_EQ(curves[0].test_accuracy.size(), 2u);
  const EpochSpread& first = curves[0].test_accuracy[0];
  EXPECT_EQ(first.models, 2);
  EXPECT_EQ(first.mean, 96);
  EXPECT_EQ(first.min, 95);
  EXPECT_EQ(first.max, 97);
  EXPECT_EQ(curves[0].test_accuracy[1].models, 1);  // seed 1 has not trained epoch 2 yet
  EXPECT_EQ(curves[0].test_accuracy[1].mean, 98);
  EXPECT_EQ(curves[1].setting, "lr=0.2");
  EXPECT_EQ(curves[1].models, (std::vector<std::string>{"lr=0.2,seed=2"}));
}

TEST(SweepSummary, StatisticsPerSettingOverItsFinishedModels) {
  const std::vector<SweepModel> models =
      expand_sweep(spec_of({{"lr", "0.1,0.2"}, {"seed", "1-3"}}));
  std::vector<SweepModelResult> results;
  // lr=0.1: final 98, 99, 100 (two reach 99 %: at epoch 2 after 3 s, at epoch 1 after 1 s).
  results.push_back({models[0], 2, {row(1, 97, 1), row(2, 98, 2)}});
  results.push_back({models[1], 2, {row(1, 98, 1), row(2, 99, 2)}});
  results.push_back({models[2], 2, {row(1, 99.5, 1), row(2, 100, 2)}});
  // lr=0.2: one finished model, one that stopped after epoch 1 (left out), one not started.
  results.push_back({models[3], 2, {row(1, 90, 1), row(2, 95, 1)}});
  results.push_back({models[4], 2, {row(1, 99.9, 1)}});
  results.push_back({models[5], 2, {}});
  std::swap(results[0], results[4]);  // the order of the results does not matter
  const std::vector<SettingSummary> summaries = summarise_sweep(results);
  ASSERT_EQ(summaries.size(), 2u);
  const SettingSummary& a = summaries[0];
  EXPECT_EQ(a.setting, "lr=0.1");
  EXPECT_EQ(a.models, 3);
  // Exact: sums and quotients of these small numbers are exact in double, and sd = 1 exactly.
  EXPECT_EQ(a.mean, 99);
  EXPECT_EQ(a.stddev, 1);
  EXPECT_EQ(a.min, 98);
  EXPECT_EQ(a.max, 100);
  EXPECT_EQ(a.reached_99, 2);
  EXPECT_EQ(a.epoch_to_99, 1.5);
  EXPECT_EQ(a.seconds_to_99, 2);
  const SettingSummary& b = summaries[1];
  EXPECT_EQ(b.models, 1);
  EXPECT_EQ(b.mean, 95);
  EXPECT_EQ(b.stddev, 0);
  EXPECT_EQ(b.reached_99, 0);
  EXPECT_TRUE(mentions(format_summary_table(summaries), "not reached"));
  EXPECT_TRUE(
      mentions(summary_csv(summaries), "\"lr=0.1\",3,99.0000,1.0000,98.00,100.00,2,1.50,2.000"));
  EXPECT_TRUE(mentions(summary_json(summaries), "\"seconds_to_99\": null"));
}

// Shards may run on machines with other data folders, devices and core counts: those settings
// do not make two shards' folders different sweeps; the others do.
TEST(SweepSummary, ShardsOfOneSweepMayDifferOnlyInWhereAndHowTheyRan) {
  const std::string a = "[train]\ndata=\"/a\"\nlr=0.1\ndevice=\"cpu\"\nthreads=2\n";
  const std::string b = "[train]\ndata=\"/b\"\nlr=0.1\ndevice=\"gpu\"\nthreads=16\n";
  EXPECT_EQ(computed_settings(a), computed_settings(b));
  EXPECT_EQ(computed_settings(a), "[train]\nlr=0.1\n");
  EXPECT_NE(computed_settings(a), computed_settings("[train]\nlr=0.2\n"));
}

// ---- the program
// ---------------------------------------------------------------------------------

// MNIST's first 256 training and 500 test images, written once for the suite: a model trains
// and is evaluated in milliseconds, and the summaries still differ between settings.
std::string data_flag() {
  static const TempDir dir;
  static const fs::path data = [] {
    testing::write_tiny_mnist(dir / "data", 256, 500);
    return dir / "data";
  }();
  return " --data '" + data.string() + "'";
}

// Tiny CPU models: 200 images trained on and the last 56 held out, 1 epoch, evaluated on 500 test
// images.
std::string tiny() {
  return " --device cpu --validation 56 --epochs 1" + data_flag();
}

// Which models may share one packed GPU run: the same network, batch, data, epochs, momentum and
// augmentation, differing at most in seed and learning-rate schedule, from the same position.
TEST(SweepPacking, OnlySeedAndScheduleMayDifferInsideAGroup) {
  TrainJob a;
  a.settings.seed = 1;
  TrainJob b = a;
  b.settings.seed = 2;
  b.settings.lr = a.settings.lr * 2;
  b.settings.schedule = "cosine";
  b.settings.min_lr = 0.001;
  b.settings.out = "elsewhere";
  EXPECT_TRUE(packable_together(a, b));
  for (const auto& change : std::vector<std::pair<std::string, void (*)(TrainSettings&)>>{
           {"activation",
            [](TrainSettings& s) { s.activation = s.activation == "relu" ? "tanh" : "relu"; }},
           {"batch size", [](TrainSettings& s) { s.batch_size += 1; }},
           {"epochs", [](TrainSettings& s) { s.epochs += 1; }},
           {"momentum", [](TrainSettings& s) { s.momentum = 0.5; }},
           {"weight decay", [](TrainSettings& s) { s.weight_decay = 0.01; }},
           {"augmentation",
            [](TrainSettings& s) { s.augment = s.augment == "none" ? "affine" : "none"; }},
           {"training images", [](TrainSettings& s) { s.train_limit = 100; }},
           {"held-out images", [](TrainSettings& s) { s.validation = 100; }},
           {"kernels",
            [](TrainSettings& s) { s.kernels = s.kernels == "fast" ? "book" : "fast"; }}}) {
    TrainJob c = b;
    change.second(c.settings);
    EXPECT_FALSE(packable_together(a, c)) << change.first;
  }
  TrainJob resumed = b;
  resumed.resume = Checkpoint{};
  resumed.resume->position.epoch = 1;
  EXPECT_FALSE(packable_together(a, resumed)) << "a model resumed at another epoch";
}

TEST(SweepCli, HelpNamesTheListsAndTheOrder) {
  TempDir dir;
  const auto help = run_lenet5("sweep --help", dir);
  EXPECT_EQ(help.exit_code, 0);
  for (const char* text : {"--seeds", "--set", "--shard", "--merge", "--resume", "--lr",
                           "seed varying fastest", "[sweep] table", "summary.csv"})
    EXPECT_TRUE(mentions(help.out, text)) << text;
}

TEST(SweepCli, EveryBadInputIsAUsageErrorBeforeAnythingTrains) {
  TempDir dir;
  struct Case {
    std::string arguments, expected;
  };
  const std::string out = " --out '" + (dir / "sweep").string() + "'";
  const std::vector<Case> cases{
      {"sweep", "nothing to sweep"},
      {"sweep --seeds ''", "empty"},
      {"sweep --seeds 5-1", "--seeds: the range '5-1' runs backwards"},
      {"sweep --seeds 1-", "not a range"},
      {"sweep --seeds=-3", "not a range"},
      {"sweep --seeds a-b", "not a range"},
      {"sweep --seeds 1 --set learning-rate=0.1", "no [train] setting 'learning-rate'"},
      {"sweep --seeds 1 --set lr", "not KEY=V1,V2"},
      {"sweep --seeds 1 --set lr=0.1,-1", "--lr must be above 0, not -1"},
      {"sweep --seeds 1 --set lr=0.1,abc", "abc"},
      {"sweep --seeds 1 --set activation=tanh,swish", "swish"},
      {"sweep --seeds 1 --set batch-size=0-2", "--batch-size must be between 1 and 60000"},
      {"sweep --seeds 1 --set out=a,b", "may not vary"},
      {"sweep --seeds 1 --set device=cpu", "may not vary"},
      {"sweep --seeds 1 --set threads=1,2", "may not vary"},
      {"sweep --seeds 1 --set data=a", "may not vary"},
      {"sweep --seeds 1 --set config=a", "may not vary"},
      {"sweep --seeds 1 --set resume=a", "may not vary"},
      {"sweep --seeds 1-1025", "more than 1024"},
      {"sweep --seeds 1-64 --set lr=0.01,0.02,0.03,0.04,0.05,0.06,0.07,0.08,0.09,0.1,0.11,0.12,"
       "0.13,0.14,0.15,0.16,0.17",
       "more than 1024 models"},
      {"sweep --seeds 1-4 --shard 5/4", "--shard"},
      {"sweep --seeds 1-4 --shard 0/4", "--shard"},
      {"sweep --seeds 1-4 --shard 1of4", "--shard"},
      {"sweep --seeds 1 --set seed=2", "two lists"},
      {"sweep --resume '" + dir.path().string() + "'", "holds no sweep.toml"},
      {"sweep --merge '" + dir.path().string() + "'", "holds no sweep.toml"},
      {"sweep --resume '" + dir.path().string() + "' --seeds 1", "give no other settings"},
  };
  for (const Case& c : cases) {
    // --resume and --merge take no settings: the others get tiny ones, so that a case wrongly
    // accepted trains only for a moment.
    const bool stored = mentions(c.arguments, "--resume") || mentions(c.arguments, "--merge");
    const auto result = run_lenet5(c.arguments + (stored ? "" : out + tiny()), dir);
    EXPECT_EQ(result.exit_code, 2) << c.arguments << "\n" << result.err;
    EXPECT_TRUE(mentions(result.err, c.expected)) << c.arguments << "\n" << result.err;
    EXPECT_FALSE(fs::exists(dir / "sweep" / "sweep.toml")) << c.arguments << ": it started";
  }
}

std::string bytes_of(const fs::path& file) {
  EXPECT_TRUE(fs::exists(file)) << file;
  return read_text(file);
}

// Each model is `lenet5 train` with its settings: the same checkpoints, byte for byte (weights,
// optimizer state and the stored config text).
TEST(SweepCli, AModelIsByteIdenticalToTrainWithTheSameSettings) {
  LENET5_REQUIRE_MNIST();
  TempDir dir;
  const auto swept = run_lenet5("sweep --seeds 3 --set lr=0.1 --batch-size 64 --out '" +
                                    (dir / "sweep").string() + "'" + tiny(),
                                dir);
  ASSERT_EQ(swept.exit_code, 0) << swept.err;
  const auto trained = run_lenet5(
      "train --seed 3 --lr 0.1 --batch-size 64 --out '" + (dir / "train").string() + "'" + tiny(),
      dir);
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  const fs::path model = dir / "sweep" / "lr=0.1,seed=3";
  for (const char* file : {"last.safetensors", "best.safetensors", "config.toml"})
    EXPECT_EQ(bytes_of(model / file), bytes_of(dir / "train" / file)) << file;
  EXPECT_TRUE(mentions(swept.out, "lr=0.1")) << swept.out;  // the summary's row
  EXPECT_TRUE(fs::exists(dir / "sweep" / "summary.csv"));
  EXPECT_TRUE(fs::exists(dir / "sweep" / "summary.json"));
  EXPECT_TRUE(mentions(swept.err, "model 1/1 lr=0.1,seed=3: final test")) << swept.err;
}

// The merged shards summarise exactly as the whole sweep does (the time columns aside: these tiny
// models never reach 99 %, so both say "not reached").
TEST(SweepCli, MergedShardsGiveTheWholeSweepsSummary) {
  LENET5_REQUIRE_MNIST();
  TempDir dir;
  const std::string lists = "sweep --seeds 1-2 --set lr=0.05,0.1" + tiny();
  const auto whole = run_lenet5(lists + " --out '" + (dir / "whole").string() + "'", dir);
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  std::string shards;
  for (const char* k : {"1", "2", "3"}) {
    const fs::path shard = dir / (std::string("shard") + k);
    const auto result =
        run_lenet5(lists + " --shard " + k + "/3 --out '" + shard.string() + "'", dir);
    ASSERT_EQ(result.exit_code, 0) << result.err;
    shards += " '" + shard.string() + "'";
  }
  EXPECT_TRUE(fs::exists(dir / "shard2" / "lr=0.05,seed=2"));  // model 1 (0-based) of 4
  EXPECT_FALSE(fs::exists(dir / "shard2" / "lr=0.05,seed=1"));
  const auto merged =
      run_lenet5("sweep --merge" + shards + " --out '" + (dir / "merged").string() + "'", dir);
  ASSERT_EQ(merged.exit_code, 0) << merged.err;
  EXPECT_EQ(read_text(dir / "merged" / "summary.csv"), read_text(dir / "whole" / "summary.csv"));
  EXPECT_EQ(read_text(dir / "merged" / "summary.json"), read_text(dir / "whole" / "summary.json"));
  EXPECT_EQ(merged.out.substr(0, merged.out.rfind("summary.csv and")),
            whole.out.substr(0, whole.out.rfind("summary.csv and")));
  // A shard given twice, or a folder of another sweep, is refused.
  const auto twice = run_lenet5("sweep --merge" + shards + shards, dir);
  EXPECT_EQ(twice.exit_code, 2) << twice.err;
  EXPECT_TRUE(mentions(twice.err, "given twice")) << twice.err;
  const auto other = run_lenet5(
      "sweep --merge '" + (dir / "whole").string() + "' '" + (dir / "shard1").string() + "'", dir);
  EXPECT_EQ(other.exit_code, 2) << other.err;
  EXPECT_TRUE(mentions(other.err, "another sweep")) << other.err;
}

// Each model of a sweep resolves --device auto again; where the build has GPU support and the
// machine no usable GPU, the fallback to the CPU is a warning said once, not once a model (-q
// keeps warnings, so it used to be four lines of the same).
TEST(SweepCli, TheFallbackToTheCpuIsSaidOnceNotOnceAModel) {
  if (!cuda::gpu_available_in_build() || cuda::device_count() > 0)
    GTEST_SKIP() << "--device auto falls back to the CPU only in a build with GPU support on a "
                    "machine without a usable GPU";
  TempDir dir;
  const auto swept = run_lenet5("-q sweep --seeds 1-4 --device auto --validation 56 --epochs 1" +
                                    data_flag() + " --out '" + (dir / "sweep").string() + "'",
                                dir);
  ASSERT_EQ(swept.exit_code, 0) << swept.err;
  const std::string warning = "no usable CUDA device";
  int said = 0;
  for (std::size_t at = swept.err.find(warning); at != std::string::npos;
       at = swept.err.find(warning, at + 1))
    ++said;
  EXPECT_EQ(said, 1) << swept.err;
}

// A sweep that --device auto puts on the CPU with a setting the CPU cannot compute as asked (the
// tensor-core kernels) is refused before its folder exists, which would otherwise hold a sweep
// that blocks the same --out and that --resume could not finish.
TEST(SweepCli, ASweepTheCpuCannotComputeIsRefusedBeforeItsFolderExists) {
  if (cuda::gpu_available_in_build() && cuda::device_count() > 0)
    GTEST_SKIP() << "--device auto puts the sweep on the CPU only on a machine without a GPU";
  TempDir dir;
  const auto result = run_lenet5(
      "sweep --device auto --kernels tensor --set lr=0.1,0.2 --validation 56 --epochs 1" +
          data_flag() + " --out '" + (dir / "sweep").string() + "'",
      dir);
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_TRUE(mentions(result.err, "model 1 (")) << result.err;
  EXPECT_TRUE(mentions(result.err, "--kernels tensor trains and evaluates on a GPU's tensor cores"))
      << result.err;
  EXPECT_FALSE(fs::exists(dir / "sweep")) << "the refused sweep made its folder";
}

// SIGINT in mid-sweep: the model in training saves, the sweep stops (exit 130); --resume finishes
// the sweep, and every model ends byte-identical to an uninterrupted sweep's.
TEST(SweepCli, ResumeAfterSigintEqualsAnUninterruptedSweep) {
  LENET5_REQUIRE_MNIST();
  TempDir dir;
  // MNIST's first 1,100 training images (1,000 trained on, 100 held out) and 100 test images:
  // each of the four processes below then reads 2 MB, not all of MNIST.
  testing::write_tiny_mnist(dir / "data", 1100, 100);
  // Four epochs a model, so that a signal sent when model 2 ends its first lands inside it.
  const std::vector<std::string> arguments{"sweep",
                                           "--seeds",
                                           "1-3",
                                           "--device",
                                           "cpu",
                                           "--train-limit",
                                           "1000",
                                           "--validation",
                                           "100",
                                           "--epochs",
                                           "4",
                                           "--augment",
                                           "none",
                                           "--evaluate",
                                           "false",
                                           "--data",
                                           (dir / "data").string()};
  std::string lists;
  for (const std::string& word : arguments) lists += " '" + word + "'";
  const fs::path cut = dir / "cut";
  testing::ChildOptions options;
  options.stderr_file = dir / "cut.txt";
  std::vector<std::string> cut_arguments = arguments;
  // On one thread, so that even a many-core machine spends long enough on model 2's last three
  // epochs for the signal to land in them (threads change no result: the bytes still match).
  cut_arguments.insert(cut_arguments.end(), {"--out", cut.string(), "--threads", "1"});
  const pid_t child = testing::start_lenet5(cut_arguments, options);
  // Model 2's log appears when model 1 is done; the signal lands as soon as model 2 has ended its
  // first epoch, while three remain (a fixed delay after its start was not enough on a 16-core
  // machine, where model 2 ended before the signal came). Polled every 5 ms: an epoch of 1,000
  // images takes tens of milliseconds there.
  const fs::path log = cut / "seed=2" / "train.log";
  for (int i = 0; i < 12000 && !mentions(read_text(log), "epoch 1/4"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  kill(child, SIGINT);
  const testing::ChildEnd end = testing::wait_for(child);
  ASSERT_EQ(end.exit_code(), 130) << read_text(dir / "cut.txt");
  EXPECT_TRUE(mentions(read_text(dir / "cut.txt"), "--resume")) << "says how to go on";
  EXPECT_FALSE(fs::exists(cut / "seed=3")) << "the sweep went on after the signal";
  // --threads is the one flag --resume takes: it changes no result, so the bytes still match.
  const auto resumed = run_lenet5("sweep --resume '" + cut.string() + "' --threads 1", dir);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_TRUE(mentions(resumed.err, "(1 thread)")) << resumed.err;
  EXPECT_TRUE(mentions(resumed.err, "model 1/3 seed=1: already trained")) << resumed.err;
  EXPECT_TRUE(mentions(resumed.err, "model 2/3 seed=2: continuing")) << resumed.err;
  const auto whole = run_lenet5(lists + " --out '" + (dir / "whole").string() + "'", dir);
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  for (const char* model : {"seed=1", "seed=2", "seed=3"})
    EXPECT_EQ(bytes_of(cut / model / "last.safetensors"),
              bytes_of(dir / "whole" / model / "last.safetensors"))
        << model;
  // Resuming a finished sweep trains nothing.
  const auto again = run_lenet5("sweep --resume '" + cut.string() + "'", dir);
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_TRUE(mentions(again.err, "model 3/3 seed=3: already trained")) << again.err;
}

// A [sweep] table in the --config file is a sweep spec; a [train] section gives the base settings.
TEST(SweepCli, ASweepTableInTheConfigFileIsASpec) {
  LENET5_REQUIRE_MNIST();
  TempDir dir;
  const fs::path config = dir / "sweep.toml";
  std::ofstream(config) << "[train]\nbatch-size = 64\n[sweep]\nseeds = \"1-2\"\nlr = [0.05, 0.1]\n"
                           "shard = \"2/2\"\n";
  // Not evaluated: the test is of the models' folders, and evaluation costs most of a tiny model.
  const std::string fast = tiny() + " --evaluate false";
  const auto result = run_lenet5(
      "--config '" + config.string() + "' sweep --out '" + (dir / "s").string() + "'" + fast, dir);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  // Shard 2 of 2: models 1 and 3 (0-based) of lr=0.05,seed=1 / seed=2 / lr=0.1,seed=1 / seed=2.
  EXPECT_TRUE(fs::exists(dir / "s" / "lr=0.05,seed=2" / "last.safetensors"));
  EXPECT_TRUE(fs::exists(dir / "s" / "lr=0.1,seed=2" / "last.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "s" / "lr=0.1,seed=1"));
  EXPECT_TRUE(mentions(read_text(dir / "s" / "lr=0.1,seed=2" / "config.toml"), "batch-size=64"));
  // `train` with the same file trains one model and says that it ignores the table.
  const auto train = run_lenet5(
      "--config '" + config.string() + "' train --out '" + (dir / "t").string() + "'" + fast, dir);
  EXPECT_EQ(train.exit_code, 0) << train.err;
  EXPECT_TRUE(mentions(train.err, "[sweep] table, which lenet5 train ignores")) << train.err;
  EXPECT_TRUE(fs::exists(dir / "t" / "last.safetensors"));
}

}  // namespace
}  // namespace lenet5
