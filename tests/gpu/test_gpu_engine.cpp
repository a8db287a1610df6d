// The GPU engine end to end on real MNIST: it learns, it is deterministic, and it computes the
// same function as the CPU engine (the reference) from the same weights.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.hpp"
#include "common/augment_tolerance.hpp"
#include "core/error.hpp"
#include "core/rng.hpp"
#include "cuda/engine/engine_parts.hpp"
#include "cuda/engine/gpu_engine.hpp"
#include "cuda/kernels/optimizer.cuh"
#include "cuda/runtime/runtime.hpp"
#include "data/mnist.hpp"
#include "engine/engine.hpp"
#include "gpu_test_util.hpp"

namespace lenet5 {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (lenet5::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU tests need one"

constexpr int kBatch = 64;
constexpr float kLr = 0.05f;  // the default config's base rate (train/settings.hpp)
const SgdSettings kMomentum{0.9, false, 0.0};

// SGD's velocity, its one state buffer under momentum (core/sgd.hpp); empty if the engine has none.
std::vector<float> velocity(const Engine& engine) {
  const OptimizerState state = engine.optimizer_state();
  const StateBuffer* buffer = find_state(state, kMomentumState);
  return buffer ? buffer->values : std::vector<float>{};
}

// MNIST from the source tree, loaded once for the whole suite; null with the reason if absent.
const Mnist* mnist(std::string* why) {
  static std::string error;
  static const std::unique_ptr<Mnist> data = []() -> std::unique_ptr<Mnist> {
    try {
      return std::make_unique<Mnist>(load_mnist(LENET5_SOURCE_DIR "/data/mnist"));
    } catch (const Error& e) {
      error = e.what();
      return nullptr;
    }
  }();
  if (!data && why) *why = "MNIST not available (" + error + "): run scripts/fetch_mnist.sh";
  return data.get();
}

// Every test of the suite needs a GPU and MNIST; without either it is skipped, with the reason.
class GpuEngine : public testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    std::string why;
    data = mnist(&why);
    if (!data) GTEST_SKIP() << why;
  }

  const Mnist* data = nullptr;
};

Dataset first_images(const Dataset& data, int count) {
  Dataset subset;
  subset.count = count;
  subset.images.assign(data.images.begin(), data.images.begin() + std::size_t(count) * kImageBytes);
  subset.labels.assign(data.labels.begin(), data.labels.begin() + count);
  return subset;
}

// One epoch over `train` in the trainer's order: permutation of (seed, epoch 0), steps at
// multiples of the batch, the last one short when the batch does not divide the set. A whole
// epoch goes to the engine in one call (the GPU engine replays it as a CUDA graph); fewer steps
// run one launch at a time.
EpochTotals train_one_epoch(Engine& engine, const Dataset& train, std::uint64_t seed,
                            int max_steps = 1 << 30) {
  engine.set_training_data(train, Augmentation{});
  const int steps = (train.count + kBatch - 1) / kBatch;
  engine.begin_epoch(0, epoch_permutation(seed, 0, train.count), std::vector<float>(steps, kLr));
  engine.train_steps(0, std::min(steps, max_steps));
  return engine.take_epoch_totals();
}

// Both engines from the weights of `seed` (which must agree), then the first `max_steps` steps of
// epoch 0 over `train` in each; the epoch totals of each.
// adjust (may be empty) changes the initial weights of both engines alike before the training.
std::pair<EpochTotals, EpochTotals> train_from_same_start(
    Engine& a, Engine& b, const Dataset& train, std::uint64_t seed, int max_steps,
    const std::function<void(const ParamLayout&, std::vector<float>&)>& adjust = {}) {
  a.initialise(seed);
  b.initialise(seed);
  EXPECT_TRUE(a.parameters() == b.parameters()) << "initialisation differs";
  if (adjust) {
    std::vector<float> weights = a.parameters();
    adjust(a.layout(), weights);
    a.set_state(weights, {});  // the velocity stays zero: set_state zeroes a buffer it lacks
    b.set_state(weights, {});
  }
  return {train_one_epoch(a, train, seed, max_steps), train_one_epoch(b, train, seed, max_steps)};
}

// The weights after one epoch over `train` from the weights of `seed`.
std::vector<float> trained_parameters(const NetConfig& config, const Dataset& train,
                                      std::uint64_t seed, bool use_graphs = true) {
  auto engine = make_gpu_engine(config, kMomentum, kBatch, use_graphs);
  engine->initialise(seed);
  train_one_epoch(*engine, train, seed);
  return engine->parameters();
}

double largest_difference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    worst = std::max(worst, double(std::fabs(a[i] - b[i])));
  return worst;
}

std::unique_ptr<Engine> gpu_engine(bool use_graphs = true) {
  return make_gpu_engine(NetConfig{}, kMomentum, kBatch, use_graphs);
}
std::unique_ptr<Engine> cpu_engine() {
  return make_engine(Device::cpu, NetConfig{}, kMomentum, kBatch);
}

