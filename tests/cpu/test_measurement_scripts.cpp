// The measurement scripts' tables, made from hand-made result files (the measuring itself needs a
// GPU, Nsight Compute or hours): scripts/ablation_lecun1998.sh --table-only, where each row's
// training comes from the list it is declared in (rows 1-7 and 15 the default training through
// `lenet5 bench`'s JSON lines, rows 8-14 and 16 SDLM runs' metrics.csv), whatever its number;
// scripts/roofline_whole_step.sh --from (both kernel sets), scripts/bench_vs_pytorch.sh --from and
// scripts/compare_kernel_sets.sh --from, which write their tables into their blocks of
// docs/results.md (through scripts/results_block.py), and the blocks themselves;
// scripts/stall_profile.sh --from, which sums Nsight Compute's warp-stall samples per reason,
// function and line; scripts/fuzz.sh --summary, the table of a fuzz run with each crash's input and
// report; scripts/compare_builds.sh with stand-in binaries.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "test_util.hpp"

namespace lenet5 {
namespace {

using testing::TempDir;

void write(const std::filesystem::path& file, const std::string& text) {
  std::filesystem::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

// Runs a script of scripts/ with `arguments` (a shell fragment); its exit status, its output in
// dir/out.txt.
int run_script(const std::string& script, const std::string& arguments, const TempDir& dir) {
  const std::string command = "bash '" + (testing::source_dir() / "scripts" / script).string() +
                              "' " + arguments + " >'" + (dir / "out.txt").string() + "' 2>&1";
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
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
          "2,0.0005,2.0,97.5,1.4,98.8" +
              seed + ",12.0,5000\n");
    write(run / "train.log",
          "[info] run folder x: " + std::to_string(parameters) + " trainable parameters, ...\n");
  }
}

TEST(AblationScript, EachRowsTrainingComesFromItsListNotItsNumber) {
  TempDir dir;
  write_bench_row(dir.path(), "15-conv-units", 61728);  // default training, numbered after 14
  write_sdlm_row(dir.path(), "16-linear-conv", 59978);  // SDLM, numbered after 15
  write_sdlm_row(dir.path(), "8-paper", 60000);
  ASSERT_EQ(
      run_script("ablation_lecun1998.sh", "--table-only --out '" + dir.path().string() + "'", dir),
      0)
      << testing::read_text(dir / "out.txt");

  const std::string csv = testing::read_text(dir / "ablation.csv");
  // Errors: 100 - 99.46 and 100 - 99.42 (the bench rows' fractions), 100 - 98.81 and 100 - 98.82.
  EXPECT_TRUE(testing::mentions(csv,
                                "15-conv-units,\"+ C1 and C3 units with their own bias and "
                                "squashing\",\"default\",\"gpu (NVIDIA H200)\",0.5600"))
      << csv;
  EXPECT_TRUE(testing::mentions(csv,
                                "16-linear-conv,\"1998 network, linear C1 and C3 units\","
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

// What ncu --csv --page raw prints: a header, a units row without an ID, then a row per launch.
// The sample kernel: 40 us, 300 M FMA + 50 M FADD + 10 M FMUL (660 MFLOP: 16.5 TFLOP/s); the
// update kernel: 10 us, 1 M FMA (2 MFLOP: 0.2 TFLOP/s).
void write_ncu_csv(const std::filesystem::path& file) {
  const std::string stalls[] = {"barrier",      "long_scoreboard",    "short_scoreboard",
                                "mio_throttle", "math_pipe_throttle", "wait",
                                "not_selected", "lg_throttle"};
  std::string header =
      "\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\","
      "\"sm__cycles_elapsed.avg.per_second\","
      "\"sm__sass_thread_inst_executed_op_ffma_pred_on.sum\","
      "\"sm__sass_thread_inst_executed_op_fadd_pred_on.sum\","
      "\"sm__sass_thread_inst_executed_op_fmul_pred_on.sum\",\"dram__bytes.sum\","
      "\"l1tex__data_pipe_lsu_wavefronts_mem_shared.sum\","
      "\"sm__throughput.avg.pct_of_peak_sustained_elapsed\","
      "\"launch__registers_per_thread\",\"launch__occupancy_limit_registers\","
      "\"launch__occupancy_limit_shared_mem\","
      "\"sm__warps_active.avg.pct_of_peak_sustained_active\","
      "\"device__attribute_multiprocessor_count\"";
  for (const std::string& stall : stalls)
    header += ",\"smsp__average_warps_issue_stalled_" + stall + "_per_issue_active.ratio\"";
  const std::string stall_values = ",\"2.5\",\"1\",\"0.5\",\"0.1\",\"0.2\",\"1.5\",\"1.2\",\"0\"";
  write(file, header + "\n\"\",\"\",\"ns\"\n" +
                  "\"0\",\"whole_step_sample_kernel\",\"40000\",\"1.98e9\",\"300000000\","
                  "\"50000000\",\"10000000\",\"200000\",\"2000000\",\"35\",\"82\",\"1\",\"1\","
                  "\"25\",\"132\"" +
                  stall_values + "\n" +
                  "\"1\",\"whole_step_update_kernel\",\"10000\",\"1.98e9\",\"1000000\",\"0\","
                  "\"0\",\"1000000\",\"0\",\"19\",\"44\",\"5\",\"16\",\"48\",\"132\"" +
                  stall_values + "\n");
}

// A results.md in dir whose block for `script` holds an old table between lines of its own: what
// scripts/results_block.py must replace, and all it may replace.
void write_results_with_block(const TempDir& dir, const std::string& script) {
  write(dir / "results.md", "# Results\nbefore\n<!-- " + script +
                                ": begin -->\nan old table\n<!-- " + script + ": end -->\nafter\n");
}

// The script's block in dir's results.md holds new text, its heading first, and nothing around the
// block changed; returns the page.
std::string expect_block_rewritten(const TempDir& dir, const std::string& script) {
  const std::string results = testing::read_text(dir / "results.md");
  EXPECT_TRUE(
      testing::mentions(results, "# Results\nbefore\n<!-- " + script + ": begin -->\nMeasured on "))
      << results;
  EXPECT_FALSE(testing::mentions(results, "an old table")) << results;
  EXPECT_TRUE(testing::mentions(results, "\n<!-- " + script + ": end -->\nafter\n")) << results;
  return results;
}

// The arguments that remake a script's tables from the earlier run in dir/measured and write them
// into dir/results.md.
std::string from_measured_into_results(const TempDir& dir) {
  return "--from '" + (dir / "measured").string() + "' --results '" +
         (dir / "results.md").string() + "'";
}

// What `lenet5 bench` wrote for a roofline run into dir/measured/bench.json: its setup (batch,
// commit abc1234 on an H200, and `setup_extra` fields) and seed 1's median epoch.
void write_roofline_bench(const TempDir& dir, int batch, const std::string& median_epoch_s,
                          const std::string& setup_extra = "") {
  write(dir / "measured" / "bench.json",
        "{\"event\":\"setup\",\"batch_size\":" + std::to_string(batch) +
            ",\"train_images\":0,\"device\":\"gpu\",\"gpu\":\"NVIDIA H200 (sm_90)\","
            "\"commit\":\"abc1234\"" +
            setup_extra + "}\n{\"event\":\"seed\",\"seed\":1,\"median_epoch_s\":" + median_epoch_s +
            "}\n");
}

// A results.md without any block: the scripts refuse it and leave it as it is.
constexpr const char* kResultsWithoutBlock = "# Results\nno block here\n";

TEST(RooflineScript, WritesItsTablesIntoTheResultsBlockAndNothingElse) {
  TempDir dir;
  write_ncu_csv(dir / "measured" / "ncu.csv");
  write_roofline_bench(dir, 128, "0.0196");
  write_results_with_block(dir, "roofline_whole_step.sh");
  const std::string arguments = "--batch-size 128 " + from_measured_into_results(dir);
  ASSERT_EQ(run_script("roofline_whole_step.sh", arguments, dir), 0)
      << testing::read_text(dir / "out.txt");

  const std::string results = expect_block_rewritten(dir, "roofline_whole_step.sh");
  EXPECT_TRUE(testing::mentions(results,
                                "on the NVIDIA H200 at abc1234 "
                                "(`scripts/roofline_whole_step.sh --batch-size 128`"))
      << results;
  // 660 MFLOP in 40 us; 60k images at 128 a step (a setup line from before bench named the images
  // held out) are 469 steps; 50 us of kernels a step.
  EXPECT_TRUE(testing::mentions(results, "| sample kernel | 40.0 µs | 16.50 TFLOP/s |")) << results;
  EXPECT_TRUE(testing::mentions(results, "| update kernel | 10.0 µs | 0.20 TFLOP/s |")) << results;
  EXPECT_TRUE(testing::mentions(results, "barrier 2.5, wait 1.5, not selected 1.2")) << results;
  EXPECT_TRUE(testing::mentions(results, "19.6 ms for 469 steps of 128")) << results;
  EXPECT_TRUE(testing::mentions(results, "50.0 µs a step, 23.4 ms an epoch")) << results;
  EXPECT_TRUE(testing::mentions(results, "The epoch is 16 % shorter")) << results;
}

// An epoch trains the images not held out (--validation, which bench's setup line names): 55,000
// at 128 a step are 430 steps, and the kernels' 50 us a step make 21.5 ms an epoch.
TEST(RooflineScript, CountsTheEpochsStepsOverTheImagesNotHeldOut) {
  TempDir dir;
  write_ncu_csv(dir / "measured" / "ncu.csv");
  write_roofline_bench(dir, 128, "0.0196", ",\"validation_images\":5000");
  write_results_with_block(dir, "roofline_whole_step.sh");
  ASSERT_EQ(run_script("roofline_whole_step.sh",
                       "--batch-size 128 " + from_measured_into_results(dir), dir),
            0)
      << testing::read_text(dir / "out.txt");
  const std::string results = expect_block_rewritten(dir, "roofline_whole_step.sh");
  EXPECT_TRUE(testing::mentions(results, "19.6 ms for 430 steps of 128, 45.6 µs a step"))
      << results;
  EXPECT_TRUE(testing::mentions(results, "50.0 µs a step, 21.5 ms an epoch")) << results;
}

// A measuring run keeps its command and date in run.txt beside its results: --from heads the
// tables with those, not with its own arguments or today's date.
TEST(RooflineScript, HeadsTablesMadeFromAnEarlierRunWithThatRunsCommandAndDate) {
  TempDir dir;
  write_ncu_csv(dir / "measured" / "ncu.csv");
  write_roofline_bench(dir, 256, "0.0154");
  write(dir / "measured" / "run.txt",
        "scripts/roofline_whole_step.sh --batch-size 256\n2026-01-02\n");
  write_results_with_block(dir, "roofline_whole_step.sh");
  ASSERT_EQ(run_script("roofline_whole_step.sh", from_measured_into_results(dir), dir), 0)
      << testing::read_text(dir / "out.txt");
  const std::string results = expect_block_rewritten(dir, "roofline_whole_step.sh");
  EXPECT_TRUE(testing::mentions(results,
                                "Measured on 2026-01-02 on the NVIDIA H200 at abc1234 "
                                "(`scripts/roofline_whole_step.sh --batch-size 256`"))
      << results;
}

TEST(RooflineScript, RefusesAResultsPageWithoutTheBlockAndAFolderWithoutResults) {
  TempDir dir;
  write(dir / "results.md", kResultsWithoutBlock);
  write(dir / "measured" / "bench.json", "{}\n");
  EXPECT_EQ(run_script("roofline_whole_step.sh", from_measured_into_results(dir), dir), 2);
  EXPECT_TRUE(
      testing::mentions(testing::read_text(dir / "out.txt"), "roofline_whole_step.sh: begin"));
  EXPECT_EQ(testing::read_text(dir / "results.md"), kResultsWithoutBlock);
  EXPECT_EQ(
      run_script("roofline_whole_step.sh", "--from '" + (dir / "measured").string() + "'", dir), 2);
  EXPECT_TRUE(testing::mentions(testing::read_text(dir / "out.txt"), "no ncu.csv and bench.json"));
}

// What ncu printed for --kernels tensor's step before be12dbd (which has one gradient sum a step,
// and the dense part as two kernels): kept, since it also checks that a kernel launched twice a
// step on two grids gets a row for each. Two steps of its eight launches, each kernel under
// its demangled signature (anonymous namespaces and template arguments included), with the times,
// the grids and the tensor pipe's columns only (the other columns read n/a). The tensor kernels'
// HMMA instructions: 1, 2 and 3 M in 20, 30 and 40 us (2048 FLOP each: 102.4, 136.5 and 153.6
// TFLOP/s); the gradient sum runs twice a step, on two grids. extra_launches: the first launches of
// a third step after the two, as when the window does not start at a step's first launch.
void write_tensor_ncu_csv(const std::filesystem::path& file, int extra_launches = 0) {
  const std::string anon = "void lenet5::cuda::(anonymous namespace)::";
  const std::string templated = "<(lenet5::Activation)0, (lenet5::Subsampling)0>(Args)";
  const std::string sum = anon + "tensor_gradient_sum_kernel2(const float *, int, SlotTensors)";
  // The name, the time in ns, the grid, the HMMA instructions, the tensor pipe's utilisation.
  const std::vector<std::array<std::string, 5>> step = {
      {"void lenet5::cuda::gather_augmented_batch_kernel(const unsigned char *)", "3000", "256",
       "0", "0"},
      {anon + "tensor_conv_forward_kernel1" + templated, "20000", "256", "1,000,000", "30"},
      {anon + "tensor_dense_backward_kernel1" + templated, "30000", "64", "2,000,000", "40"},
      {sum, "5000", "1,848", "0", "0"},
      {anon + "tensor_conv_backward_kernel2" + templated, "40000", "256", "3,000,000", "35"},
      {sum, "4000", "81", "0", "0"},
      {"void lenet5::cuda::softmax_cross_entropy_kernel1(const float *)", "6000", "1", "0", "0"},
      {"void lenet5::cuda::sgd_step_kernel1(float, bool)", "3000", "241", "0", "0"}};
  std::string csv =
      "\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\",\"launch__grid_size\","
      "\"sm__inst_executed_pipe_tensor_op_hmma.sum\","
      "\"sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active\"\n"
      "\"\",\"\",\"ns\",\"\",\"inst\",\"%\"\n";
  int id = 0;
  for (int i = 0; i < 2 * int(step.size()) + extra_launches; ++i) {
    const auto& launch = step[std::size_t(i) % step.size()];
    csv += "\"" + std::to_string(id++) + "\",\"" + launch[0] + "\",\"" + launch[1] + "\",\"" +
           launch[2] + "\",\"" + launch[3] + "\",\"" + launch[4] + "\"\n";
  }
  write(file, csv);
}

// A tensor-set run's files (write_tensor_ncu_csv's launches; bench.json's setup line with
// setup_extra) made into the tensor block of a results page by --from without --kernels: the
// block as written, or "" (a failure reported) where the script failed.
std::string tensor_roofline_block(const TempDir& dir, const std::string& setup_extra,
                                  int extra_launches = 0) {
  write_tensor_ncu_csv(dir / "measured" / "ncu.csv", extra_launches);
  write_roofline_bench(dir, 256, "0.030", setup_extra);
  write_results_with_block(dir, "roofline_tensor");
  const int status = run_script("roofline_whole_step.sh", from_measured_into_results(dir), dir);
  EXPECT_EQ(status, 0) << testing::read_text(dir / "out.txt");
  return status == 0 ? expect_block_rewritten(dir, "roofline_tensor") : "";
}

// Without --kernels, --from takes the set the run measured from its bench.json, and writes into
// that set's block: a row per kernel and grid, each launched once a step.
TEST(RooflineScript, TensorSetHasARowPerKernelAndGridWithTheTensorPipesColumns) {
  TempDir dir;
  const std::string results = tensor_roofline_block(dir, ",\"kernels\":\"tensor\"");
  ASSERT_FALSE(results.empty());
  EXPECT_TRUE(testing::mentions(results,
                                "on the NVIDIA H200 at abc1234 "
                                "(`scripts/roofline_whole_step.sh --kernels tensor`"))
      << results;
  for (const char* row : {
           "| `gather_augmented_batch_kernel` | 3.0 µs | n/a |",
           "| `tensor_conv_forward_kernel1` | 20.0 µs | n/a |",
           "| n/a | 30.0 % | 1,000,000 | 102.40 TFLOP/s | 20.7 % |",
           "| `tensor_gradient_sum_kernel2` (1,848 blocks, after "
           "`tensor_dense_backward_kernel1`) | 5.0 µs |",
           "| `tensor_gradient_sum_kernel2` (81 blocks, after "
           "`tensor_conv_backward_kernel2`) | 4.0 µs |",
           "| `sgd_step_kernel1` | 3.0 µs |",
           // 3 + 20 + 30 + 5 + 40 + 4 + 6 + 3 us a step; 6 M HMMA of 2048 FLOP.
           "the eight kernels run one after the other: 111.0 µs a step",
           "6.000 M mma.sync a step (12.29 GFLOP of TF32",
       })
    EXPECT_TRUE(testing::mentions(results, row)) << row << "\n" << results;
  EXPECT_FALSE(testing::mentions(results, " a step |")) << results;  // no kernel twice a step
  // The whole-step block is not this run's to write.
  EXPECT_EQ(run_script("roofline_whole_step.sh",
                       "--kernels whole-step --from '" + (dir / "measured").string() + "'", dir),
            2);
  EXPECT_TRUE(
      testing::mentions(testing::read_text(dir / "out.txt"), "that run measured --kernels tensor"));
}

// A window that is not whole steps (the script's launches a step not the kernels' own: two steps
// and the first two launches of a third) still counts each kernel once a step, at the median of its
// launches, and says why on stderr: not the gather and the convolutions' forward at 1.5 a step.
TEST(RooflineScript, AWindowOfPartStepsStillCountsEachKernelOnceAStep) {
  TempDir dir;
  const std::string results = tensor_roofline_block(dir, ",\"kernels\":\"tensor\"", 2);
  ASSERT_FALSE(results.empty());
  for (const char* row : {"| `gather_augmented_batch_kernel` | 3.0 µs |",
                          "| `tensor_conv_forward_kernel1` | 20.0 µs |",
                          "the eight kernels run one after the other: 111.0 µs a step",
                          "6.000 M mma.sync a step"})
    EXPECT_TRUE(testing::mentions(results, row)) << row << "\n" << results;
  EXPECT_FALSE(testing::mentions(results, " a step |")) << results;
  EXPECT_TRUE(testing::mentions(testing::read_text(dir / "out.txt"),
                                "not a whole number of steps"));
}

// A tensor-set run in --precision bf16 (bench.json's setup says so): its tensor columns and its
// work are BF16's, against the BF16 peak (989.4 TFLOP/s, twice TF32's, so 10.35 % where TF32's
// 102.40 TFLOP/s were 20.7 %); and bf16 with the whole-step set is refused before anything runs.
TEST(RooflineScript, ABf16RunIsCountedAgainstTheBf16Peak) {
  TempDir dir;
  const std::string results =
      tensor_roofline_block(dir, ",\"kernels\":\"tensor\",\"precision\":\"bf16\"");
  ASSERT_FALSE(results.empty());
  for (const char* text : {"989.4 TFLOP/s BF16 (dense)", "| mma.sync (HMMA) per launch | BF16 |",
                           "| n/a | 30.0 % | 1,000,000 | 102.40 TFLOP/s | 10.3 % |",
                           "6.000 M mma.sync a step (12.29 GFLOP of BF16"})
    EXPECT_TRUE(testing::mentions(results, text)) << text << "\n" << results;
  EXPECT_FALSE(testing::mentions(results, "TF32")) << results;
  EXPECT_EQ(run_script("roofline_whole_step.sh", "--kernels whole-step --precision bf16", dir), 2);
  EXPECT_TRUE(testing::mentions(testing::read_text(dir / "out.txt"), "give --kernels tensor"));
}

// The scripts write into docs/results.md itself (`--results docs/results.md`): the page must keep
// each one's pair of marker lines, or the next measuring run is refused before it measures.
TEST(ResultsPage, HoldsTheBlockOfEachScriptThatWritesIntoIt) {
  for (const std::string script : {"roofline_whole_step.sh", "roofline_tensor",
                                   "bench_vs_pytorch.sh", "compare_kernel_sets.sh"}) {
    const std::string command =
        "python3 '" + (testing::source_dir() / "scripts" / "results_block.py").string() +
        "' --check '" + (testing::source_dir() / "docs" / "results.md").string() + "' " + script;
    const int status = std::system(command.c_str());
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "docs/results.md has no block for " << script;
  }
}

// What scripts/bench_vs_pytorch.sh --out keeps: lenet5's JSON lines per kernel set (a setup line,
// epoch lines, a seed line per seed), the PyTorch peer's (epoch lines, a summary line per seed),
// and run.txt (the command, the config, the reference kernel set, the date it was measured).
void write_comparison_run(const std::filesystem::path& dir) {
  const std::string lenet5 = "{\"framework\":\"lenet5\",\"mode\":\"whole-step\",";
  write(dir / "lenet5-whole-step.jsonl",
        lenet5 +
            "\"event\":\"setup\",\"batch_size\":128,\"epochs\":8,\"augment\":\"elastic\","
            "\"gpu\":\"NVIDIA H200 (sm_90)\",\"commit\":\"abc1234\"}\n" +
            lenet5 + "\"event\":\"epoch\",\"epoch\":2,\"images_per_s\":3000000}\n" + lenet5 +
            "\"event\":\"seed\",\"median_epoch_s\":0.0200,\"final_test_accuracy\":0.9910,"
            "\"time_to_99_s\":0.14,\"time_to_99_2_s\":null,\"peak_allocated_mb\":74.0}\n" +
            lenet5 +
            "\"event\":\"seed\",\"median_epoch_s\":0.0196,\"final_test_accuracy\":0.9920,"
            "\"time_to_99_s\":0.16,\"time_to_99_2_s\":0.30,\"peak_allocated_mb\":74.0}\n");
  const std::string graph = "{\"framework\":\"pytorch\",\"mode\":\"graph\",";
  write(dir / "pytorch-graph.jsonl",
        graph + "\"event\":\"epoch\",\"epoch\":2,\"images_per_s\":250000}\n" + graph +
            "\"event\":\"summary\",\"median_epoch_s\":0.2400,\"final_test_accuracy\":0.9930,"
            "\"time_to_99_s\":1.6,\"time_to_99_2_s\":2.0,\"peak_memory_mb\":450}\n" +
            graph +
            "\"event\":\"summary\",\"median_epoch_s\":0.2420,\"final_test_accuracy\":0.9916,"
            "\"time_to_99_s\":1.7,\"time_to_99_2_s\":null,\"peak_memory_mb\":455}\n");
  write(dir / "run.txt",
        "scripts/bench_vs_pytorch.sh --config configs/fast.toml --seeds 1,2 --modes "
        "whole-step,graph\nconfigs/fast.toml\nwhole-step\n2026-01-02\n");
}

TEST(ComparisonScript, WritesItsTableIntoTheResultsBlockAndNothingElse) {
  TempDir dir;
  write_comparison_run(dir / "measured");
  write_results_with_block(dir, "bench_vs_pytorch.sh");
  const std::string arguments = from_measured_into_results(dir);
  ASSERT_EQ(run_script("bench_vs_pytorch.sh", arguments, dir), 0)
      << testing::read_text(dir / "out.txt");
  const std::string results = expect_block_rewritten(dir, "bench_vs_pytorch.sh");
  EXPECT_TRUE(testing::mentions(
      results,
      "Measured on 2026-01-02 on the NVIDIA H200 at abc1234 (`scripts/bench_vs_pytorch.sh "
      "--config configs/fast.toml "
      "--seeds 1,2 --modes whole-step,graph`; written by the script):"))
      << results;
  EXPECT_TRUE(testing::mentions(results,
                                "configs/fast.toml: batch 128, 8 epochs, augment elastic; 2 "
                                "seed(s) per program"))
      << results;
  // Medians of the seeds' median epochs (19.8 and 241.0 ms), mean and minimum accuracy, the mean
  // time to 99 % where every seed reached it, and how many did where not.
  EXPECT_TRUE(testing::mentions(results,
                                "| lenet5 | whole-step | 19.8 ms | 3000k | 99.15 %, 99.10 % | "
                                "0.150 s | reached by 1 of 2 seeds | 74 MB | 1.0x |"))
      << results;
  EXPECT_TRUE(
      testing::mentions(results,
                        "| pytorch | graph | 241.0 ms | 250k | 99.23 %, 99.16 % | 1.650 s | "
                        "reached by 1 of 2 seeds | 455 MB | 12.2x |"))
      << results;
}

TEST(ComparisonScript, RefusesAResultsPageWithoutTheBlockAndAFolderWithoutResults) {
  TempDir dir;
  write_comparison_run(dir / "measured");
  write(dir / "results.md", kResultsWithoutBlock);
  EXPECT_EQ(run_script("bench_vs_pytorch.sh", from_measured_into_results(dir), dir), 2);
  EXPECT_TRUE(testing::mentions(testing::read_text(dir / "out.txt"), "bench_vs_pytorch.sh: begin"));
  EXPECT_EQ(testing::read_text(dir / "results.md"), kResultsWithoutBlock);
  EXPECT_EQ(
      run_script("bench_vs_pytorch.sh", "--from '" + (dir / "results.md").string() + "'", dir), 2);
  EXPECT_TRUE(testing::mentions(testing::read_text(dir / "out.txt"), "no run.txt and lenet5-"));
  // --from measures nothing, so it takes no measuring flags; --out must not mix two runs.
  EXPECT_EQ(run_script("bench_vs_pytorch.sh",
                       "--from '" + (dir / "measured").string() + "' --seeds 1,2", dir),
            2);
  EXPECT_TRUE(testing::mentions(testing::read_text(dir / "out.txt"), "it takes only --results"));
  EXPECT_EQ(run_script("bench_vs_pytorch.sh", "--out '" + (dir / "measured").string() + "'", dir),
            2);
  EXPECT_TRUE(testing::mentions(testing::read_text(dir / "out.txt"), "already holds files"));
  // A program whose run failed left an empty file: the table leaves it out and says so.
  write(dir / "measured" / "pytorch-eager.jsonl", "");
  ASSERT_EQ(run_script("bench_vs_pytorch.sh", "--from '" + (dir / "measured").string() + "'", dir),
            0);
  const std::string out = testing::read_text(dir / "out.txt");
  EXPECT_TRUE(testing::mentions(out, "pytorch-eager.jsonl holds no results")) << out;
  EXPECT_TRUE(testing::mentions(out, "| pytorch | graph |")) << out;
  EXPECT_FALSE(testing::mentions(out, "| pytorch | eager |")) << out;
}

// What scripts/compare_kernel_sets.sh --out keeps: each run's `lenet5 bench` JSON lines (a setup
// line, a seed line per seed) and run.txt (the command, the date, then a line per run: config,
// kernel set and file, tab-separated). Two seeds; per config whole-step, then tensor.
void write_kernel_set_run(const std::filesystem::path& dir) {
  std::string runs;
  const auto run = [&](const std::string& config, const std::string& kernels, int batch,
                       const std::vector<std::string>& seeds) {
    std::string text = "{\"event\":\"setup\",\"batch_size\":" + std::to_string(batch) +
                       ",\"epochs\":6,\"kernels\":\"" + kernels +
                       "\",\"gpu\":\"NVIDIA H200 (sm_90, 139.8 GiB)\",\"commit\":\"abc1234\"}\n";
    for (std::size_t i = 0; i < seeds.size(); ++i)
      text += "{\"event\":\"seed\",\"seed\":" + std::to_string(i + 1) + "," + seeds[i] + "}\n";
    write(dir / (config + "-" + kernels + ".jsonl"), text);
    runs += "configs/" + config + ".toml\t" + kernels + "\t" + config + "-" + kernels + ".jsonl\n";
  };
  const auto seed = [](const std::string& accuracy, const std::string& t99,
                       const std::string& epoch) {
    return "\"final_test_accuracy\":" + accuracy + ",\"time_to_99_s\":" + t99 +
           ",\"median_epoch_s\":" + epoch;
  };
  run("lenet5", "whole-step", 128,
      {seed("0.9950", "0.12", "0.016"), seed("0.9946", "0.13", "0.016")});
  run("lenet5", "tensor", 128, {seed("0.9944", "0.3", "0.0085"), seed("0.9940", "0.31", "0.0085")});
  run("fast", "whole-step", 256,
      {seed("0.9914", "0.081", "0.012"), seed("0.9910", "0.08", "0.012")});
  run("fast", "tensor", 256, {seed("0.9916", "0.05", "0.0048"), seed("0.9902", "null", "0.0048")});
  write(dir / "run.txt", "scripts/compare_kernel_sets.sh --seeds 1,2\n2026-01-02\n" + runs);
}

TEST(KernelSetScript, WritesItsTableAndVerdictsIntoTheResultsBlockAndNothingElse) {
  TempDir dir;
  write_kernel_set_run(dir / "measured");
  write_results_with_block(dir, "compare_kernel_sets.sh");
  const std::string arguments = from_measured_into_results(dir);
  ASSERT_EQ(run_script("compare_kernel_sets.sh", arguments, dir), 0)
      << testing::read_text(dir / "out.txt");
  const std::string results = expect_block_rewritten(dir, "compare_kernel_sets.sh");
  EXPECT_TRUE(testing::mentions(results,
                                "Measured on 2026-01-02 on the NVIDIA H200 at abc1234 "
                                "(`scripts/compare_kernel_sets.sh --seeds 1,2`"))
      << results;
  // A row per config and kernel set; "-": seed 2 never reached 99 %.
  EXPECT_TRUE(testing::mentions(results,
                                "| configs/fast.toml (batch 256, 6 epochs) | tensor | 99.16, 99.02 "
                                "| 99.09 | 99.02 | 0.050, - | 4.8 |"))
      << results;
  // Against whole-step's figures of the same config; the time to 99 % is fast.toml's target only.
  for (const char* verdict : {
           "configs/lenet5.toml, tensor against whole-step:\n"
           "- mean accuracy within 0.05 points of whole-step's 99.480 %: not met (99.420 %, "
           "-0.060 points)\n"
           "- no seed more than 0.1 points below whole-step's lowest, 99.46 %: met (lowest "
           "99.40 %, -0.06 points)\n"
           "- epoch at most 8 ms: not met (8.50 ms)\n",
           "configs/fast.toml, tensor against whole-step:\n"
           "- mean accuracy within 0.05 points of whole-step's 99.120 %: met (99.090 %, -0.030 "
           "points)\n"
           "- no seed more than 0.1 points below whole-step's lowest, 99.10 %: met (lowest "
           "99.02 %, -0.08 points)\n"
           "- time to 99 % at most 0.06 s on every seed: not met (seed 2: never)\n"
           "- epoch at most 5 ms: met (4.80 ms)\n",
       })
    EXPECT_TRUE(testing::mentions(results, verdict)) << verdict << "\n" << results;
}

// A kernel set given as NAME:PRECISION runs `lenet5 bench --kernels NAME --precision PRECISION`
// and keeps its own file and row; a plain name passes no --precision. The binary here is a stand-in
// that logs its arguments and prints a bench run's lines, so the script's own part is what runs.
TEST(KernelSetScript, RunsEachNamePrecisionPairWithItsPrecision) {
  TempDir dir;
  std::filesystem::create_directories(dir / "mnist");
  write(dir / "lenet5",
        "#!/usr/bin/env bash\n"
        "echo \"$*\" >>'" + (dir / "arguments.txt").string() + "'\n"
        "echo '{\"event\":\"setup\",\"batch_size\":128,\"epochs\":2,\"gpu\":\"a GPU\"}'\n"
        "echo '{\"event\":\"seed\",\"seed\":1,\"final_test_accuracy\":0.99,"
        "\"time_to_99_s\":0.1,\"median_epoch_s\":0.01}'\n");
  std::filesystem::permissions(dir / "lenet5", std::filesystem::perms::owner_all);
  setenv("LENET5", (dir / "lenet5").c_str(), 1);
  setenv("LENET5_DATA", (dir / "mnist").c_str(), 1);
  const std::string fast_bf16_arguments =
      "--configs configs/fast.toml --kernels whole-step,tensor:bf16 --seeds 1 --out '" +
      (dir / "out").string() + "'";
  EXPECT_EQ(run_script("compare_kernel_sets.sh", fast_bf16_arguments, dir), 1);
  EXPECT_TRUE(testing::mentions(testing::read_text(dir / "out.txt"), "no MNIST in"));
  // Gzipped, as scripts/fetch_mnist.sh may leave it, and as lenet5 reads it.
  write(dir / "mnist" / "t10k-images-idx3-ubyte.gz", "");
  const int status = run_script("compare_kernel_sets.sh", fast_bf16_arguments, dir);
  unsetenv("LENET5");
  unsetenv("LENET5_DATA");
  ASSERT_EQ(status, 0) << testing::read_text(dir / "out.txt");
  const std::string arguments = testing::read_text(dir / "arguments.txt");
  EXPECT_TRUE(testing::mentions(arguments, "--kernels whole-step --seeds 1")) << arguments;
  EXPECT_TRUE(testing::mentions(arguments, "--kernels tensor --precision bf16 --seeds 1"))
      << arguments;
  EXPECT_TRUE(std::filesystem::exists(dir / "out" / "fast-tensor-bf16.jsonl"));
  EXPECT_TRUE(testing::mentions(testing::read_text(dir / "out.txt"),
                                "| configs/fast.toml (batch 128, 2 epochs) | tensor:bf16 |"))
      << testing::read_text(dir / "out.txt");
  EXPECT_EQ(run_script("compare_kernel_sets.sh", "--kernels whole-step,tensor:", dir), 2);
  EXPECT_TRUE(testing::mentions(testing::read_text(dir / "out.txt"), "NAME:PRECISION"));
}

TEST(KernelSetScript, RefusesAFolderWithoutARunAndMeasuringFlagsWithFrom) {
  TempDir dir;
  write(dir / "results.md", kResultsWithoutBlock);
  write_kernel_set_run(dir / "measured");
  EXPECT_EQ(run_script("compare_kernel_sets.sh", from_measured_into_results(dir), dir), 2);
  EXPECT_TRUE(
      testing::mentions(testing::read_text(dir / "out.txt"), "compare_kernel_sets.sh: begin"));
  EXPECT_EQ(testing::read_text(dir / "results.md"), kResultsWithoutBlock);
  std::filesystem::create_directories(dir / "empty");
  EXPECT_EQ(run_script("compare_kernel_sets.sh", "--from '" + (dir / "empty").string() + "'", dir),
            2);
  EXPECT_TRUE(testing::mentions(testing::read_text(dir / "out.txt"), "no run.txt there"));
  EXPECT_EQ(run_script("compare_kernel_sets.sh",
                       "--from '" + (dir / "measured").string() + "' --seeds 1,2", dir),
            2);
  EXPECT_TRUE(testing::mentions(testing::read_text(dir / "out.txt"), "it takes only --results"));
}

// A stand-in for a lenet5 binary as scripts/compare_builds.sh runs it: it logs its arguments;
// `train ... --out DIR` writes DIR's checkpoint files (last.safetensors holding `last`), `bench`
// prints a seed line with these epochs.
void write_stand_in_lenet5(const std::filesystem::path& file, const TempDir& dir,
                           const std::string& last, const std::string& epoch_s,
                           const std::string& no_augment_s) {
  write(file,
        "#!/usr/bin/env bash\n"
        "echo \"$*\" >>'" +
            (dir / "arguments.txt").string() +
            "'\n"
            "if [ \"$1\" = train ]; then\n"
            "  while [ $# -gt 0 ] && [ \"$1\" != --out ]; do shift; done\n"
            "  mkdir -p \"$2\" && echo " +
            last +
            " >\"$2/last.safetensors\"\n"
            "  echo best >\"$2/best.safetensors\" && echo settings >\"$2/config.toml\"\n"
            "else\n"
            "  echo '{\"event\":\"seed\",\"seed\":1,\"median_epoch_s\":" +
            epoch_s + ",\"median_epoch_s_no_augment\":" + no_augment_s +
            "}'\n"
            "fi\n");
  std::filesystem::permissions(file, std::filesystem::perms::owner_all);
}

// Two builds compared on a kernel set with its precision (NAME:PRECISION) and on two configs: the
// trainings cut to --train-epochs, each checkpoint file compared, each config's epochs and bench's
// own epochs without augmentation side by side; a checkpoint that differs says so and fails; a
// malformed kernel set or an unknown config is refused before anything runs.
TEST(BuildsScript, ComparesEachKernelSetsCheckpointsAndEpochsPerConfig) {
  TempDir dir;
  write_stand_in_lenet5(dir / "old", dir, "same", "0.020", "0.0195");
  write_stand_in_lenet5(dir / "new", dir, "same", "0.019", "0.0199");
  write_stand_in_lenet5(dir / "other", dir, "other", "0.019", "null");
  setenv("LENET5_DATA", (dir / "mnist").c_str(), 1);
  const std::string builds = "'" + (dir / "old").string() + "' '" + (dir / "new").string() + "'";
  const int status = run_script("compare_builds.sh",
                                builds +
                                    " --kernels whole-step,tensor:tf32 --configs lenet5,fast "
                                    "--rounds 1 --epochs 2 --train-epochs 3",
                                dir);
  const std::string out = testing::read_text(dir / "out.txt");
  ASSERT_EQ(status, 0) << out;
  const std::string arguments = testing::read_text(dir / "arguments.txt");
  EXPECT_TRUE(testing::mentions(arguments, "--kernels tensor --precision tf32 --epochs 3 --out"))
      << arguments;
  EXPECT_TRUE(testing::mentions(arguments, "bench --config configs/fast.toml")) << arguments;
  EXPECT_TRUE(testing::mentions(out, "checkpoint tensor:tf32 last.safetensors: identical")) << out;
  EXPECT_TRUE(testing::mentions(
      out,
      "epoch time tensor:tf32, fast: old 20.00 ms, new 19.00 ms, new/old 0.950 (median of 1 "
      "rounds); without augmentation old 19.50 ms, new 19.90 ms, new/old 1.021"))
      << out;
  EXPECT_TRUE(testing::mentions(out, "same behaviour: yes")) << out;

  EXPECT_EQ(run_script("compare_builds.sh",
                       "'" + (dir / "old").string() + "' '" + (dir / "other").string() +
                           "' --kernels tensor:bf16 --rounds 1 --epochs 2",
                       dir),
            1);
  const std::string differing = testing::read_text(dir / "out.txt");
  EXPECT_TRUE(testing::mentions(differing, "checkpoint tensor:bf16 last.safetensors: DIFFERENT"))
      << differing;
  EXPECT_FALSE(testing::mentions(differing, "without augmentation")) << differing;
  EXPECT_TRUE(testing::mentions(differing, "same behaviour: no")) << differing;

  EXPECT_EQ(run_script("compare_builds.sh", builds + " --kernels tensor:", dir), 2);
  EXPECT_TRUE(testing::mentions(testing::read_text(dir / "out.txt"), "NAME:PRECISION"));
  EXPECT_EQ(run_script("compare_builds.sh", builds + " --configs nonesuch", dir), 2);
  EXPECT_TRUE(testing::mentions(testing::read_text(dir / "out.txt"), "no configs/nonesuch.toml"));
  unsetenv("LENET5_DATA");
}

// What scripts/stall_profile.sh reads: Nsight Compute's source page (--page source --csv
// --print-source cuda,sass), a section per file: a row per source line (numbered), each followed by
// its SASS instructions with their own counts. An instruction inlined from another function is
// listed under every frame of its inline chain, in no particular order: here 0x10 under the line
// that calls first_stage before first_stage's own line, and 0x20 under cmath's line before Scale's.
// The source tree is a folder of its own, so that the test does not follow cuda/'s line numbers,
// with a decoy at a shorter tail of the sampled paths.
void write_stall_profile_inputs(const std::filesystem::path& dir) {
  write(dir / "tree" / "cuda" / "engine" / "inner.cuh",
        "// stages\n"                                      // 1
        "__device__ float first_stage(float x) {\n"        // 2
        "  return x * 2.0f;\n"                             // 3
        "}\n"                                              // 4
        "struct Scale {\n"                                 // 5
        "  LENET5_HD float operator()(float x) const {\n"  // 6
        "    return x * 3.0f;\n"                           // 7
        "  }\n"                                            // 8
        "};\n");                                           // 9
  write(dir / "tree" / "cuda" / "engine" / "stages.cuh",
        std::string(9, '\n') +
            "__global__ void __launch_bounds__(128, 2)\n"    // 10
            "    second_kernel(float* y) {\n"                // 11
            "  y[0] = first_stage(y[0]) + Scale{}(y[1]);\n"  // 12
            "}\n");                                          // 13
  write(dir / "tree" / "engine" / "stages.cuh",
        std::string(9, '\n') + "__device__ float decoy(float x) { return x; }\n");
  // Columns in an order of their own: the script finds them by name.
  const std::string header =
      "\"Line No\",\"Source\",\"Address\",\"Source\",\"Instructions Executed\","
      "\"Warp Stall Sampling (All Samples)\",\"Warp Stall Sampling (Not-issued Samples)\","
      "\"stall_barrier (Not Issued)\",\"stall_barrier\",\"stall_long_sb\"\n";
  const auto section = [&header](const std::string& file) {
    return "\"File Path\",\"" + file + "\"\n\"Function Name\",\"void second_kernel(float *)\"\n" +
           header;
  };
  const auto line = [](int number, const std::string& source) {
    return "\"" + std::to_string(number) + "\",\"" + source + "\",\"-\",\"-\",\"0\",\"0\",\"0\"," +
           "\"0\",\"0\",\"0\"\n";
  };
  const auto sass = [](const std::string& address, const std::string& executed, int samples,
                       int barrier_not_issued, int barrier, int long_sb) {
    return "\"\",\"\",\"" + address + "\",\"      FFMA R1, R2, R3, R4\",\"" + executed + "\",\"" +
           std::to_string(samples) + "\",\"0\",\"" + std::to_string(barrier_not_issued) + "\",\"" +
           std::to_string(barrier) + "\",\"" + std::to_string(long_sb) + "\"\n";
  };
  const std::string x10 = sass("0x10", "1,000,000", 30, 9, 0, 30);
  const std::string x20 = sass("0x20", "200,000", 20, 0, 0, 20);
  write(dir / "measured" / "source.csv",
        section("/usr/include/c++/13/cmath") + line(477, "{ return __builtin_tanhf(__x); }") + x20 +
            sass("0x40", "100,000", 5, 0, 0, 5) +
            section("/elsewhere/checkout/cuda/engine/stages.cuh") +
            line(12, "y[0] = first_stage(y[0]) + Scale{}(y[1]);") + x10 +
            "\"\",\"\",\"...\",\"...\",\"-\",\"-\",\"-\",\"-\",\"-\",\"-\"\n" +
            sass("0x30", "400,000", 10, 7, 10, 0) +
            section("/elsewhere/checkout/cuda/engine/inner.cuh") + line(3, "return x * 2.0f;") +
            x10 + line(7, "return x * 3.0f;") + x20);
}

TEST(StallProfileScript, CountsEachInstructionOnceOnItsInnermostLineAndSumsPerReasonAndFunction) {
  TempDir dir;
  write_stall_profile_inputs(dir.path());
  const std::string arguments = "--from '" + (dir / "measured").string() + "' --source-root '" +
                                (dir / "tree").string() + "' --top 3";
  ASSERT_EQ(run_script("stall_profile.sh", arguments, dir), 0)
      << testing::read_text(dir / "out.txt");
  const std::string tables = testing::read_text(dir / "measured" / "stalls.md");
  EXPECT_TRUE(testing::mentions(testing::read_text(dir / "out.txt"), tables));
  // 0x10, 0x20, 0x30, 0x40 once each: 30 + 20 + 10 + 5 samples; the not-issued columns are not
  // counted again.
  EXPECT_TRUE(testing::mentions(
      tables, "65 warp-stall samples over 4 SASS instructions; 1.70 M warp instructions"))
      << tables;
  // 0x10 counts in first_stage, not on the line that calls it; 0x20 in this tree, not in cmath;
  // second_kernel's name sits on the line after __launch_bounds__.
  for (const char* row : {
           "| long sb | 55 | 84.6 % |",
           "| barrier | 10 | 15.4 % |",
           "| first_stage (cuda/engine/inner.cuh) | 30 | 46.2 % | long sb 30 |",
           "| Scale::operator() (cuda/engine/inner.cuh) | 20 | 30.8 % | long sb 20 |",
           "| second_kernel (cuda/engine/stages.cuh) | 10 | 15.4 % | barrier 10 |",
           "| cmath (outside the tree) | 5 | 7.7 % | long sb 5 |",
           "| cuda/engine/inner.cuh:3 | 30 | 46.2 % | long sb 30 | `return x * 2.0f;` |",
           "| cuda/engine/stages.cuh:12 | 10 | 15.4 % | barrier 10 |",
       })
    EXPECT_TRUE(testing::mentions(tables, row)) << row << "\n" << tables;
  EXPECT_FALSE(testing::mentions(tables, "Not Issued")) << tables;
  EXPECT_FALSE(testing::mentions(tables, "decoy")) << tables;
  // --top 3: the fourth line is left out.
  EXPECT_FALSE(testing::mentions(tables, "cmath:477")) << tables;
}

TEST(StallProfileScript, RefusesBadArgumentsAFolderWithoutASourcePageAndAPageWithoutLines) {
  TempDir dir;
  std::filesystem::create_directories(dir / "empty");
  EXPECT_EQ(run_script("stall_profile.sh", "--from '" + (dir / "empty").string() + "'", dir), 2);
  EXPECT_TRUE(testing::mentions(testing::read_text(dir / "out.txt"), "no source.csv there"));
  EXPECT_EQ(
      run_script("stall_profile.sh", "--from '" + (dir / "empty").string() + "' --skip 3", dir), 2);
  EXPECT_TRUE(testing::mentions(testing::read_text(dir / "out.txt"), "not --skip"));
  EXPECT_EQ(run_script("stall_profile.sh", "--top many", dir), 2);
  EXPECT_TRUE(testing::mentions(testing::read_text(dir / "out.txt"), "--top takes a whole number"));
  EXPECT_EQ(run_script("stall_profile.sh", "--top", dir), 2);
  EXPECT_TRUE(testing::mentions(testing::read_text(dir / "out.txt"), "--top needs a value"));
  // A binary built without -lineinfo: no source lines, so no instruction under one.
  write(dir / "sass-only" / "source.csv",
        "\"File Path\",\"\"\n\"Line No\",\"Source\",\"Address\",\"Source\","
        "\"Warp Stall Sampling (All Samples)\"\n\"\",\"\",\"0x7f00\",\"FMUL R1, R1, 2\",\"30\"\n");
  EXPECT_EQ(run_script("stall_profile.sh", "--from '" + (dir / "sass-only").string() + "'", dir),
            1);
  EXPECT_TRUE(testing::mentions(testing::read_text(dir / "out.txt"), "-lineinfo"));
  // Not a source page at all.
  write(dir / "other" / "source.csv", "\"ID\",\"Kernel Name\"\n\"0\",\"k\"\n");
  EXPECT_EQ(run_script("stall_profile.sh", "--from '" + (dir / "other").string() + "'", dir), 2);
  EXPECT_TRUE(testing::mentions(testing::read_text(dir / "out.txt"), "no Line No header"));
}

// A fuzz build as scripts/fuzz.sh leaves it, with two targets: "calm" ran to its end without a
// crash, "broken" ran to its end with one.
void write_fuzz_build(const std::filesystem::path& build) {
  write(build / "CMakeCache.txt", "LENET5_FUZZ_BUILT_TARGETS:INTERNAL=calm;broken\n");
  write(build / "fuzz_calm.log",
        "INFO: Seed: 1\nstat::number_of_executed_units: 1234\nstat::average_exec_per_sec: 20\n");
  write(build / "corpus" / "calm" / "a", "x");
  write(build / "corpus" / "calm" / "b", "y");
  write(build / "fuzz_broken.log",
        "INFO: Seed: 1\n==4242==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x1\n"
        "    #0 0x55 in lenet5::decode_gray_image src/image/image_io.cpp:212\n"
        "stat::number_of_executed_units: 99\nstat::average_exec_per_sec: 9\n");
  write(build / "artifacts" / "broken" / "crash-0123", std::string("\x01\x02PNG\xff", 6));
}

// With FUZZ_BUILD set to `build` for the script (the variable it reads), then unset.
int run_fuzz_summary(const std::filesystem::path& build, const std::string& targets,
                     const TempDir& dir) {
  setenv("FUZZ_BUILD", build.c_str(), 1);
  const int status = run_script("fuzz.sh", "--summary " + targets, dir);
  unsetenv("FUZZ_BUILD");
  return status;
}

TEST(FuzzScript, SummaryEndsWithEachCrashsInputAsBase64AndTheStartOfItsReport) {
  TempDir dir;
  write_fuzz_build(dir / "build");
  EXPECT_EQ(run_fuzz_summary(dir / "build", "", dir), 1);
  const std::string out = testing::read_text(dir / "out.txt");
  EXPECT_TRUE(testing::mentions(out, "calm                 1234         20        2 0")) << out;
  EXPECT_TRUE(testing::mentions(out, "broken                 99          9        0 1")) << out;
  // The input's six bytes, 01 02 'P' 'N' 'G' ff, decode back from this line; the command that
  // replays it carries the bounds that made it a crash.
  EXPECT_TRUE(testing::mentions(out, "broken: crash-0123 (6 bytes) as base64:\nAQJQTkf/\n")) << out;
  EXPECT_TRUE(testing::mentions(out,
                                "/tests/fuzz/fuzz_broken -rss_limit_mb=2048 "
                                "-malloc_limit_mb=1024 -timeout=60 crash.bin"))
      << out;
  EXPECT_TRUE(testing::mentions(out, "==4242==ERROR: AddressSanitizer: heap-buffer-overflow"));
  EXPECT_TRUE(testing::mentions(out, "src/image/image_io.cpp:212"));
  // The report comes after the table: a log cut to its end keeps it.
  const std::size_t table_row = out.find("broken                 99"), input = out.find("AQJQTkf/");
  ASSERT_NE(table_row, std::string::npos);
  ASSERT_NE(input, std::string::npos);
  EXPECT_LT(table_row, input);
}

TEST(FuzzScript, SummaryPassesOnlyTargetsThatFinishedWithoutACrash) {
  TempDir dir;
  write_fuzz_build(dir / "build");
  EXPECT_EQ(run_fuzz_summary(dir / "build", "calm", dir), 0) << testing::read_text(dir / "out.txt");
  EXPECT_FALSE(testing::mentions(testing::read_text(dir / "out.txt"), "broken"));
  // A target that left no final statistics did not finish (killed, or out of memory).
  write(dir / "build" / "fuzz_cut.log", "INFO: Seed: 1\n#2 INITED cov: 3\n");
  EXPECT_EQ(run_fuzz_summary(dir / "build", "calm cut", dir), 1);
  std::string out = testing::read_text(dir / "out.txt");
  EXPECT_TRUE(testing::mentions(out, "cut                     ?          ?        0 0")) << out;
  EXPECT_TRUE(testing::mentions(out, "cut: see ")) << out;
  // UBSan's reports start with the line that says "runtime error:", not with "==ERROR".
  write(dir / "build" / "fuzz_ub.log",
        "INFO: Seed: 1\nsrc/image/ink.cpp:40:3: runtime error: signed integer overflow\n"
        "stat::number_of_executed_units: 7\n");
  write(dir / "build" / "artifacts" / "ub" / "crash-77", "ub");
  EXPECT_EQ(run_fuzz_summary(dir / "build", "ub", dir), 1);
  out = testing::read_text(dir / "out.txt");
  EXPECT_TRUE(testing::mentions(out, "ub: crash-77 (2 bytes) as base64:\ndWI=\n")) << out;
  EXPECT_TRUE(testing::mentions(out, "ink.cpp:40:3: runtime error: signed integer overflow"));
}

TEST(FuzzScript, SummaryRefusesAFolderWithoutAFuzzBuild) {
  TempDir dir;
  EXPECT_EQ(run_fuzz_summary(dir / "nothing", "", dir), 2);
  EXPECT_TRUE(testing::mentions(testing::read_text(dir / "out.txt"), "no fuzz build in"));
  // A build configured without -DLENET5_FUZZ=ON has no fuzz targets to summarise.
  write(dir / "plain" / "CMakeCache.txt", "CMAKE_BUILD_TYPE:STRING=Release\n");
  EXPECT_EQ(run_fuzz_summary(dir / "plain", "", dir), 2);
  EXPECT_TRUE(testing::mentions(testing::read_text(dir / "out.txt"), "is not a fuzz build"));
}

}  // namespace
}  // namespace lenet5
