// The measurement behind cudnn.tab4: LeNet-5 trained for a fixed number of steps from the same
// building blocks as the GPU engine (cuda/engine/gpu_engine.cu: gather -> forward -> loss -> backward -> SGD
// on kDefaultStream), with CUDA events marked between the phases, then tested once. The engine
// itself is not used: its steps run as one captured graph, with nothing to mark in between.
//
// Phases, as the paper's rows: forward = gather + forward; backward = loss (with its gradient) +
// backward, the fast kernels' weight gradients joined back before the phase ends; update = the
// one SGD launch; testing = gather + forward + loss over the test set, once after the steps.
// Every interval is GPU wall time between two marks, so it includes any time the GPU waits for
// the host to launch the next kernel.
#pragma once

#include <cstdint>
#include <vector>

#include "core/net_config.hpp"
#include "core/sgd.hpp"
#include "cuda/runtime/buffer.hpp"
#include "data/mnist.hpp"
#include "engine/network.hpp"
#include "figures/cudnn_table4.hpp"

namespace lenet5::figures {

// `count` images of random bytes (0..255) and random labels (0..9) from SplitMix64 with `seed`:
// MNIST's shapes without its files, for runs that measure only time.
Dataset random_dataset(int count, std::uint64_t seed);

// A data set's images and labels in device memory, uploaded once and read by every run.
struct DeviceDataset {
  int count = 0;
  Buffer<std::uint8_t> images, labels;  // (count, 28, 28), (count)
};
DeviceDataset upload_dataset(const Dataset& data);

struct PhaseRunSetup {
  int iterations = 200;  // the paper's
  int batch = 64;        // the trainer's default batch
  int test_batch = 256;  // as the engines evaluate
  float lr = 0.01f;
  SgdSettings sgd{0.9, false, 0.0};  // the trainer's default momentum
  std::uint64_t init_seed = 1;
};

// One run: its phase times and what it computed, to compare configurations.
struct PhaseRun {
  PhaseTimes times;
  int intervals = 0;                // readings summed into the phases (interval_count)
  std::vector<double> step_losses;  // mean loss of each training step's batch
  double test_loss = 0;             // mean over the test set, after the steps
  std::vector<float> parameters;    // after the steps
};

// The network, optimiser state and step buffers of one configuration, allocated once so that
// nothing is allocated between the marks.
class PhaseTrainer {
 public:
  PhaseTrainer(const NetConfig& config, const PhaseRunSetup& setup);

  // Initialises the parameters from setup.init_seed and zeroes the velocity, then trains on
  // setup.iterations consecutive batches of `train` (batch i = images i*batch .. i*batch+batch-1)
  // and tests on all of `test`, marking the phases. Every run starts from the same state, so two
  // runs compute the same (the kernels are deterministic) and the first can be the warm-up.
  PhaseRun run(const DeviceDataset& train, const DeviceDataset& test);

 private:
  PhaseRunSetup m_setup;
  Network<float> m_network;
  Buffer<float> m_velocity, m_input, m_dL_dlogits;
  Buffer<std::uint8_t> m_labels;
};

}  // namespace lenet5::figures
