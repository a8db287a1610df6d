// The measurement behind cudnn.tab4 (src/figures/phase_timing.hpp): its timed loop trains exactly
// as the GPU engine does (bit for bit, from the same weights and data), each run's phases sum to
// its overall within the event-timing bound and the run repeats itself bit for bit, for every
// configuration the target times; and the target itself passes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "core/conv_algo.hpp"
#include "cuda/engine/gpu_engine.hpp"
#include "figures/cudnn_table4.hpp"
#include "figures/figures.hpp"
#include "figures/phase_timing.hpp"
#include "gpu_test_util.hpp"

namespace lenet5 {
namespace {

NetConfig config_of(GpuKernels kernels, ConvAlgo algo) {
  NetConfig config;
  config.kernels = kernels;
  config.conv_algo = algo;
  return config;
}

// The target's configurations: the book's kernels with version 1, the fast ones with every version.
std::vector<NetConfig> timed_configurations() {
  std::vector<NetConfig> all{config_of(GpuKernels::book, ConvAlgo::direct)};
  for (const ConvAlgoInfo& info : conv_algorithms())
    all.push_back(config_of(GpuKernels::fast, info.algo));
  return all;
}

std::string name_of(const NetConfig& c) {
  return std::string(to_string(c.kernels)) + " + " + to_string(c.conv_algo);
}

// Gather, forward, loss, backward and SGD in the engine's order, with the engine's kernels: the
// same bits. The test set of 300 ends in a short batch (300 = 256 + 44).
TEST(PhaseTiming, TrainsAndTestsExactlyAsTheGpuEngine) {
  LENET5_REQUIRE_GPU();
  figures::PhaseRunSetup setup;
  setup.iterations = 5;
  const Dataset train = figures::random_dataset(setup.iterations * setup.batch, 11);
  const Dataset test = figures::random_dataset(300, 12);
  const figures::DeviceDataset train_dev = figures::upload_dataset(train);
  const figures::DeviceDataset test_dev = figures::upload_dataset(test);
  for (GpuKernels kernels : {GpuKernels::book, GpuKernels::fast}) {
    const NetConfig config =
        config_of(kernels, kernels == GpuKernels::book ? ConvAlgo::direct : ConvAlgo::staged);
    SCOPED_TRACE(name_of(config));
    figures::PhaseTrainer trainer(config, setup);
    const figures::PhaseRun run = trainer.run(train_dev, test_dev);

    auto engine = make_gpu_engine(config, setup.sgd, setup.batch, /*use_graphs=*/false);
    engine->initialise(setup.init_seed);
    engine->set_training_data(train);
    std::vector<std::int32_t> in_order(std::size_t(train.count));
    std::iota(in_order.begin(), in_order.end(), 0);
    engine->begin_epoch(in_order, std::vector<float>(std::size_t(setup.iterations), setup.lr));
    engine->train_steps(0, setup.iterations);
    const EpochTotals totals = engine->take_epoch_totals();

    EXPECT_EQ(run.parameters, engine->parameters());
    // Each step's mean times 64 (a power of two: exact) is its loss sum; summed in step order as
    // the engine sums its slots.
    double loss_sum = 0;
    for (double mean : run.step_losses) loss_sum += mean * setup.batch;
    ASSERT_EQ(run.step_losses.size(), std::size_t(setup.iterations));
    EXPECT_EQ(loss_sum, totals.loss_sum);
    EXPECT_EQ(run.test_loss, engine->evaluate(test).mean_loss());
  }
}

// For every configuration cudnn.tab4 times: positive phase times, overall = sum of the phases
// within the bound, and a second run identical to the first (the target's warm-up and timed run).
TEST(PhaseTiming, PhasesSumToTheOverallAndRunsRepeat) {
  LENET5_REQUIRE_GPU();
  figures::PhaseRunSetup setup;
  setup.iterations = 20;
  const figures::DeviceDataset train =
      figures::upload_dataset(figures::random_dataset(setup.iterations * setup.batch, 21));
  const figures::DeviceDataset test = figures::upload_dataset(figures::random_dataset(1000, 22));
  for (const NetConfig& config : timed_configurations()) {
    SCOPED_TRACE(name_of(config));
    figures::PhaseTrainer trainer(config, setup);
    const figures::PhaseRun first = trainer.run(train, test);
    const figures::PhaseRun second = trainer.run(train, test);
    const figures::PhaseTimes& t = second.times;
    EXPECT_TRUE(figures::positive_and_finite(t));
    EXPECT_EQ(second.intervals, figures::interval_count(setup.iterations));
    EXPECT_LE(std::fabs(t.overall_ms - t.phase_sum()),
              figures::overall_sum_bound_ms(second.intervals, t.overall_ms))
        << "overall " << t.overall_ms << " ms, sum " << t.phase_sum() << " ms";
    EXPECT_EQ(second.parameters, first.parameters);
    EXPECT_EQ(second.step_losses, first.step_losses);
    EXPECT_EQ(second.test_loss, first.test_loss);
    for (double loss : second.step_losses) EXPECT_TRUE(std::isfinite(loss));
  }
}

// The whole target: 200 iterations for every configuration, all its checks.
TEST(PhaseTiming, CudnnTab4TargetPasses) {
  LENET5_REQUIRE_GPU();
  const std::filesystem::path out =
      std::filesystem::temp_directory_path() / ("lenet5-cudnn-tab4-" + std::to_string(::getpid()));
  figures::FiguresOptions options;
  options.ids = {"cudnn.tab4"};
  options.out = out;
  options.device = "gpu";
  std::ostringstream log;
  const int exit_code = figures::run_figures(options, log);
  const bool wrote_table = std::filesystem::exists(out / "cudnn.tab4" / "table4_all.csv");
  std::filesystem::remove_all(out);
  EXPECT_EQ(exit_code, 0) << log.str();
  EXPECT_NE(log.str().find("PASS cudnn.tab4"), std::string::npos) << log.str();
  EXPECT_TRUE(wrote_table);
}

}  // namespace
}  // namespace lenet5
