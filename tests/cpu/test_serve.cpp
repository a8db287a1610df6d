// `lenet5 serve`'s routes over HTTP: one server on a free loopback port for the whole suite
// (serve_test_util.hpp), every route, then requests with bodies the API must refuse, each followed
// by a check that the server still answers. test_serve_http.cpp has the tests of HTTP itself.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "serve/api.hpp"
#include "serve/run_evaluation.hpp"
#include "serve/server.hpp"
#include "serve/web_assets.hpp"
#include "serve_test_util.hpp"
#include "test_util.hpp"
#include "train/evaluate.hpp"

namespace lenet5 {
namespace {

using namespace serve_test;
using nlohmann::json;
using testing::TempDir;
namespace fs = std::filesystem;

// A small test set in MNIST's files: kTestImages images of bars and blobs at places and
// thicknesses that vary with the index, labels i % 10. Images kTestImages/2.. repeat the first
// half, so the network gives each of those pairs the same probabilities: ties, which the misreads'
// order breaks by test index.
constexpr int kTestImages = 300;
Dataset small_test_set() {
  Dataset test;
  test.count = kTestImages;
  test.images.resize(std::size_t(kTestImages) * kImageBytes);
  for (int i = 0; i < kTestImages; ++i) {
    const int k = i % (kTestImages / 2);
    std::uint8_t* image = test.images.data() + std::size_t(i) * kImageBytes;
    for (int y = 0; y < 28; ++y)
      for (int x = 0; x < 28; ++x) {
        const bool bar = std::abs(x - 4 - k % 20) <= k % 3 && y > 3 + k % 7 && y < 24;
        const bool blob = (x - 14) * (x - 14) + (y - 8 - k % 13) * (y - 8 - k % 13) < k % 30;
        image[y * 28 + x] = bar || blob ? std::uint8_t(155 + k % 100) : 0;
      }
    test.labels.push_back(std::uint8_t(i % 10));
  }
  return test;
}

void write_idx(const fs::path& file, std::uint32_t magic, const std::vector<std::uint32_t>& dims,
               const std::vector<std::uint8_t>& data) {
  std::ofstream out(file, std::ios::binary);
  const auto put32 = [&out](std::uint32_t v) {  // IDX numbers are big-endian
    for (int shift = 24; shift >= 0; shift -= 8) out.put(char((v >> shift) & 0xff));
  };
  put32(magic);
  for (const std::uint32_t dim : dims) put32(dim);
  out.write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size()));
}

// The test split's two files (MNIST's names) in `dir`.
void write_test_split(const fs::path& dir, const Dataset& test) {
  fs::create_directories(dir);
  const DatasetDescription& mnist = mnist_dataset();
  write_idx(dir / mnist.test_images.name, 0x00000803, {std::uint32_t(test.count), 28, 28},
            test.images);
  write_idx(dir / mnist.test_labels.name, 0x00000801, {std::uint32_t(test.count)}, test.labels);
}

// A run folder holding only `checkpoint` as best.safetensors, dated `age` in the past, so that
// a replacement written later in the test has another modification time whatever the clock's
// resolution.
void write_run(const fs::path& folder, const Checkpoint& checkpoint,
               std::chrono::seconds age = std::chrono::seconds(0)) {
  fs::create_directories(folder);
  save_checkpoint(folder / "best.safetensors", checkpoint);
  fs::last_write_time(folder / "best.safetensors",
                      fs::last_write_time(folder / "best.safetensors") - age);
}

// What the evaluation route should send for `checkpoint` on `test`, computed here from the
// engine's own probabilities: every misread (index, truth, prediction, its probability), most
// confident first and ties by index.
struct Misread {
  int index, truth, predicted;
  float probability;
};
std::vector<Misread> expected_misreads(const Checkpoint& checkpoint, const Dataset& test) {
  const auto engine = engine_for(checkpoint, Device::cpu);
  const std::vector<float> p = engine->probabilities(test.images.data(), test.count);
  std::vector<Misread> misreads;
  for (int i = 0; i < test.count; ++i) {
    const float* row = p.data() + std::size_t(i) * 10;
    const int predicted = int(std::max_element(row, row + 10) - row);
    if (predicted != test.labels[std::size_t(i)])
      misreads.push_back({i, test.labels[std::size_t(i)], predicted, row[predicted]});
  }
  std::sort(misreads.begin(), misreads.end(), [](const Misread& a, const Misread& b) {
    return a.probability != b.probability ? a.probability > b.probability : a.index < b.index;
  });
  return misreads;
}

std::vector<std::uint8_t> from_base64(const std::string& text) {
  static const std::string digits =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<std::uint8_t> bytes;
  std::uint32_t group = 0;
  int bits = 0;
  for (const char c : text) {
    if (c == '=') break;
    group = group << 6 | std::uint32_t(digits.find(c));
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      bytes.push_back(std::uint8_t(group >> bits & 0xff));
    }
  }
  return bytes;
}

std::string file_bytes(const fs::path& file) {
  return testing::read_text(file);
}

