// The golden trajectory on the CPU engine (tests/common/golden_trajectory.hpp): eight SGD steps
// on fixed synthetic data, each step's loss and the final weights compared with values stored
// here. The stored values were produced by this test at 27bc59b, before the tree was rearranged;
// a change that alters what the CPU engine computes fails here and must say why in its commit,
// with new values.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "backend/backend.hpp"
#include "common/golden_trajectory.hpp"

namespace lenet5 {
namespace {

// Tolerance: the CPU engine is deterministic (fixed summation order whatever the thread count),
// so on one machine the values repeat bit for bit. Across machines, glibc may pick another
// variant of exp/tanh for the processor (FMA or not), which differs in the last bit; eight steps
// of SGD grow a last-bit difference to about 1e-7 relative. A real change of the computation (an
// index, a reordered layer, another initialisation, a changed default) moves the losses by 1e-4
// or more, so 2e-6 relative separates the two.
constexpr double kRelativeTolerance = 2e-6;

constexpr double kStepLosses[testing::kGoldenSteps] = {
    2.2883626159169221, 2.1956888508354506, 1.9883258041605805, 1.696451759874491,
    1.3910479605611528, 1.0779077202795424, 0.77040808822896167, 0.5330003709098321};
constexpr double kWeightedSum = 88.097233014308586;
constexpr double kAbsoluteSum = 3181.6593270061167;

std::string printed(const testing::Trajectory& t) {
  std::string out = "losses";
  char number[64];
  for (const double loss : t.step_losses) {
    std::snprintf(number, sizeof number, " %.17g", loss);
    out += number;
  }
  std::snprintf(number, sizeof number, "; weighted %.17g", t.weighted_sum);
  out += number;
  std::snprintf(number, sizeof number, "; absolute %.17g", t.absolute_sum);
  return out + number;
}

void expect_near_relative(double actual, double expected, const std::string& what) {
  EXPECT_LE(std::fabs(actual - expected), kRelativeTolerance * std::fabs(expected))
      << what << ": " << actual << " against the stored " << expected;
}

TEST(GoldenTrajectory, CpuEngineRepeatsTheStoredLossesAndWeights) {
  const auto engine = make_engine(Device::cpu, NetConfig{}, testing::golden_sgd(),
                                  testing::kGoldenBatch);
  const testing::Trajectory t = testing::golden_trajectory(*engine);
  SCOPED_TRACE("this run: " + printed(t));
  ASSERT_EQ(t.step_losses.size(), std::size_t(testing::kGoldenSteps));
  for (int s = 0; s < testing::kGoldenSteps; ++s)
    expect_near_relative(t.step_losses[s], kStepLosses[s], "loss of step " + std::to_string(s));
  expect_near_relative(t.weighted_sum, kWeightedSum, "weighted parameter sum");
  expect_near_relative(t.absolute_sum, kAbsoluteSum, "absolute parameter sum");
  // The data are learnable: the last step's loss is well below the first (about 2.3 = ln 10).
  EXPECT_LT(t.step_losses.back(), 0.8 * t.step_losses.front());
}

}  // namespace
}  // namespace lenet5
