// Packed models on the GPU (lenet5 sweep): models trained together by one engine group, their
// steps in the same whole-step launches, end with exactly the checkpoints each writes trained
// alone by `lenet5 train` (train()), with and without augmentation, and a packed group resumed
// after an epoch ends as the uninterrupted group does.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "cuda/runtime/runtime.hpp"
#include "sweep/sweep.hpp"
#include "train/checkpoint.hpp"
#include "train/trainer.hpp"
#include "training_test_util.hpp"

namespace lenet5 {
namespace {

namespace fs = std::filesystem;
using test::bytes_of;
using test::mnist_dir;
using test::ScratchDir;

// Model i of a small packed sweep: its own seed and peak rate, a one-cycle schedule, momentum and
// weight decay (so SGD's velocity is packed too), 1,000 training images (the last batch short),
// evaluated every epoch (so best.safetensors exists and the evaluations are per model).
TrainJob packed_job(const fs::path& out, int i, int epochs, const std::string& augment) {
  TrainJob job;
  TrainSettings& s = job.settings;
  s.data_dir = mnist_dir().string();
  s.train_limit = 1000;
  s.epochs = epochs;
  s.batch_size = 96;
  s.device = "gpu";
  s.kernels = "whole-step";
  s.schedule = "one-cycle";
  s.lr = 0.05 + 0.05 * i;
  s.momentum = 0.9;
  s.weight_decay = 5e-4;
  s.seed = std::uint64_t(11 + i);
  s.augment = augment;
  s.evaluate_every_epoch = true;
  s.out = out.string();
  // A config text of the model's own, as the sweep stores each model's.
  job.config_toml = "[train]\nseed = " + std::to_string(s.seed) + "\n";
  return job;
}

std::vector<TrainJob> packed_jobs(const ScratchDir& dir, int models, int epochs,
                                  const std::string& augment) {
  std::vector<TrainJob> jobs;
  for (int i = 0; i < models; ++i)
    jobs.push_back(packed_job(dir / ("m" + std::to_string(i)), i, epochs, augment));
  return jobs;
}

// metrics.csv without its timing columns (seconds, images/s), which differ run to run.
std::string metrics_without_timing(const fs::path& file) {
  std::ifstream in(file);
  std::string line, kept;
  while (std::getline(in, line)) {
    std::string row;
    std::stringstream fields(line);
    std::string field;
    for (int column = 0; std::getline(fields, field, ',') && column < 6; ++column)
      row += field + ",";
    kept += row + "\n";
  }
  return kept;
}

class PackedTraining : public testing::TestWithParam<std::string> {};

TEST_P(PackedTraining, EachModelWritesTheCheckpointsOfTrainAlone) {
  REQUIRE_GPU_AND_MNIST();
  ScratchDir packed("packed-group"), alone("packed-alone");
  constexpr int kModels = 3;
  const std::vector<TrainJob> jobs = packed_jobs(packed, kModels, 2, GetParam());
  const std::vector<TrainOutcome> outcomes = train_models(jobs);
  ASSERT_EQ(outcomes.size(), std::size_t(kModels));
  for (int i = 0; i < kModels; ++i) {
    SCOPED_TRACE("model " + std::to_string(i));
    const TrainJob lone = packed_job(alone / ("m" + std::to_string(i)), i, 2, GetParam());
    const TrainOutcome trained = train(lone.settings, lone.config_toml);
    const fs::path a = jobs[i].settings.out, b = lone.settings.out;
    EXPECT_EQ(bytes_of(a / "last.safetensors"), bytes_of(b / "last.safetensors"));
    EXPECT_EQ(bytes_of(a / "best.safetensors"), bytes_of(b / "best.safetensors"));
    EXPECT_EQ(metrics_without_timing(a / "metrics.csv"), metrics_without_timing(b / "metrics.csv"));
    EXPECT_EQ(outcomes[i].best_validation_accuracy, trained.best_validation_accuracy);
    ASSERT_TRUE(outcomes[i].final_evaluation && trained.final_evaluation);
    EXPECT_EQ(outcomes[i].final_evaluation->loss_sum, trained.final_evaluation->loss_sum);
  }
  // The models really differ: packing did not give them one another's weights.
  EXPECT_NE(load_checkpoint(fs::path(jobs[0].settings.out) / "last.safetensors").parameters,
            load_checkpoint(fs::path(jobs[1].settings.out) / "last.safetensors").parameters);
}

// A constant rate (each model its own), so that a 1-epoch run is exactly the first half of a
// 2-epoch run (one-cycle's rates depend on the number of epochs).
std::vector<TrainJob> constant_rate_jobs(const ScratchDir& dir, int models, int epochs,
                                         const std::string& augment) {
  std::vector<TrainJob> jobs = packed_jobs(dir, models, epochs, augment);
  for (TrainJob& job : jobs) job.settings.schedule = "constant";
  return jobs;
}

TEST_P(PackedTraining, AGroupResumedAfterAnEpochEndsAsTheUninterruptedGroup) {
  REQUIRE_GPU_AND_MNIST();
  ScratchDir straight("packed-straight"), split("packed-split");
  constexpr int kModels = 2;
  train_models(constant_rate_jobs(straight, kModels, 2, GetParam()));
  train_models(constant_rate_jobs(split, kModels, 1, GetParam()));
  std::vector<TrainJob> resumed = constant_rate_jobs(split, kModels, 2, GetParam());
  for (TrainJob& job : resumed) {
    job.resume_file = fs::path(job.settings.out) / "last.safetensors";
    job.resume = load_checkpoint(job.resume_file);
  }
  train_models(resumed);
  for (int i = 0; i < kModels; ++i) {
    const std::string model = "m" + std::to_string(i);
    EXPECT_EQ(bytes_of(straight / model / "last.safetensors"),
              bytes_of(split / model / "last.safetensors"))
        << model;
  }
}

INSTANTIATE_TEST_SUITE_P(Augment, PackedTraining, testing::Values("none", "elastic"),
                         [](const testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// At an epoch's end the models' files (metrics.csv, best, last) are written side by side on a
// thread of their own (trainer.cpp, end_epochs, 16 models' at a time); with one epoch, the run
// joins them before the models finish. A failed write stops none of the writes in flight beside
// it, and the first failing model's is the error reported: with the best.safetensors of m1 and m3
// folders (no rename replaces a folder that holds a file, not even root's), m0, m2 and m4-m15 end
// the epoch with both their checkpoints, the error names m1's file, and neither m1 nor m3 has a
// last.safetensors (best is written before last). With 18 models, m1's failure is met where the
// window of writes is full (at m17), not only after the last model.
TEST(PackedTrainingWrites, AFailedWriteIsReportedAndTheOtherModelsAreWritten) {
  REQUIRE_GPU_AND_MNIST();
  ScratchDir dir("packed-failed-write");
  std::vector<TrainJob> jobs = packed_jobs(dir, 18, 1, "none");
  for (TrainJob& job : jobs) job.settings.lr = 0.1;  // packed_jobs' rates climb to 0.9 by m17
  const fs::path in_the_way = dir / "m1" / "best.safetensors";
  fs::create_directories(in_the_way / "a-file-inside");
  fs::create_directories(dir / "m3" / "best.safetensors" / "a-file-inside");
  std::string error;
  try {
    train_models(jobs);
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("cannot write " + in_the_way.string()), std::string::npos) << error;
  for (const int i : {0, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}) {
    const fs::path model = dir / ("m" + std::to_string(i));
    SCOPED_TRACE(model.string());
    EXPECT_EQ(load_checkpoint(model / "last.safetensors").position.epoch, 1);
    EXPECT_EQ(load_checkpoint(model / "best.safetensors").position.epoch, 1);
  }
  for (const char* model : {"m1", "m3"})
    EXPECT_FALSE(fs::exists(dir / model / "last.safetensors")) << model;
}

// The sweep packs what may share a group and nothing else: of three models, the two that differ
// only in seed and rate train in one packed run and the third (another batch size) alone; each
// ends with the checkpoint of train() alone.
TEST(PackedSweep, PacksModelsThatDifferOnlyInSeedAndRate) {
  REQUIRE_GPU_AND_MNIST();
  ScratchDir dir("packed-sweep"), alone("packed-sweep-alone");
  std::vector<SweepModelRun> runs;
  for (int i = 0; i < 3; ++i) {
    const TrainJob job = packed_job({}, i, 1, "none");
    SweepModelRun run{SweepModel{}, job.settings, job.config_toml};
    run.model.index = i;
    run.model.name = "m" + std::to_string(i);
    run.model.setting = "(all)";
    if (i == 2) run.settings.batch_size = 64;
    runs.push_back(run);
  }
  std::vector<std::string> lines;
  const SweepOutcome outcome =
      run_sweep(dir / "s", "[train]\n", runs, /*resume=*/false,
                [&lines](const std::string& line) { lines.push_back(line); });
  EXPECT_EQ(outcome.trained, 3);
  const auto said = [&lines](const std::string& text) {
    return std::any_of(lines.begin(), lines.end(), [&](const std::string& line) {
      return line.find(text) != std::string::npos;
    });
  };
  EXPECT_TRUE(said("models 1, 2 of 3: training, 2 packed into one GPU run"));
  EXPECT_TRUE(said("model 3/3 m2: training"));
  for (const SweepModelRun& run : runs) {
    TrainSettings lone = run.settings;
    lone.out = (alone / run.model.name).string();
    train(lone, run.config_toml);
    EXPECT_EQ(bytes_of(dir / "s" / run.model.name / "last.safetensors"),
              bytes_of(fs::path(lone.out) / "last.safetensors"))
        << run.model.name;
  }
}

// Models that differ beyond their seed and rates are refused as one group (the sweep never forms
// such a group: it packs by packable_together).
TEST(PackedTrainingRefusal, ADifferentNetworkCannotShareAGroup) {
  ScratchDir dir("packed-refused");
  std::vector<TrainJob> jobs = packed_jobs(dir, 2, 1, "none");
  jobs[1].settings.activation = jobs[0].settings.activation == "relu" ? "tanh" : "relu";
  EXPECT_FALSE(packable_together(jobs[0], jobs[1]));
  EXPECT_THROW(train_models(jobs), Error);
}

}  // namespace
}  // namespace lenet5
