// The optimizer seam (core/optimizer.hpp, engine/optimizers.hpp): the table declares each
// optimizer's state by name, the engine keeps exactly those buffers, and a checkpoint carries them
// by name so that an engine restored from it continues bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "backend/backend.hpp"
#include "common/golden_trajectory.hpp"
#include "engine/optimizers.hpp"
#include "io/safetensors.hpp"
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

}  // namespace
}  // namespace lenet5