// A sweep folder as `lenet5 sweep --seeds 1-2 --set lr=0.05,0.1 --epochs 2` leaves it part-way:
// lr=0.05 finished on both seeds, lr=0.1 trained one epoch of seed 1, and its seed 2's folder is a
// link out of the sweep folder (to run-a, whose rows must not be read as the model's).
void write_metrics(const fs::path& run, const std::string& rows) {
  fs::create_directories(run);
  std::ofstream(run / "config.toml") << "# lenet5 train settings\n[train]\nepochs=2\n";
  std::ofstream(run / "metrics.csv")
      << "epoch,lr,train_loss,train_acc,test_loss,test_acc,seconds,images_per_s\n"
      << rows;
}
void write_sweep(const fs::path& sweep) {
  fs::create_directories(sweep);
  std::ofstream(sweep / "sweep.toml") << "[train]\nepochs=2\n\n[sweep]\nlr = [\"0.05\", "
                                         "\"0.1\"]\nseed = [\"1\", \"2\"]\nshard = \"1/1\"\n";
  write_metrics(sweep / "lr=0.05,seed=1",
                "1,0.05,0.5,90,0.3,97,1.0,100\n"
                "2,0.05,0.25,95,0.2,98,1.0,100\n");
  write_metrics(sweep / "lr=0.05,seed=2",
                "1,0.05,0.25,95,0.1,99,1.0,100\n"
                "2,0.05,0.125,97,0.05,100,1.0,100\n");
  write_metrics(sweep / "lr=0.1,seed=1", "1,0.1,1,80,0.4,90,1.0,100\n");
  fs::create_directory_symlink("../run-a", sweep / "lr=0.1,seed=2");
}

class Serve : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    s_data = std::make_unique<TempDir>();
    write_test_split(s_data->path(), small_test_set());
    s_runs = std::make_unique<TempDir>();
    Checkpoint run_b = seeded_checkpoint(5);
    run_b.test_accuracy = 0.5;  // as the trainer records it: the list gives it in %
    write_run(*s_runs / "run-b", run_b);
    // runs/latest, as `train` leaves it, and a link to a run outside the runs folder.
    fs::create_directory_symlink("run-b", *s_runs / "latest");
    write_metrics(s_data->path() / "elsewhere", "1,0.05,0.5,90,0.3,97,1.0,100\n");
    fs::create_directory_symlink(s_data->path() / "elsewhere", *s_runs / "elsewhere");
    write_run(*s_runs / "run-c", seeded_checkpoint(6), std::chrono::seconds(10));
    fs::create_directories(*s_runs / "run-a");
    std::ofstream(*s_runs / "run-a" / "metrics.csv")
        << "epoch,lr,train_loss,train_acc,test_loss,test_acc,seconds,images_per_s\n"
           "1,0.05,1.5,60.00,,,1.0,100\n"
           "2,0.04,0.5,90.00,0.25,95.50,1.0,100\n";
    std::ofstream(*s_runs / "run-a" / "config.toml") << "[train]\nepochs = 2\n";
    fs::create_directories(*s_runs / "not-a-run");  // no run files: not listed
    write_sweep(*s_runs / "sweep-a");
    fs::create_directories(*s_runs / "sweep-bad");
    std::ofstream(*s_runs / "sweep-bad" / "sweep.toml") << "[sweep]\nlr = 0.1\n";
    s_server = std::make_unique<RunningServer>(seeded_checkpoint(), settings(s_data->path()));
  }
  static void TearDownTestSuite() {
    s_server.reset();
    s_runs.reset();
    s_data.reset();
  }

  static serve::ServeSettings settings(const fs::path& data) {
    serve::ServeSettings s;
    s.port = 0;
    s.runs = s_runs->path();
    s.data = data;
    return s;
  }
  static testing::HttpResult get(const std::string& target,
                                 const testing::RequestHeaders& headers = {}) {
    return s_server->get(target, headers);
  }
  static testing::HttpResult post(const std::string& target, const std::string& body,
                                  const std::string& content_type,
                                  const testing::RequestHeaders& headers = {}) {
    return s_server->post(target, body, content_type, headers);
  }
  static void expect_still_serving() { serve_test::expect_still_serving(*s_server); }

  static std::unique_ptr<TempDir> s_runs, s_data;
  static std::unique_ptr<RunningServer> s_server;
};

std::unique_ptr<TempDir> Serve::s_runs, Serve::s_data;
std::unique_ptr<RunningServer> Serve::s_server;

TEST_F(Serve, ThePageAndItsAssetsAreTheEmbeddedFiles) {
  for (const serve::WebAsset& asset : serve::web_assets()) {
    const auto result = get(asset.path);
    ASSERT_TRUE(result) << asset.path;
    EXPECT_EQ(result.status, 200) << asset.path;
    EXPECT_EQ(result.header("Content-Type"), asset.content_type);
    EXPECT_EQ(result.body, std::string(reinterpret_cast<const char*>(asset.bytes), asset.size));
  }
  const auto index = get("/");
  ASSERT_TRUE(index);
  EXPECT_EQ(index.header("Content-Type"), "text/html; charset=utf-8");
  EXPECT_TRUE(testing::mentions(index.body, "app.js"));
  // The page's icon, named in its head, and at the address browsers ask for without being told.
  EXPECT_TRUE(testing::mentions(index.body,
                                "<link rel=\"icon\" type=\"image/svg+xml\" href=\"favicon.svg\">"));
  const auto icon = get("/favicon.ico");
  ASSERT_TRUE(icon);
  EXPECT_EQ(icon.status, 200);
  EXPECT_EQ(icon.header("Content-Type"), "image/svg+xml");
  EXPECT_TRUE(testing::mentions(icon.body, "<svg")) << icon.body;
}

