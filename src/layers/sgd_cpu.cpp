#include "layers/sgd_cpu.hpp"

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

}  // namespace lenet5
