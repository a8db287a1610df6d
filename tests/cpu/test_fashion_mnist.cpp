// A second data set through the program (--dataset fashion-mnist): a run trained on it records it
// in its checkpoint, `evaluate` and `classify` name its classes, a checkpoint evaluated on another
// data set is refused unless --force is given, and checkpoints without the record are MNIST's. The
// data is a made-up set in MNIST's layout (tiny_mnist.hpp), so the tests need neither data set.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>

#include "data/datasets.hpp"
#include "io/safetensors.hpp"
#include "test_util.hpp"
#include "tiny_mnist.hpp"
#include "train/checkpoint.hpp"

namespace lenet5 {
namespace {

namespace fs = std::filesystem;
using testing::mentions;
using testing::run_lenet5;
using testing::TempDir;

const DatasetDescription& fashion() {
  return find_dataset("fashion-mnist");
}

std::string quoted(const fs::path& path) {
  return "'" + path.string() + "'";
}

// How many lines of `text` begin with `name` and a space once their indent is removed.
int lines_led_by(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  int count = 0;
  for (std::string line; std::getline(in, line);) {
    const std::size_t start = line.find_first_not_of(' ');
    if (start != std::string::npos && line.compare(start, name.size() + 1, name + " ") == 0)
      ++count;
  }
  return count;
}

// One short epoch on the striped set, as a Fashion-MNIST run; returns its best checkpoint.
fs::path train_fashion_run(const TempDir& dir) {
  testing::write_tiny_striped_set(dir / "data", 200, 50);
  const auto trained = run_lenet5(
      "train --device cpu --dataset fashion-mnist --epochs 1 --batch-size 20 --validation 40 "
      "--augment none --data " +
          quoted(dir / "data") + " --out " + quoted(dir / "run"),
      dir);
  EXPECT_EQ(trained.exit_code, 0) << trained.err;
  // train ends with `evaluate`'s report of the best checkpoint: Fashion-MNIST's class names.
  EXPECT_TRUE(mentions(trained.out, "rows: true class, columns: predicted class")) << trained.out;
  EXPECT_TRUE(mentions(trained.out, "T-shirt/top")) << trained.out;
  return dir / "run" / "best.safetensors";
}

const fs::path kDigit7 = testing::source_dir() / "tests" / "data" / "digit7.pgm";

class FashionRun : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    s_dir = new TempDir;
    s_checkpoint = train_fashion_run(*s_dir);
  }
  static void TearDownTestSuite() {
    delete s_dir;
    s_dir = nullptr;
  }
  static std::string data() { return quoted(*s_dir / "data"); }
  static std::string checkpoint() { return quoted(s_checkpoint); }

  static TempDir* s_dir;
  static fs::path s_checkpoint;
  TempDir m_scratch;
};
TempDir* FashionRun::s_dir = nullptr;
fs::path FashionRun::s_checkpoint;

TEST_F(FashionRun, ConfigAndCheckpointRecordTheDataSet) {
  ASSERT_TRUE(fs::exists(s_checkpoint));
  const std::string config = testing::read_text(*s_dir / "run" / "config.toml");
  EXPECT_TRUE(mentions(config, "\ndataset=\"fashion-mnist\"\n")) << config;
  // A metadata string, as PyTorch's safetensors reads them, and the stored settings both say it.
  const SafetensorsFile file = read_safetensors(s_checkpoint);
  EXPECT_EQ(file.metadata.at("dataset"), "fashion-mnist");
  const Checkpoint loaded = load_checkpoint(s_checkpoint);
  EXPECT_EQ(loaded.dataset, "fashion-mnist");
  EXPECT_TRUE(mentions(loaded.config_toml, "dataset=\"fashion-mnist\"")) << loaded.config_toml;
  // --input-scaling dataset: Fashion-MNIST's own statistics, which the metadata records.
  EXPECT_EQ(file.metadata.at("input_scaling"), "fashion-mnist");
  EXPECT_EQ(loaded.net.input_scaling, InputScaling::fashion_mnist);
}

TEST_F(FashionRun, EvaluateNamesTheClassesInTheConfusionMatrix) {
  // No --dataset: the checkpoint's own, read from --data.
  const auto text = run_lenet5(
      "evaluate --device cpu --checkpoint " + checkpoint() + " --data " + data(), m_scratch);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(mentions(text.out, "test accuracy")) << text.out;
  EXPECT_TRUE(mentions(text.out, "confusion matrix (rows: true class, columns: predicted class)"))
      << text.out;
  // Every name leads its row of the matrix and its line of the precision/recall table; the first
  // also leads the line of column headings, which the last ends.
  for (const std::string& name : fashion().class_names)
    EXPECT_EQ(lines_led_by(text.out, name), name == "T-shirt/top" ? 3 : 2) << name << "\n"
                                                                           << text.out;
  EXPECT_TRUE(mentions(text.out, "  Ankle boot\n")) << "the last column heading\n" << text.out;

  const auto json = run_lenet5(
      "evaluate --json --device cpu --checkpoint " + checkpoint() + " --data " + data(), m_scratch);
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_TRUE(mentions(json.out, "\"dataset\":\"fashion-mnist\"")) << json.out;
  EXPECT_TRUE(mentions(json.out, "\"classes\":[\"T-shirt/top\",\"Trouser\"")) << json.out;
}

