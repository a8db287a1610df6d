// Training on the CPU, end to end: it learns, resuming is exact, the run folder is complete, and
// `evaluate` agrees with what training recorded.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "core/layout.hpp"
#include "io/safetensors.hpp"
#include "test_util.hpp"
#include "tiny_mnist.hpp"
#include "train/checkpoint.hpp"
#include "train/evaluate.hpp"
#include "train/report.hpp"
#include "train/run_pictures.hpp"
#include "train/trainer.hpp"

namespace lenet5 {
namespace {

using testing::TempDir;

TrainSettings small_run(const TempDir& dir, int images, int epochs) {
  TrainSettings s;
  s.data_dir = testing::mnist_dir().string();
  s.train_limit = images;
  s.epochs = epochs;
  s.device = "cpu";
  s.out = (dir / "run").string();
  return s;
}

// A finished run of one epoch on 64 images in dir/run (no per-epoch evaluation): its settings.
TrainSettings finished_run(const TempDir& dir) {
  TrainSettings settings = small_run(dir, 64, 1);
  settings.evaluate_every_epoch = false;
  train(settings, "[train]\n");
  return settings;
}

std::vector<float> final_parameters(const std::filesystem::path& run) {
  return load_checkpoint(run / "last.safetensors").parameters;
}

// small_run's settings on MNIST's first images_trained + held_out training images and first
// test_images test images, written into dir/data: an epoch then evaluates held_out + test_images
// images instead of the full sets' 15,000, most of a short CPU run's time otherwise.
TrainSettings small_run_on_a_subset(const TempDir& dir, int images_trained, int held_out,
                                    int test_images, int epochs) {
  testing::write_tiny_mnist(dir / "data", images_trained + held_out, test_images);
  TrainSettings s = small_run(dir, images_trained, epochs);
  s.data_dir = (dir / "data").string();
  s.validation = held_out;
  return s;
}

TEST(Training, ShortCpuRunLearns) {
  LENET5_REQUIRE_MNIST();
  TempDir dir;
  TrainSettings settings = small_run_on_a_subset(dir, 2000, 1000, 1000, 1);
  settings.batch_size = 32;  // 63 steps: at the default 128, 16 steps of a cosine rate are few
  const TrainOutcome outcome = train(settings, "[train]\n");
  // Chance is 10 %. One pass over 2,000 images at batch 32 reaches 85.3 % with the default
  // settings; a wrong gradient sign, a broken layer or a shuffled label stays near chance. 60 %
  // leaves room for other seeds while still catching all of those.
  EXPECT_GT(outcome.best_validation_accuracy, 0.60);
  EXPECT_FALSE(outcome.interrupted);
  EXPECT_EQ(outcome.epochs_done, 1);
  for (const char* file :
       {"config.toml", "metrics.csv", "train.log", "last.safetensors", "best.safetensors"})
    EXPECT_TRUE(std::filesystem::exists(dir / "run" / file)) << file;
  // The log names the network's size (core/layout.hpp's count for the default network).
  EXPECT_TRUE(testing::mentions(testing::read_text(dir / "run" / "train.log"),
                                ": 61706 trainable parameters, training on 2000 images"));
}

TEST(Training, EvaluateReportsTheAccuracyRecordedInMetrics) {
  LENET5_REQUIRE_MNIST();
  TempDir dir;
  constexpr int kHeldOut = 1000;
  train(small_run_on_a_subset(dir, 1000, kHeldOut, 1000, 1), "[train]\n");
  const std::string metrics = testing::read_text(dir / "run" / "metrics.csv");
  const Checkpoint checkpoint = load_checkpoint(dir / "run" / "best.safetensors");
  const Mnist data = load_mnist(dir / "data");
  const Evaluation evaluation = engine_for(checkpoint, Device::cpu)->evaluate(data.test);
  // The test_acc column of epoch 1 (after the held-out images' val_loss and val_acc), printed
  // with the same formatter; val_acc is what the same weights score on the held-out images.
  const std::string row = metrics.substr(metrics.find('\n') + 1);
  std::vector<std::string> fields;
  std::stringstream stream(row);
  for (std::string field; std::getline(stream, field, ',');) fields.push_back(field);
  ASSERT_EQ(fields.size(), 10u) << row;
  EXPECT_EQ(fields[7], format_percent(evaluation.correct, evaluation.count));
  EXPECT_DOUBLE_EQ(checkpoint.test_accuracy, evaluation.accuracy());
  const Dataset validation = hold_out_validation(data.train, kHeldOut).validation;
  const Evaluation held_out = engine_for(checkpoint, Device::cpu)->evaluate(validation);
  EXPECT_EQ(fields[5], format_percent(held_out.correct, held_out.count));
  EXPECT_DOUBLE_EQ(checkpoint.validation_accuracy, held_out.accuracy());
  EXPECT_EQ(checkpoint.validation_images, kHeldOut);
}

std::vector<std::string> split_text(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  for (std::string part; std::getline(stream, part, separator);) parts.push_back(part);
  return parts;
}

// --evaluate-training-set: metrics.csv gains train_eval_loss and train_eval_acc, and the last
// epoch's are what the last checkpoint scores on the same (undistorted) training images, written
// with the same formats. The run distorts its images (the default elastic augmentation), so that
// the evaluated accuracy is of the images as they are, not of those the epoch saw.
TEST(Training, EvaluatingTheTrainingSetRecordsWhatTheLastCheckpointScoresOnIt) {
  LENET5_REQUIRE_MNIST();
  TempDir dir;
  const Mnist tiny = testing::write_tiny_mnist(dir / "data", 256, 64);
  TrainSettings settings = small_run(dir, 0, 2);
  settings.data_dir = (dir / "data").string();
  settings.validation = 0;  // all 256 images trained on: the columns are the two it adds alone
  settings.batch_size = 32;
  settings.evaluate_training_set = true;
  const TrainOutcome outcome = train(settings, "[train]\n");
  const std::string metrics = testing::read_text(dir / "run" / "metrics.csv");
  const std::vector<std::string> lines = split_text(metrics, '\n');
  ASSERT_EQ(lines.size(), 3u) << metrics;  // the header and two epochs
  EXPECT_EQ(lines[0],
            "epoch,lr,train_loss,train_acc,test_loss,test_acc,seconds,images_per_s,"
            "train_eval_loss,train_eval_acc");
  const std::vector<std::string> last = split_text(lines[2], ',');
  ASSERT_EQ(last.size(), 10u) << lines[2];

  const Checkpoint checkpoint = load_checkpoint(dir / "run" / "last.safetensors");
  const Evaluation evaluation = engine_for(checkpoint, Device::cpu)->evaluate(tiny.train);
  ASSERT_EQ(evaluation.count, 256);
  char loss[32];
  std::snprintf(loss, sizeof loss, "%.6f", evaluation.mean_loss());  // the trainer's {:.6f}
  EXPECT_EQ(last[8], loss);
  EXPECT_EQ(last[9], format_percent(evaluation.correct, evaluation.count));
  EXPECT_EQ(outcome.epochs.back().train_eval_accuracy, evaluation.accuracy());
  EXPECT_EQ(read_metrics_csv(dir / "run" / "metrics.csv").back().train_eval_accuracy,
            std::stod(last[9]));
  // What is trained does not depend on the setting: the checkpoint is the one without it.
  TempDir plain_dir;
  TrainSettings plain = settings;
  plain.evaluate_training_set = false;
  plain.out = (plain_dir / "run").string();
  train(plain, "[train]\n");
  EXPECT_EQ(final_parameters(plain_dir / "run"), checkpoint.parameters);
  const std::string plain_metrics = testing::read_text(plain_dir / "run" / "metrics.csv");
  EXPECT_EQ(plain_metrics.substr(0, plain_metrics.find('\n')),
            "epoch,lr,train_loss,train_acc,test_loss,test_acc,seconds,images_per_s");
}

// A run resumed with --evaluate-training-set turned on keeps its earlier rows as they were (without
// the two columns) and adds the new epochs' with them; the file reads, and so resumes again.
TEST(Training, AResumeThatTurnsTheTrainingSetsEvaluationOnKeepsTheEarlierRows) {
  LENET5_REQUIRE_MNIST();
  TempDir dir;
  testing::write_tiny_mnist(dir / "data", 128, 32);
  TrainSettings first = small_run(dir, 0, 1);
  first.data_dir = (dir / "data").string();
  first.validation = 0;  // 128 images, all trained on
  first.batch_size = 32;
  train(first, "[train]\n");
  TrainSettings second = first;
  second.epochs = 2;
  second.evaluate_training_set = true;
  const std::filesystem::path last = dir / "run" / "last.safetensors";
  train(second, "[train]\n", load_checkpoint(last), last);
  const std::vector<std::string> lines =
      split_text(testing::read_text(dir / "run" / "metrics.csv"), '\n');
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(split_text(lines[0], ',').size(), 10u) << lines[0];
  EXPECT_EQ(split_text(lines[1], ',').size(), 8u) << lines[1];
  EXPECT_EQ(split_text(lines[2], ',').size(), 10u) << lines[2];
  const std::vector<MetricsRow> rows = read_metrics_csv(dir / "run" / "metrics.csv");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].train_eval_accuracy, -1);
  EXPECT_GE(rows[1].train_eval_accuracy, 0);
}

