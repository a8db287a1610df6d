// The measurement behind cudnn.tab4 (src/figures/phase_timing.hpp): the GPU engine that marks its
// phases marks them in order and computes the same bits as the engine that does not, each run's
// phases sum to its overall within the event-timing bound and the run repeats itself bit for bit,
// for every configuration the target times; and the target itself passes.
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
#include "core/error.hpp"
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

// Records the phases the engine marks, in order.
struct RecordedMarks final : PhaseMarks {
  std::vector<EnginePhase> phases;
  void mark(EnginePhase phase) override { phases.push_back(phase); }
};

// The marked engine calls its marks in the order the timing sums them (three per step, then
// testing and the end) and computes the same bits as the engine `train` runs, whose epoch is one
// replayed graph. The test set of 300 ends in a short batch (300 = 256 + 44).
TEST(PhaseTiming, MarkingThePhasesChangesNothingTheEngineComputes) {
  LENET5_REQUIRE_GPU();
  const SgdSettings sgd{0.9, false, 0.0};
  const int batch = 64, steps = 5;
  const Dataset train = figures::random_dataset(steps * batch, 11);
  const Dataset test = figures::random_dataset(300, 12);
  std::vector<std::int32_t> in_order(static_cast<std::size_t>(train.count));
  std::iota(in_order.begin(), in_order.end(), 0);
  const std::vector<float> rates(std::size_t(steps), 0.01f);
  for (GpuKernels kernels : {GpuKernels::book, GpuKernels::fast}) {
    const NetConfig config =
        config_of(kernels, kernels == GpuKernels::book ? ConvAlgo::direct : ConvAlgo::staged);
    SCOPED_TRACE(name_of(config));
    RecordedMarks marks;
    auto marked = make_marked_gpu_engine(config, sgd, batch, marks);
    auto plain = make_gpu_engine(config, sgd, batch);
    for (Engine* engine : {marked.get(), plain.get()}) {
      engine->initialise(1);
      engine->set_training_data(train, Augmentation{});
      engine->begin_epoch(0, in_order, rates);
      engine->train_steps(0, steps);
    }
    const Evaluation marked_test = marked->evaluate(test), plain_test = plain->evaluate(test);

    std::vector<EnginePhase> expected;
    for (int s = 0; s < steps; ++s)
      expected.insert(expected.end(),
                      {EnginePhase::forward, EnginePhase::backward, EnginePhase::update});
    expected.insert(expected.end(), {EnginePhase::testing, EnginePhase::end});
    EXPECT_EQ(marks.phases, expected);
    EXPECT_EQ(marked->parameters(), plain->parameters());
    EXPECT_EQ(marked->take_epoch_totals().loss_sum, plain->take_epoch_totals().loss_sum);
    EXPECT_EQ(marked_test.loss_sum, plain_test.loss_sum);
    EXPECT_EQ(marked_test.confusion, plain_test.confusion);
  }
  // The whole-step kernels' step is two launches: no phases to mark.
  NetConfig whole_step;
  whole_step.kernels = GpuKernels::whole_step;
  RecordedMarks unused;
  EXPECT_THROW(make_marked_gpu_engine(whole_step, sgd, batch, unused), Error);
}

// For every configuration cudnn.tab4 times: positive phase times, overall = sum of the phases
// within the bound, and a second run identical to the first (the target's warm-up and timed run).
TEST(PhaseTiming, PhasesSumToTheOverallAndRunsRepeat) {
  LENET5_REQUIRE_GPU();
  figures::PhaseRunSetup setup;
  setup.iterations = 20;
  const Dataset train = figures::random_dataset(setup.iterations * setup.batch, 21);
  const Dataset test = figures::random_dataset(1000, 22);
  for (const NetConfig& config : timed_configurations()) {
    SCOPED_TRACE(name_of(config));
    figures::PhaseTrainer trainer(config, setup, train);
    const figures::PhaseRun first = trainer.run(test);
    const figures::PhaseRun second = trainer.run(test);
    const figures::PhaseTimes& t = second.times;
    EXPECT_TRUE(figures::positive_and_finite(t));
    EXPECT_EQ(second.intervals, figures::interval_count(setup.iterations));
    EXPECT_LE(std::fabs(t.overall_ms - t.phase_sum()),
              figures::overall_sum_bound_ms(second.intervals, t.overall_ms))
        << "overall " << t.overall_ms << " ms, sum " << t.phase_sum() << " ms";
    EXPECT_EQ(second.parameters, first.parameters);
    EXPECT_EQ(second.train_loss, first.train_loss);
    EXPECT_EQ(second.test_loss, first.test_loss);
    EXPECT_TRUE(std::isfinite(second.train_loss));
    EXPECT_TRUE(std::isfinite(second.test_loss));
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
