// What an optimizer is to the engines, the checkpoints and resume. An optimizer updates the flat
// parameter buffer (core/layout.hpp) from the flat gradient buffer once per step and keeps, per
// parameter, state between steps in named buffers as long as the parameter buffer: plain SGD
// keeps none, SGD with momentum keeps "momentum" (the velocity), Adam would keep its two moments
// and SDLM its Hessian estimate. A checkpoint stores state buffer S of tensor T as "T.S", after
// the parameters, buffer by buffer in the order the optimizer declares them.
//
// The optimizers' table is engine/optimizers.hpp; each optimizer describes itself and its host
// update in one file of src/layers/ (SGD: layers/sgd_cpu.cpp, SDLM: layers/sdlm_cpu.cpp) and its
// device update in one file of cuda/kernels/ (SGD: cuda/kernels/optimizer.cu, SDLM:
// cuda/kernels/sdlm.cu).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/sgd.hpp"

namespace lenet5 {

// One state buffer on the host: its name and its values (flat, layout.buffer_floats).
struct StateBuffer {
  std::string name;
  std::vector<float> values;

  bool operator==(const StateBuffer& other) const {
    return name == other.name && values == other.values;
  }
};
// An engine's optimizer state on the host, in the order the optimizer declares its buffers.
using OptimizerState = std::vector<StateBuffer>;

// The buffer called `name`, or null when `state` has none of that name.
inline const StateBuffer* find_state(const OptimizerState& state, const std::string& name) {
  for (const StateBuffer& buffer : state)
    if (buffer.name == name) return &buffer;
  return nullptr;
}

// An optimizer's update on the host: `state` holds one pointer per buffer of all_state, in that
// order, null for a buffer these settings do not keep; every array holds `count` floats.
using HostUpdate = void (*)(const SgdSettings& settings, float lr, const float* gradients,
                            float* params, float* const* state, std::size_t count);

// An optimizer as it describes itself: its name, the state it keeps, its update on the host.
struct OptimizerDescription {
  std::string name;
  // Every state buffer it may keep, in declaration order: the names a checkpoint may hold.
  std::vector<std::string> all_state;
  // The buffers it keeps under these settings, in the order of all_state (plain SGD: none).
  std::vector<std::string> (*state_for)(const SgdSettings& settings);
  HostUpdate update_cpu;
  // The state buffer that the engine refills before each pass with the Gauss-Newton diagonal of
  // the loss (engine/curvature.hpp), estimated on that pass's first settings.sdlm_samples samples
  // (SDLM: "hessian"); empty for an optimizer without one (SGD).
  std::string curvature_state;
};

}  // namespace lenet5