// `settings` (two epochs, out in `straight`) run once uninterrupted, then again into split/run as
// one epoch resumed for the second; returns split/run's last checkpoint. The schedule is constant
// so that a one-epoch run is exactly the first half of a two-epoch run.
std::filesystem::path train_straight_and_resumed_after_epoch(TrainSettings settings,
                                                             const TempDir& split) {
  settings.schedule = "constant";
  settings.evaluate_every_epoch = false;
  train(settings, "[train]\n");
  TrainSettings first = settings;
  first.out = (split / "run").string();
  first.epochs = 1;
  train(first, "[train]\n");
  const std::filesystem::path file = split / "run" / "last.safetensors";
  TrainSettings second = first;
  second.epochs = 2;
  train(second, "[train]\n", load_checkpoint(file), file);
  return file;
}

TEST(Training, ResumingAfterAnEpochGivesIdenticalWeights) {
  LENET5_REQUIRE_MNIST();
  TempDir straight, split;
  // Momentum (the default) so that the momentum buffers must be restored too.
  const std::filesystem::path checkpoint_file =
      train_straight_and_resumed_after_epoch(small_run(straight, 640, 2), split);
  EXPECT_EQ(final_parameters(straight / "run"), final_parameters(split / "run"));
  EXPECT_EQ(load_checkpoint(checkpoint_file).position.epoch, 2);
}

