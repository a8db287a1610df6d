// The optimizer seam (core/optimizer.hpp, engine/optimizers.hpp): the table declares each
// optimizer's state by name, the engine keeps exactly those buffers, and a checkpoint carries them
// by name so that an engine restored from it continues bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "backend/backend.hpp"
#include "common/golden_trajectory.hpp"
#include "core/error.hpp"
#include "core/sdlm.hpp"
#include "engine/optimizers.hpp"
#include "io/safetensors.hpp"
#include "layers/sdlm_cpu.hpp"
#include "test_util.hpp"
#include "train/checkpoint.hpp"

namespace lenet5 {
namespace {

using testing::TempDir;

TEST(Optimizers, SgdKeepsItsVelocityOnlyWithMomentum) {
  const Optimizer& sgd = optimizer_for(testing::golden_sgd());
  EXPECT_EQ(sgd.description.name, kSgdName);
  EXPECT_EQ(sgd.description.all_state, std::vector<std::string>{kMomentumState});
  EXPECT_TRUE(sgd.description.state_for(SgdSettings{0, false, 5e-4}).empty());
  EXPECT_EQ(sgd.description.state_for(SgdSettings{0.9, true, 0}),
            std::vector<std::string>{kMomentumState});
  const std::vector<std::string> names = all_state_names();
  EXPECT_NE(std::find(names.begin(), names.end(), kMomentumState), names.end());
}

// The golden data (tests/common/golden_trajectory.hpp) in reversed order, at its rate.
void train_golden_steps(Engine& engine, int first_step, int end_step) {
  std::vector<std::int32_t> permutation(testing::kGoldenImages);
  for (int i = 0; i < testing::kGoldenImages; ++i) permutation[i] = testing::kGoldenImages - 1 - i;
  engine.begin_epoch(0, permutation,
                     std::vector<float>(testing::kGoldenSteps, testing::kGoldenLearningRate));
  engine.train_steps(first_step, end_step);
}

Checkpoint checkpoint_of(const Engine& engine) {
  Checkpoint c;
  c.parameters = engine.parameters();
  c.optimizer_state = engine.optimizer_state();
  return c;
}

// Half the golden steps, a checkpoint, a fresh engine restored from it: the state comes back under
// its name, and the rest of the steps give the same weights and state as an engine that never
// stopped (the resume equivalence of the trainer, at the engine's level).
TEST(Optimizers, CpuEngineStateRoundTripsThroughACheckpointByName) {
  TempDir dir;
  const Dataset data = testing::golden_dataset();
  const auto make = [&] {
    auto engine = make_engine(Device::cpu, NetConfig{}, testing::golden_sgd(), testing::kGoldenBatch);
    engine->set_training_data(data, Augmentation{});
    return engine;
  };
  const int half = testing::kGoldenSteps / 2;
  auto straight = make(), stopped = make();
  straight->initialise(testing::kGoldenSeed);
  stopped->initialise(testing::kGoldenSeed);
  train_golden_steps(*stopped, 0, half);
  save_checkpoint(dir / "c.safetensors", checkpoint_of(*stopped));

  const SafetensorsFile file = read_safetensors(dir / "c.safetensors");
  ASSERT_TRUE(file.tensors.count("c3.weight.momentum"));
  const Checkpoint loaded = load_checkpoint(dir / "c.safetensors");
  ASSERT_EQ(loaded.optimizer_state.size(), 1u);
  EXPECT_EQ(loaded.optimizer_state[0].name, kMomentumState);
  const std::vector<float>& velocity = loaded.optimizer_state[0].values;
  EXPECT_TRUE(std::any_of(velocity.begin(), velocity.end(), [](float v) { return v != 0; }))
      << "after four steps with momentum the velocity cannot be all zero";

  auto resumed = make();
  resumed->set_state(loaded.parameters, loaded.optimizer_state);
  EXPECT_TRUE(resumed->optimizer_state() == stopped->optimizer_state());
  train_golden_steps(*straight, 0, testing::kGoldenSteps);
  train_golden_steps(*resumed, half, testing::kGoldenSteps);
  EXPECT_EQ(resumed->parameters(), straight->parameters());
  EXPECT_TRUE(resumed->optimizer_state() == straight->optimizer_state());
}

// Plain SGD keeps no state, so its checkpoint holds the parameters only; restoring that into an
// engine with momentum starts the velocity from zero, as a fresh run does.
TEST(Optimizers, PlainSgdKeepsNoStateAndAMissingBufferStartsAtZero) {
  TempDir dir;
  const Dataset data = testing::golden_dataset();
  auto plain = make_engine(Device::cpu, NetConfig{}, SgdSettings{0, false, 0}, testing::kGoldenBatch);
  plain->initialise(testing::kGoldenSeed);
  plain->set_training_data(data, Augmentation{});
  train_golden_steps(*plain, 0, 2);
  EXPECT_TRUE(plain->optimizer_state().empty());
  save_checkpoint(dir / "c.safetensors", checkpoint_of(*plain));
  EXPECT_EQ(read_safetensors(dir / "c.safetensors").tensors.size(),
            plain->layout().tensors.size());

  auto with_momentum =
      make_engine(Device::cpu, NetConfig{}, testing::golden_sgd(), testing::kGoldenBatch);
  with_momentum->initialise(testing::kGoldenSeed);
  with_momentum->set_training_data(data, Augmentation{});
  train_golden_steps(*with_momentum, 0, 1);  // a non-zero velocity, which set_state must clear
  const Checkpoint loaded = load_checkpoint(dir / "c.safetensors");
  with_momentum->set_state(loaded.parameters, loaded.optimizer_state);
  const OptimizerState state = with_momentum->optimizer_state();
  ASSERT_EQ(state.size(), 1u);
  EXPECT_EQ(state[0].values, std::vector<float>(plain->layout().buffer_floats, 0.0f));
  EXPECT_EQ(with_momentum->parameters(), plain->parameters());
}

SgdSettings sdlm_settings() {
  SgdSettings sdlm;
  sdlm.optimizer = kSdlmName;
  sdlm.sdlm_samples = 64;
  return sdlm;
}

TEST(Optimizers, TheTableChoosesByNameAndSdlmKeepsItsHessianEstimate) {
  EXPECT_EQ(optimizer_names(), (std::vector<std::string>{kSgdName, kSdlmName}));
  EXPECT_EQ(optimizer_for(SgdSettings{}).description.name, kSgdName);
  const Optimizer& sdlm = optimizer_for(sdlm_settings());
  EXPECT_EQ(sdlm.description.name, kSdlmName);
  EXPECT_EQ(sdlm.description.all_state, std::vector<std::string>{kHessianState});
  EXPECT_EQ(sdlm.description.state_for(sdlm_settings()), std::vector<std::string>{kHessianState});
  EXPECT_EQ(sdlm.description.curvature_state, kHessianState);
  EXPECT_TRUE(optimizer_for(SgdSettings{}).description.curvature_state.empty());
  SgdSettings unknown;
  unknown.optimizer = "adam";
  EXPECT_THROW(optimizer_for(unknown), UsageError);
}

// w -= lr / (mu + h + decay) * (grad + decay * w), on values whose every step is exact in float
// (powers of two and small sums of them), so the comparison can be exact.
TEST(Optimizers, SdlmScalesEachParametersStepByItsCurvature) {
  SgdSettings settings = sdlm_settings();
  settings.sdlm_mu = 0.25;
  const std::vector<float> gradients{2.0f, 2.0f, -1.0f};
  const std::vector<float> hessian{0.0f, 0.75f, 3.75f};
  std::vector<float> params{1.0f, 1.0f, 1.0f};
  sdlm_step_cpu(settings, 0.5f, gradients.data(), params.data(), hessian.data(), 3);
  // Steps 0.5/0.25 = 2, 0.5/1 = 0.5, 0.5/4 = 0.125.
  EXPECT_EQ(params, (std::vector<float>{1.0f - 4.0f, 1.0f - 1.0f, 1.0f + 0.125f}));

  settings.weight_decay = 0.25;  // its gradient 0.25 w, and its curvature 0.25 in the denominator
  params = {2.0f, 2.0f, 2.0f};
  sdlm_step_cpu(settings, 0.5f, gradients.data(), params.data(), hessian.data(), 3);
  // g = grad + 0.5; steps 0.5/0.5 = 1, 0.5/1.25 = 0.4 (float), 0.5/4.25 (float).
  EXPECT_EQ(params[0], 2.0f - 2.5f);
  EXPECT_EQ(params[1], 2.0f - (0.5f / 1.25f) * 2.5f);
  EXPECT_EQ(params[2], 2.0f - (0.5f / 4.25f) * -0.5f);
}

// The SDLM counterpart of the SGD round trip above: the Hessian estimate travels as
// "<tensor>.hessian", and a pass resumed after its first step with it ends bit for bit where the
// uninterrupted pass does (which re-estimated only before step 0).
TEST(Optimizers, CpuEngineSdlmStateRoundTripsThroughACheckpointByName) {
  TempDir dir;
  const Dataset data = testing::golden_dataset();
  const auto make = [&] {
    auto engine = make_engine(Device::cpu, NetConfig{}, sdlm_settings(), testing::kGoldenBatch);
    engine->set_training_data(data, Augmentation{});
    return engine;
  };
  const int half = testing::kGoldenSteps / 2;
  auto straight = make(), stopped = make();
  straight->initialise(testing::kGoldenSeed);
  stopped->initialise(testing::kGoldenSeed);
  train_golden_steps(*stopped, 0, half);
  save_checkpoint(dir / "c.safetensors", checkpoint_of(*stopped));

  const SafetensorsFile file = read_safetensors(dir / "c.safetensors");
  EXPECT_TRUE(file.tensors.count("c3.weight.hessian"));
  EXPECT_FALSE(file.tensors.count("c3.weight.momentum"));
  const Checkpoint loaded = load_checkpoint(dir / "c.safetensors");
  ASSERT_EQ(loaded.optimizer_state.size(), 1u);
  EXPECT_EQ(loaded.optimizer_state[0].name, kHessianState);
  const std::vector<float>& h = loaded.optimizer_state[0].values;
  EXPECT_TRUE(std::any_of(h.begin(), h.end(), [](float v) { return v > 0; }))
      << "the estimate made before the first step cannot be all zero";
  EXPECT_TRUE(std::none_of(h.begin(), h.end(), [](float v) { return v < 0; }))
      << "a Gauss-Newton diagonal is never negative";

  auto resumed = make();
  resumed->set_state(loaded.parameters, loaded.optimizer_state);
  train_golden_steps(*straight, 0, testing::kGoldenSteps);
  train_golden_steps(*resumed, half, testing::kGoldenSteps);
  EXPECT_EQ(resumed->parameters(), straight->parameters());
  EXPECT_TRUE(resumed->optimizer_state() == straight->optimizer_state());
}

}  // namespace
}  // namespace lenet5
