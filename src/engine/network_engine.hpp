// NetworkEngine: the part of an Engine that both engines share, the network's parameters and the
// optimizer's state on the engine's device, and the operations that only read or replace them
// (fresh weights, host copies, a checkpoint's state). Each engine adds its own step and passes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/device.hpp"
#include "core/layout.hpp"
#include "core/net_config.hpp"
#include "core/optimizer.hpp"
#include "core/sgd.hpp"
#include "core/shapes.hpp"
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

  // The engines' steps read and write these directly, as they did when each engine held its own.
  SgdSettings m_sgd;
  int m_batch;  // training samples per step
  const Optimizer& m_optimizer;
  Network<float> m_network;
  OptimizerBuffers m_state;
};

}  // namespace lenet5