// LeCun et al. 1998's trainable subsampling (--kernels fast: the whole-step kernels refuse it):
// the checkpoints carry its coefficients, trained away from their initial values, and a run
// resumed after its first epoch ends with the uninterrupted run's weights.
TEST(Training, TrainableSubsamplingCheckpointsAndResumesExactly) {
  LENET5_REQUIRE_MNIST();
  TempDir straight, split;
  TrainSettings settings = small_run(straight, 640, 2);
  settings.subsampling = "trainable";
  settings.kernels = "fast";
  train_straight_and_resumed_after_epoch(settings, split);
  EXPECT_EQ(final_parameters(straight / "run"), final_parameters(split / "run"));
  const Checkpoint last = load_checkpoint(straight / "run" / "last.safetensors");
  EXPECT_EQ(last.net.subsampling, Subsampling::trainable);
  const ParamLayout layout = lenet5_layout(last.net);
  std::vector<float> initial(layout.buffer_floats);
  initialise_parameters(layout, last.net, settings.seed, initial.data());
  for (const char* name : {"s2.weight", "s4.weight"}) {
    const ParamSpec& spec = layout.find(name);
    for (std::size_t i = 0; i < spec.count; ++i)
      EXPECT_NE(last.parameters[spec.offset + i], initial[spec.offset + i]) << name << i;
  }
}