int argmax(const float* p) {
  return int(std::max_element(p, p + 10) - p);
}

// Chance is 10%. The CPU reference reaches 86-88% on the 10,000 test images after this one epoch
// (2,000 images, batch 64, lr 0.05, momentum 0.9; seeds 1-3), and the GPU computes the same
// function. 70% leaves room for order-of-summation effects while a wrong gradient anywhere keeps
// the network far below it.
TEST_F(GpuEngine, LearnsFromTwoThousandImagesInOneEpoch) {
  const Dataset train = first_images(data->train, 2000);
  auto engine = gpu_engine();
  engine->initialise(1);
  const EpochTotals totals = train_one_epoch(*engine, train, 1);
  EXPECT_EQ(totals.seen, 2000);
  EXPECT_TRUE(std::isfinite(totals.loss_sum));
  EXPECT_LT(totals.loss_sum / totals.seen, std::log(10.0)) << "the mean training loss did not "
                                                              "drop below the untrained log(10)";
  const Evaluation test = engine->evaluate(data->test);
  RecordProperty("test_accuracy", std::to_string(test.accuracy()));
  EXPECT_EQ(test.count, 10000);
  EXPECT_GT(test.accuracy(), 0.70) << "test accuracy " << test.accuracy();
  std::int64_t confusion_total = 0;
  for (const auto& row : test.confusion)
    for (const std::int64_t cell : row) confusion_total += cell;
  EXPECT_EQ(confusion_total, 10000);
}

// No atomics in any reduction that feeds the weights, one stream, cuBLAS in a fixed
// configuration: two runs from the same seed on the same data must agree bit for bit.
TEST_F(GpuEngine, SameSeedSameDataGivesBitIdenticalParameters) {
  const Dataset train = first_images(data->train, 2000);
  auto first = gpu_engine(), second = gpu_engine();
  const auto [a, b] = train_from_same_start(*first, *second, train, 7, 30);
  EXPECT_TRUE(first->parameters() == second->parameters());
  ASSERT_FALSE(velocity(*first).empty());
  EXPECT_TRUE(velocity(*first) == velocity(*second));
  EXPECT_EQ(a.loss_sum, b.loss_sum);
  EXPECT_EQ(a.correct, b.correct);
  EXPECT_EQ(a.seen, 30 * kBatch);
  const Evaluation ea = first->evaluate(data->test), eb = first->evaluate(data->test);
  EXPECT_EQ(ea.loss_sum, eb.loss_sum) << "evaluation is not reproducible";
}

// Same weights, same images: the GPU and the CPU engine must agree on the predictions. The two
// sum in different orders (cuBLAS, the convolution kernels) and the device's tanhf differs from
// glibc's by an ulp or two, so logits differ by about 1e-6 relative; a prediction can flip only
// where the top two logits are that close, which in a trained network is rare: we allow 2 flips in
// 1,000 and probabilities within 1e-4 (an H200 gave 0 flips and 1e-6). The loss sums agree to far
// better than 1e-4 relative.
TEST_F(GpuEngine, EvaluationMatchesCpuEngineFromTheSameWeights) {
  auto gpu = gpu_engine();
  gpu->initialise(3);
  train_one_epoch(*gpu, first_images(data->train, 2000), 3);
  auto cpu = cpu_engine();
  cpu->set_state(gpu->parameters(), gpu->optimizer_state());
  ASSERT_TRUE(cpu->parameters() == gpu->parameters());

  const Dataset test = first_images(data->test, 1000);
  const Evaluation g = gpu->evaluate(test), c = cpu->evaluate(test);
  EXPECT_EQ(g.count, 1000);
  EXPECT_LE(std::llabs(g.correct - c.correct), 2) << "gpu " << g.correct << ", cpu " << c.correct;
  EXPECT_NEAR(g.loss_sum, c.loss_sum, 1e-4 * c.loss_sum);
  std::int64_t moved = 0;  // each flipped prediction moves one count between two cells
  for (int t = 0; t < 10; ++t)
    for (int p = 0; p < 10; ++p) moved += std::llabs(g.confusion[t][p] - c.confusion[t][p]);
  EXPECT_LE(moved, 2 * 2);

  const std::vector<float> pg = gpu->probabilities(test.images.data(), test.count);
  const std::vector<float> pc = cpu->probabilities(test.images.data(), test.count);
  ASSERT_EQ(pg.size(), pc.size());
  int flips = 0;
  float largest = 0;
  for (int i = 0; i < test.count; ++i) {
    flips += argmax(&pg[i * 10]) != argmax(&pc[i * 10]);
    for (int k = 0; k < 10; ++k)
      largest = std::max(largest, std::fabs(pg[i * 10 + k] - pc[i * 10 + k]));
  }
  RecordProperty("flipped_predictions", flips);
  RecordProperty("largest_probability_difference", std::to_string(largest));
  EXPECT_LE(flips, 2);
  EXPECT_LE(largest, 1e-4f);
}

