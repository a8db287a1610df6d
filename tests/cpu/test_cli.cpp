// The command line as users and scripts meet it: exit codes (0 success, 1 runtime failure,
// 2 usage error), one-line messages that name the problem, settings from TOML files.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "core/cpu_threads.hpp"
#include "cuda/runtime/runtime.hpp"
#include "settings_test_util.hpp"
#include "test_util.hpp"
#include "tiny_mnist.hpp"
#include "train/checkpoint.hpp"

namespace lenet5 {
namespace {

using testing::mentions;
using testing::run_lenet5;
using testing::TempDir;

TEST(Cli, HelpListsEveryCommandAndVersionPrintsIt) {
  TempDir dir;
  const auto help = run_lenet5("--help", dir);
  EXPECT_EQ(help.exit_code, 0);
  // Listed in the order of their registrations' keys (src/cli/commands.hpp).
  std::size_t at = help.out.find("Subcommands:");
  ASSERT_NE(at, std::string::npos) << help.out;
  for (const char* command : {"train", "sweep", "evaluate", "classify", "bench", "figures"}) {
    at = help.out.find(std::string("\n  ") + command + " ", at);
    ASSERT_NE(at, std::string::npos) << command << " missing or out of order in\n" << help.out;
  }
  const auto train_help = run_lenet5("train --help", dir);
  EXPECT_EQ(train_help.exit_code, 0);
  for (const char* flag :
       {"--epochs", "--batch-size", "--lr", "--schedule", "--momentum", "--weight-decay", "--seed",
        "--device", "--out", "--resume", "--train-limit", "--data"})
    EXPECT_TRUE(mentions(train_help.out, flag)) << flag;
  const auto version = run_lenet5("--version", dir);
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_TRUE(mentions(version.out, "lenet5 " LENET5_VERSION));
}

TEST(Cli, UsageErrorsExitWithTwo) {
  TempDir dir;
  struct Case {
    const char* arguments;
    const char* message;
  };
  const Case cases[] = {
      {"", "subcommand"},
      {"train --no-such-flag", "--no-such-flag"},
      {"train --epochs many", "--epochs"},
      {"train --device tpu --train-limit 10", "--device must be auto, gpu or cpu"},
      {"train --schedule sometimes --device cpu", "unknown schedule 'sometimes'"},
      {"train --activation softplus --device cpu", "unknown activation 'softplus'"},
      {"train --kernels fast --conv-algo winograd --device cpu",
       "unknown convolution version 'winograd'"},
      {"train --kernels turbo --device cpu", "accepted: book, fast, whole-step, tensor"},
      {"train --kernels whole-step --conv-algo tiled --device cpu",
       "does not apply to --kernels whole-step"},
      // Refused before any data is read (there is none under --data here), on any device.
      {"train --kernels whole-step --subsampling trainable --device cpu --data /no/such/folder",
       "--subsampling trainable does not apply to --kernels whole-step"},
      {"train --subsampling trainable --device cpu --data /no/such/folder",
       "choose --kernels fast"},
      // The whole-step kernels compute the softmax output only; the default kernel set is
      // whole-step, so --output rbf alone is refused too, before anything trains.
      {"train --kernels whole-step --output rbf --device cpu",
       "--output rbf does not run in the whole-step kernel set"},
      {"train --output rbf --device cpu --train-limit 10", "choose --kernels fast"},
      {"train --output linear --device cpu", "unknown output layer 'linear'"},
      {"train --batch-size 0 --device cpu", "--batch-size"},
      {"train --optimizer adam --device cpu", "accepted: sgd|sdlm"},
      {"train --optimizer sdlm --momentum 0.9 --kernels fast --device cpu",
       "--optimizer sdlm takes no momentum"},
      // Refused before anything trains, whatever the device (the CPU runs fast layers for it).
      {"train --optimizer sdlm --momentum 0 --kernels whole-step --device cpu",
       "--optimizer sdlm does not run in --kernels whole-step"},
      {"train --optimizer sdlm --momentum 0 --kernels fast --sdlm-mu 0 --device cpu",
       "--sdlm-mu must be above 0"},
      {"train --momentum 1.5 --device cpu", "--momentum"},
      // The tensor cores (C3, and the dense weights' gradients from batch 256): the whole-step
      // kernels on a GPU only.
      {"train --precision tf32 --device cpu", "--precision tf32 runs on a GPU's tensor cores"},
      // Its evaluations need the tensor cores, which the CPU has none of: not silently fp32 there.
      {"train --kernels tensor --device cpu",
       "--kernels tensor trains and evaluates on a GPU's tensor cores"},
      {"train --precision tf32 --kernels fast --device gpu",
       "--precision tf32 runs in the whole-step and tensor-core kernels only"},
      {"train --precision bf16 --kernels whole-step --device gpu",
       "--precision bf16 runs in the tensor-core kernels' training step only"},
      {"train --precision fp16 --device cpu", "fp16"},
      {"train --dataset cifar --device cpu",
       "--dataset: unknown data set 'cifar' (accepted: mnist|fashion-mnist)"},
      {"evaluate --dataset cifar --checkpoint '" LENET5_SOURCE_DIR "/tests/data/digit7.pgm'",
       "--dataset"},
      {"evaluate", "--checkpoint"},
      {"evaluate --checkpoint /no/such/file.safetensors", "/no/such/file.safetensors"},
      {"classify --checkpoint /no/such/file.safetensors x.png", "/no/such/file.safetensors"},
      {"--config /no/such/config.toml train", "/no/such/config.toml"},
      // Any existing file passes --checkpoint's parse; the thread count is refused before it is
      // read.
      {"evaluate --threads 0 --device cpu --checkpoint '" LENET5_SOURCE_DIR
       "/tests/data/digit7.pgm'",
       "--threads must be at least 1"},
      {"classify --threads 0 --device cpu --checkpoint '" LENET5_SOURCE_DIR
       "/tests/data/digit7.pgm' x.png",
       "--threads must be at least 1"},
  };
  for (const Case& c : cases) {
    const auto result = run_lenet5(c.arguments, dir);
    EXPECT_EQ(result.exit_code, 2) << c.arguments << "\n" << result.err;
    EXPECT_TRUE(mentions(result.err, c.message)) << c.arguments << "\n" << result.err;
  }
}

// Every declared range, through the program: a value outside it is a usage error naming the flag.
TEST(Cli, EachOutOfRangeSettingIsAUsageErrorNamingTheFlag) {
  TempDir dir;
  for (const SettingDeclaration& d : train_setting_declarations()) {
    if (!d.range) continue;
    for (double value : testing::values_outside(*d.range)) {
      // "--flag=-1": a value that starts with a dash must be joined to its flag.
      const std::string arguments =
          "train --device cpu " + d.flag + "=" + testing::number_argument(value);
      const auto result = run_lenet5(arguments, dir);
      EXPECT_EQ(result.exit_code, 2) << arguments << "\n" << result.err;
      EXPECT_TRUE(mentions(result.err, d.flag + " must be " + d.range->text())) << arguments << "\n"
                                                                                << result.err;
    }
  }
}

// The augmentation's settings through the program: an unknown kind names the accepted ones, and a
// range outside its limits names the flag and the range (core/augment.hpp's limits: a half turn,
// a sigma above 0 and at most 28, a scale range below 1 so the factor stays positive).
TEST(Cli, AugmentationSettingsOutsideTheirRangesAreUsageErrors) {
  TempDir dir;
  struct Case {
    const char* arguments;
    const char* message;
  };
  const Case cases[] = {
      {"--augment bogus", "unknown augmentation 'bogus' (accepted: dataset|none|affine|elastic)"},
      {"--augment-rotation 181", "--augment-rotation must be between 0 and 180, not 181"},
      {"--augment elastic --elastic-sigma 0",
       "--elastic-sigma must be above 0 and at most 28, not 0"},
      {"--elastic-sigma=-1", "--elastic-sigma must be above 0 and at most 28, not -1"},
      {"--augment-scale 1", "--augment-scale must be at least 0 and below 1, not 1"},
  };
  for (const Case& c : cases) {
    const std::string arguments = std::string("train --device cpu ") + c.arguments;
    const auto result = run_lenet5(arguments, dir);
    EXPECT_EQ(result.exit_code, 2) << arguments << "\n" << result.err;
    EXPECT_TRUE(mentions(result.err, c.message)) << arguments << "\n" << result.err;
  }
}

// CLI11 reads a settings file line by line to its end: a device or a huge file is refused first.
TEST(Cli, SettingsFileMustBeASmallRegularFile) {
  TempDir dir;
  std::ofstream(dir / "huge.toml") << "[train]\n";
  std::filesystem::resize_file(dir / "huge.toml", (1u << 20) + 1);
  const std::pair<std::string, std::string> cases[] = {{"/dev/zero", "not a regular file"},
                                                       {(dir / "huge.toml").string(), "1 MiB"}};
  for (const auto& [file, message] : cases) {
    const auto result = run_lenet5("--config " + file + " train --device cpu", dir);
    EXPECT_EQ(result.exit_code, 2) << file << "\n" << result.err;
    EXPECT_TRUE(mentions(result.err, message)) << file << "\n" << result.err;
  }
}

// A bare name that is no file of the working folder is a shipped config: the build tree's program
// reads the source tree's configs/ (the installed one its share/lenet5/configs: tests/install/).
TEST(Cli, ABareConfigNameIsAShippedConfig) {
  TempDir dir;
  const auto found = run_lenet5("--config quick.toml train --help", dir);
  EXPECT_EQ(found.exit_code, 0) << found.err;
  // The name without its .toml, as the shipped configs are spoken of.
  const auto short_name = run_lenet5("--config quick train --help", dir);
  EXPECT_EQ(short_name.exit_code, 0) << short_name.err;
  const auto short_missing = run_lenet5("--config no-such train --device cpu", dir);
  EXPECT_EQ(short_missing.exit_code, 2) << short_missing.err;
  EXPECT_TRUE(mentions(short_missing.err, "no-such was found in none of")) << short_missing.err;
  // A quick.toml of the working folder comes before the shipped one, by either name: this one
  // asks for 0 epochs, which the shipped quick.toml does not.
  { std::ofstream(dir / "quick.toml") << "[train]\nepochs = 0\n"; }
  const std::filesystem::path previous = std::filesystem::current_path();
  std::filesystem::current_path(dir.path());
  for (const std::string name : {"quick", "quick.toml"}) {
    const auto local = run_lenet5("--config " + name + " train --device cpu", dir);
    EXPECT_EQ(local.exit_code, 2) << name << "\n" << local.err;
    EXPECT_TRUE(mentions(local.err, "--epochs")) << name << "\n" << local.err;
  }
  std::filesystem::current_path(previous);
  const auto missing = run_lenet5("--config no-such.toml train --device cpu", dir);
  EXPECT_EQ(missing.exit_code, 2) << missing.err;
  // The refusal names the file, where it looked and what it could have been.
  for (const std::string& part :
       {std::string("no-such.toml"), std::string("the working folder"),
        (testing::source_dir() / "configs").string(), std::string("quick.toml")})
    EXPECT_TRUE(mentions(missing.err, part)) << part << "\n" << missing.err;
}

TEST(Cli, DeviceGpuWithoutAGpuIsAClearError) {
  if (!cuda::gpu_available_in_build())
    GTEST_SKIP() << "built without GPU support (DeviceGpuInABuildWithoutGpuSupportIsAUsageError)";
  if (cuda::device_count() > 0) GTEST_SKIP() << "this machine has a CUDA device";
  TempDir dir;
  const auto result = run_lenet5("train --device gpu --train-limit 10", dir);
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_TRUE(mentions(result.err, "--device gpu")) << result.err;
  EXPECT_TRUE(mentions(result.err, "--device cpu")) << result.err;  // says how to proceed
}

// A build without GPU support says so, and how to get it, wherever the GPU is asked for: a usage
// error (exit 2), as the request cannot succeed on any machine.
TEST(Cli, DeviceGpuInABuildWithoutGpuSupportIsAUsageError) {
  if (cuda::gpu_available_in_build()) GTEST_SKIP() << "this build has GPU support";
  TempDir dir;
  // Any existing file passes --checkpoint's parse; the device is refused before it is read.
  const std::string file =
      "'" + (testing::source_dir() / "tests" / "data" / "digit7.pgm").string() + "'";
  const std::vector<std::string> gpu_requests{
      "train --device gpu --train-limit 10",
      "evaluate --device gpu --checkpoint " + file,
      "classify --device gpu --checkpoint " + file + " " + file,
      "bench --device gpu --epochs 1",
      "bench --layers",
      "figures fig16.12 --device gpu --out '" + (dir / "out").string() + "'"};
  for (const std::string& arguments : gpu_requests) {
    const auto result = run_lenet5(arguments, dir);
    EXPECT_EQ(result.exit_code, 2) << arguments << "\n" << result.err;
    EXPECT_TRUE(mentions(result.err, cuda::kBuiltWithoutGpu)) << arguments << "\n" << result.err;
  }
}

// ... and --device auto runs on the CPU without a warning about it (the build announced it).
TEST(Cli, DeviceAutoInABuildWithoutGpuSupportIsTheCpuQuietly) {
  LENET5_REQUIRE_MNIST();
  if (cuda::gpu_available_in_build()) GTEST_SKIP() << "this build has GPU support";
  TempDir dir;
  const auto result =
      run_lenet5("train --train-limit 64 --epochs 1 --evaluate false --data '" +
                     testing::mnist_dir().string() + "' --out '" + (dir / "run").string() + "'",
                 dir);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_FALSE(mentions(result.err, "CUDA")) << result.err;
  EXPECT_FALSE(mentions(result.err, "warn")) << result.err;
}

// Resuming with other augmentation settings than the checkpoint's is allowed, and said.
TEST(Cli, ResumingWithAnotherAugmentationWarns) {
  LENET5_REQUIRE_MNIST();
  TempDir dir;
  const std::string data = testing::mnist_dir().string(), run = (dir / "run").string();
  const auto first = run_lenet5(
      "train --device cpu --train-limit 64 --epochs 1 --evaluate false"
      " --data " +
          data + " --out " + run,
      dir);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const std::string checkpoint = run + "/last.safetensors";
  const auto same = run_lenet5("train --epochs 2 --resume " + checkpoint, dir);
  EXPECT_EQ(same.exit_code, 0) << same.err;
  EXPECT_FALSE(mentions(same.err, "augmentation differs")) << same.err;
  // The kind each run resolves to is compared: MNIST's "dataset" is elastic.
  const auto named = run_lenet5("train --epochs 3 --augment elastic --resume " + checkpoint, dir);
  EXPECT_EQ(named.exit_code, 0) << named.err;
  EXPECT_FALSE(mentions(named.err, "augmentation differs")) << named.err;
  const auto other = run_lenet5("train --epochs 4 --augment none --resume " + checkpoint, dir);
  EXPECT_EQ(other.exit_code, 0) << other.err;
  EXPECT_TRUE(mentions(other.err, "augmentation differs")) << other.err;
}

// SIGTERM during training: the run saves last.safetensors (a checkpoint in mid-epoch that resumes)
// and exits with 128 + 15, the shell's convention for "ended by SIGTERM".
TEST(Cli, SigtermSavesACheckpointAndExitsWith143) {
  LENET5_REQUIRE_MNIST();
  TempDir dir;
  const std::string out = (dir / "run").string(), data = testing::mnist_dir().string();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const int quiet = open("/dev/null", O_WRONLY);
    dup2(quiet, STDOUT_FILENO);
    dup2(quiet, STDERR_FILENO);
    execl(LENET5_BINARY, LENET5_BINARY, "train", "--device", "cpu", "--epochs", "1", "--evaluate",
          "false", "--out", out.c_str(), "--data", data.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // The log's first line is written just before the engine is built and the handlers installed;
  // an epoch of 60,000 images then takes many seconds on a CPU, so a signal 0.5 s later lands in
  // mid-epoch, and the run stops right after the step it is in.
  const auto log = dir / "run" / "train.log";
  for (int i = 0; i < 600 && testing::read_text(log).find("training on") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  kill(child, SIGTERM);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status)
                                 << " (before the handler was installed?)";
  EXPECT_EQ(WEXITSTATUS(status), 143);
  EXPECT_TRUE(std::filesystem::exists(dir / "run" / "last.safetensors"));
  EXPECT_NE(testing::read_text(log).find("--resume"), std::string::npos);  // says how to go on
  // The pictures of what the folder holds: no epoch ended, so the curves are empty charts.
  for (const char* picture : {"curves.svg", "filters_c1.png", "filters_c3.png"})
    EXPECT_TRUE(std::filesystem::exists(dir / "run" / picture)) << picture;
}

// `command` given a config file whose [train] section holds the unknown key learning-rate: a usage
// error (exit code 2) that names the key.
void expect_unknown_key_refused(const TempDir& dir, const std::string& command) {
  const std::string typo = (dir / "typo.toml").string();
  { std::ofstream(typo) << "[train]\nepochs = 1\nlearning-rate = 0.1\n"; }
  const auto result = run_lenet5("--config '" + typo + "' " + command, dir);
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_TRUE(mentions(result.err, "learning-rate")) << result.err;
}

TEST(Cli, UnknownConfigKeysAreErrors) {
  TempDir dir;
  expect_unknown_key_refused(dir, "train");
}

// bench trains with the config file's [train] section (as train does), the command line winning.
TEST(Cli, BenchUsesTheConfigTrainSectionAndFlagsWin) {
  LENET5_REQUIRE_MNIST();
  TempDir dir;
  {
    std::ofstream(dir / "b.toml") << "[train]\nlr = 0.123\nschedule = \"one-cycle\"\nepochs = 3\n";
  }
  const auto result = run_lenet5("--config '" + (dir / "b.toml").string() +
                                     "' bench --device cpu --train-limit 64 --evaluate false "
                                     "--epochs 1 --data '" +
                                     testing::mnist_dir().string() + "'",
                                 dir);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(mentions(result.out, "\"lr\":0.123")) << result.out;
  EXPECT_TRUE(mentions(result.out, "\"schedule\":\"one-cycle\"")) << result.out;
  EXPECT_TRUE(mentions(result.out, "\"epochs\":1")) << result.out;  // the flag wins over the file

  expect_unknown_key_refused(dir, "bench --device cpu");
}

TEST(Cli, RuntimeFailuresExitWithOneAndSayHowToFix) {
  TempDir dir;
  const auto no_data =
      run_lenet5("train --device cpu --data '" + (dir / "empty").string() + "'", dir);
  EXPECT_EQ(no_data.exit_code, 1) << no_data.err;
  EXPECT_TRUE(mentions(no_data.err, "fetch_mnist.sh")) << no_data.err;

  { std::ofstream(dir / "junk.safetensors") << "this is not a checkpoint"; }
  const auto junk = run_lenet5(
      "evaluate --device cpu --checkpoint '" + (dir / "junk.safetensors").string() + "'", dir);
  EXPECT_EQ(junk.exit_code, 1) << junk.err;
  EXPECT_TRUE(mentions(junk.err, "junk.safetensors")) << junk.err;
}

// --quiet quiets the terminal, not the run's record: train.log still has the run's info lines.
TEST(Cli, QuietTrainingStillWritesItsLog) {
  LENET5_REQUIRE_MNIST();
  TempDir dir;
  const std::string run = (dir / "run").string();
  const auto trained = run_lenet5(
      "-q train --device cpu --train-limit 64 --epochs 1 --evaluate false"
      " --out '" +
          run + "' --data '" + testing::mnist_dir().string() + "'",
      dir);
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  EXPECT_FALSE(mentions(trained.err, "info")) << trained.err;
  const std::string log = testing::read_text(dir / "run" / "train.log");
  EXPECT_TRUE(mentions(log, "trainable parameters, training on 64 images")) << log;
  EXPECT_TRUE(mentions(log, "epoch 1/1")) << log;
}

TEST(Cli, TrainWritesTheEffectiveConfigAndEvaluatesAndClassifies) {
  LENET5_REQUIRE_MNIST();
  TempDir dir;
  const std::string run = (dir / "run").string();
  // MNIST's first 1,500 training images (500 trained on, 1,000 held out) and 1,000 test images:
  // the full sets' 15,000 evaluated images would take most of the run's time.
  testing::write_tiny_mnist(dir / "data", 1500, 1000);
  const std::string data = " --data '" + (dir / "data").string() + "'";
  const auto trained =
      run_lenet5("--config '" + (testing::source_dir() / "configs" / "quick.toml").string() +
                     "' train --train-limit 500 --validation 1000 --device cpu --seed 5 --out '" +
                     run + "'" + data,
                 dir);
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  const std::string config = testing::read_text(dir / "run" / "config.toml");
  EXPECT_TRUE(mentions(config, "train-limit=500")) << config;  // the flag overrides the file
  EXPECT_TRUE(mentions(config, "seed=5")) << config;
  EXPECT_TRUE(mentions(config, "epochs=1")) << config;  // from quick.toml
  // The thread count is stored in config.toml, the log names it with the device.
  EXPECT_TRUE(mentions(config, "\nthreads=" + std::to_string(available_cpu_threads()) + "\n"))
      << config;
  EXPECT_TRUE(mentions(trained.err, "on the cpu (" + std::to_string(available_cpu_threads()) +
                                        (available_cpu_threads() == 1 ? " thread)" : " threads)")))
      << trained.err;

  const std::string checkpoint = run + "/best.safetensors";
  const auto evaluated =
      run_lenet5("evaluate --json --device cpu --checkpoint '" + checkpoint + "'" + data, dir);
  ASSERT_EQ(evaluated.exit_code, 0) << evaluated.err;
  EXPECT_TRUE(mentions(evaluated.out, "\"accuracy\"")) << evaluated.out;
  EXPECT_TRUE(mentions(evaluated.out, "\"confusion\"")) << evaluated.out;
  // train ends with the best checkpoint's report, the very text `evaluate` prints for that file,
  // which is what a run folder given as --checkpoint means.
  const auto report = run_lenet5("evaluate --device cpu --checkpoint '" + run + "'" + data, dir);
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_TRUE(mentions(report.out, "confusion matrix")) << report.out;
  // ... and says which checkpoint that is and how it was chosen: on the held-out images.
  EXPECT_TRUE(mentions(trained.out,
                       "best.safetensors (after epoch 1 of 1: the epoch that the "
                       "1000 training images held out for validation read best"))
      << trained.out;
  EXPECT_TRUE(mentions(trained.out, report.out)) << trained.out << "\n---\n" << report.out;
  // A folder without a checkpoint is a usage error that says what --checkpoint takes.
  const auto no_run = run_lenet5("evaluate --checkpoint '" + dir.path().string() + "'", dir);
  EXPECT_EQ(no_run.exit_code, 2) << no_run.err;
  EXPECT_TRUE(mentions(no_run.err, "holding no best.safetensors nor last.safetensors"))
      << no_run.err;

  // One unreadable image among good ones: the others are still classified, the exit code is 1.
  { std::ofstream(dir / "broken.png") << "not a png"; }
  const auto classified = run_lenet5(
      "classify --device cpu --checkpoint '" + checkpoint + "' '" + (dir / "broken.png").string() +
          "' '" + (testing::source_dir() / "tests" / "data" / "digit7.pgm").string() + "' --top 3",
      dir);
  EXPECT_EQ(classified.exit_code, 1);
  EXPECT_TRUE(mentions(classified.err, "broken.png")) << classified.err;
  EXPECT_TRUE(mentions(classified.out, "digit7.pgm: ")) << classified.out;
}

}  // namespace
}  // namespace lenet5

namespace lenet5 {
namespace {

// A checkpoint written before training images were held out has no validation line and no
// validation_images: resumed, its run goes on training on all its images, whatever the default
// now holds out, and asking for another number is a usage error that says what to pass.
TEST(Cli, ACheckpointFromBeforeHeldOutImagesResumesHoldingOutNone) {
  LENET5_REQUIRE_MNIST();
  testing::TempDir dir;
  // A subset of MNIST (its first 200 training and 200 test images): each epoch is evaluated.
  testing::write_tiny_mnist(dir / "data", 200, 200);
  const std::string data = " --data '" + (dir / "data").string() + "'";
  const std::string run = (dir / "run").string();
  const auto trained = testing::run_lenet5(
      "train --device cpu --train-limit 64 --epochs 1 --validation 0 --out '" + run + "'" + data,
      dir);
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  Checkpoint old = load_checkpoint(dir / "run" / "last.safetensors");
  const std::size_t line = old.config_toml.find("validation=0\n");
  ASSERT_NE(line, std::string::npos) << old.config_toml;
  old.config_toml.erase(line, std::string("validation=0\n").size());
  save_checkpoint(dir / "run" / "last.safetensors", old);

  const std::string resume = " --resume '" + run + "/last.safetensors'";
  const auto refused = testing::run_lenet5("train --epochs 2 --validation 100" + resume, dir);
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_TRUE(testing::mentions(refused.err, "held out 0 of the training images")) << refused.err;
  EXPECT_TRUE(testing::mentions(refused.err, "resume with --validation 0")) << refused.err;
  const auto resumed = testing::run_lenet5("train --epochs 2" + resume, dir);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_TRUE(testing::mentions(resumed.err, "none held out")) << resumed.err;
  EXPECT_TRUE(testing::mentions(resumed.out, "last.safetensors (after epoch 2 of 2, the last"))
      << resumed.out;
}

}  // namespace
}  // namespace lenet5