// Sends SIGINT once the trainer has installed its handler and training has started.
void interrupt_when_training(std::chrono::milliseconds delay) {
  for (;;) {
    struct sigaction current {};
    sigaction(SIGINT, nullptr, &current);
    if (current.sa_handler != SIG_IGN && current.sa_handler != SIG_DFL) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::this_thread::sleep_for(delay);
  kill(getpid(), SIGINT);
}

// Enough images that a signal lands in mid-epoch whatever the core count (see below). The
// sanitized build's steps take about eight times as long, so a quarter as many images still
// outlast the delay there by seconds.
constexpr int kInterruptedImages = testing::kSanitized ? 3200 : 12800;

// `settings` (one epoch, out in `straight`) run once uninterrupted, then again into split/run,
// stopped there by SIGINT in mid-epoch and resumed from its last checkpoint.
void train_straight_and_interrupted(
    TrainSettings settings, const TempDir& split,
    std::chrono::milliseconds delay = std::chrono::milliseconds(100)) {
  settings.evaluate_every_epoch = false;
  train(settings, "[train]\n");

  settings.out = (split / "run").string();
  // While the test waits for the trainer, SIGINT must not kill the test process.
  std::signal(SIGINT, SIG_IGN);
  // The fast CPU layers train 12,800 images in about 1.3 s on 2 cores and 0.3 s on 16, a step
  // taking 2-15 ms: 100 ms after training starts is past the first step and well before the end.
  std::thread interrupter(interrupt_when_training, delay);
  const TrainOutcome stopped = train(settings, "[train]\n");
  interrupter.join();
  std::signal(SIGINT, SIG_DFL);
  ASSERT_TRUE(stopped.interrupted) << "training finished before the signal arrived";
  const std::filesystem::path file = split / "run" / "last.safetensors";
  const Checkpoint saved = load_checkpoint(file);
  EXPECT_EQ(saved.position.epoch, 0);
  EXPECT_GT(saved.position.step, 0);
  train(settings, "[train]\n", saved, file);
}

TEST(Training, ASignalSavesMidEpochAndResumingFinishesIdentically) {
  LENET5_REQUIRE_MNIST();
  TempDir straight, split;
  TrainSettings settings = small_run(straight, kInterruptedImages, 1);
  settings.augment = "none";  // the plain path; the augmented one is tested below
  ASSERT_NO_FATAL_FAILURE(train_straight_and_interrupted(settings, split));
  // Wherever the signal landed, the resumed run must end exactly where the uninterrupted one did.
  EXPECT_EQ(final_parameters(straight / "run"), final_parameters(split / "run"));
}

TEST(Training, SameSeedGivesIdenticalCheckpointsAndAnotherSeedDoesNot) {
  LENET5_REQUIRE_MNIST();
  TempDir a, b, c;
  TrainSettings settings = small_run(a, 320, 1);
  settings.evaluate_every_epoch = false;
  train(settings, "[train]\n");
  settings.out = (b / "run").string();
  train(settings, "[train]\n");
  settings.out = (c / "run").string();
  settings.seed = 2;
  train(settings, "[train]\n");
  EXPECT_EQ(testing::read_text(a / "run" / "last.safetensors"),
            testing::read_text(b / "run" / "last.safetensors"));
  EXPECT_NE(final_parameters(a / "run"), final_parameters(c / "run"));
}

// The thread count is in config.toml (how the run was computed) but not in the checkpoints, whose
// bytes the fast CPU layers' fixed chunks keep identical for any number of threads.
TEST(Training, OneOrThreeThreadsWriteByteIdenticalCheckpoints) {
  LENET5_REQUIRE_MNIST();
  TempDir one, three;
  TrainSettings settings = small_run(one, 200, 1);
  settings.evaluate_every_epoch = false;
  settings.threads = 1;
  train(settings, "[train]\nthreads=1\nseed=1\n");
  settings.out = (three / "run").string();
  settings.threads = 3;
  train(settings, "[train]\nthreads=3\nseed=1\n");
  EXPECT_EQ(testing::read_text(one / "run" / "last.safetensors"),
            testing::read_text(three / "run" / "last.safetensors"));
  EXPECT_EQ(testing::read_text(three / "run" / "config.toml"), "[train]\nthreads=3\nseed=1\n");
  EXPECT_EQ(load_checkpoint(three / "run" / "last.safetensors").config_toml, "[train]\nseed=1\n");
}

TEST(Training, RefusesToOverwriteAnExistingRun) {
  LENET5_REQUIRE_MNIST();
  TempDir dir;
  TrainSettings settings = finished_run(dir);
  try {
    train(settings, "[train]\n");
    FAIL() << "a second run into the same folder was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--resume"), std::string::npos) << e.what();
  }
}