// The whole-step kernel set evaluates with its own forward stages (WholeStep::evaluate): from the
// same weights it must agree with the CPU engine as the fast layers do, with the tolerances of
// EvaluationMatchesCpuEngineFromTheSameWeights and for the same reasons (the whole-step kernels
// form each image's loss in float, the fast layers in double: ~1e-7 relative more, far below
// 1e-4).
TEST_F(GpuEngine, WholeStepEvaluationMatchesTheCpuEngine) {
  NetConfig config;
  config.kernels = GpuKernels::whole_step;
  const std::vector<float> weights = trained_parameters(config, first_images(data->train, 2000), 3);
  auto gpu = make_gpu_engine(config, kMomentum, kBatch);
  auto cpu = cpu_engine();
  gpu->set_state(weights, {});
  cpu->set_state(weights, {});
  const Dataset test = first_images(data->test, 1000);
  const Evaluation g = gpu->evaluate(test), c = cpu->evaluate(test);
  EXPECT_EQ(g.count, 1000);
  EXPECT_GT(c.accuracy(), 0.70) << "the weights did not learn: a weak comparison";
  EXPECT_LE(std::llabs(g.correct - c.correct), 2) << "gpu " << g.correct << ", cpu " << c.correct;
  EXPECT_NEAR(g.loss_sum, c.loss_sum, 1e-4 * c.loss_sum);
  std::int64_t moved = 0, total = 0;
  for (int t = 0; t < 10; ++t)
    for (int p = 0; p < 10; ++p) {
      moved += std::llabs(g.confusion[t][p] - c.confusion[t][p]);
      total += g.confusion[t][p];
    }
  EXPECT_LE(moved, 2 * 2);
  EXPECT_EQ(total, 1000);
  const Evaluation again = gpu->evaluate(test);
  EXPECT_EQ(again.loss_sum, g.loss_sum) << "evaluation is not reproducible";
}

// A packed group evaluates its models together (one launch for all, gpu_engine_group.cu), and
// each model's evaluation must be, bit for bit, the one a lone whole-step engine gives with its
// weights: the packed sweep's metrics and best checkpoints are then those of `lenet5 train`. A
// model given new weights is evaluated anew, the others keep theirs, and another set is
// evaluated on its own.
TEST_F(GpuEngine, PackedEvaluationIsEachModelsLoneEvaluationBitForBit) {
  NetConfig config;
  config.kernels = GpuKernels::whole_step;
  const Dataset train = first_images(data->train, 640), test = first_images(data->test, 1000);
  std::vector<std::vector<float>> weights;
  for (const std::uint64_t seed : {1, 2, 3})
    weights.push_back(trained_parameters(config, train, seed));
  const std::unique_ptr<EngineGroup> group = make_gpu_engine_group(config, kMomentum, kBatch, 3);
  auto lone = make_gpu_engine(config, kMomentum, kBatch);
  const auto lone_evaluation = [&](const std::vector<float>& w, const Dataset& set) {
    lone->set_state(w, {});
    return lone->evaluate(set);
  };
  const auto expect_same = [](const Evaluation& a, const Evaluation& b, const std::string& what) {
    EXPECT_EQ(a.loss_sum, b.loss_sum) << what;
    EXPECT_EQ(a.correct, b.correct) << what;
    EXPECT_EQ(a.count, b.count) << what;
    EXPECT_TRUE(a.confusion == b.confusion) << what;
  };
  for (int i = 0; i < 3; ++i) group->model(i).set_state(weights[std::size_t(i)], {});
  std::vector<Evaluation> packed;
  for (int i = 0; i < 3; ++i) packed.push_back(group->model(i).evaluate(test));
  for (int i = 0; i < 3; ++i)
    expect_same(packed[std::size_t(i)], lone_evaluation(weights[std::size_t(i)], test),
                "model " + std::to_string(i));
  EXPECT_NE(packed[0].loss_sum, packed[1].loss_sum) << "the models should differ";
  group->model(1).set_state(weights[0], {});
  expect_same(group->model(1).evaluate(test), packed[0], "model 1 given model 0's weights");
  expect_same(group->model(2).evaluate(test), packed[2], "model 2, unchanged");
  expect_same(group->model(2).evaluate(train), lone_evaluation(weights[2], train),
              "model 2 on the training images");
  expect_same(group->model(0).evaluate(test), packed[0], "model 0 after another set");
}

