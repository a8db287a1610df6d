// The GPU engine (see engine/engine.hpp for the contract).
#pragma once

#include <memory>

#include "core/net_config.hpp"
#include "engine/engine.hpp"

namespace lenet5 {

// use_graphs: replay whole epochs as one captured CUDA graph (the default; off only to compare
// against launching every kernel directly).
std::unique_ptr<Engine> make_gpu_engine(const NetConfig& net, const SgdSettings& sgd,
                                        int batch_size, bool use_graphs = true);

// `models` models of the whole-step kernel set that share the network, the SGD settings, the batch
// size and the training data (each its own seed, permutation and learning rates), their steps
// packed into the same launches (cuda/engine/whole_step.cuh's ModelGroup). Each model's weights
// are bit-identical to those a make_gpu_engine trains with the same settings.
std::unique_ptr<EngineGroup> make_gpu_engine_group(const NetConfig& net, const SgdSettings& sgd,
                                                   int batch_size, int models);

// ---- marking the phases, for timing them (the figures' cudnn.tab4) ----------------------------
// A training step's forward (gather + forward), backward (loss with its gradient + backward) and
// update (the SGD launch); an evaluation's testing (gather + forward + loss over the data set) and
// its end.
enum class EnginePhase { forward, backward, update, testing, end };

// Told where each phase begins: the engine calls mark() on the host just before it queues the
// phase's launches on cuda::kDefaultStream, so that a CUDA event recorded there at that moment
// separates the phases on the GPU's timeline.
class PhaseMarks {
 public:
  virtual ~PhaseMarks() = default;
  virtual void mark(EnginePhase phase) = 0;
};

// The engine of make_gpu_engine(net, sgd, batch_size, /*use_graphs=*/false) that also calls
// `marks` (which must outlive it): its steps are launched one by one, never replayed as a graph,
// so that the marks fall between them, and they compute the same bits. The whole-step kernel set
// is refused: its step is two launches, with no phases between them.
std::unique_ptr<Engine> make_marked_gpu_engine(const NetConfig& net, const SgdSettings& sgd,
                                               int batch_size, PhaseMarks& marks);

}  // namespace lenet5
