// The optimizers' table (core/optimizer.hpp says what an optimizer is), and the optimizer state an
// engine keeps on its device. Both engines, the checkpoints and resume read this one table.
//
// Adding an optimizer: its description and host update in src/layers/<name>_cpu.cpp, its device
// update in cuda/kernels/<name>.cu, and its line in engine/optimizers.cpp (which declares the two
// entry points it lists), plus its tests. Engines, checkpoints and resume need no change.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/device.hpp"
#include "core/optimizer.hpp"
#include "core/sgd.hpp"
#include "cuda/kernels/optimizer.cuh"
#include "cuda/runtime/buffer.hpp"

namespace lenet5 {

struct Optimizer {
  const OptimizerDescription& description;  // name, state, host update (src/layers/)
  cuda::DeviceUpdate update_gpu;             // device update (cuda/kernels/)
};

// Every optimizer, in table order.
const std::vector<Optimizer>& optimizers();
// Every optimizer's name, in table order: sgd, sdlm.
std::vector<std::string> optimizer_names();
// The optimizer settings.optimizer names (UsageError, with the accepted names, for another name).
const Optimizer& optimizer_for(const SgdSettings& settings);
// Every state buffer name of every optimizer, in table order without repeats: the state
// tensors a checkpoint may hold.
std::vector<std::string> all_state_names();

// An engine's optimizer state: the buffers the optimizer keeps under the engine's settings, on
// the engine's device, each `floats` long and zero at first.
class OptimizerBuffers {
 public:
  OptimizerBuffers(const OptimizerDescription& optimizer, const SgdSettings& settings,
                   Device device, std::size_t floats);

  void zero();
  // Host copies, in the optimizer's order.
  OptimizerState to_host() const;
  // Takes each kept buffer from `state` by name, or zeroes it when `state` has none of that name
  // (a checkpoint of a run without momentum resumed with momentum); buffers of `state` that the
  // optimizer does not keep under these settings are ignored. A buffer of the wrong length is an
  // internal Error (checkpoints check shapes when they load).
  void set(const OptimizerState& state);
  // Replaces the kept buffer `name` with `values` (host floats, as long as the buffer); an
  // internal Error if it is not kept or the length differs.
  void replace(const std::string& name, const std::vector<float>& values);
  // The update's `state` argument (core/optimizer.hpp): one pointer per name of the optimizer's
  // all_state, null for the buffers not kept.
  float* const* pointers() const { return m_pointers.data(); }
  // The buffer called `name`, or null when it is not kept.
  float* find(const std::string& name);

 private:
  std::vector<std::string> m_names;  // of the kept buffers
  std::vector<Buffer<float>> m_buffers;
  std::vector<std::string> m_all_names;
  std::vector<float*> m_pointers;  // parallel to m_all_names
  std::size_t m_floats;
};

}  // namespace lenet5
