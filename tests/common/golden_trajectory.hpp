// The golden trajectory: a short training run on fixed synthetic data whose loss per step and
// final weights are stored in the tests (tests/cpu/test_golden_trajectory.cpp,
// tests/gpu/test_golden_trajectory.cpp), so that a change that alters the numbers cannot pass
// unseen. The data need no files: 256 images of a bright 6x6 block whose place is given by the
// label, over SplitMix64 noise, so the loss falls and every layer's gradient matters.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/rng.hpp"
#include "engine/engine.hpp"

namespace lenet5::testing {

constexpr int kGoldenImages = 256;
constexpr int kGoldenBatch = 32;
constexpr int kGoldenSteps = kGoldenImages / kGoldenBatch;  // 8
constexpr float kGoldenLearningRate = 0.05f;
constexpr std::uint64_t kGoldenSeed = 7;

inline Dataset golden_dataset() {
  Dataset data;
  data.count = kGoldenImages;
  data.images.resize(std::size_t(kGoldenImages) * 28 * 28);
  data.labels.resize(kGoldenImages);
  SplitMix64 rng(kGoldenSeed);
  for (int i = 0; i < kGoldenImages; ++i) {
    const int label = i % 10;
    data.labels[i] = std::uint8_t(label);
    std::uint8_t* image = data.images.data() + std::size_t(i) * 28 * 28;
    for (int p = 0; p < 28 * 28; ++p) image[p] = std::uint8_t(rng.next() % 48);
    const int top = 3 + (label / 5) * 12, left = 2 + (label % 5) * 5;
    for (int y = top; y < top + 6; ++y)
      for (int x = left; x < left + 6; ++x) image[y * 28 + x] = 255;
  }
  return data;
}

// SGD with momentum and weight decay, as the default configuration trains.
inline SgdSettings golden_sgd() { return {0.9, false, 5e-4}; }

struct Trajectory {
  std::vector<double> step_losses;  // mean loss of each step's batch
  double weighted_sum = 0;          // sum_i w_i * (1 + i % 7) over the flat parameter buffer
  double absolute_sum = 0;          // sum_i |w_i|
};

// Initialises from kGoldenSeed and trains kGoldenSteps steps, one call each, on a fixed
// permutation (reversed order) at a constant rate.
inline Trajectory golden_trajectory(Engine& engine) {
  const Dataset data = golden_dataset();
  engine.initialise(kGoldenSeed);
  engine.set_training_data(data, Augmentation{});
  std::vector<std::int32_t> permutation(kGoldenImages);
  for (int i = 0; i < kGoldenImages; ++i) permutation[i] = kGoldenImages - 1 - i;
  engine.begin_epoch(0, permutation, std::vector<float>(kGoldenSteps, kGoldenLearningRate));
  Trajectory result;
  double previous_sum = 0;
  for (int step = 0; step < kGoldenSteps; ++step) {
    engine.train_steps(step, step + 1);
    const EpochTotals totals = engine.take_epoch_totals();  // cumulative over the epoch
    result.step_losses.push_back((totals.loss_sum - previous_sum) / kGoldenBatch);
    previous_sum = totals.loss_sum;
  }
  const std::vector<float> w = engine.parameters();
  for (std::size_t i = 0; i < w.size(); ++i) {
    result.weighted_sum += double(w[i]) * double(1 + i % 7);
    result.absolute_sum += std::fabs(double(w[i]));
  }
  return result;
}

// "losses 2.28 ...; weighted ...; absolute ...", every number with the 17 digits that give back
// its double, ready to be pasted into the stored values.
inline std::string printed(const Trajectory& t) {
  std::string out = "losses";
  char number[64];
  const char* separator = " ";
  for (const double loss : t.step_losses) {
    std::snprintf(number, sizeof number, "%s%.17g", separator, loss);
    out += number;
    separator = ", ";
  }
  std::snprintf(number, sizeof number, "; weighted %.17g", t.weighted_sum);
  out += number;
  std::snprintf(number, sizeof number, "; absolute %.17g", t.absolute_sum);
  return out + number;
}

// Compares a run with its stored values, each within `relative_tolerance` (the caller's reason).
inline void expect_trajectory(const Trajectory& actual, const Trajectory& stored,
                              double relative_tolerance) {
  SCOPED_TRACE("this run: " + printed(actual));
  const auto expect_near = [&](double a, double b, const std::string& what) {
    EXPECT_LE(std::fabs(a - b), relative_tolerance * std::fabs(b))
        << what << ": " << a << " against the stored " << b;
  };
  ASSERT_EQ(actual.step_losses.size(), stored.step_losses.size());
  for (std::size_t s = 0; s < stored.step_losses.size(); ++s)
    expect_near(actual.step_losses[s], stored.step_losses[s], "loss of step " + std::to_string(s));
  expect_near(actual.weighted_sum, stored.weighted_sum, "weighted parameter sum");
  expect_near(actual.absolute_sum, stored.absolute_sum, "absolute parameter sum");
  // The data are learnable: the last step's loss is well below the first (about 2.3 = ln 10).
  EXPECT_LT(actual.step_losses.back(), 0.8 * actual.step_losses.front());
}

}  // namespace lenet5::testing