TEST_F(Serve, ModelGivesTheSettingsAndTheC1AndC3Filters) {
  const json model = json_of(get("/api/model"), 200);
  EXPECT_EQ(model["checkpoint"], "seeded.safetensors");
  EXPECT_EQ(model["net"]["c3_table"], "lecun");
  EXPECT_EQ(model["epoch"], 1);
  EXPECT_EQ(model["c1"]["shape"], json({6, 1, 5, 5}));
  EXPECT_EQ(model["c1"]["values"].size(), 150u);
  EXPECT_EQ(model["c3"]["shape"], json({16, 6, 5, 5}));
  EXPECT_EQ(model["c3"]["values"].size(), 2400u);
  // LeCun's table: C3 map 0 reads S2 maps 0, 1, 2; map 15 reads all six.
  EXPECT_EQ(model["c3"]["table"][0], json({true, true, true, false, false, false}));
  EXPECT_EQ(model["c3"]["table"][15], json({true, true, true, true, true, true}));
  EXPECT_EQ(model["layers"].size(), 7u);
  // The page names output k by the checkpoint's data set: MNIST's digits for this one.
  EXPECT_EQ(model["dataset"], "mnist");
  EXPECT_EQ(model["classes"], json(mnist_dataset().class_names));
}

TEST_F(Serve, ClassifyAnswersEveryLayerOfTheDrawing) {
  const json answer = json_of(post("/api/classify", bar_drawing().dump(), "application/json"), 200);
  const std::vector<std::pair<std::string, std::vector<int>>> expected{
      {"c1", {6, 28, 28}}, {"s2", {6, 14, 14}}, {"c3", {16, 10, 10}},  {"s4", {16, 5, 5}},
      {"c5", {120, 1, 1}}, {"f6", {84, 1, 1}},  {"output", {10, 1, 1}}};
  ASSERT_EQ(answer["layers"].size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const json& layer = answer["layers"][i];
    EXPECT_EQ(layer["name"], expected[i].first);
    EXPECT_EQ(layer["shape"], json(expected[i].second));
    EXPECT_EQ(layer["values"].size(),
              std::size_t(expected[i].second[0] * expected[i].second[1] * expected[i].second[2]));
  }
  EXPECT_EQ(answer["input28"].size(), 784u);
  EXPECT_EQ(answer["input32"].size(), 1024u);
  double sum = 0;
  for (double p : answer["probabilities"]) sum += p;
  EXPECT_NEAR(sum, 1.0, 1e-5);  // ten float32 probabilities: a few ulps each
  const auto& p = answer["probabilities"];
  EXPECT_EQ(answer["prediction"], int(std::max_element(p.begin(), p.end(),
                                                       [](const json& a, const json& b) {
                                                         return a.get<double>() < b.get<double>();
                                                       }) -
                                      p.begin()));
}

// The same file through `classify`'s code path and through the server: the same digit, the same
// probabilities (the same engine computes both, so exactly).
TEST_F(Serve, AnImageFileIsReadAsClassifyReadsIt) {
  const fs::path file = testing::source_dir() / "tests/data/five_clean.png";
  const json answer = json_of(post("/api/classify", file_bytes(file), "image/png"), 200);
  const auto engine = engine_for(seeded_checkpoint(), Device::cpu);
  const Classification reference = classify_images(*engine, {file.string()}, {})[0];
  ASSERT_TRUE(reference.error.empty()) << reference.error;
  for (int k = 0; k < 10; ++k)
    EXPECT_EQ(answer["probabilities"][k].get<float>(), reference.probabilities[k]) << k;
  const Digit28 digit = preprocess_digit(load_gray_image(file), InvertMode::automatic, "five");
  EXPECT_EQ(answer["input28"], json(digit.pixels));
}

