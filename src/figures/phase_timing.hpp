// The measurement behind cudnn.tab4: LeNet-5 trained for a fixed number of steps by the GPU
// engine itself (cuda/engine/gpu_engine.cu), then tested once by its evaluate, with a CUDA event
// recorded where each phase begins (make_marked_gpu_engine: the steps are launched one by one
// instead of replayed as a graph, so that the marks fall between them).
//
// Phases, as the paper's rows: forward = gather + forward; backward = loss (with its gradient) +
// backward, the fast kernels' weight gradients joined back before the phase ends; update = the
// one SGD launch; testing = the engine's evaluation of the test set (gather + forward + loss, its
// two small result buffers allocated inside), once after the steps. Every interval is GPU wall
// time between two marks, so it includes any time the GPU waits for the host to launch the next
// kernel.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/net_config.hpp"
#include "core/sgd.hpp"
#include "data/mnist.hpp"
#include "engine/engine.hpp"
#include "figures/cudnn_table4.hpp"

namespace lenet5::figures {

struct PhaseRunSetup {
  int iterations = 200;  // the paper's
  int batch = 64;        // the trainer's default batch
  float lr = 0.01f;
  SgdSettings sgd{0.9, false, 0.0};  // the trainer's default momentum
  std::uint64_t init_seed = 1;
};

// One run: its phase times and what it computed, to compare configurations.
struct PhaseRun {
  PhaseTimes times;
  int intervals = 0;              // readings summed into the phases (interval_count)
  double train_loss = 0;          // mean over the steps' samples
  double test_loss = 0;           // mean over the test set, after the steps
  std::vector<float> parameters;  // after the steps
};

class PhaseEvents;

// The engine of one configuration and its events, made once, so that a run allocates nothing
// between the marks but the evaluation's own result buffers.
class PhaseTrainer {
 public:
  // `train` (setup.iterations * setup.batch images at least) must outlive the trainer: the engine
  // keeps a device copy of it.
  PhaseTrainer(const NetConfig& config, const PhaseRunSetup& setup, const Dataset& train);
  ~PhaseTrainer();

  // Initialises the parameters from setup.init_seed and zeroes the optimiser state, then trains
  // on setup.iterations consecutive batches of the training set (step i: images i*batch ..
  // i*batch+batch-1) and evaluates all of `test`, marking the phases. Every run starts from the
  // same state, so two runs compute the same (the kernels are deterministic) and the first can be
  // the warm-up.
  PhaseRun run(const Dataset& test);

 private:
  PhaseRunSetup m_setup;
  std::unique_ptr<PhaseEvents> m_events;  // declared before m_engine, which marks them
  std::unique_ptr<Engine> m_engine;
  std::vector<std::int32_t> m_in_order;  // the epoch's permutation: 0, 1, 2, ...
};

}  // namespace lenet5::figures