// What the page shows for a drawing, computed on the GPU: every layer's output read back from the
// device must be the CPU engine's from the same weights, for each kernel set (the book's plain
// layers with separate activation layers, the fused fast ones, and the whole-step engine, whose
// single images run through the fast layers). The input is the same normalisation of the same
// bytes, so it agrees to an ulp (1e-6 of values below 3). Each layer's outputs differ only by
// summation order and the device's activation functions, ~1e-6 relative as above; 1e-4 of the
// layer's largest value leaves a factor 100 while a wrong offset or layer gives O(1) errors.
TEST_F(GpuEngine, ActivationsMatchTheCpuEngineForEveryKernelSet) {
  auto trainer = gpu_engine();
  trainer->initialise(4);
  train_one_epoch(*trainer, first_images(data->train, 1000), 4);
  for (const GpuKernels kernels : {GpuKernels::book, GpuKernels::fast, GpuKernels::whole_step})
    for (const InputScaling scaling : {InputScaling::mnist, InputScaling::lecun1998}) {
      NetConfig config;
      config.kernels = kernels;
      config.input_scaling = scaling;
      auto gpu = make_gpu_engine(config, kMomentum, kBatch);
      auto cpu = make_engine(Device::cpu, config, kMomentum, kBatch);
      gpu->set_state(trainer->parameters(), trainer->optimizer_state());
      cpu->set_state(trainer->parameters(), trainer->optimizer_state());
      for (int image = 0; image < 3; ++image) {
        const std::uint8_t* pixels = data->test.images.data() + std::size_t(image) * kImageBytes;
        const Activations g = gpu->activations(pixels), c = cpu->activations(pixels);
        const std::string what = std::string(gpu_kernel_set(kernels).name) + " " +
                                 to_string(scaling) + " image " + std::to_string(image);
        EXPECT_LE(largest_difference(g.input, c.input), 1e-6) << what;
        EXPECT_EQ(g.input[0], normalise_pixel(0, pixel_scaling(scaling))) << what;
        ASSERT_EQ(g.layers.size(), c.layers.size()) << what;
        for (std::size_t l = 0; l < c.layers.size(); ++l) {
          EXPECT_EQ(g.layers[l].name, c.layers[l].name) << what;
          float scale = 1;
          for (const float v : c.layers[l].values) scale = std::max(scale, std::fabs(v));
          EXPECT_LE(largest_difference(g.layers[l].values, c.layers[l].values), 1e-4 * scale)
              << what << " " << c.layers[l].name;
        }
        for (int k = 0; k < 10; ++k)
          EXPECT_NEAR(g.probabilities[k], c.probabilities[k], 1e-4) << what << " class " << k;
      }
    }
}

// One SGD step from the same initial weights on the same 64 images. With classical momentum from
// zero velocity and no weight decay, the velocity after the step IS the batch gradient (v = 0.9*0
// + g exactly), so the velocity exposes every layer's gradient. Each tensor's GPU gradient must be
// within 1e-4 (relative, L2) of the CPU's: different summation orders over up to 64*28*28 =
// 50,176 terms (C1's weights) and ulp-level activation differences gave at most 5e-6 on an H200
// (C1), so 1e-4 leaves a factor 20, while any indexing error gives O(1). The parameters w - lr*v
// then differ by at most lr * |dv| plus an ulp or two of w.
void expect_one_step_matches(
    Engine& gpu, Engine& cpu, const Dataset& train,
    const std::function<void(const ParamLayout&, std::vector<float>&)>& adjust = {}) {
  const auto [tg, tc] = train_from_same_start(gpu, cpu, train, 5, 1, adjust);
  if (::testing::Test::HasFailure()) return;  // the engines started from different weights
  EXPECT_EQ(tg.seen, kBatch);
  EXPECT_NEAR(tg.loss_sum, tc.loss_sum, 1e-5 * tc.loss_sum);
  EXPECT_LE(std::llabs(tg.correct - tc.correct), 1);

  const std::vector<float> vg = velocity(gpu), vc = velocity(cpu);
  ASSERT_EQ(vg.size(), vc.size());
  ASSERT_EQ(vc.size(), cpu.layout().buffer_floats);
  const std::vector<float> wg = gpu.parameters(), wc = cpu.parameters();
  for (const ParamSpec& tensor : gpu.layout().tensors) {
    SCOPED_TRACE(tensor.name);
    double diff2 = 0, norm2 = 0, largest_dv = 0, largest_w = 0, largest_dw = 0;
    for (std::size_t i = tensor.offset; i < tensor.offset + tensor.count; ++i) {
      const double dv = double(vg[i]) - double(vc[i]);
      diff2 += dv * dv;
      norm2 += double(vc[i]) * vc[i];
      largest_dv = std::max(largest_dv, std::fabs(dv));
      largest_w = std::max(largest_w, std::fabs(double(wc[i])));
      largest_dw = std::max(largest_dw, std::fabs(double(wg[i]) - double(wc[i])));
    }
    ::testing::Test::RecordProperty(tensor.name + ".gradient_relative_error",
                                    std::to_string(std::sqrt(diff2 / norm2)));
    EXPECT_GT(norm2, 0.0) << "no gradient reached this tensor";
    EXPECT_LE(std::sqrt(diff2), 1e-4 * std::sqrt(norm2)) << "gradient differs";
    EXPECT_LE(largest_dw, kLr * largest_dv + std::ldexp(largest_w, -22)) << "parameters differ";
  }
}

TEST_F(GpuEngine, OneStepMatchesCpuEngine) {
  auto gpu = gpu_engine(), cpu = cpu_engine();
  expect_one_step_matches(*gpu, *cpu, first_images(data->train, 2000));
}

