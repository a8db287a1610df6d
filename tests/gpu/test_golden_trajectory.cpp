// The golden trajectory on the GPU engine, for each kernel set (tests/common/golden_trajectory.hpp):
// eight SGD steps on fixed synthetic data, each step's loss and the final weights compared with
// values stored here, measured on an H100 on 2026-11-25 at 4fbc966 (whose checkpoints of the
// README's command are byte-identical to those of f13c262, the tree before the rearrangement). The
// kernel sets sum in different orders, so each has its own values; all stay close to the CPU's.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "backend/backend.hpp"
#include "common/golden_trajectory.hpp"
#include "gpu_test_util.hpp"

namespace lenet5 {
namespace {

// Tolerance: every kernel is deterministic (no float atomics, fixed reduction orders), so the same
// build on the same GPU repeats these values bit for bit; Hopper GPUs (H100, H200) run the same
// sm_90 code and agree. 1e-6 relative leaves room for a last-bit difference in the device's
// tanhf/expf between driver versions, grown over eight steps; a real change of the computation
// moves the losses by 1e-4 or more.
constexpr double kRelativeTolerance = 1e-6;

const std::map<std::string, testing::Trajectory>& stored() {
  static const std::map<std::string, testing::Trajectory> values{
      {"book",
       {{2.2883626205663758, 2.1956888484277397, 1.9883258349414028, 1.696451801277826,
         1.3910479733823511, 1.0779077513064621, 0.77040803637933841, 0.53300035072372687},
        88.097232900650852,
        3181.6593257499953}},
      {"fast",
       {{2.2883626292056931, 2.1956888464231188, 1.9883258185955865, 1.6964518042251209,
         1.3910479847982877, 1.0779077359423184, 0.77040805591018824, 0.53300036505753567},
        88.097231151641608,
        3181.6593260338013}},
      {"whole-step",
       {{2.2883626073598862, 2.1956888474524021, 1.9883258603513241, 1.6964518278837204,
         1.3910480104386806, 1.0779077559709549, 0.77040807157754898, 0.5330004021525383},
        88.097230956940621,
        3181.6593263770992}},
  };
  return values;
}

class GoldenTrajectoryGpu : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTrajectoryGpu, RepeatsTheStoredLossesAndWeights) {
  LENET5_REQUIRE_GPU();
  NetConfig net;
  net.kernels = parse_gpu_kernels(GetParam());
  const auto engine = make_engine(Device::gpu, net, testing::golden_sgd(), testing::kGoldenBatch);
  testing::expect_trajectory(testing::golden_trajectory(*engine), stored().at(GetParam()),
                             kRelativeTolerance);
}

INSTANTIATE_TEST_SUITE_P(EveryKernelSet, GoldenTrajectoryGpu,
                         ::testing::Values("book", "fast", "whole-step"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

}  // namespace
}  // namespace lenet5
