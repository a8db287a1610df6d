// NetworkEngine: the part of an Engine that both engines share, the network's parameters and the
// optimizer's state on the engine's device, and the operations that only read or replace them
// (fresh weights, host copies, a checkpoint's state). Each engine adds its own step and passes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/augment.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"
#include "core/net_config.hpp"
#include "core/optimizer.hpp"
#include "core/sgd.hpp"
#include "core/shapes.hpp"
#include "engine/curvature.hpp"
#include "engine/engine.hpp"
#include "engine/network.hpp"
#include "engine/optimizers.hpp"

namespace lenet5 {

class NetworkEngine : public Engine {
 public:
  const ParamLayout& layout() const override { return m_network.layout(); }

  void initialise(std::uint64_t seed) override {
    m_network.initialise(seed);
    m_state.zero();
  }
  std::vector<float> parameters() const override { return m_network.parameters().to_vector(); }
  OptimizerState optimizer_state() const override { return m_state.to_host(); }
  void set_state(const std::vector<float>& parameters, const OptimizerState& state) override {
    check_parameter_count(m_network.layout(), parameters);
    m_network.parameters().copy_from_host(parameters.data());
    m_state.set(state);
  }

  // The one image through probabilities(), which leaves it as sample 0 of the network's last
  // forward pass on either device; the layers' outputs and the input are then read back from it.
  Activations activations(const std::uint8_t* image) override {
    Activations result;
    std::vector<std::int32_t> predicted;
    const std::vector<float> p = classify(image, 1, predicted);
    std::copy(p.begin(), p.end(), result.probabilities.begin());
    result.predicted = predicted.at(0);
    result.input = m_network.input_values(0);
    result.layers = m_network.layer_outputs(0);
    return result;
  }

 protected:
  // The network holds a training batch or an evaluation batch, whichever is larger; the state
  // buffers are those the settings' optimizer keeps, as long as the network's parameters.
  NetworkEngine(const NetConfig& net, Device device, int batch_size, const SgdSettings& sgd)
      : m_sgd(sgd),
        m_batch(batch_size),
        m_optimizer(optimizer_for(sgd)),
        m_network(net, device, std::max(batch_size, kEvalBatch)),
        m_state(m_optimizer.description, sgd, device, m_network.layout().buffer_floats) {}

  // How both engines turn images into the network's input (core/shapes.hpp).
  PixelScaling scaling() const { return pixel_scaling(m_network.config().input_scaling); }

  // An optimizer with a curvature estimate (SDLM, core/optimizer.hpp) has it re-estimated before
  // each pass. The engines call these from set_training_data and begin_epoch, and
  // estimate_curvature_before(first_step) before their steps: the estimate runs when the pass's
  // first step does, on the parameters at that moment. A pass resumed after its first step keeps
  // the estimate the checkpoint restored, as the uninterrupted pass kept the one it made.
  void curvature_data(const Dataset& train, const Augmentation& augmentation) {
    m_curvature_train = &train;
    m_curvature_augmentation = augmentation;
  }
  void curvature_pass(int epoch, const std::vector<std::int32_t>& permutation) {
    if (m_optimizer.description.curvature_state.empty()) return;
    const std::size_t samples = std::min(permutation.size(), std::size_t(m_sgd.sdlm_samples));
    m_curvature_samples.assign(permutation.begin(), permutation.begin() + samples);
    m_curvature_epoch = std::uint32_t(epoch);
    m_curvature_due = true;
  }
  void estimate_curvature_before(int first_step) {
    if (!m_curvature_due) return;
    m_curvature_due = false;
    if (first_step != 0) return;
    if (!m_curvature_train) throw Error("internal: a curvature estimate without training data");
    m_state.replace(m_optimizer.description.curvature_state,
                    estimate_curvature(m_network.config(), parameters(), *m_curvature_train,
                                       m_curvature_augmentation, m_curvature_epoch,
                                       m_curvature_samples, int(m_curvature_samples.size())));
  }

  // The engines' steps read and write these directly, as they did when each engine held its own.
  SgdSettings m_sgd;
  int m_batch;  // training samples per step
  const Optimizer& m_optimizer;
  Network<float> m_network;
  OptimizerBuffers m_state;

 private:
  const Dataset* m_curvature_train = nullptr;
  Augmentation m_curvature_augmentation;
  std::uint32_t m_curvature_epoch = 0;
  std::vector<std::int32_t> m_curvature_samples;  // the pass's first sdlm_samples indices
  bool m_curvature_due = false;
};

}  // namespace lenet5