TEST_F(Serve, RunsListsRunFoldersAndGivesTheirMetrics) {
  const json runs = json_of(get("/api/runs"), 200);
  // run-a, run-b and run-c of the evaluation tests, and the sweeps of the sweep tests.
  ASSERT_EQ(runs["runs"].size(), 5u);
  EXPECT_EQ(runs["runs"][0]["name"], "run-a");
  EXPECT_EQ(runs["runs"][0]["sweep"], false);
  EXPECT_EQ(runs["runs"][0]["epochs"], 2);
  EXPECT_EQ(runs["runs"][0]["test_accuracy"], 95.5);
  EXPECT_EQ(runs["runs"][0]["test_accuracy_epoch"], 2);
  EXPECT_TRUE(runs["runs"][0]["checkpoint"].is_null());  // metrics only: nothing to evaluate
  // run-b's evaluation reads its best.safetensors: the list names it, with the epoch and the
  // test accuracy recorded in it (and no held-out images: a checkpoint made as before them).
  EXPECT_EQ(runs["runs"][1]["name"], "run-b");
  EXPECT_EQ(runs["runs"][1]["checkpoint"],
            json({{"file", "best.safetensors"},
                  {"epoch", 1},
                  {"test_accuracy", 50.0},
                  {"validation_accuracy", nullptr},
                  {"validation_images", 0}}));
  // runs/latest is a pointer to run-b, not a sixth run; the link out of the folder is not shown.
  EXPECT_EQ(runs["links"], json({{"latest", "run-b"}}));
  EXPECT_EQ(json_of(get("/api/runs/latest"), 200)["checkpoint"]["file"], "best.safetensors");
  json_of(get("/api/runs/elsewhere"), 404);
  const json run = json_of(get("/api/runs/run-a"), 200);
  EXPECT_EQ(run["config_toml"], "[train]\nepochs = 2\n");
  ASSERT_EQ(run["metrics"].size(), 2u);
  EXPECT_TRUE(run["metrics"][0]["test_accuracy"].is_null());
  EXPECT_EQ(run["metrics"][1]["train_loss"], 0.5);
  // A metrics.csv without the columns of --evaluate-training-set: the training set's are null.
  EXPECT_TRUE(run["metrics"][1]["train_eval_accuracy"].is_null());
  EXPECT_TRUE(run["metrics"][1]["validation_accuracy"].is_null()) << "run-a held none out";
  EXPECT_TRUE(run["metrics"][1]["train_eval_loss"].is_null());
  EXPECT_TRUE(run["checkpoint"].is_null());  // no checkpoint yet: nothing to evaluate
  const json run_b = json_of(get("/api/runs/run-b"), 200);
  EXPECT_EQ(run_b["checkpoint"]["file"], "best.safetensors");
  EXPECT_FALSE(run_b["checkpoint"]["stamp"].get<std::string>().empty());
  json_of(get("/api/runs/no-such-run"), 404);
  json_of(get("/api/runs/not-a-run"), 404);
}

TEST_F(Serve, RunsListsSweepFoldersWithTheirModels) {
  const json runs = json_of(get("/api/runs"), 200)["runs"];
  ASSERT_EQ(runs.size(), 5u);
  EXPECT_EQ(runs[3]["name"], "sweep-a");
  EXPECT_EQ(runs[3]["sweep"], true);
  EXPECT_EQ(runs[3]["models"], 4);
  EXPECT_EQ(runs[3]["finished"], 2);  // both seeds of lr=0.05
  // A damaged sweep folder is listed with the reason, the others still shown.
  EXPECT_EQ(runs[4]["name"], "sweep-bad");
  EXPECT_TRUE(testing::mentions(runs[4]["error"].get<std::string>(), "lr = 0.1")) << runs[4];
}

// Per setting: its models' folder names, summary.json's entry once a model has finished, and per
// epoch the models there and their mean, min and max. The values are sums and halves of small
// binary fractions: exact in double, so compared exactly.
TEST_F(Serve, ASweepGivesEachSettingsSpreadPerEpochAndItsSummary) {
  const json sweep = json_of(get("/api/runs/sweep-a"), 200);
  EXPECT_EQ(sweep["sweep"], true);
  EXPECT_EQ(sweep["models"], 4);
  EXPECT_TRUE(
      testing::mentions(sweep["sweep_toml"].get<std::string>(), "lr = [\"0.05\", \"0.1\"]"));
  const json& settings = sweep["settings"];
  ASSERT_EQ(settings.size(), 2u);
  const json& slow = settings[0];
  EXPECT_EQ(slow["setting"], "lr=0.05");
  EXPECT_EQ(slow["runs"], json({"lr=0.05,seed=1", "lr=0.05,seed=2"}));
  EXPECT_EQ(slow["test_accuracy"],
            json::parse(R"([{"epoch": 1, "models": 2, "mean": 98.0, "min": 97.0, "max": 99.0},
                           {"epoch": 2, "models": 2, "mean": 99.0, "min": 98.0, "max": 100.0}])"));
  EXPECT_EQ(slow["train_loss"][1],
            json::parse(R"({"epoch": 2, "models": 2, "mean": 0.1875, "min": 0.125, "max": 0.25})"));
  EXPECT_EQ(slow["summary"]["models"], 2);
  EXPECT_EQ(slow["summary"]["final_test_accuracy"]["mean"], 99.0);
  EXPECT_EQ(slow["summary"]["final_test_accuracy"]["min"], 98.0);
  EXPECT_EQ(slow["summary"]["reached_99"], 1);  // seed 2 at its first epoch; seed 1 never
  // lr=0.1: seed 1 after its first epoch; seed 2's folder is a link out of the sweep, not read
  // (run-a's rows would add an epoch 2 and a second model).
  const json& fast = settings[1];
  EXPECT_EQ(fast["setting"], "lr=0.1");
  EXPECT_EQ(fast["runs"], json({"lr=0.1,seed=1"}));
  EXPECT_TRUE(fast["summary"].is_null());  // nothing finished yet
  EXPECT_EQ(fast["test_accuracy"],
            json::parse(R"([{"epoch": 1, "models": 1, "mean": 90.0, "min": 90.0, "max": 90.0}])"));
  // A sweep folder has no checkpoint of its own; a damaged one says what is wrong with it.
  json_of(get("/api/runs/sweep-a/evaluation"), 404);
  const json bad = json_of(get("/api/runs/sweep-bad"), 500);
  EXPECT_TRUE(testing::mentions(bad["error"].get<std::string>(), "sweep.toml")) << bad;
  EXPECT_FALSE(testing::mentions(bad["error"].get<std::string>(), "internal")) << bad;
}