TEST(Training, ResumeRefusesADifferentNetwork) {
  LENET5_REQUIRE_MNIST();
  TempDir dir;
  TrainSettings settings = finished_run(dir);
  const auto file = dir / "run" / "last.safetensors";
  settings.activation = settings.activation == "relu" ? "tanh" : "relu";  // not the run's
  settings.epochs = 2;
  EXPECT_THROW(train(settings, "[train]\n", load_checkpoint(file), file), UsageError);
}

// ---- with augmentation ------------------------------------------------------------------------

// Elastic augmentation (the defaults' ranges): the CPU engine trains on the double reference,
// keyed by (seed, epoch, image index), so a resumed run sees the images the uninterrupted one saw.
TrainSettings elastic(TrainSettings settings) {
  settings.augment = "elastic";
  return settings;
}

// Stopped by SIGINT in mid-epoch and resumed: the last checkpoint is byte for byte the
// uninterrupted run's (weights, momentum, position and rate; a checkpoint records no time).
TEST(Training, WithElasticAugmentationASignalInMidEpochAndResumingFinishIdentically) {
  LENET5_REQUIRE_MNIST();
  TempDir straight, split;
  ASSERT_NO_FATAL_FAILURE(
      train_straight_and_interrupted(elastic(small_run(straight, kInterruptedImages, 1)), split));
  EXPECT_EQ(final_parameters(straight / "run"), final_parameters(split / "run"));
  EXPECT_EQ(testing::read_text(straight / "run" / "last.safetensors"),
            testing::read_text(split / "run" / "last.safetensors"));
}

// Stopped after epoch 1 of 2 and resumed: epoch 2's images are keyed by its own number, which the
// resumed run takes from the checkpoint's position.
TEST(Training, WithElasticAugmentationResumingAfterAnEpochFinishesIdentically) {
  LENET5_REQUIRE_MNIST();
  TempDir straight, split;
  const std::filesystem::path file =
      train_straight_and_resumed_after_epoch(elastic(small_run(straight, 640, 2)), split);
  EXPECT_EQ(load_checkpoint(file).position.epoch, 2);
  EXPECT_EQ(final_parameters(straight / "run"), final_parameters(split / "run"));
  EXPECT_EQ(testing::read_text(straight / "run" / "last.safetensors"), testing::read_text(file));
}

// The setting reaches the engine: the same run with and without --augment elastic ends on other
// weights, and so does one with affine augmentation only.
TEST(Training, AugmentationChangesWhatTheRunTrainsOn) {
  LENET5_REQUIRE_MNIST();
  TempDir none_dir, elastic_dir, affine_dir;
  TrainSettings none = small_run(none_dir, 320, 1);
  none.augment = "none";  // the default augments
  none.evaluate_every_epoch = false;
  train(none, "[train]\n");
  TrainSettings with_elastic = elastic(none);
  with_elastic.out = (elastic_dir / "run").string();
  train(with_elastic, "[train]\n");
  TrainSettings with_affine = none;
  with_affine.augment = "affine";
  with_affine.out = (affine_dir / "run").string();
  train(with_affine, "[train]\n");
  const std::vector<float> plain = final_parameters(none_dir / "run");
  EXPECT_NE(final_parameters(elastic_dir / "run"), plain);
  EXPECT_NE(final_parameters(affine_dir / "run"), plain);
  EXPECT_NE(final_parameters(affine_dir / "run"), final_parameters(elastic_dir / "run"));
}

