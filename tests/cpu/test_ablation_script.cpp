// scripts/ablation_lecun1998.sh --table-only over hand-made result files: each row's training
// comes from the list it is declared in (rows 1-7 and 15 the default training through `lenet5
// bench`'s JSON lines, rows 8-14 and 16 SDLM runs' metrics.csv), whatever its number, and the
// table reads the parameters, errors and epoch times it was given.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <sys/wait.h>

#include "test_util.hpp"

namespace lenet5 {
namespace {

using testing::TempDir;

void write(const std::filesystem::path& file, const std::string& text) {
  std::filesystem::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

// What `lenet5 bench` prints for a row of the default training: a setup line, then a seed line
// per seed.
void write_bench_row(const std::filesystem::path& dir, const std::string& name, int parameters) {
  write(dir / (name + ".jsonl"),
        "{\"event\":\"setup\",\"device\":\"gpu\",\"gpu\":\"NVIDIA H200 (sm_90)\",\"parameters\":" +
            std::to_string(parameters) +
            "}\n"
            "{\"event\":\"seed\",\"final_test_accuracy\":0.9946,\"median_epoch_s\":0.084}\n"
            "{\"event\":\"seed\",\"final_test_accuracy\":0.9942,\"median_epoch_s\":0.086}\n");
}

// An SDLM row: a run folder per seed with its metrics.csv and train.log.
void write_sdlm_row(const std::filesystem::path& dir, const std::string& name, int parameters) {
  for (const std::string seed : {"1", "2"}) {
    const std::filesystem::path run = dir / name / ("seed=" + seed);
    write(run / "metrics.csv",
          "epoch,lr,train_loss,train_acc,test_loss,test_acc,seconds,images_per_s\n"
          "1,0.0005,4.1,95.0,1.6,97.50,10.0,6000\n"
          "2,0.0005,2.0,97.5,1.4,98.8" + seed + ",12.0,5000\n");
    write(run / "train.log",
          "[info] run folder x: " + std::to_string(parameters) + " trainable parameters, ...\n");
  }
}

TEST(AblationScript, EachRowsTrainingComesFromItsListNotItsNumber) {
  TempDir dir;
  write_bench_row(dir.path(), "15-conv-units", 61728);  // default training, numbered after 14
  write_sdlm_row(dir.path(), "16-linear-conv", 59978);  // SDLM, numbered after 15
  write_sdlm_row(dir.path(), "8-paper", 60000);
  const std::string command = "bash '" + (testing::source_dir() / "scripts/ablation_lecun1998.sh")
                                             .string() +
                              "' --table-only --out '" + dir.path().string() + "' >'" +
                              (dir / "out.txt").string() + "' 2>&1";
  const int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << testing::read_text(dir / "out.txt");

  const std::string csv = testing::read_text(dir / "ablation.csv");
  // Errors: 100 - 99.46 and 100 - 99.42 (the bench rows' fractions), 100 - 98.81 and 100 - 98.82.
  EXPECT_TRUE(testing::mentions(csv, "15-conv-units,\"+ C1 and C3 units with their own bias and "
                                     "squashing\",\"default\",\"gpu (NVIDIA H200)\",0.5600"))
      << csv;
  EXPECT_TRUE(testing::mentions(csv, "16-linear-conv,\"1998 network, linear C1 and C3 units\","
                                     "\"1998 (SDLM, batch 1, 20 passes)\",\"cpu, 1 thread\",1.1850"))
      << csv;
  EXPECT_TRUE(testing::mentions(csv, "8-paper,\"1998 network\",\"1998 (SDLM")) << csv;
  // The parameters each row reported, and the median epoch: bench's seconds, SDLM's epochs 2 on.
  EXPECT_TRUE(testing::mentions(csv, ",2,61728,0.085000")) << csv;
  EXPECT_TRUE(testing::mentions(csv, ",2,59978,12.000000")) << csv;
  // Rows without files are left out rather than shown empty.
  EXPECT_FALSE(testing::mentions(csv, "10-full-c3")) << csv;
  // The markdown table shows the same rows, the default training's first, in declaration order.
  const std::string md = testing::read_text(dir / "ablation.md");
  EXPECT_LT(md.find("+ C1 and C3 units"), md.find("| 1998 network |")) << md;
  EXPECT_LT(md.find("| 1998 network |"), md.find("linear C1 and C3 units")) << md;
}

}  // namespace
}  // namespace lenet5