// LeCun et al. 1998's trainable subsampling, with the book's and the fast kernels, against the CPU
// reference layers: the coefficients s2.weight and s4.weight are tensors like any other here.
TEST_F(GpuEngine, TrainableSubsamplingOneStepMatchesCpuReference) {
  NetConfig net;
  net.subsampling = Subsampling::trainable;
  net.activation = Activation::scaled_tanh;
  for (const GpuKernels kernels : {GpuKernels::book, GpuKernels::fast}) {
    SCOPED_TRACE(to_string(kernels));
    net.kernels = GpuKernels::book;  // the CPU's reference layers
    auto cpu = make_engine(Device::cpu, net, kMomentum, kBatch);
    net.kernels = kernels;
    auto gpu = make_gpu_engine(net, kMomentum, kBatch, true);
    expect_one_step_matches(*gpu, *cpu, first_images(data->train, 2000));
  }
}

// LeCun et al. 1998's C1 and C3 units, with the book's and the fast kernels, against the CPU
// reference layers: c1.bias and c3.bias reach the convolution kernels' bias paths, and a1 and a3
// run as activation layers of their own in the fast set too. With the rest of the paper's network
// (trainable subsampling, scaled tanh, its C3 table) and the softmax output, whose step
// expect_one_step_matches knows; the RBF output has its own GPU tests. The biases, which start at
// 0, are set to values of either sign first, so that the forward pass adds them too.
TEST_F(GpuEngine, SquashedConvUnitsOneStepMatchesCpuReference) {
  const auto nonzero_biases = [](const ParamLayout& layout, std::vector<float>& weights) {
    for (const char* bias : {"c1.bias", "c3.bias"}) {
      const ParamSpec& tensor = layout.find(bias);
      for (std::size_t i = 0; i < tensor.count; ++i)
        weights[tensor.offset + i] = 0.05f * float(int(i % 5) - 2);
    }
  };
  NetConfig net;
  net.conv_units = ConvUnits::squashed;
  net.subsampling = Subsampling::trainable;
  net.activation = Activation::scaled_tanh;
  net.c3_table = C3Table::lecun;
  for (const GpuKernels kernels : {GpuKernels::book, GpuKernels::fast}) {
    SCOPED_TRACE(to_string(kernels));
    net.kernels = GpuKernels::book;  // the CPU's reference layers
    auto cpu = make_engine(Device::cpu, net, kMomentum, kBatch);
    net.kernels = kernels;
    auto gpu = make_gpu_engine(net, kMomentum, kBatch, true);
    expect_one_step_matches(*gpu, *cpu, first_images(data->train, 2000), nonzero_biases);
  }
}

// The graph replays exactly the launches it recorded: an epoch replayed from the graph and the
// same epoch launched kernel by kernel must give bit-identical weights, and a second epoch reuses
// the graph (same buffers, new permutation and rates uploaded into them).
TEST_F(GpuEngine, EpochGraphMatchesDirectLaunchesBitForBit) {
  const Dataset train = first_images(data->train, 1000);
  auto graphed = gpu_engine(true), direct = gpu_engine(false);
  for (Engine* engine : {graphed.get(), direct.get()}) {
    engine->initialise(3);
    engine->set_training_data(train, Augmentation{});
    const int steps = (train.count + kBatch - 1) / kBatch;
    for (int epoch = 0; epoch < 2; ++epoch) {
      engine->begin_epoch(epoch, epoch_permutation(3, epoch, train.count),
                          std::vector<float>(steps, kLr / float(epoch + 1)));
      for (int step = 0; step < steps; step += engine->preferred_steps_per_call(steps))
        engine->train_steps(step, std::min(steps, step + engine->preferred_steps_per_call(steps)));
      EXPECT_EQ(engine->take_epoch_totals().seen, train.count);
    }
  }
  EXPECT_EQ(graphed->preferred_steps_per_call(16), 16);
  EXPECT_EQ(direct->preferred_steps_per_call(16), 1);
  EXPECT_EQ(graphed->parameters(), direct->parameters());
  ASSERT_FALSE(velocity(*graphed).empty());
  EXPECT_EQ(velocity(*graphed), velocity(*direct));
}