// The report's page names the classes (its pictures' labels: test_pictures.cpp).
TEST_F(FashionRun, EvaluateReportNamesTheClasses) {
  const auto report = run_lenet5("evaluate --device cpu --checkpoint " + checkpoint() + " --data " +
                                     data() + " --report " + quoted(m_scratch / "report"),
                                 m_scratch);
  ASSERT_EQ(report.exit_code, 0) << report.err;
  const std::string page = testing::read_text(m_scratch / "report" / "index.html");
  EXPECT_TRUE(mentions(page, "Rows: the true class; columns: the class predicted.")) << page;
  EXPECT_TRUE(mentions(page, "0 T-shirt/top, 1 Trouser, ")) << page;
  for (const char* picture : {"confusion.png", "errors.png"})
    EXPECT_TRUE(fs::exists(m_scratch / "report" / picture)) << picture;
}

TEST_F(FashionRun, ClassifySaysTheClassNotItsNumber) {
  const auto top = run_lenet5(
      "classify --device cpu --top 10 --checkpoint " + checkpoint() + " " + quoted(kDigit7),
      m_scratch);
  ASSERT_EQ(top.exit_code, 0) << top.err;
  // All ten classes are listed under --top 10, each by its name.
  for (const std::string& name : fashion().class_names)
    EXPECT_TRUE(mentions(top.out, " " + name + " ")) << name << " missing from\n" << top.out;
  bool named = false;
  for (const std::string& name : fashion().class_names)
    named = named || mentions(top.out, "digit7.pgm: " + name + " (");
  EXPECT_TRUE(named) << "the best class is not named as Fashion-MNIST names it:\n" << top.out;

  const auto json = run_lenet5(
      "classify --json --device cpu --checkpoint " + checkpoint() + " " + quoted(kDigit7),
      m_scratch);
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_TRUE(mentions(json.out, "\"class\":\"")) << json.out;
}

TEST_F(FashionRun, EvaluatingOnAnotherDataSetIsRefusedUnlessForced) {
  const std::string command =
      "evaluate --device cpu --dataset mnist --checkpoint " + checkpoint() + " --data " + data();
  const auto refused = run_lenet5(command, m_scratch);
  EXPECT_EQ(refused.exit_code, 1) << refused.err;
  EXPECT_TRUE(mentions(refused.err, "was trained on Fashion-MNIST, but the test set in"))
      << refused.err;
  EXPECT_TRUE(mentions(refused.err, "is MNIST's")) << refused.err;
  EXPECT_TRUE(mentions(refused.err, "--force")) << refused.err;
  EXPECT_TRUE(refused.out.empty()) << refused.out;

  const auto forced = run_lenet5(command + " --force", m_scratch);
  EXPECT_EQ(forced.exit_code, 0) << forced.err;
  // The columns are still the checkpoint's classes: what its outputs mean.
  EXPECT_TRUE(mentions(forced.out, "T-shirt/top")) << forced.out;
}

// The real MNIST files are recognised by their checksums, whatever --dataset says: a Fashion
// checkpoint pointed at MNIST's folder is refused, and so is training "Fashion-MNIST" from it.
TEST_F(FashionRun, MnistFilesAreRecognisedByTheirChecksums) {
  if (!testing::have_mnist()) GTEST_SKIP() << "MNIST is not in " << testing::mnist_dir();
  const auto refused = run_lenet5("evaluate --device cpu --checkpoint " + checkpoint() +
                                      " --data " + quoted(testing::mnist_dir()),
                                  m_scratch);
  EXPECT_EQ(refused.exit_code, 1) << refused.err;
  EXPECT_TRUE(mentions(refused.err, "is MNIST's")) << refused.err;

  const auto training =
      run_lenet5("train --device cpu --dataset fashion-mnist --epochs 1 --data " +
                     quoted(testing::mnist_dir()) + " --out " + quoted(m_scratch / "run"),
                 m_scratch);
  EXPECT_EQ(training.exit_code, 1) << training.err;
  EXPECT_TRUE(mentions(training.err, "holds MNIST's files, not Fashion-MNIST's")) << training.err;
}

TEST_F(FashionRun, ResumingWithAnotherDataSetIsAUsageError) {
  const auto resumed = run_lenet5("train --device cpu --dataset mnist --epochs 2 --data " + data() +
                                      " --resume " + checkpoint(),
                                  m_scratch);
  EXPECT_EQ(resumed.exit_code, 2) << resumed.err;
  EXPECT_TRUE(mentions(resumed.err, "--dataset mnist differs from the checkpoint's data set"))
      << resumed.err;
}

// A checkpoint written before data sets were recorded has no 'dataset' key: it is MNIST's, and
// `classify` names digits.
TEST_F(FashionRun, ACheckpointWithoutTheRecordIsMnist) {
  const SafetensorsFile file = read_safetensors(s_checkpoint);
  Metadata metadata = file.metadata;
  metadata.erase("dataset");
  std::vector<TensorView> views;
  for (const auto& [name, tensor] : file.tensors)
    views.push_back({name, tensor.shape, tensor.values.data()});
  const fs::path old = m_scratch / "old.safetensors";
  write_safetensors(old, views, metadata);
  EXPECT_EQ(load_checkpoint(old).dataset, "mnist");

  const auto classified = run_lenet5(
      "classify --device cpu --checkpoint " + quoted(old) + " " + quoted(kDigit7), m_scratch);
  ASSERT_EQ(classified.exit_code, 0) << classified.err;
  EXPECT_TRUE(mentions(classified.out, "digit7.pgm: ")) << classified.out;
  for (const std::string& name : fashion().class_names)
    EXPECT_FALSE(mentions(classified.out, name)) << classified.out;
}

}  // namespace
}  // namespace lenet5