// What the answer calls the classes: `dataset`'s names, noun and title (api.hpp's dataset_json).
void expect_classes_of(const json& answer, const DatasetDescription& dataset) {
  EXPECT_EQ(answer["dataset"], dataset.name);
  EXPECT_EQ(answer["dataset_title"], dataset.title);
  EXPECT_EQ(answer["class_noun"], dataset.class_noun);
  EXPECT_EQ(answer["classes"], json(dataset.class_names));
}

// What the route answers for `checkpoint` is what `evaluate` and a direct evaluation say: the
// engine's confusion matrix over every test image, and the misreads the engine's probabilities
// give, the most confident kMaxMisreadsSent of them in order, each with its own test image.
void expect_evaluation_of(const json& answer, const Checkpoint& checkpoint, const Dataset& test) {
  const Evaluation reference = engine_for(checkpoint, Device::cpu)->evaluate(test);
  EXPECT_EQ(answer["images"], test.count);
  EXPECT_EQ(answer["correct"], reference.correct);
  EXPECT_EQ(answer["confusion"], json(reference.confusion));
  std::int64_t counted = 0, diagonal = 0;
  for (int t = 0; t < 10; ++t)
    for (int p = 0; p < 10; ++p) {
      counted += answer["confusion"][t][p].get<std::int64_t>();
      if (t == p) diagonal += answer["confusion"][t][p].get<std::int64_t>();
    }
  EXPECT_EQ(counted, test.count);
  EXPECT_EQ(diagonal, reference.correct);

  const std::vector<Misread> expected = expected_misreads(checkpoint, test);
  EXPECT_EQ(answer["misreads_total"], expected.size());
  EXPECT_EQ(answer["misreads_total"], test.count - reference.correct);
  EXPECT_EQ(answer["misreads_cap"], serve::kMaxMisreadsSent);
  const json& misreads = answer["misreads"];
  ASSERT_EQ(misreads.size(), std::min<std::size_t>(expected.size(), serve::kMaxMisreadsSent));
  for (std::size_t i = 0; i < misreads.size(); ++i) {
    const json& m = misreads[i];
    const int index = m["index"];
    EXPECT_EQ(index, expected[i].index) << i;
    EXPECT_EQ(m["truth"], expected[i].truth) << i;
    EXPECT_EQ(m["predicted"], expected[i].predicted) << i;
    EXPECT_EQ(m["probability"].get<float>(), expected[i].probability) << i;  // the same engine
    const auto first = test.images.begin() + std::ptrdiff_t(std::size_t(index) * kImageBytes);
    EXPECT_EQ(from_base64(m["pixels"]),
              std::vector<std::uint8_t>(first, first + std::ptrdiff_t(kImageBytes)))
        << i;
  }
}

TEST_F(Serve, EvaluationGivesTheConfusionMatrixAndTheMostConfidentMisreads) {
  const json answer = json_of(get("/api/runs/run-b/evaluation"), 200);
  EXPECT_EQ(answer["checkpoint"], "best.safetensors");
  expect_classes_of(answer, mnist_dataset());
  EXPECT_EQ(answer["epoch"], 1);
  const Dataset test = small_test_set();
  expect_evaluation_of(answer, seeded_checkpoint(5), test);
  // The set is built so that the cap and the ties are both exercised: more misreads than are
  // sent, and equal probabilities (a repeated image) among those sent, in test-index order.
  EXPECT_GT(answer["misreads_total"].get<int>(), serve::kMaxMisreadsSent);
  int ties = 0;
  for (std::size_t i = 1; i < answer["misreads"].size(); ++i) {
    const json &a = answer["misreads"][i - 1], &b = answer["misreads"][i];
    EXPECT_GE(a["probability"].get<double>(), b["probability"].get<double>()) << i;
    if (a["probability"] == b["probability"]) {
      ++ties;
      EXPECT_LT(a["index"].get<int>(), b["index"].get<int>()) << i;
    }
  }
  EXPECT_GT(ties, 0);
}