// GraphExec::run, how an epoch is replayed: every call runs the work once, the first by launching
// it directly while another thread captures it (launch_first) or from the graph it captures
// first, the later ones by replaying that graph without asking for the launches again. The work is
// an SGD step of rate 1 on a gradient of -1, which adds exactly 1 to each value every time it runs.
TEST(EpochGraph, RunsTheWorkOnceEachCallAndReplaysItsCapture) {
  SKIP_WITHOUT_GPU();
  for (const bool launch_first : {true, false}) {
    SCOPED_TRACE(launch_first ? "launched, then captured" : "captured first");
    constexpr std::size_t kCount = 5;
    const std::vector<float> minus_one(kCount, -1.0f);
    Buffer<float> gradients(Device::gpu, kCount), values(Device::gpu, kCount);
    gradients.copy_from_host(minus_one.data());
    values.zero();
    std::atomic<int> enqueued = 0;  // launched and captured on two threads at once
    const auto add_one = [&] {
      ++enqueued;
      cuda::sgd_step(SgdSettings{}, 1.0f, gradients.data(), values.data(), nullptr, kCount,
                     cuda::kDefaultStream);
    };
    GraphExec graph;
    for (int run = 1; run <= 3; ++run) {
      graph.run(cuda::kDefaultStream, launch_first, add_one);
      CUDA_CHECK(cudaStreamSynchronize(cuda::kDefaultStream));
      EXPECT_TRUE(graph) << "run " << run;
      // Launched directly and captured beside it: two calls; captured first: one. Never again.
      EXPECT_EQ(enqueued.load(), launch_first ? 2 : 1) << "run " << run;
      EXPECT_EQ(values.to_vector(), std::vector<float>(kCount, float(run))) << "run " << run;
    }
  }
}

// The two kernel sets compute the same network: from the same weights they classify the same way,
// and an epoch of training moves the weights to the same place up to rounding (different
// summation orders, fused multiply-adds and the device's activation functions differ in the last
// bits; over 16 steps such differences stay around 1e-6, far below 1e-3).
TEST_F(GpuEngine, BookAndFastKernelsComputeTheSameNetwork) {
  NetConfig book_config, fast_config;
  book_config.kernels = GpuKernels::book;
  fast_config.kernels = GpuKernels::fast;
  auto book = make_gpu_engine(book_config, kMomentum, kBatch);
  auto fast = make_gpu_engine(fast_config, kMomentum, kBatch);
  book->initialise(5);
  fast->initialise(5);
  const Dataset test = first_images(data->test, 1000);
  const Evaluation book_eval = book->evaluate(test), fast_eval = fast->evaluate(test);
  // Before training the two sets' logits differ by ~1e-6 relative (summation order), so only a
  // sample whose top two logits are that close can change its prediction: a couple of 1,000 at
  // most; the mean loss moves by the same ~1e-6 relative, below 1e-5 absolute (the loss is ~2.3).
  EXPECT_LE(std::abs(book_eval.correct - fast_eval.correct), 2);
  EXPECT_NEAR(book_eval.mean_loss(), fast_eval.mean_loss(), 1e-5);

  const Dataset train = first_images(data->train, 1000);
  train_one_epoch(*book, train, 5);
  train_one_epoch(*fast, train, 5);
  const double worst = largest_difference(book->parameters(), fast->parameters());
  EXPECT_LT(worst, 1e-3);
  RecordProperty("largest_weight_difference", std::to_string(worst));
}

// The book's kernel set is as deterministic as the fast one.
TEST_F(GpuEngine, BookKernelsAreDeterministicToo) {
  NetConfig config;
  config.kernels = GpuKernels::book;
  const Dataset train = first_images(data->train, 640);
  EXPECT_EQ(trained_parameters(config, train, 9), trained_parameters(config, train, 9));
}

// The whole-step kernel set trains the same network as the fast one: one epoch from the same
// weights in the same order lands on the same weights up to rounding (its sums run in other
// orders; the bound is the one of BookAndFastKernelsComputeTheSameNetwork, for the same reason),
// with the same loss statistics, and the network it trains learns.
TEST_F(GpuEngine, WholeStepKernelsTrainLikeTheFastKernels) {
  for (const InputScaling scaling : {InputScaling::mnist, InputScaling::lecun1998}) {
    SCOPED_TRACE(to_string(scaling));
    NetConfig fast_config, whole_config;
    whole_config.kernels = GpuKernels::whole_step;
    fast_config.input_scaling = whole_config.input_scaling = scaling;
    auto fast = make_gpu_engine(fast_config, kMomentum, kBatch);
    auto whole = make_gpu_engine(whole_config, kMomentum, kBatch);
    fast->initialise(5);
    whole->initialise(5);
    const Dataset train = first_images(data->train, 1000);  // the last step has 40 images
    const EpochTotals fast_totals = train_one_epoch(*fast, train, 5);
    const EpochTotals whole_totals = train_one_epoch(*whole, train, 5);
    EXPECT_EQ(whole_totals.seen, 1000);
    // The epoch's statistics are gathered while the weights drift apart by up to the 1e-3 bound
    // below, so the loss sum may differ by that order relative, and one more near-tie prediction
    // than before training may flip (3 of 1,000 instead of 2).
    EXPECT_NEAR(whole_totals.loss_sum, fast_totals.loss_sum, 1e-3 * fast_totals.loss_sum);
    EXPECT_LE(std::abs(whole_totals.correct - fast_totals.correct), 3);
    const double worst = largest_difference(fast->parameters(), whole->parameters());
    EXPECT_LT(worst, 1e-3);
    RecordProperty("largest_weight_difference", std::to_string(worst));
    // The threshold and its reason: LearnsFromTwoThousandImagesInOneEpoch.
    auto learner = make_gpu_engine(whole_config, kMomentum, kBatch);
    learner->initialise(1);
    train_one_epoch(*learner, first_images(data->train, 2000), 1);
    EXPECT_GT(learner->evaluate(data->test).accuracy(), 0.70);
  }
}

