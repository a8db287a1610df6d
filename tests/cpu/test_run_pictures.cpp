// The pictures `train` leaves in its run folder and `evaluate --report` writes, through the
// program as a user runs it (one short CPU run shared by the tests), and metrics.csv's reading.
#include <gtest/gtest.h>
#include <stb_image.h>

#include <fstream>

#include "error_assertions.hpp"
#include "test_util.hpp"
#include "tiny_mnist.hpp"
#include "train/evaluation_report.hpp"
#include "train/run_folder.hpp"
#include "train/run_pictures.hpp"

namespace lenet5 {
namespace {

namespace fs = std::filesystem;
using testing::mentions;
using testing::read_text;
using testing::run_lenet5;
using testing::TempDir;
using testing_support::throws_error_mentioning;

// Width and height of a PNG file, 0 x 0 when it does not decode.
std::pair<int, int> png_size(const fs::path& file) {
  int width = 0, height = 0, channels = 0;
  if (!stbi_info(file.c_str(), &width, &height, &channels)) return {0, 0};
  return {width, height};
}

// Held-out images add val_loss and val_acc after train_acc, and a validation series to each chart.
TEST(RunPictures, MetricsRowsWithValidationColumnsGiveAValidationSeries) {
  TempDir dir;
  std::ofstream(dir / "metrics.csv")
      << "epoch,lr,train_loss,train_acc,val_loss,val_acc,test_loss,test_acc,seconds,images_per_s\n"
         "1,0.05,1.5,60.00,0.75,80.00,0.5,85.00,1.0,100\n"
         "2,0.04,0.5,90.00,0.125,97.50,0.25,95.50,1.0,100\n";
  const std::vector<MetricsRow> rows = read_metrics_csv(dir / "metrics.csv");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].validation_loss, 0.125);
  EXPECT_EQ(rows[1].validation_accuracy, 97.5);
  EXPECT_EQ(rows[1].test_accuracy, 95.5);
  EXPECT_EQ(rows[1].seconds, 1);
  const std::vector<pictures::LineChart> charts = training_curves(rows);
  ASSERT_EQ(charts[1].series.size(), 3u);
  EXPECT_EQ(charts[1].series[1].name, "validation");
  EXPECT_EQ(charts[1].series[1].y, (std::vector<double>{80, 97.5}));
  EXPECT_EQ(charts[1].series[2].name, "test");
}

TEST(RunPictures, MetricsRowsBecomeTrainAndTestSeries) {
  TempDir dir;
  std::ofstream(dir / "metrics.csv")
      << "epoch,lr,train_loss,train_acc,test_loss,test_acc,seconds,images_per_s\n"
         "1,0.05,1.5,60.00,,,1.0,100\n"  // not evaluated
         "2,0.04,0.5,90.00,0.25,95.50,1.0,100\n";
  const std::vector<MetricsRow> rows = read_metrics_csv(dir / "metrics.csv");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].test_loss, -1);
  EXPECT_EQ(rows[1].test_accuracy, 95.5);
  const std::vector<pictures::LineChart> charts = training_curves(rows);
  ASSERT_EQ(charts.size(), 2u);
  EXPECT_EQ(charts[0].series[0].y, (std::vector<double>{1.5, 0.5}));  // train loss
  EXPECT_EQ(charts[0].series[1].x, (std::vector<double>{2}));         // test loss: epoch 2 only
  EXPECT_EQ(charts[1].series[1].y, (std::vector<double>{95.5}));      // test accuracy
  std::ofstream(dir / "bad.csv") << "epoch,lr,train_loss,train_acc,test_loss,test_acc,seconds\n"
                                    "1,0.1,x,y,z,w,1\n";
  EXPECT_TRUE(
      throws_error_mentioning([&] { read_metrics_csv(dir / "bad.csv"); }, {"bad.csv", "line 2"}));
  // The columns are found by the header's names: one without a column every run writes is
  // refused at line 1.
  std::ofstream(dir / "headless.csv") << "epoch,lr\n1,0.1,0.5,90,0.25,95,1.0,100\n";
  EXPECT_TRUE(throws_error_mentioning([&] { read_metrics_csv(dir / "headless.csv"); },
                                      {"headless.csv", "line 1", "test_acc"}));
  // A file no run writes (a sparse 17 MiB here) is refused from its size, before it is read.
  std::ofstream(dir / "huge.csv") << "epoch,lr\n";
  std::filesystem::resize_file(dir / "huge.csv", kMaxMetricsBytes + 1);
  EXPECT_TRUE(
      throws_error_mentioning([&] { read_metrics_csv(dir / "huge.csv"); }, {"huge.csv", "16 MiB"}));
}

// metrics.csv of a run with --evaluate-training-set ends each row in train_eval_loss and
// train_eval_acc; the rows of older files (and of runs without it) have neither, and read as -1.
TEST(RunPictures, MetricsRowsReadTheTrainingSetColumnsWhereTheyAre) {
  TempDir dir;
  std::ofstream(dir / "metrics.csv")
      << "epoch,lr,train_loss,train_acc,test_loss,test_acc,seconds,images_per_s,"
         "train_eval_loss,train_eval_acc\n"
         "1,0.05,1.5,60.00,0.5,85.00,1.0,100\n"  // kept from before a resume without the setting
         "2,0.04,0.5,90.00,0.25,95.50,1.0,100,0.125,97.25\n";
  const std::vector<MetricsRow> rows = read_metrics_csv(dir / "metrics.csv");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].train_eval_loss, -1);
  EXPECT_EQ(rows[0].train_eval_accuracy, -1);
  EXPECT_EQ(rows[1].train_eval_loss, 0.125);
  EXPECT_EQ(rows[1].train_eval_accuracy, 97.25);
  EXPECT_EQ(rows[1].train_accuracy, 90);  // the running accuracy stays where it was
  EXPECT_EQ(rows[1].seconds, 1);
  std::ofstream(dir / "bad.csv")
      << "epoch,lr,train_loss,train_acc,test_loss,test_acc,seconds,images_per_s,"
         "train_eval_loss,train_eval_acc\n1,0.1,0.5,90,0.25,95,1.0,100,x,97\n";
  EXPECT_TRUE(
      throws_error_mentioning([&] { read_metrics_csv(dir / "bad.csv"); }, {"bad.csv", "line 2"}));
}

