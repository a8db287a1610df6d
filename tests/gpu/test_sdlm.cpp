// SDLM on the GPU: the update kernel (cuda/kernels/sdlm.cu) against the host update
// (layers/sdlm_cpu.cpp) bit for bit, and the GPU engine training with it in both layer-by-layer
// kernel sets: the curvature it takes from the host estimate is the CPU engine's, bit for bit,
// its step follows the CPU engine's, and an interrupted pass resumes bit-identically. The
// whole-step kernels do not take SDLM (refused).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "common/golden_trajectory.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"
#include "core/rng.hpp"
#include "core/sdlm.hpp"
#include "cuda/engine/gpu_engine.hpp"
#include "cuda/kernels/dense.cuh"
#include "cuda/kernels/sdlm.cuh"
#include "gpu_test_util.hpp"
#include "layers/sdlm_cpu.hpp"

namespace lenet5 {
namespace {

using test::all_equal;
using test::download;
using test::random_floats;
using test::upload;

SgdSettings sdlm(double weight_decay = 0) {
  SgdSettings settings;
  settings.optimizer = kSdlmName;
  settings.weight_decay = weight_decay;
  settings.sdlm_samples = 64;
  return settings;
}

// Every operation of the update is one IEEE float operation rounded to nearest on both sides
// (sdlm.cu says how the kernel keeps nvcc from fusing them), so the results must be identical.
TEST(SdlmKernel, MatchesTheHostUpdateBitForBit) {
  LENET5_REQUIRE_GPU();
  for (const std::size_t count :
       {std::size_t(1), std::size_t(1000), lenet5_layout(NetConfig{}).buffer_floats}) {
    for (const double decay : {0.0, 5e-4}) {
      SCOPED_TRACE(std::to_string(count) + " parameters, weight decay " + std::to_string(decay));
      std::vector<float> params = random_floats(count, 1);
      const std::vector<float> gradients = random_floats(count, 2);
      std::vector<float> hessian = test::absolute(random_floats(count, 3));
      hessian[0] = 0.0f;  // where only mu bounds the step
      Buffer<float> d_params = upload(params);
      const Buffer<float> d_gradients = upload(gradients), d_hessian = upload(hessian);
      const std::vector<float> rate{0.0005f};
      const Buffer<float> d_rate = upload(rate);
      sdlm_step_cpu(sdlm(decay), rate[0], gradients.data(), params.data(), hessian.data(), count);
      cuda::sdlm_step(sdlm(decay), d_rate.data(), d_gradients.data(), d_params.data(),
                      d_hessian.data(), count, cuda::kDefaultStream);
      EXPECT_TRUE(all_equal(download(d_params), params));
      EXPECT_TRUE(all_equal(download(d_hessian), hessian)) << "the estimate is only read";
    }
  }
}

// The engines over the golden data (no files needed), one pass in the trainer's order.
std::vector<std::int32_t> golden_order() {
  return epoch_permutation(testing::kGoldenSeed, 0, testing::kGoldenImages);
}
constexpr float kRate = 0.002f;

void begin(Engine& engine, const Dataset& data) {
  engine.set_training_data(data, Augmentation{});
  engine.begin_epoch(0, golden_order(), std::vector<float>(testing::kGoldenSteps, kRate));
}

std::vector<float> hessian_of(const Engine& engine) {
  const OptimizerState state = engine.optimizer_state();
  const StateBuffer* buffer = find_state(state, kHessianState);
  return buffer ? buffer->values : std::vector<float>{};
}

NetConfig with_kernels(GpuKernels kernels) {
  NetConfig net;
  net.kernels = kernels;
  return net;
}

class GpuSdlm : public ::testing::TestWithParam<GpuKernels> {
 protected:
  void SetUp() override { LENET5_REQUIRE_GPU(); }
};

// The estimate is the host's, from the same parameters: identical. After one step the weights
// differ only by the float rounding of the two engines' gradients, scaled by each step size.
TEST_P(GpuSdlm, TakesTheHostsCurvatureAndStepsLikeTheCpuEngine) {
  const Dataset data = testing::golden_dataset();
  auto gpu = make_gpu_engine(with_kernels(GetParam()), sdlm(), testing::kGoldenBatch, true);
  auto cpu = make_engine(Device::cpu, with_kernels(GetParam()), sdlm(), testing::kGoldenBatch);
  gpu->initialise(testing::kGoldenSeed);
  cpu->initialise(testing::kGoldenSeed);
  ASSERT_TRUE(gpu->parameters() == cpu->parameters()) << "initialisation differs";
  const std::vector<float> start = cpu->parameters();
  begin(*gpu, data);
  begin(*cpu, data);
  gpu->train_steps(0, 1);
  cpu->train_steps(0, 1);
  const std::vector<float> h = hessian_of(*cpu);
  ASSERT_EQ(h.size(), cpu->layout().buffer_floats);
  EXPECT_TRUE(all_equal(hessian_of(*gpu), h));

  // Each weight moved by step_k * g_k, step_k = lr / (mu + h_k) the same on both (same h). The
  // gradients of the two engines agree to 1e-4 of their L2 norm per tensor (the bound
  // OneStepMatchesCpuEngine holds SGD to), so the weights differ by at most the largest step times
  // that, plus the rounding of the weights themselves (2^-22 of the largest).
  const std::vector<float> wg = gpu->parameters(), wc = cpu->parameters();
  for (const ParamSpec& tensor : cpu->layout().tensors) {
    SCOPED_TRACE(tensor.name);
    double largest_step = 0, gradient_norm2 = 0, largest_w = 0, largest_difference = 0;
    for (std::size_t i = tensor.offset; i < tensor.offset + tensor.count; ++i) {
      const double step = kRate / (float(sdlm().sdlm_mu) + h[i]);
      const double gradient = (double(start[i]) - wc[i]) / step;
      largest_step = std::max(largest_step, step);
      gradient_norm2 += gradient * gradient;
      largest_w = std::max(largest_w, std::fabs(double(wc[i])));
      largest_difference = std::max(largest_difference, std::fabs(double(wg[i]) - wc[i]));
    }
    EXPECT_GT(gradient_norm2, 0.0) << "no step reached this tensor";
    EXPECT_LE(largest_difference,
              largest_step * 1e-4 * std::sqrt(gradient_norm2) + std::ldexp(largest_w, -22))
        << "the GPU's step differs from the CPU's by more than rounding";
  }
}

// Stopped after three steps, restored into a fresh engine from its parameters and state, and
// finished: bit-identical to the pass that never stopped (which re-estimated only at step 0),
// with and without the epoch's CUDA graph.
TEST_P(GpuSdlm, AnInterruptedPassResumesBitIdentically) {
  const Dataset data = testing::golden_dataset();
  const auto make = [&](bool graphs) {
    auto engine =
        make_gpu_engine(with_kernels(GetParam()), sdlm(5e-4), testing::kGoldenBatch, graphs);
    engine->initialise(testing::kGoldenSeed);
    begin(*engine, data);
    return engine;
  };
  auto straight = make(true), stopped = make(false);
  straight->train_steps(0, testing::kGoldenSteps);
  stopped->train_steps(0, 3);
  auto resumed = make(false);
  resumed->set_state(stopped->parameters(), stopped->optimizer_state());
  resumed->train_steps(3, testing::kGoldenSteps);
  EXPECT_TRUE(all_equal(resumed->parameters(), straight->parameters()));
  EXPECT_TRUE(all_equal(hessian_of(*resumed), hessian_of(*straight)));
}

INSTANTIATE_TEST_SUITE_P(BookAndFast, GpuSdlm,
                         ::testing::Values(GpuKernels::book, GpuKernels::fast),
                         [](const ::testing::TestParamInfo<GpuKernels>& info) {
                           return std::string(info.param == GpuKernels::book ? "book" : "fast");
                         });

TEST(GpuSdlmWholeStep, IsRefused) {
  LENET5_REQUIRE_GPU();
  EXPECT_THROW(make_gpu_engine(with_kernels(GpuKernels::whole_step), sdlm(), 32, true), UsageError);
}

}  // namespace
}  // namespace lenet5
