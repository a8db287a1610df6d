// The [train] settings on the command line and in config files (cli/train_options.cpp): the
// effective config text that checkpoints and config.toml store, read back to the same settings and
// the same text, for every shipped config and for the defaults; unknown keys refused; --help built
// from the declarations.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "cli/train_options.hpp"
#include "core/cpu_threads.hpp"
#include "settings_test_util.hpp"
#include "test_util.hpp"

namespace lenet5 {
namespace {

namespace fs = std::filesystem;
using testing::first_difference;
using testing::TempDir;

struct ReadSettings {
  TrainSettings settings;
  std::string text;  // the effective config text
};

// `train` under a top-level app, bound to `settings` as the program binds it; like main(), the app
// takes --config and refuses keys that name no setting.
CLI::App* add_train(CLI::App& app, TrainSettings& settings) {
  app.allow_config_extras(CLI::config_extras_mode::error);
  app.set_config("--config");
  CLI::App* train = app.add_subcommand("train");
  cli::bind_train_settings(*train, settings);
  return train;
}

// `lenet5 <arguments>` as far as the settings go, e.g. {"--config", "configs/fast.toml", "train"}.
ReadSettings read_arguments(std::vector<std::string> arguments) {
  ReadSettings read;
  CLI::App app;
  CLI::App* train = add_train(app, read.settings);
  std::reverse(arguments.begin(), arguments.end());  // CLI11 takes them last first
  app.parse(arguments);
  read.text = cli::effective_config(*train);
  return read;
}

// A stored effective config text read back, as --resume reads a checkpoint's.
ReadSettings read_stored(const std::string& text) {
  ReadSettings read;
  CLI::App app;
  CLI::App* train = add_train(app, read.settings);
  std::istringstream stored(text);
  app.parse_from_stream(stored);
  read.text = cli::effective_config(*train);
  return read;
}

// The text every default run stores in its checkpoints, byte for byte: checkpoints written before a
// change of the declarations must keep reading as they did, and runs after it must write what they
// did. (CLI11 writes a default bool as 0 or 1, and a value that was given as it was given.)
// config.toml holds the thread count too, which checkpoints leave out. The one change a default
// run's text has seen is validation=5000, when held-out images became the default: what a default
// run computes changed with it (a checkpoint without the line held out none, and resumes so).
const char* const kDefaultText =
    "# lenet5 train settings (lenet5 --config FILE train)\n"
    "[train]\n"
    "data=\"\"\n"
    "train-limit=0\n"
    "validation=5000\n"
    "epochs=20\n"
    "batch-size=128\n"
    "lr=0.05\n"
    "schedule=\"cosine\"\n"
    "lr-gamma=0.1\n"
    "lr-step-epochs=1\n"
    "min-lr=0\n"
    "warmup-epochs=0\n"
    "one-cycle-start=0.25\n"
    "momentum=0.9\n"
    "nesterov=0\n"
    "weight-decay=0.0005\n"
    "seed=1\n"
    "device=\"auto\"\n"
    "evaluate=1\n"
    "activation=\"relu\"\n"
    "subsampling=\"max\"\n"
    "c3-table=\"full\"\n"
    "kernels=\"whole-step\"\n"
    "conv-algo=\"auto\"\n"
    "augment=\"elastic\"\n"
    "augment-rotation=10\n"
    "augment-scale=0.1\n"
    "augment-shear=10\n"
    "augment-translation=2\n"
    "elastic-alpha=10\n"
    "elastic-sigma=4\n";

TEST(TrainOptions, DefaultsWriteTheTextThatRunsHaveAlwaysStored) {
  const ReadSettings defaults = read_arguments({"train"});
  EXPECT_EQ(checkpoint_config(defaults.text), kDefaultText);
  EXPECT_TRUE(testing::mentions(
      defaults.text, "device=\"auto\"\nthreads=" + std::to_string(available_cpu_threads()) + "\n"))
      << defaults.text;
  EXPECT_EQ(first_difference(defaults.settings, TrainSettings()), "");
}

// --dataset is stored in checkpoints only away from its default, MNIST: the text of every earlier
// checkpoint (which has no such line) is still the text of a default run, and reads as MNIST.
TEST(TrainOptions, TheDataSetIsStoredOnlyWhenItIsNotMnist) {
  const ReadSettings defaults = read_arguments({"train"});
  EXPECT_TRUE(testing::mentions(defaults.text, "\ndataset=\"mnist\"\n")) << "config.toml has it";
  EXPECT_FALSE(testing::mentions(checkpoint_config(defaults.text), "dataset="));
  EXPECT_EQ(read_stored(kDefaultText).settings.dataset, "mnist");

  const ReadSettings fashion = read_arguments({"train", "--dataset", "fashion-mnist"});
  const std::string stored = checkpoint_config(fashion.text);
  EXPECT_TRUE(testing::mentions(stored, "\ndataset=\"fashion-mnist\"\n")) << stored;
  EXPECT_EQ(read_stored(stored).settings.dataset, "fashion-mnist");
}

// --augment dataset (the default) is written as what it resolves to, so that a run's config.toml
// says what it trained with and a default MNIST run stores the augment="elastic" of kDefaultText.
TEST(TrainOptions, TheDataSetsAugmentationIsWrittenResolved) {
  const ReadSettings fashion = read_arguments({"train", "--dataset", "fashion-mnist"});
  EXPECT_EQ(fashion.settings.augment, "dataset");
  EXPECT_TRUE(testing::mentions(fashion.text, "\naugment=\"none\"\n")) << fashion.text;
  const ReadSettings named =
      read_arguments({"train", "--dataset", "fashion-mnist", "--augment", "affine"});
  EXPECT_TRUE(testing::mentions(named.text, "\naugment=\"affine\"\n")) << named.text;
  EXPECT_EQ(read_stored(checkpoint_config(fashion.text)).settings.augment_kind(), "none");
}

// --precision likewise: only tf32 is stored in checkpoints, so that a resumed tf32 run (whose
// settings are read back from its checkpoint) goes on in tf32, and every fp32 checkpoint keeps the
// text it had before the setting existed.
TEST(TrainOptions, ThePrecisionIsStoredOnlyWhenItIsTf32) {
  const ReadSettings defaults = read_arguments({"train"});
  EXPECT_TRUE(testing::mentions(defaults.text, "\nprecision=\"fp32\"\n")) << "config.toml has it";
  EXPECT_FALSE(testing::mentions(checkpoint_config(defaults.text), "precision="));
  EXPECT_EQ(read_stored(kDefaultText).settings.precision, "fp32");

  const ReadSettings tf32 = read_arguments({"train", "--precision", "tf32"});
  const std::string stored = checkpoint_config(tf32.text);
  EXPECT_TRUE(testing::mentions(stored, "\nprecision=\"tf32\"\n")) << stored;
  EXPECT_EQ(read_stored(stored).settings.net_config().precision, Precision::tf32);
}

// --output likewise: only rbf is stored in checkpoints, so that the text of every softmax run is
// what it was before the setting existed. config.toml and a TOML file carry it either way.
TEST(TrainOptions, TheOutputLayerIsStoredOnlyWhenItIsRbf) {
  const ReadSettings defaults = read_arguments({"train"});
  EXPECT_TRUE(testing::mentions(defaults.text, "\noutput=\"softmax\"\n")) << "config.toml has it";
  EXPECT_FALSE(testing::mentions(checkpoint_config(defaults.text), "output="));
  EXPECT_EQ(read_stored(kDefaultText).settings.output, "softmax");

  const ReadSettings rbf = read_arguments({"train", "--output", "rbf", "--kernels", "fast"});
  const std::string stored = checkpoint_config(rbf.text);
  EXPECT_TRUE(testing::mentions(stored, "\noutput=\"rbf\"\n")) << stored;
  EXPECT_EQ(read_stored(stored).settings.output, "rbf");
  EXPECT_EQ(read_stored(stored).settings.net_config().output, OutputLayer::rbf);

  TempDir dir;
  std::ofstream(dir / "rbf.toml") << "[train]\noutput = \"rbf\"\nkernels = \"book\"\n";
  const ReadSettings from_file = read_arguments({"--config", (dir / "rbf.toml").string(), "train"});
  EXPECT_EQ(from_file.settings.output, "rbf");
  EXPECT_EQ(read_stored(from_file.text).text, from_file.text);
}

// SDLM's three settings are stored in checkpoints only away from their defaults (sgd, 0.02, 500):
// the default text is unchanged, and an SDLM run's checkpoints read back as SDLM with its values.
TEST(TrainOptions, TheOptimizerAndSdlmsSettingsAreStoredOnlyAwayFromTheirDefaults) {
  const ReadSettings defaults = read_arguments({"train"});
  EXPECT_TRUE(testing::mentions(defaults.text, "\noptimizer=\"sgd\"\n")) << "config.toml has it";
  for (const char* key : {"optimizer=", "sdlm-mu=", "sdlm-samples="})
    EXPECT_FALSE(testing::mentions(checkpoint_config(defaults.text), key)) << key;
  EXPECT_EQ(read_stored(kDefaultText).settings.optimizer, "sgd");

  const ReadSettings sdlm = read_arguments({"train", "--optimizer", "sdlm", "--momentum", "0",
                                            "--sdlm-mu", "0.01", "--sdlm-samples", "250"});
  const std::string stored = checkpoint_config(sdlm.text);
  for (const char* line : {"\noptimizer=\"sdlm\"\n", "\nsdlm-mu=0.01\n", "\nsdlm-samples=250\n"})
    EXPECT_TRUE(testing::mentions(stored, line)) << line << " missing in\n" << stored;
  const TrainSettings back = read_stored(stored).settings;
  EXPECT_EQ(back.optimizer, "sdlm");
  EXPECT_EQ(back.sdlm_mu, 0.01);
  EXPECT_EQ(back.sdlm_samples, 250);
  // SDLM at the paper's values stores only the optimizer: the values are the defaults.
  const ReadSettings paper = read_arguments({"train", "--optimizer", "sdlm", "--sdlm-mu", "0.020"});
  EXPECT_FALSE(testing::mentions(checkpoint_config(paper.text), "sdlm-mu=")) << paper.text;
}

// Read -> effective text -> read again: the same settings and the same text, for the defaults,
// every shipped config, and flags over a config (the flags win and are stored).
TEST(TrainOptions, ShippedConfigsAndDefaultsRoundTrip) {
  std::vector<std::vector<std::string>> cases{{"train"}};
  for (const auto& entry : fs::directory_iterator(testing::source_dir() / "configs"))
    if (entry.path().extension() == ".toml")
      cases.push_back({"--config", entry.path().string(), "train"});
  ASSERT_GE(cases.size(), 4u) << "configs/ should hold lenet5.toml, fast.toml and quick.toml";
  cases.push_back({"--config", (testing::source_dir() / "configs" / "fast.toml").string(), "train",
                   "--batch-size", "32", "--nesterov", "true", "--lr", "0.050", "--seed", "7",
                   "--data", "/tmp/mnist", "--out", "/tmp/run"});

  for (const auto& arguments : cases) {
    const std::string what = arguments.size() > 1 ? arguments[1] : "the defaults";
    const ReadSettings first = read_arguments(arguments);
    EXPECT_NO_THROW(first.settings.validate()) << what;
    const ReadSettings again = read_stored(first.text);
    EXPECT_EQ(again.text, first.text) << what;
    // --out is where a run goes, not how it trains: never stored, so never read back.
    TrainSettings expected = first.settings;
    expected.out = TrainSettings().out;
    // --augment dataset is stored as the kind it resolves to (effective_config).
    expected.augment = first.settings.augment_kind();
    EXPECT_EQ(first_difference(again.settings, expected), "") << what;
  }
}

TEST(TrainOptions, AConfigFileSetsWhatItNames) {
  const ReadSettings fast = read_arguments(
      {"--config", (testing::source_dir() / "configs" / "fast.toml").string(), "train"});
  EXPECT_EQ(fast.settings.kernels, "whole-step");
  EXPECT_EQ(fast.settings.batch_size, 256);
  EXPECT_EQ(fast.settings.schedule, "one-cycle");
  EXPECT_NE(fast.text.find("kernels=\"whole-step\"\n"), std::string::npos) << fast.text;
}

TEST(TrainOptions, AnUnknownKeyIsAnErrorNamingIt) {
  TempDir dir;
  const fs::path file = dir / "typo.toml";
  std::ofstream(file) << "[train]\nepochs = 1\nlearning-rate = 0.1\n";
  try {
    read_arguments({"--config", file.string(), "train"});
    ADD_FAILURE() << "learning-rate was accepted";
  } catch (const CLI::ParseError& e) {
    EXPECT_NE(std::string(e.what()).find("learning-rate"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_stored("[train]\nlearning-rate=0.1\n"), CLI::ParseError);
}

TEST(TrainOptions, HelpShowsEveryDeclaredSettingWithItsHelpAndRange) {
  TrainSettings settings;
  CLI::App app;
  const std::string help = add_train(app, settings)->help();
  for (const SettingDeclaration& d : train_setting_declarations()) {
    EXPECT_NE(help.find(d.flag), std::string::npos) << d.flag;
    EXPECT_NE(help.find(d.help_text()), std::string::npos) << d.flag;
    if (d.range) EXPECT_NE(d.help_text().find(d.range->text()), std::string::npos) << d.flag;
  }
}

}  // namespace
}  // namespace lenet5
