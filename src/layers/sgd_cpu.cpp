// SGD: its description in the optimizers' table (core/optimizer.hpp) and its update on the host.
#include "layers/sgd_cpu.hpp"

#include "core/optimizer.hpp"

namespace lenet5 {

void sgd_step_cpu(const SgdSettings& settings, float lr, const float* gradients, float* params,
                  float* velocity, std::size_t count) {
  const float mu = float(settings.momentum), decay = float(settings.weight_decay);
  for (std::size_t i = 0; i < count; ++i) {
    const float g = gradients[i] + decay * params[i];
    if (mu == 0.0f) {
      params[i] -= lr * g;
      continue;
    }
    velocity[i] = mu * velocity[i] + g;
    params[i] -= lr * (settings.nesterov ? g + mu * velocity[i] : velocity[i]);
  }
}

namespace {

// The velocity is kept only with momentum: plain SGD has no state to save or restore.
std::vector<std::string> sgd_state(const SgdSettings& settings) {
  if (settings.momentum > 0) return {kMomentumState};
  return {};
}

void sgd_update_cpu(const SgdSettings& settings, float lr, const float* gradients, float* params,
                    float* const* state, std::size_t count) {
  sgd_step_cpu(settings, lr, gradients, params, state[0], count);
}

}  // namespace

const OptimizerDescription& sgd_optimizer() {
  static const OptimizerDescription sgd{kSgdName, {kMomentumState}, sgd_state, sgd_update_cpu, ""};
  return sgd;
}

}  // namespace lenet5
