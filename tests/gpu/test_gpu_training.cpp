// The trainer on the GPU, end to end: a run resumed from its checkpoint ends with exactly the
// weights of an uninterrupted run, with and without augmentation and on each kernel set that
// trains, same-seed runs write byte-identical checkpoints, and the tensor cores' checkpoints
// evaluate alike on every engine.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backend/backend.hpp"
#include "core/rng.hpp"
#include "cuda/runtime/runtime.hpp"
#include "data/mnist.hpp"
#include "gpu_test_util.hpp"
#include "train/checkpoint.hpp"
#include "train/trainer.hpp"
#include "training_test_util.hpp"

namespace lenet5 {
namespace {

namespace fs = std::filesystem;
using test::bytes_of;
using test::mnist_dir;
using test::ScratchDir;

TrainSettings gpu_run(const fs::path& out, int epochs) {
  TrainSettings s;
  s.data_dir = mnist_dir().string();
  s.train_limit = 1280;
  s.epochs = epochs;
  s.device = "gpu";
  s.schedule = "constant";  // so that a 1-epoch run is exactly the first half of a 2-epoch run
  s.evaluate_every_epoch = false;
  s.out = out.string();
  return s;
}

TEST(GpuTraining, ResumingAfterAnEpochGivesIdenticalWeights) {
  REQUIRE_GPU_AND_MNIST();
  ScratchDir straight("straight"), split("split");
  train(gpu_run(straight / "run", 2), "[train]\n");
  train(gpu_run(split / "run", 1), "[train]\n");
  const fs::path file = split / "run" / "last.safetensors";
  train(gpu_run(split / "run", 2), "[train]\n", load_checkpoint(file), file);
  const Checkpoint a = load_checkpoint(straight / "run" / "last.safetensors");
  const Checkpoint b = load_checkpoint(file);
  EXPECT_EQ(b.position.epoch, 2);
  EXPECT_EQ(a.parameters, b.parameters);
  ASSERT_EQ(a.optimizer_state.size(), 1u);  // the default momentum keeps SGD's velocity
  EXPECT_TRUE(a.optimizer_state == b.optimizer_state);
}

TEST(GpuTraining, SameSeedRunsWriteByteIdenticalCheckpoints) {
  REQUIRE_GPU_AND_MNIST();
  ScratchDir first("first"), second("second");
  train(gpu_run(first / "run", 1), "[train]\n");
  train(gpu_run(second / "run", 1), "[train]\n");
  EXPECT_EQ(bytes_of(first / "run" / "last.safetensors"),
            bytes_of(second / "run" / "last.safetensors"));
}

// --precision tf32 reaches the engine from the settings: a tf32 run is deterministic as fp32's is
// (same-seed runs write byte-identical checkpoints, and a resumed run ends on the uninterrupted
// run's weights), and its weights are not fp32's (C3 ran on the tensor cores).
TEST(GpuTraining, Tf32RunsAreDeterministicResumeExactlyAndAreNotFp32Runs) {
  REQUIRE_GPU_AND_MNIST();
  LENET5_REQUIRE_TF32();
  ScratchDir first("tf32-first"), second("tf32-second"), split("tf32-split"), floats("fp32");
  // Batch 256: the dense weights' sums on the tensor cores too (5 steps an epoch of 1,280 images).
  const auto tf32_run = [](const fs::path& out, int epochs) {
    TrainSettings s = gpu_run(out, epochs);
    s.precision = "tf32";
    s.batch_size = 256;
    return s;
  };
  train(tf32_run(first / "run", 2), "[train]\n");
  train(tf32_run(second / "run", 2), "[train]\n");
  EXPECT_EQ(bytes_of(first / "run" / "last.safetensors"),
            bytes_of(second / "run" / "last.safetensors"));
  train(tf32_run(split / "run", 1), "[train]\n");
  const fs::path file = split / "run" / "last.safetensors";
  train(tf32_run(split / "run", 2), "[train]\n", load_checkpoint(file), file);
  EXPECT_EQ(load_checkpoint(first / "run" / "last.safetensors").parameters,
            load_checkpoint(file).parameters);
  TrainSettings fp32 = tf32_run(floats / "run", 2);
  fp32.precision = "fp32";  // the same run but for the precision
  train(fp32, "[train]\n");
  EXPECT_NE(load_checkpoint(first / "run" / "last.safetensors").parameters,
            load_checkpoint(floats / "run" / "last.safetensors").parameters);
}

// --precision reaches the tensor-core set's step from the settings: in each of fp32, tf32 and
// bf16, same-seed runs write byte-identical checkpoints; each precision's weights are its own (the
// three checkpoints differ); and each run learned (its checkpoint, evaluated by the CPU, well above
// chance, which a step computed in garbage would not reach).
TEST(GpuTraining, TensorKernelPrecisionsAreDeterministicAndEachItsOwn) {
  REQUIRE_GPU_AND_MNIST();
  LENET5_REQUIRE_TF32();
  Dataset test_set = load_mnist(mnist_dir()).test;
  test_set.count = 2000;
  test_set.images.resize(std::size_t(test_set.count) * kImageBytes);
  test_set.labels.resize(std::size_t(test_set.count));
  std::vector<std::vector<float>> weights;
  for (const char* precision : {"fp32", "tf32", "bf16"}) {
    ScratchDir dir(std::string("tensor-") + precision);
    const auto run = [&](const fs::path& out) {
      TrainSettings s = gpu_run(out, 1);
      s.kernels = "tensor";
      s.precision = precision;
      return s;
    };
    train(run(dir / "a"), "[train]\n");
    train(run(dir / "b"), "[train]\n");
    EXPECT_EQ(bytes_of(dir / "a" / "last.safetensors"), bytes_of(dir / "b" / "last.safetensors"))
        << precision;
    const Checkpoint trained = load_checkpoint(dir / "a" / "last.safetensors");
    TrainSettings cpu = run(dir / "a");
    cpu.kernels = "fast";
    cpu.precision = "fp32";
    cpu.device = "cpu";
    auto engine = make_engine(Device::cpu, cpu.net_config(), cpu.sgd(), cpu.batch_size);
    engine->set_state(trained.parameters, trained.optimizer_state);
    // 20 steps on 1,280 images: well above chance (10 %), as in the test below.
    EXPECT_GT(engine->evaluate(test_set).correct, test_set.count * 3 / 10) << precision;
    weights.push_back(trained.parameters);
  }
  EXPECT_NE(weights[0], weights[1]) << "fp32 and tf32";
  EXPECT_NE(weights[1], weights[2]) << "tf32 and bf16";
  EXPECT_NE(weights[0], weights[2]) << "fp32 and bf16";
}

// A checkpoint that --kernels tensor wrote is an ordinary one (the same tensors in the same
// layout): the CPU and every other kernel set load it and evaluate it alike. The fp32 engines
// differ only in their sums' order, and the tensor cores' evaluation rounds to TF32, which moves a
// prediction only where two classes are within about 1e-3 of each other: kSamePredictions, 3 of
// the 2,000 test images, allows that and catches a checkpoint read into the wrong tensors (which
// drops the accuracy towards 10 %).
constexpr int kSamePredictions = 3;

TEST(GpuTraining, TensorKernelCheckpointsEvaluateAlikeOnEveryEngine) {
  REQUIRE_GPU_AND_MNIST();
  LENET5_REQUIRE_TF32();
  ScratchDir dir("tensor-checkpoint");
  TrainSettings tensor = gpu_run(dir / "run", 1);
  tensor.kernels = "tensor";
  train(tensor, "[train]\n");
  const Checkpoint trained = load_checkpoint(dir / "run" / "last.safetensors");
  Dataset test_set = load_mnist(mnist_dir()).test;
  test_set.count = 2000;
  test_set.images.resize(std::size_t(test_set.count) * kImageBytes);
  test_set.labels.resize(std::size_t(test_set.count));
  std::vector<std::int64_t> correct;
  for (const auto& [device, kernels] : {std::pair{Device::cpu, "fast"},
                                        {Device::gpu, "fast"},
                                        {Device::gpu, "whole-step"},
                                        {Device::gpu, "tensor"}}) {
    TrainSettings settings = tensor;
    settings.kernels = kernels;
    auto engine = make_engine(device, settings.net_config(), settings.sgd(), settings.batch_size);
    engine->set_state(trained.parameters, trained.optimizer_state);
    const Evaluation evaluation = engine->evaluate(test_set);
    EXPECT_EQ(evaluation.count, test_set.count) << kernels;
    correct.push_back(evaluation.correct);
  }
  // 20 steps on 1,280 images: well above chance (10 %), which a misread checkpoint falls to.
  EXPECT_GT(correct[0], test_set.count * 3 / 10) << "a trained network, read as written";
  for (std::size_t i = 1; i < correct.size(); ++i)
    EXPECT_NEAR(double(correct[i]), double(correct[0]), kSamePredictions) << "engine " << i;
}

// ---- resuming with augmentation ---------------------------------------------------------------

// gpu_run with elastic augmentation (the defaults' ranges) on the given kernel set.
TrainSettings augmented_run(const fs::path& out, int epochs, const std::string& kernels) {
  TrainSettings s = gpu_run(out, epochs);
  s.augment = "elastic";
  s.kernels = kernels;
  return s;
}

class AugmentedGpuTraining : public testing::TestWithParam<std::string> {};

// Stopped after epoch 1 of 2 and resumed: epoch 2 augments with its own key (the epoch comes
// from the position, not from a count of epochs this process ran), so the last checkpoint is
// byte for byte the uninterrupted run's (no field of a checkpoint records when it was written).
TEST_P(AugmentedGpuTraining, ResumingAfterAnEpochWritesTheSameCheckpoint) {
  REQUIRE_GPU_AND_MNIST();
  if (GetParam() == "tensor") LENET5_REQUIRE_TF32();
  ScratchDir straight("aug-straight"), split("aug-split");
  train(augmented_run(straight / "run", 2, GetParam()), "[train]\n");
  train(augmented_run(split / "run", 1, GetParam()), "[train]\n");
  const fs::path file = split / "run" / "last.safetensors";
  train(augmented_run(split / "run", 2, GetParam()), "[train]\n", load_checkpoint(file), file);
  EXPECT_EQ(load_checkpoint(file).position.epoch, 2);
  EXPECT_EQ(load_checkpoint(straight / "run" / "last.safetensors").parameters,
            load_checkpoint(file).parameters);
  EXPECT_EQ(bytes_of(straight / "run" / "last.safetensors"), bytes_of(file));
}

// Stopped in mid-epoch: the GPU engine hands the trainer whole epochs, so a signal lands between
// epochs; the checkpoint a signal would write after 7 of epoch 2's 20 steps (as the CPU engine's
// step-by-step epochs do) is made here the way the trainer makes it: the weights after epoch 1,
// an engine of the run's settings taking those 7 steps in the trainer's order and rates, and the
// position (epoch 1, step 7). Resumed from it, the run finishes epoch 2 step by step and writes
// the uninterrupted run's last checkpoint, byte for byte.
TEST_P(AugmentedGpuTraining, ResumingInMidEpochWritesTheSameCheckpoint) {
  REQUIRE_GPU_AND_MNIST();
  if (GetParam() == "tensor") LENET5_REQUIRE_TF32();
  ScratchDir straight("aug-straight-mid"), split("aug-split-mid");
  const TrainSettings full = augmented_run(straight / "run", 2, GetParam());
  train(full, "[train]\n");
  TrainSettings first = augmented_run(split / "run", 1, GetParam());
  train(first, "[train]\n");
  const fs::path file = split / "run" / "last.safetensors";
  const Checkpoint boundary = load_checkpoint(file);
  ASSERT_EQ(boundary.position.epoch, 1);

  Dataset training_set = load_mnist(mnist_dir()).train;
  training_set.count = full.train_limit;  // what --train-limit keeps: the first images
  training_set.images.resize(std::size_t(full.train_limit) * kImageBytes);
  training_set.labels.resize(std::size_t(full.train_limit));
  const int steps = full.train_limit / full.batch_size, stop_at = 7;
  const Schedule schedule = full.schedule_config();
  std::vector<float> rates(steps);
  for (int step = 0; step < steps; ++step)
    rates[step] = float(schedule.rate(1 + double(step) / steps));
  auto engine = make_engine(Device::gpu, full.net_config(), full.sgd(), full.batch_size);
  engine->set_state(boundary.parameters, boundary.optimizer_state);
  engine->set_training_data(training_set, full.augmentation());
  engine->begin_epoch(1, epoch_permutation(full.seed, 1, training_set.count), rates);
  engine->train_steps(0, stop_at);
  Checkpoint stopped = boundary;
  stopped.position = {1, stop_at, engine->take_epoch_totals(), boundary.position.best_accuracy};
  stopped.parameters = engine->parameters();
  stopped.optimizer_state = engine->optimizer_state();
  stopped.learning_rate = rates[stop_at - 1];
  save_checkpoint(file, stopped);

  TrainSettings second = first;
  second.epochs = 2;
  train(second, "[train]\n", load_checkpoint(file), file);
  EXPECT_EQ(load_checkpoint(file).position.epoch, 2);
  EXPECT_EQ(load_checkpoint(straight / "run" / "last.safetensors").parameters,
            load_checkpoint(file).parameters);
  EXPECT_EQ(bytes_of(straight / "run" / "last.safetensors"), bytes_of(file));
}

INSTANTIATE_TEST_SUITE_P(EveryTrainingSet, AugmentedGpuTraining,
                         testing::Values("fast", "whole-step", "tensor"), [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace lenet5