// LeCun 1998's training: SDLM (core/sdlm.hpp) without momentum, the paper's per-pass schedule at
// its first rate scaled up for a short run, on the fast CPU layers (the whole-step kernels do not
// take SDLM). A smaller estimate than the paper's 500 samples keeps the tests short.
TrainSettings sdlm_run(const TempDir& dir, int images, int epochs) {
  TrainSettings s = small_run(dir, images, epochs);
  s.optimizer = "sdlm";
  s.momentum = 0;
  s.kernels = "fast";
  s.schedule = "lecun1998";
  s.lr = 0.002;
  s.batch_size = 8;
  s.sdlm_samples = 100;
  s.augment = "none";
  return s;
}

// The train_loss column of metrics.csv, one value per epoch.
std::vector<double> train_losses(const std::filesystem::path& run) {
  std::stringstream rows(testing::read_text(run / "metrics.csv"));
  std::vector<double> losses;
  std::string row;
  std::getline(rows, row);  // the header
  while (std::getline(rows, row)) {
    std::stringstream fields(row);
    std::string field;
    for (int i = 0; i < 3; ++i) std::getline(fields, field, ',');
    losses.push_back(std::stod(field));
  }
  return losses;
}

TEST(Training, SdlmWithThePapersScheduleLearnsAndIsDeterministic) {
  LENET5_REQUIRE_MNIST();
  TempDir first, second;
  TrainSettings settings = sdlm_run(first, 400, 2);
  settings.evaluate_every_epoch = false;
  train(settings, "[train]\n");
  settings.out = (second / "run").string();
  train(settings, "[train]\n");
  const std::vector<double> losses = train_losses(first / "run");
  ASSERT_EQ(losses.size(), 2u);
  // Chance is ln 10 = 2.30 per image. SDLM took these 400 images from 1.75 in the first pass to
  // 0.67 in the second (plain SGD at the same rate stays at 2.26 after the first); a wrong sign, a
  // step that ignores the curvature or a curvature of the wrong size does not learn like that.
  EXPECT_LT(losses[0], 2.1);
  EXPECT_LT(losses[1], 0.8 * losses[0]);
  EXPECT_EQ(testing::read_text(first / "run" / "last.safetensors"),
            testing::read_text(second / "run" / "last.safetensors"));
  const Checkpoint checkpoint = load_checkpoint(first / "run" / "last.safetensors");
  ASSERT_EQ(checkpoint.optimizer_state.size(), 1u);
  EXPECT_EQ(checkpoint.optimizer_state[0].name, "hessian");
}

// Stopped by SIGINT in mid-pass and resumed: the pass's Hessian estimate comes back from the
// checkpoint instead of being made again from later weights, so the run ends byte for byte where
// the uninterrupted one did.
TEST(Training, SdlmInterruptedInMidPassAndResumedFinishesIdentically) {
  LENET5_REQUIRE_MNIST();
  TempDir straight, split;
  // 100 steps of 5-50 ms (2 cores, idle to loaded); sanitized, 25 steps of about 100 ms.
  TrainSettings settings = sdlm_run(straight, testing::kSanitized ? 1600 : 6400, 1);
  settings.batch_size = 64;
  // An estimate on 20 samples takes 10-100 ms before the first step; the signal 300 ms after
  // training starts lands past it and past the first step, and well before the end.
  settings.sdlm_samples = 20;
  ASSERT_NO_FATAL_FAILURE(
      train_straight_and_interrupted(settings, split, std::chrono::milliseconds(300)));
  EXPECT_EQ(testing::read_text(straight / "run" / "last.safetensors"),
            testing::read_text(split / "run" / "last.safetensors"));
}

// Stopped after pass 1 of 2 and resumed: pass 2 re-estimates from the same weights either way.
TEST(Training, SdlmResumedAfterAPassFinishesIdentically) {
  LENET5_REQUIRE_MNIST();
  TempDir straight, split;
  const std::filesystem::path file =
      train_straight_and_resumed_after_epoch(sdlm_run(straight, 200, 2), split);
  EXPECT_EQ(load_checkpoint(file).position.epoch, 2);
  EXPECT_EQ(testing::read_text(straight / "run" / "last.safetensors"), testing::read_text(file));
}

}  // namespace
}  // namespace lenet5