// A run that trains on gets a new best.safetensors: the next request evaluates that one.
TEST_F(Serve, EvaluationFollowsANewCheckpoint) {
  const Dataset test = small_test_set();
  const json before = json_of(get("/api/runs/run-c/evaluation"), 200);
  expect_evaluation_of(before, seeded_checkpoint(6), test);
  Checkpoint next = seeded_checkpoint(7);
  next.position.epoch = 2;
  write_run(*s_runs / "run-c", next);
  const json run = json_of(get("/api/runs/run-c"), 200);
  const json after = json_of(get("/api/runs/run-c/evaluation"), 200);
  EXPECT_NE(after["stamp"], before["stamp"]);
  EXPECT_EQ(after["stamp"], run["checkpoint"]["stamp"]);  // what the page compares
  EXPECT_EQ(after["epoch"], 2);
  expect_evaluation_of(after, next, test);
}

TEST_F(Serve, EvaluationRefusesBadNamesAndRunsWithoutACheckpoint) {
  for (const char* path : {"/api/runs/..%2f..%2fetc/evaluation", "/api/runs/%2e%2e/evaluation",
                           "/api/runs/no-such-run/evaluation", "/api/runs/not-a-run/evaluation"}) {
    const auto result = get(path);
    ASSERT_TRUE(result) << path;
    EXPECT_GE(result.status, 400) << path;
    EXPECT_LT(result.status, 500) << path;
    EXPECT_TRUE(json::parse(result.body, nullptr, false).contains("error")) << path;
  }
  const json answer = json_of(get("/api/runs/run-a/evaluation"), 404);
  EXPECT_TRUE(testing::mentions(answer["error"], "no checkpoint yet")) << answer;
  expect_still_serving();
}

// Without the test set the route says what is missing and how to get it; the rest of the server
// goes on, and once the files are there the next request evaluates.
TEST_F(Serve, EvaluationWithoutTheTestSetSaysHowToGetIt) {
  TempDir data;
  const RunningServer server(seeded_checkpoint(), settings(data / "mnist"));
  const json answer = json_of(server.get("/api/runs/run-b/evaluation"), 503);
  for (const char* hint : {"MNIST", "scripts/fetch_mnist.sh", "--data"})
    EXPECT_TRUE(testing::mentions(answer["error"], hint)) << answer;
  json_of(server.get("/api/runs"), 200);
  write_test_split(data / "mnist", small_test_set());
  json_of(server.get("/api/runs/run-b/evaluation"), 200);
}

// A data set's first `count` images: a test set told apart from the one it is cut from by its size.
Dataset first_images(const Dataset& set, int count) {
  Dataset first;
  first.count = count;
  first.images.assign(set.images.begin(),
                      set.images.begin() + std::ptrdiff_t(std::size_t(count) * kImageBytes));
  first.labels.assign(set.labels.begin(), set.labels.begin() + count);
  return first;
}

Checkpoint fashion_checkpoint() {
  Checkpoint fashion = seeded_checkpoint(5);
  fashion.dataset = "fashion-mnist";
  return fashion;
}

// A runs folder with one Fashion-MNIST run ("fashion") and one MNIST run ("mnist").
void write_fashion_and_mnist_runs(const fs::path& runs) {
  write_run(runs / "fashion", fashion_checkpoint());
  write_run(runs / "mnist", seeded_checkpoint(5));
}

// A Fashion-MNIST run is scored on Fashion-MNIST's test set, read where `evaluate` reads it
// without --data ($LENET5_DATA here; serve's --data holds the MNIST runs' made-up test set, which
// no checksum names), and its answer names Fashion-MNIST's classes. An MNIST run beside it is
// scored on the --data folder's test set, in digits, as before.
TEST_F(Serve, AFashionRunIsEvaluatedOnItsOwnTestSetAndNamedInItsClasses) {
  TempDir runs, fashion_data;
  write_fashion_and_mnist_runs(runs.path());
  const Dataset fashion_test = first_images(small_test_set(), 120);
  write_test_split(fashion_data.path(), fashion_test);
  const testing::DataEnv env(fashion_data.path().c_str());
  serve::ServeSettings with_both = settings(s_data->path());
  with_both.runs = runs.path();
  const RunningServer server(seeded_checkpoint(), with_both);

  const json fashion = json_of(server.get("/api/runs/fashion/evaluation"), 200);
  expect_classes_of(fashion, find_dataset("fashion-mnist"));
  expect_evaluation_of(fashion, fashion_checkpoint(), fashion_test);

  const json mnist = json_of(server.get("/api/runs/mnist/evaluation"), 200);
  expect_classes_of(mnist, mnist_dataset());
  expect_evaluation_of(mnist, seeded_checkpoint(5), small_test_set());
}