// No atomics: two whole-step runs from the same seed agree bit for bit, and the epoch replayed as
// a CUDA graph agrees bit for bit with the same steps launched one by one.
TEST_F(GpuEngine, WholeStepKernelsAreDeterministicWithAndWithoutGraphs) {
  NetConfig config;
  config.kernels = GpuKernels::whole_step;
  const Dataset train = first_images(data->train, 640);
  const std::vector<float> first = trained_parameters(config, train, 9);
  EXPECT_EQ(first, trained_parameters(config, train, 9));
  EXPECT_EQ(first, trained_parameters(config, train, 9, /*use_graphs=*/false));
}

// ---- batch sizes, and augmentation ----------------------------------------------------------

// Epoch `epoch` over `train` at `batch` images per step and the constant rate kLr, in the order of
// the permutation of `order_epoch` (the trainer's is the epoch's own), all steps in one call to
// train_steps (a GPU engine with graphs replays its epoch graph) or one call per step.
EpochTotals run_epoch(Engine& engine, int count, int batch, int epoch, int order_epoch,
                      bool one_call, std::uint64_t seed) {
  const int steps = (count + batch - 1) / batch;
  engine.begin_epoch(epoch, epoch_permutation(seed, order_epoch, count),
                     std::vector<float>(steps, kLr));
  if (one_call)
    engine.train_steps(0, steps);
  else
    for (int step = 0; step < steps; ++step) engine.train_steps(step, step + 1);
  return engine.take_epoch_totals();
}

// A training set whose last batch is short (1,037 images: 4 x 256 + 13, and 1,000 + 37), at the
// command line's larger batch sizes, through both GPU kernel sets (the whole-step one is sized
// by the batch, the fast one's network for max(batch, 256)): an epoch moves the weights where
// the CPU engine's epoch moves them (each tensor's displacement over the epoch, final - initial
// weights, relative in L2: ||dw_gpu - dw_cpu|| / ||dw_cpu||). Each step's gradient agrees with the
// CPU's to about 5e-6 relative (OneStepMatchesCpuEngine), and over 5 or 2 steps the displacement
// agrees to the same order; 1e-3 leaves a wide margin, while a last batch dropped, read past the
// permutation's end or divided by the full batch size changes the displacement by that step's share
// of it (with momentum 0.9: about 8 % of 5 steps, a third of 2).
TEST_F(GpuEngine, ShortLastBatchTrainsLikeTheCpuEngine) {
  const Dataset train = first_images(data->train, 1037);
  for (const int batch : {256, 1000}) {
    auto cpu = make_engine(Device::cpu, NetConfig{}, kMomentum, batch);
    cpu->initialise(5);
    const std::vector<float> initial = cpu->parameters();
    cpu->set_training_data(train, Augmentation{});
    const EpochTotals cpu_totals = run_epoch(*cpu, train.count, batch, 0, 0, true, 5);
    for (const GpuKernels kernels : {GpuKernels::fast, GpuKernels::whole_step}) {
      NetConfig config;
      config.kernels = kernels;
      const std::string what = std::string(to_string(kernels)) + " batch " + std::to_string(batch);
      auto gpu = make_gpu_engine(config, kMomentum, batch);
      gpu->initialise(5);
      ASSERT_EQ(gpu->parameters(), initial) << what;
      gpu->set_training_data(train, Augmentation{});
      const EpochTotals gpu_totals = run_epoch(*gpu, train.count, batch, 0, 0, true, 5);
      EXPECT_EQ(gpu_totals.seen, 1037) << what;
      // The epoch's statistics are gathered while the weights move apart by up to the bound
      // below, so the loss sum may differ by that order relative, and a few near-tie predictions
      // may flip (as in WholeStepKernelsTrainLikeTheFastKernels).
      EXPECT_NEAR(gpu_totals.loss_sum, cpu_totals.loss_sum, 1e-3 * cpu_totals.loss_sum) << what;
      EXPECT_LE(std::llabs(gpu_totals.correct - cpu_totals.correct), 3) << what;
      test::expect_same_displacement(gpu->layout(), initial, gpu->parameters(), cpu->parameters(),
                                     1e-3, what);
    }
  }
}