TEST(RunPictures, ReportFolderRulesNeverClobberOtherFiles) {
  TempDir dir;
  EXPECT_NO_THROW(check_report_folder(dir / "new"));
  EXPECT_NO_THROW(check_report_folder(dir.path()));  // empty
  std::ofstream(dir / kConfusionFile) << "an earlier report's picture";
  EXPECT_NO_THROW(check_report_folder(dir.path()));  // an earlier report, to be replaced
  std::ofstream(dir / "notes.txt") << "mine";
  EXPECT_THROW(check_report_folder(dir.path()), UsageError);
  EXPECT_THROW(check_report_folder(dir / "notes.txt"), UsageError);
}

// A short run's data: MNIST's first 64 training images to train on, the next 500 held out, and
// the first 500 test images, in dir/data (the full sets' 15,000 evaluated images would take most
// of the run's time).
std::string short_run_data(const TempDir& dir) {
  testing::write_tiny_mnist(dir / "data", 64 + 500, 500);
  return " --data '" + (dir / "data").string() + "'";
}
constexpr char kShortRun[] = "train --device cpu --train-limit 64 --validation 500 --epochs 1";

// One short run (64 images, one epoch, evaluated), then evaluate --report on its checkpoint.
TEST(RunPictures, TrainLeavesPicturesAndEvaluateWritesAReport) {
  LENET5_REQUIRE_MNIST();
  TempDir dir;
  const std::string data = short_run_data(dir), run = (dir / "run").string();
  const auto trained = run_lenet5(kShortRun + data + " --out " + run, dir);
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  const std::string curves = read_text(dir / "run" / kCurvesFile);
  EXPECT_EQ(curves.rfind("<svg", 0), 0u);
  // Two charts (loss, accuracy), each with a train, a validation (the 500 images held out) and a
  // test polyline of the one epoch.
  std::size_t polylines = 0;
  for (std::size_t at = 0; (at = curves.find("<polyline", at)) != std::string::npos; ++at)
    ++polylines;
  EXPECT_EQ(polylines, 6u);
  EXPECT_GT(png_size(dir / "run" / kFiltersC1File).first, 0);
  EXPECT_GT(png_size(dir / "run" / kFiltersC3File).first, 0);
  // Drawn on a thread of their own, reported in the run's own log by the main thread.
  EXPECT_TRUE(mentions(read_text(dir / "run" / "train.log"), "pictures: curves.svg"));

  const std::string report = (dir / "report").string();
  const std::string evaluate =
      "evaluate --device cpu" + data + " --checkpoint " + run + "/best.safetensors --report ";
  const auto first = run_lenet5(evaluate + report, dir);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_TRUE(mentions(first.out, "test accuracy"));  // the usual table still goes to stdout
  EXPECT_GT(png_size(dir / "report" / kConfusionFile).first, 0);
  EXPECT_GT(png_size(dir / "report" / kErrorsFile).first, 0);
  const std::string html = read_text(dir / "report" / kReportIndexFile);
  EXPECT_TRUE(mentions(html, "<img src=\"confusion.png\""));
  EXPECT_TRUE(mentions(html, "<img src=\"errors.png\""));

  const auto into_run = run_lenet5(evaluate + run, dir);  // the run folder holds other files
  EXPECT_EQ(into_run.exit_code, 2);
  EXPECT_TRUE(mentions(into_run.err, "which an evaluation report did not write")) << into_run.err;
  EXPECT_TRUE(fs::exists(dir / "run" / "last.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "run" / kReportIndexFile));
  const auto onto_file = run_lenet5(evaluate + run + "/config.toml", dir);
  EXPECT_EQ(onto_file.exit_code, 2);
  EXPECT_TRUE(mentions(onto_file.err, "it is a file, not a folder")) << onto_file.err;
}

// The pictures are a view of the run, not part of it: one that cannot be written (here curves.svg,
// a folder that holds a file, which no rename replaces) is a warning, in the run's log too, and
// the run still ends well with its checkpoints.
TEST(RunPictures, APictureThatCannotBeWrittenIsAWarningNotAFailure) {
  LENET5_REQUIRE_MNIST();
  TempDir dir;
  const fs::path run = dir / "run";
  fs::create_directories(run / kCurvesFile / "a-file-inside");
  const auto trained = run_lenet5(kShortRun + short_run_data(dir) + " --out " + run.string(), dir);
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  EXPECT_TRUE(mentions(trained.err, "could not draw the run's pictures")) << trained.err;
  EXPECT_TRUE(mentions(trained.err, (run / kCurvesFile).string())) << trained.err;
  const std::string log = read_text(run / "train.log");
  EXPECT_TRUE(mentions(log, "could not draw the run's pictures")) << log;
  EXPECT_FALSE(mentions(log, "pictures: curves.svg")) << log;
  EXPECT_TRUE(fs::exists(run / "last.safetensors"));
  EXPECT_TRUE(fs::exists(run / "best.safetensors"));
}

}  // namespace
}  // namespace lenet5