// Without Fashion-MNIST's test set, a Fashion run's answer says which data set is missing, where
// it was looked for and how to get it; MNIST runs go on, and once the files are there the next
// request evaluates.
TEST_F(Serve, AFashionRunWithoutItsTestSetSaysHowToGetIt) {
  TempDir runs, scratch;
  write_fashion_and_mnist_runs(runs.path());
  const fs::path fashion_data = scratch / "fashion-mnist";
  const testing::DataEnv env(fashion_data.c_str());
  serve::RunEvaluations evaluations(s_data->path());
  try {
    evaluations.answer(runs / "fashion");
    ADD_FAILURE() << "a Fashion-MNIST run was evaluated without its test set";
  } catch (const serve::BadRequest& e) {
    EXPECT_EQ(e.status(), 503);
    for (const std::string hint :
         {std::string("Fashion-MNIST not found in ") + fashion_data.string(),
          std::string("scripts/fetch_mnist.sh --dataset fashion-mnist")})
      EXPECT_TRUE(testing::mentions(e.what(), hint)) << e.what();
  }
  EXPECT_EQ(json::parse(*evaluations.answer(runs / "mnist"))["dataset"], "mnist");
  write_test_split(fashion_data, first_images(small_test_set(), 120));
  EXPECT_EQ(json::parse(*evaluations.answer(runs / "fashion"))["images"], 120);
}

// Each data set's test set is looked for on its own: without the --data folder's (MNIST's) test
// set, MNIST runs are answered 503 and Fashion-MNIST runs are still evaluated.
TEST_F(Serve, EachDataSetsTestSetIsLookedForOnItsOwn) {
  TempDir runs, scratch;
  write_fashion_and_mnist_runs(runs.path());
  write_test_split(scratch / "fashion-mnist", first_images(small_test_set(), 120));
  const testing::DataEnv env((scratch / "fashion-mnist").c_str());
  serve::RunEvaluations evaluations(scratch / "mnist");
  EXPECT_EQ(json::parse(*evaluations.answer(runs / "fashion"))["images"], 120);
  try {
    evaluations.answer(runs / "mnist");
    ADD_FAILURE() << "an MNIST run was evaluated without the MNIST test set";
  } catch (const serve::BadRequest& e) {
    EXPECT_EQ(e.status(), 503);
    EXPECT_TRUE(testing::mentions(e.what(), "MNIST not found in " + (scratch / "mnist").string()))
        << e.what();
  }
}

// The real MNIST files are recognised by their checksums: a Fashion run whose folder holds them
// is refused, saying so, rather than scored against digits.
TEST_F(Serve, AFashionRunIsNotScoredOnMnistsFiles) {
  if (!testing::have_mnist()) GTEST_SKIP() << "MNIST is not in " << testing::mnist_dir();
  TempDir runs;
  write_fashion_and_mnist_runs(runs.path());
  const testing::DataEnv env(testing::mnist_dir().c_str());
  serve::RunEvaluations evaluations(s_data->path());
  try {
    evaluations.answer(runs / "fashion");
    ADD_FAILURE() << "a Fashion-MNIST run was evaluated on MNIST";
  } catch (const serve::BadRequest& e) {
    EXPECT_EQ(e.status(), 503);
    EXPECT_TRUE(testing::mentions(e.what(), testing::mnist_dir().string() + " holds MNIST's"))
        << e.what();
    EXPECT_TRUE(testing::mentions(e.what(), "scripts/fetch_mnist.sh --dataset fashion-mnist"))
        << e.what();
  }
  EXPECT_EQ(evaluations.evaluations(), 0);
}

// A --data folder of the real Fashion-MNIST files, recognised by their checksums, serves the
// Fashion-MNIST runs; MNIST runs are then read from where `evaluate` reads MNIST without --data.
TEST_F(Serve, ADataFolderOfFashionMnistsFilesServesTheFashionRuns) {
  const fs::path fashion_dir = testing::source_dir() / "data" / "fashion-mnist";
  if (!fs::exists(fashion_dir / find_dataset("fashion-mnist").test_labels.name))
    GTEST_SKIP() << "Fashion-MNIST is not in " << fashion_dir
                 << " (scripts/fetch_mnist.sh --dataset fashion-mnist)";
  TempDir runs;
  write_fashion_and_mnist_runs(runs.path());
  const testing::DataEnv env(s_data->path().c_str());
  serve::RunEvaluations evaluations(fashion_dir);
  const json fashion = json::parse(*evaluations.answer(runs / "fashion"));
  EXPECT_EQ(fashion["dataset"], "fashion-mnist");
  EXPECT_EQ(fashion["images"], 10000);  // Fashion-MNIST's whole test set
  const json mnist = json::parse(*evaluations.answer(runs / "mnist"));
  EXPECT_EQ(mnist["dataset"], "mnist");
  EXPECT_EQ(mnist["images"], kTestImages);  // the made-up set in $LENET5_DATA
}

// Each checkpoint is evaluated once, however many ask at the same time, until it changes.
TEST_F(Serve, EvaluationsAreCachedPerCheckpointAndSharedByConcurrentRequests) {
  TempDir runs;
  write_run(runs / "run", seeded_checkpoint(5), std::chrono::seconds(10));
  serve::RunEvaluations evaluations(s_data->path());
  std::vector<std::shared_ptr<const std::string>> answers(8);
  std::vector<std::thread> clients;
  for (auto& answer : answers)
    clients.emplace_back([&] { answer = evaluations.answer(runs / "run"); });
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(evaluations.evaluations(), 1);
  for (const auto& answer : answers) EXPECT_EQ(answer, answers[0]);  // the one cached text
  EXPECT_EQ(evaluations.answer(runs / "run"), answers[0]);
  EXPECT_EQ(evaluations.evaluations(), 1);
  write_run(runs / "run", seeded_checkpoint(8));
  EXPECT_NE(*evaluations.answer(runs / "run"), *answers[0]);
  EXPECT_EQ(evaluations.evaluations(), 2);
}

