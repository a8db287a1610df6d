// The optimizers' table (SGD, SDLM) and the state buffers an engine keeps for the chosen one.
#include "engine/optimizers.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace lenet5 {

// Each optimizer's two entry points, declared here rather than in a header of their own so that
// adding an optimizer touches no shared header: the description and host update, defined in
// src/layers/<name>_cpu.cpp, and the device update, defined in cuda/kernels/<name>.cu.
const OptimizerDescription& sgd_optimizer();   // layers/sgd_cpu.cpp
const OptimizerDescription& sdlm_optimizer();  // layers/sdlm_cpu.cpp
namespace cuda {
void sgd_update(const SgdSettings& settings, const float* lr, const float* gradients,
                float* params, float* const* state, std::size_t count,
                cudaStream_t stream);  // cuda/kernels/optimizer.cu
void sdlm_update(const SgdSettings& settings, const float* lr, const float* gradients,
                 float* params, float* const* state, std::size_t count,
                 cudaStream_t stream);  // cuda/kernels/sdlm.cu
}  // namespace cuda

const std::vector<Optimizer>& optimizers() {
  static const std::vector<Optimizer> table{
      {sgd_optimizer(), cuda::sgd_update},
      {sdlm_optimizer(), cuda::sdlm_update},
  };
  return table;
}

std::vector<std::string> optimizer_names() {
  std::vector<std::string> names;
  for (const Optimizer& optimizer : optimizers()) names.push_back(optimizer.description.name);
  return names;
}

const Optimizer& optimizer_for(const SgdSettings& settings) {
  for (const Optimizer& optimizer : optimizers())
    if (optimizer.description.name == settings.optimizer) return optimizer;
  std::string accepted;
  for (const std::string& name : optimizer_names())
    accepted += (accepted.empty() ? "" : "|") + name;
  throw UsageError("unknown optimizer '" + settings.optimizer + "' (accepted: " + accepted + ")");
}

std::vector<std::string> all_state_names() {
  std::vector<std::string> names;
  for (const Optimizer& optimizer : optimizers())
    for (const std::string& name : optimizer.description.all_state)
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  return names;
}

OptimizerBuffers::OptimizerBuffers(const OptimizerDescription& optimizer,
                                   const SgdSettings& settings, Device device, std::size_t floats)
    : m_names(optimizer.state_for(settings)), m_all_names(optimizer.all_state), m_floats(floats) {
  for (const std::string& name : m_names) {
    if (std::find(m_all_names.begin(), m_all_names.end(), name) == m_all_names.end())
      throw Error("internal: optimizer " + optimizer.name + " keeps '" + name +
                  "', which its all_state does not declare");
    m_buffers.emplace_back(device, floats);
  }
  for (const std::string& name : m_all_names) m_pointers.push_back(find(name));
}

void OptimizerBuffers::zero() {
  for (Buffer<float>& buffer : m_buffers) buffer.zero();
}

OptimizerState OptimizerBuffers::to_host() const {
  OptimizerState state;
  for (std::size_t i = 0; i < m_names.size(); ++i)
    state.push_back({m_names[i], m_buffers[i].to_vector()});
  return state;
}

void OptimizerBuffers::set(const OptimizerState& state) {
  for (std::size_t i = 0; i < m_names.size(); ++i) {
    const StateBuffer* given = find_state(state, m_names[i]);
    if (!given) {
      m_buffers[i].zero();
      continue;
    }
    if (given->values.size() != m_floats)
      throw Error("internal: optimizer state '" + m_names[i] + "' holds " +
                  std::to_string(given->values.size()) + " values, expected " +
                  std::to_string(m_floats));
    m_buffers[i].copy_from_host(given->values.data());
  }
}

void OptimizerBuffers::replace(const std::string& name, const std::vector<float>& values) {
  const auto it = std::find(m_names.begin(), m_names.end(), name);
  if (it == m_names.end() || values.size() != m_floats)
    throw Error("internal: cannot replace optimizer state '" + name + "' with " +
                std::to_string(values.size()) + " values");
  m_buffers[std::size_t(it - m_names.begin())].copy_from_host(values.data());
}

float* OptimizerBuffers::find(const std::string& name) {
  const auto it = std::find(m_names.begin(), m_names.end(), name);
  return it == m_names.end() ? nullptr : m_buffers[std::size_t(it - m_names.begin())].data();
}

}  // namespace lenet5