// Every GPU kernel set that trains with elastic augmentation, 640 images at batch 64 (10 steps an
// epoch). The engine keeps the epoch in a device buffer that the augmentation reads when a step
// runs, so:
//  - the epoch replayed from its CUDA graph gives bit for bit the weights of the same epoch
//    launched step by step, in epoch 0 (the graph's capture) and in epoch 1 (its replay, which
//    must read 1 from the buffer: a value frozen at capture would give epoch 0's images);
//  - an epoch 1 that repeats epoch 0's key with epoch 1's order ends elsewhere (the images
//    differ, not only the order), and so does a run without augmentation.
// For the tensor-core set the graph's epoch gathers each step's batch in a launch (gpu_engine.cu's
// tensor_steps), each but the first's on a side stream beside the step before (behind its
// convolutions' forward kernel), into two steps' slots that the steps take in turn, and the direct
// one each step's before the step: the same bits too.
class AugmentedGpuEngine : public GpuEngine, public testing::WithParamInterface<GpuKernels> {
 protected:
  void SetUp() override {
    GpuEngine::SetUp();
    if (!IsSkipped() && GetParam() == GpuKernels::tensor) LENET5_REQUIRE_TF32();
  }
};

TEST_P(AugmentedGpuEngine, EpochGraphReplaysEachEpochsImages) {
  const Dataset train = first_images(data->train, 640);
  NetConfig config;
  config.kernels = GetParam();
  const Augmentation elastic{test::moderate_augmentation(AugmentKind::elastic), 3};
  auto graphed = make_gpu_engine(config, kMomentum, kBatch, true);
  auto direct = make_gpu_engine(config, kMomentum, kBatch, false);
  auto repeated = make_gpu_engine(config, kMomentum, kBatch, true);
  auto plain = make_gpu_engine(config, kMomentum, kBatch, true);
  for (Engine* engine : {graphed.get(), direct.get(), repeated.get(), plain.get()}) {
    engine->initialise(3);
    engine->set_training_data(train, engine == plain.get() ? Augmentation{} : elastic);
  }
  for (Engine* engine : {graphed.get(), repeated.get(), plain.get()})
    EXPECT_EQ(run_epoch(*engine, train.count, kBatch, 0, 0, true, 3).seen, 640);
  run_epoch(*direct, train.count, kBatch, 0, 0, false, 3);
  EXPECT_EQ(graphed->parameters(), direct->parameters()) << "epoch 0";
  EXPECT_EQ(graphed->parameters(), repeated->parameters()) << "epoch 0";
  EXPECT_NE(graphed->parameters(), plain->parameters()) << "the augmentation changed nothing";

  run_epoch(*graphed, train.count, kBatch, 1, 1, true, 3);
  run_epoch(*direct, train.count, kBatch, 1, 1, false, 3);
  run_epoch(*repeated, train.count, kBatch, /*epoch=*/0, /*order_epoch=*/1, true, 3);
  EXPECT_EQ(graphed->parameters(), direct->parameters()) << "epoch 1";
  ASSERT_FALSE(velocity(*graphed).empty());
  EXPECT_EQ(velocity(*graphed), velocity(*direct)) << "epoch 1";
  EXPECT_NE(graphed->parameters(), repeated->parameters()) << "epoch 1 trained on epoch 0's images";
}

// What `train --resume` does with a checkpoint written in mid-epoch: a fresh engine takes the
// weights and momentum after 4 of epoch 1's 10 steps, begins epoch 1 again and runs steps 4 to
// 10 (one by one: a partial epoch is not the graph). With augmentation it must end bit for bit
// where the uninterrupted run (epoch 1 replayed from its graph) ends.
TEST_P(AugmentedGpuEngine, ResumedInMidEpochEndsBitIdentical) {
  const Dataset train = first_images(data->train, 640);
  const int steps = 640 / kBatch;
  NetConfig config;
  config.kernels = GetParam();
  const Augmentation elastic{test::moderate_augmentation(AugmentKind::elastic), 4};
  auto straight = make_gpu_engine(config, kMomentum, kBatch);
  auto stopped = make_gpu_engine(config, kMomentum, kBatch);
  for (Engine* engine : {straight.get(), stopped.get()}) {
    engine->initialise(4);
    engine->set_training_data(train, elastic);
    run_epoch(*engine, train.count, kBatch, 0, 0, true, 4);
  }
  run_epoch(*straight, train.count, kBatch, 1, 1, true, 4);
  const std::vector<float> rates(steps, kLr);
  stopped->begin_epoch(1, epoch_permutation(4, 1, train.count), rates);
  stopped->train_steps(0, 4);
  stopped->take_epoch_totals();

  auto resumed = make_gpu_engine(config, kMomentum, kBatch);
  resumed->set_state(stopped->parameters(), stopped->optimizer_state());
  resumed->set_training_data(train, elastic);
  resumed->begin_epoch(1, epoch_permutation(4, 1, train.count), rates);
  resumed->train_steps(4, steps);
  EXPECT_EQ(resumed->take_epoch_totals().seen, 640 - 4 * kBatch);
  EXPECT_EQ(resumed->parameters(), straight->parameters());
  EXPECT_EQ(velocity(*resumed), velocity(*straight));
}

INSTANTIATE_TEST_SUITE_P(EveryTrainingSet, AugmentedGpuEngine,
                         testing::Values(GpuKernels::fast, GpuKernels::whole_step,
                                         GpuKernels::tensor),
                         [](const auto& info) {
                           std::string name = to_string(info.param);
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace lenet5
