// The RBF output layer and the MAP criterion of LeCun, Bottou, Bengio, Haffner 1998 (--output
// rbf): the prototypes as entered, the criterion's values, probabilities and predictions, the
// layout and checkpoints of an RBF network, the settings' refusal of the whole-step kernels, and
// a short CPU training run. The gradients are checked by finite differences in
// test_gradient_check.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <vector>

#include "checkpoint_edit.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"
#include "core/rbf_prototypes.hpp"
#include "core/topology.hpp"
#include "cpu/cpu_engine.hpp"
#include "engine/network.hpp"
#include "io/safetensors.hpp"
#include "layers/reference_cpu.hpp"
#include "test_util.hpp"
#include "tiny_mnist.hpp"
#include "train/checkpoint.hpp"
#include "train/evaluate.hpp"
#include "train/settings.hpp"
#include "train/trainer.hpp"

namespace lenet5 {
namespace {

using testing::complaint_without_checksum;
using testing::TempDir;
using testing::Tensors;

// ---- the prototypes

TEST(RbfPrototypes, EachIs84ValuesOfPlusOrMinusOneAsItsBitmapReads) {
  const auto& prototypes = rbf_prototypes();
  ASSERT_EQ(prototypes.size(), std::size_t(kClasses) * 84);
  for (int digit = 0; digit < kClasses; ++digit)
    for (int row = 0; row < kRbfBitmapHeight; ++row) {
      const std::string_view line = rbf_bitmap_row(digit, row);
      ASSERT_EQ(line.size(), std::size_t(kRbfBitmapWidth)) << digit << " row " << row;
      for (int column = 0; column < kRbfBitmapWidth; ++column) {
        const char pixel = line[std::size_t(column)];
        ASSERT_TRUE(pixel == '#' || pixel == '.') << digit << " row " << row;
        EXPECT_EQ(prototypes[std::size_t(digit * 84 + row * 7 + column)],
                  pixel == '#' ? 1.0f : -1.0f);
      }
    }
}

TEST(RbfPrototypes, TheTenAreDistinctAndEachHasInk) {
  const auto& prototypes = rbf_prototypes();
  std::set<std::vector<float>> distinct;
  for (int digit = 0; digit < kClasses; ++digit) {
    const std::vector<float> prototype(prototypes.begin() + digit * 84,
                                       prototypes.begin() + (digit + 1) * 84);
    distinct.insert(prototype);
    const auto ink = std::count(prototype.begin(), prototype.end(), 1.0f);
    EXPECT_GT(ink, 10) << digit;  // a digit's strokes, not an empty or a filled bitmap
    EXPECT_LT(ink, 60) << digit;
  }
  EXPECT_EQ(distinct.size(), std::size_t(kClasses));
}

// ---- the criterion

constexpr int kTen = kClasses;

// Exactly representable distances, so the expected values below are computed the same way.
std::vector<double> some_distances() {
  return {12, 3, 25, 40, 7.5, 60, 9, 33, 18, 50};
}

TEST(MapCriterion, TheLossIsMinusTheLogOfTheLabelsProbability) {
  const std::vector<double> y = some_distances();
  double denominator = std::exp(-kMapRejectionConstant);
  for (double v : y) denominator += std::exp(-v);
  for (std::uint8_t label : {std::uint8_t(1), std::uint8_t(5)}) {
    const LossStats stats =
        map_loss_cpu(y.data(), &label, 1, kTen, (double*)nullptr, (int*)nullptr);
    // E = y_D + log(e^-j + sum e^-y_i), equation (9), computed directly (no overflow here).
    // 1e-12: the log-sum-exp form rounds differently from the direct one, in the last bits of
    // values of order 1-60.
    EXPECT_NEAR(stats.loss_sum, y[label] + std::log(denominator), 1e-12);
    EXPECT_NEAR(stats.loss_sum, -std::log(std::exp(-y[label]) / denominator), 1e-12);
  }
}

TEST(MapCriterion, ProbabilitiesLeaveTheRestToNoneOfThese) {
  const std::vector<double> y = some_distances();
  std::vector<float> p(kTen);
  map_probabilities_cpu(y.data(), 1, kTen, p.data());
  double denominator = std::exp(-kMapRejectionConstant), sum = 0;
  for (double v : y) denominator += std::exp(-v);
  for (int k = 0; k < kTen; ++k) {
    // float's rounding of a value below 1: 1e-7 relative.
    EXPECT_NEAR(p[std::size_t(k)], std::exp(-y[std::size_t(k)]) / denominator, 1e-7);
    sum += p[std::size_t(k)];
  }
  // The nearest distance (3) is well below j = 10, so "none of these" is small but not zero.
  const double none = std::exp(-kMapRejectionConstant) / denominator;
  EXPECT_GT(none, 0.0);
  EXPECT_NEAR(1.0 - sum, none, 1e-6);  // ten float roundings of 1e-7 each, with room
  EXPECT_LT(sum, 1.0);
}

TEST(MapCriterion, PredictsTheNearestPrototypeFirstOnTies) {
  std::vector<float> y = {30, 8, 20, 8, 50, 60, 70, 80, 90, 100};
  std::vector<std::uint8_t> label = {3};
  int predicted = -1;
  const LossStats stats =
      map_loss_cpu(y.data(), label.data(), 1, kTen, (float*)nullptr, &predicted);
  EXPECT_EQ(predicted, 1);  // 1 and 3 tie at 8: the first
  EXPECT_EQ(stats.correct, 0);
  label = {1};
  EXPECT_EQ(map_loss_cpu(y.data(), label.data(), 1, kTen, (float*)nullptr, &predicted).correct, 1);
}

// Far from every prototype (distances in the hundreds, as saturated F6 units give) e^-y
// underflows in double; the log-sum-exp keeps the loss, its gradient and the prediction finite
// and right.
TEST(MapCriterion, StaysFiniteFarFromEveryPrototype) {
  std::vector<float> y = {900, 850, 800, 760, 1000, 990, 980, 970, 960, 950};
  const std::uint8_t label = 3;
  std::vector<float> grad(kTen);
  int predicted = -1;
  const LossStats stats = map_loss_cpu(y.data(), &label, 1, kTen, grad.data(), &predicted);
  EXPECT_EQ(predicted, 3);
  // Every e^-y_i is negligible next to e^-j (e^-740 against 1 once scaled by e^j, below double's
  // epsilon), so E = y_D + log(e^-j) = 760 - 10 exactly.
  EXPECT_EQ(stats.loss_sum, 750.0);
  for (int k = 0; k < kTen; ++k) {
    EXPECT_TRUE(std::isfinite(grad[std::size_t(k)]));
    // dE/dy_D = 1 (pull the label's prototype closer), the others' e^-y_i/... round to 0.
    EXPECT_EQ(grad[std::size_t(k)], k == label ? 1.0f : 0.0f) << k;
  }
  std::vector<float> p(kTen);
  map_probabilities_cpu(y.data(), 1, kTen, p.data());
  for (float v : p) EXPECT_EQ(v, 0.0f);  // all "none of these": only the distances tell the class
}

// ---- the network

NetConfig rbf_config(GpuKernels kernels = GpuKernels::fast) {
  NetConfig config;
  config.activation = Activation::scaled_tanh;
  config.output = OutputLayer::rbf;
  config.kernels = kernels;
  return config;
}

TEST(RbfNetwork, HasNoOutputWeightOrBiasAndOutputsTheDistances) {
  const ParamLayout layout = lenet5_layout(rbf_config());
  EXPECT_EQ(layout.tensors.back().name, "f6.bias");
  EXPECT_THROW(layout.find("output.weight"), Error);
  EXPECT_EQ(layout.trainable_count, 61706u - 850u);  // the book's less 10 x 84 + 10
  EXPECT_EQ(lenet5_topology(rbf_config()).back().kind, LayerKind::rbf);

  // The book's CPU reference and the fast CPU layers: each output is sum (f6_j - w_ij)^2.
  for (GpuKernels kernels : {GpuKernels::book, GpuKernels::fast}) {
    Network<double> network(rbf_config(kernels), Device::cpu, 2);
    network.initialise(3);
    std::vector<double> input(2 * kInputFloats);
    for (std::size_t i = 0; i < input.size(); ++i) input[i] = std::sin(double(i));
    network.forward(input.data(), 2);
    const std::vector<LayerOutput> outputs = network.layer_outputs(1);
    const std::vector<float>& f6 = outputs[outputs.size() - 2].values;
    const double* y = network.logits() + kClasses;
    for (int i = 0; i < kClasses; ++i) {
      double expected = 0;
      for (int j = 0; j < 84; ++j) {
        const double d = double(f6[std::size_t(j)]) - rbf_prototypes()[std::size_t(i * 84 + j)];
        expected += d * d;
      }
      // f6 came back rounded to float: each |f6_j| <= 1.72 is off by at most 1.72 * 2^-24, which
      // moves (f6_j - w_ij)^2 by at most 2 * 2.72 times that; 84 terms: 4.7e-5 at worst.
      EXPECT_NEAR(y[i], expected, 5e-5) << to_string(kernels) << " output " << i;
    }
  }
}

// ---- settings

TEST(RbfSettings, WholeStepIsRefusedNamingTheSettingAndTheWayOut) {
  TrainSettings settings;
  settings.output = "rbf";
  settings.kernels = "whole-step";
  try {
    settings.validate();
    FAIL() << "--output rbf with --kernels whole-step was accepted";
  } catch (const UsageError& e) {
    EXPECT_TRUE(testing::mentions(e.what(), "--output rbf")) << e.what();
    EXPECT_TRUE(testing::mentions(e.what(), "--kernels fast")) << e.what();
  }
  for (const char* kernels : {"book", "fast"}) {
    settings.kernels = kernels;
    EXPECT_EQ(settings.net_config().output, OutputLayer::rbf) << kernels;
  }
  EXPECT_TRUE(testing::mentions(train_setting_declaration("--output").help_text(), "LeCun"));
}

// ---- checkpoints

Checkpoint checkpoint_of(const NetConfig& net) {
  Checkpoint c;
  c.net = net;
  const ParamLayout layout = lenet5_layout(net);
  c.parameters.resize(layout.buffer_floats);
  initialise_parameters(layout, net, 5, c.parameters.data());
  // Half the weights: zero in the layout's padding, which a checkpoint does not store.
  c.optimizer_state.push_back({kMomentumState, {}});
  for (float p : c.parameters) c.optimizer_state.back().values.push_back(0.5f * p);
  c.config_toml = "[train]\n";
  return c;
}

// The version a build that predates the RBF output checks with != (kCheckpointVersion was 1 and
// was the only one it read).
constexpr int kVersionBeforeRbf = 1;

TEST(RbfCheckpoint, IsVersionTwoWithThePrototypesAndNoOutputWeights) {
  TempDir dir;
  const Checkpoint saved = checkpoint_of(rbf_config());
  save_checkpoint(dir / "rbf.safetensors", saved);
  const SafetensorsFile file = read_safetensors(dir / "rbf.safetensors");
  EXPECT_EQ(file.metadata.at("format_version"), "2");
  EXPECT_NE(std::stoi(file.metadata.at("format_version")), kVersionBeforeRbf)
      << "an older build would misread the file instead of refusing it";
  EXPECT_EQ(file.metadata.at("output"), "rbf");
  EXPECT_EQ(file.tensors.count("output.weight"), 0u);
  EXPECT_EQ(file.tensors.count("output.bias"), 0u);
  EXPECT_EQ(file.tensors.count("output.prototypes.momentum"), 0u);  // not trained: no state
  const Tensor32& prototypes = file.tensors.at("output.prototypes");
  EXPECT_EQ(prototypes.shape, (std::vector<std::int64_t>{10, 84}));
  EXPECT_TRUE(
      std::equal(prototypes.values.begin(), prototypes.values.end(), rbf_prototypes().begin()));

  const Checkpoint loaded = load_checkpoint(dir / "rbf.safetensors");
  EXPECT_EQ(loaded.net.output, OutputLayer::rbf);
  EXPECT_EQ(loaded.net.activation, Activation::scaled_tanh);
  EXPECT_EQ(loaded.parameters, saved.parameters);
  EXPECT_TRUE(loaded.optimizer_state == saved.optimizer_state);
}

TEST(RbfCheckpoint, SoftmaxCheckpointsStayVersionOneWithoutAnOutputKey) {
  TempDir dir;
  save_checkpoint(dir / "softmax.safetensors", checkpoint_of(NetConfig{}));
  const SafetensorsFile file = read_safetensors(dir / "softmax.safetensors");
  EXPECT_EQ(file.metadata.at("format_version"), "1");
  EXPECT_EQ(file.metadata.count("output"), 0u);
  EXPECT_EQ(file.tensors.count("output.prototypes"), 0u);
  EXPECT_EQ(load_checkpoint(dir / "softmax.safetensors").net.output, OutputLayer::softmax);
}

TEST(RbfCheckpoint, RefusesInconsistentFiles) {
  TempDir dir;
  save_checkpoint(dir / "rbf.safetensors", checkpoint_of(rbf_config()));
  const SafetensorsFile rbf = read_safetensors(dir / "rbf.safetensors");

  EXPECT_EQ(complaint_without_checksum(dir, rbf, [](Tensors&, Metadata&) {}), "");
  const std::string old_version = complaint_without_checksum(
      dir, rbf, [](Tensors&, Metadata& m) { m["format_version"] = "1"; });
  EXPECT_TRUE(testing::mentions(old_version, "format version 1 with the output layer rbf"))
      << old_version;
  const std::string missing = complaint_without_checksum(
      dir, rbf, [](Tensors& t, Metadata&) { t.erase("output.prototypes"); });
  EXPECT_TRUE(testing::mentions(missing, "'output.prototypes' (the RBF prototypes) is missing"))
      << missing;
  const std::string changed = complaint_without_checksum(
      dir, rbf, [](Tensors& t, Metadata&) { t["output.prototypes"].values[17] *= -1.0f; });
  EXPECT_TRUE(testing::mentions(changed, "differs from this lenet5's RBF prototypes")) << changed;
  const std::string unknown =
      complaint_without_checksum(dir, rbf, [](Tensors&, Metadata& m) { m["output"] = "svm"; });
  EXPECT_TRUE(testing::mentions(unknown, "unknown output layer 'svm'")) << unknown;

  // A softmax file claiming version 2, or carrying prototypes, is not what this program writes.
  save_checkpoint(dir / "softmax.safetensors", checkpoint_of(NetConfig{}));
  const SafetensorsFile softmax = read_safetensors(dir / "softmax.safetensors");
  EXPECT_TRUE(
      testing::mentions(complaint_without_checksum(
                            dir, softmax, [](Tensors&, Metadata& m) { m["format_version"] = "2"; }),
                        "format version 2 with the output layer softmax"));
  EXPECT_TRUE(testing::mentions(
      complaint_without_checksum(dir, softmax,
                                 [&](Tensors& t, Metadata&) {
                                   t["output.prototypes"] = rbf.tensors.at("output.prototypes");
                                 }),
      "unknown extra tensors ('output.prototypes')"));
}

// ---- training and classifying on the CPU

// MNIST's first 2,000 training images (1,000 trained on, 1,000 held out) and first 1,000 test
// images, in dir/data: an epoch evaluates 2,000 images instead of the full sets' 15,000.
constexpr int kRbfTrained = 1000, kRbfHeldOut = 1000, kRbfTest = 1000;
Mnist write_rbf_data(const TempDir& dir) {
  return testing::write_tiny_mnist(dir / "data", kRbfTrained + kRbfHeldOut, kRbfTest);
}

TrainSettings rbf_run(const TempDir& dir, const std::string& name) {
  TrainSettings s;
  s.data_dir = (dir / "data").string();
  s.validation = kRbfHeldOut;
  s.epochs = 3;
  s.batch_size = 32;
  // The criterion's gradient is larger than softmax's (distances, not logits): with momentum 0.9
  // this run, scored on all of MNIST's test set, measured 81.7 % at 0.002 but 50.1 % at 0.01, and
  // 0.05 saturates the units (9.8 %).
  s.lr = 0.002;
  s.momentum = 0.9;
  s.device = "cpu";
  s.threads = 2;
  s.augment = "none";
  s.activation = "scaled-tanh";
  s.subsampling = "average";
  s.output = "rbf";
  s.kernels = "fast";
  s.out = (dir / name).string();
  return s;
}

TEST(RbfTraining, ShortCpuRunLowersTheLossDeterministically) {
  LENET5_REQUIRE_MNIST();
  TempDir dir;
  const Mnist data = write_rbf_data(dir);
  const TrainOutcome first = train(rbf_run(dir, "a"), "[train]\n");
  ASSERT_EQ(first.epochs.size(), 3u);
  for (std::size_t e = 1; e < first.epochs.size(); ++e)
    EXPECT_LT(first.epochs[e].train_loss, first.epochs[e - 1].train_loss) << "epoch " << e + 1;
  // Chance is 10 %; three passes over 1,000 images put the nearest prototype right on 80.8 % of
  // the held-out images. 50 % catches a wrong sign, a broken layer or a prototype/label mix-up.
  EXPECT_GT(first.best_validation_accuracy, 0.5);

  train(rbf_run(dir, "b"), "[train]\n");
  EXPECT_EQ(testing::read_text(dir / "a" / "last.safetensors"),
            testing::read_text(dir / "b" / "last.safetensors"));

  // evaluate and classify through the checkpoint, as the commands do.
  const Checkpoint checkpoint = load_checkpoint(dir / "a" / "best.safetensors");
  EXPECT_EQ(checkpoint.net.output, OutputLayer::rbf);
  const auto engine = engine_for(checkpoint, Device::cpu);
  const Evaluation evaluation = engine->evaluate(data.test);
  EXPECT_EQ(evaluation.output, OutputLayer::rbf);
  EXPECT_DOUBLE_EQ(evaluation.accuracy(), checkpoint.test_accuracy);
  EXPECT_TRUE(testing::mentions(format_evaluation(evaluation, mnist_dataset()), "MAP criterion"));

  std::vector<std::int32_t> predicted;
  const std::vector<float> p = engine->classify(data.test.images.data(), 100, predicted);
  ASSERT_EQ(predicted.size(), 100u);
  for (int i = 0; i < 100; ++i) {
    const float* row = p.data() + i * kClasses;
    float sum = 0;
    for (int k = 0; k < kClasses; ++k) sum += row[k];
    EXPECT_LE(sum, 1.0f + 1e-6f) << i;  // float rounding of ten terms
    EXPECT_EQ(row[predicted[std::size_t(i)]], *std::max_element(row, row + kClasses)) << i;
  }
}

TEST(RbfClassify, ReportsTheNearestPrototypeAndNoneOfThese) {
  Classification r;
  r.file = "x.png";
  r.probabilities = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0};  // far from every prototype
  r.predicted = 4;
  r.none_of_these = 1.0f;
  const std::string text = format_classification(r, 3, mnist_dataset());
  EXPECT_TRUE(testing::mentions(text, "x.png: 4 (0.0%)")) << text;
  EXPECT_TRUE(testing::mentions(text, "none of these 100.0%")) << text;
  const std::string json = format_classifications_json({r}, 1, mnist_dataset());
  EXPECT_TRUE(testing::mentions(json, "\"digit\":4")) << json;
  EXPECT_TRUE(testing::mentions(json, "\"none_of_these\":1.0")) << json;
  r.none_of_these = -1;  // the softmax output: no such line or key
  EXPECT_FALSE(testing::mentions(format_classification(r, 1, mnist_dataset()), "none of these"));
}

}  // namespace
}  // namespace lenet5