TEST(ServeEvaluation, Base64IsTheStandardAlphabetWithPadding) {
  const std::string text = "Many hands make light work.";
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(text.data());
  EXPECT_EQ(serve::base64(bytes, text.size()), "TWFueSBoYW5kcyBtYWtlIGxpZ2h0IHdvcmsu");
  EXPECT_EQ(serve::base64(bytes, 1), "TQ==");
  EXPECT_EQ(serve::base64(bytes, 2), "TWE=");
  EXPECT_EQ(serve::base64(bytes, 0), "");
}

// A browser asks for brotli or gzip; compressing a 67 KB answer costs more time than sending it
// (server.cpp's kJsonType says how much), so the API's answers go as they are.
TEST_F(Serve, AnswersAreNotCompressedWhenTheBrowserOffersEncodings) {
  const testing::RequestHeaders browser{{"Accept-Encoding", "gzip, deflate, br, zstd"}};
  const auto result = post("/api/classify", bar_drawing().dump(), "application/json", browser);
  const json answer = json_of(result, 200);
  EXPECT_TRUE(answer.contains("layers"));
  json_of(get("/api/runs/run-b/evaluation", browser), 200);
}

TEST_F(Serve, RunNamesMustBeDirectChildren) {
  for (const char* name : {"..", ".", "", "a/b", "/etc", "run-a/../run-a", "sweep-a/lr=0.1,seed=1"})
    for (const auto folder : {serve::run_folder, serve::listed_folder})
      EXPECT_THROW(folder(s_runs->path(), name), serve::BadRequest) << name;
  EXPECT_EQ(serve::listed_folder(s_runs->path(), "sweep-a"), fs::canonical(*s_runs / "sweep-a"));
  EXPECT_THROW(serve::run_folder(s_runs->path(), "sweep-a"), serve::BadRequest);
  EXPECT_EQ(serve::run_folder(s_runs->path(), "run-a"), fs::canonical(*s_runs / "run-a"));
}

TEST_F(Serve, MalformedRequestsGetA4xxAndAnError) {
  const std::string png = file_bytes(testing::source_dir() / "tests/data/five_clean.png");
  EXPECT_TRUE(json_of(post("/api/classify", "{\"pixels\": [1, 2,", "application/json"), 400)
                  .contains("error"));
  json_of(post("/api/classify", "{\"pixels\": [1, 2, 3]}", "application/json"), 422);
  json_of(post("/api/classify", "{\"pixels\": \"x\"}", "application/json"), 400);
  json_of(post("/api/classify", "{\"pixels\": [], \"width\": 99999}", "application/json"), 422);
  json_of(post("/api/classify", "hello", "text/plain"), 415);
  json_of(post("/api/classify", png.substr(0, png.size() / 2), "image/png"), 422);
  json_of(post("/api/classify", "not an image", "image/png"), 422);
  json_of(post("/api/classify?invert=sideways", png, "image/png"), 400);
  json blank = bar_drawing();
  for (auto& v : blank["pixels"]) v = 0;
  json_of(post("/api/classify", blank.dump(), "application/json"), 422);
  expect_still_serving();
}

// A PNG whose header claims 30000x30000 grey pixels (900 MB decoded) in a few bytes: refused
// from the header. stb_image does not check CRCs, so a zero CRC is enough.
TEST_F(Serve, AHugeImageHeaderIsRefusedBeforeDecoding) {
  std::string png("\x89PNG\r\n\x1a\n", 8);
  const auto be32 = [&png](std::uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) png.push_back(char((v >> shift) & 0xff));
  };
  be32(13);
  png += "IHDR";
  be32(30000);
  be32(30000);
  png += std::string("\x08\x00\x00\x00\x00", 5);  // 8-bit grey, no interlace
  be32(0);
  const json answer = json_of(post("/api/classify", png, "image/png"), 422);
  EXPECT_TRUE(testing::mentions(answer["error"], "30000x30000")) << answer;
  expect_still_serving();
}

// An HDR upload whose first run-length scanline ends with the file: stb_image 2.27 looped forever
// on it, holding the worker that read it. It is refused, and the server goes on answering.
TEST_F(Serve, AnHdrCutShortIsRefusedWithoutHoldingAWorker) {
  const std::string hdr =
      file_bytes(testing::source_dir() / "tests/data/fuzz-found/hdr_rle_scanline_cut_short.hdr");
  const json answer = json_of(post("/api/classify", hdr, "image/vnd.radiance"), 422);
  EXPECT_TRUE(testing::mentions(answer["error"], "corrupt HDR: its pixel data is cut short"))
      << answer;
  expect_still_serving();
}

}  // namespace
}  // namespace lenet5
