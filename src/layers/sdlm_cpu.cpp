// SDLM: its description in the optimizers' table (core/optimizer.hpp) and its update on the host.
#include "layers/sdlm_cpu.hpp"

#include "core/optimizer.hpp"
#include "core/sdlm.hpp"

namespace lenet5 {

// Each operation in float and rounded on its own, in this order: the device kernel
// (cuda/kernels/sdlm.cu) performs the same ones and is bit-identical.
void sdlm_step_cpu(const SgdSettings& settings, float lr, const float* gradients, float* params,
                   const float* hessian, std::size_t count) {
  const float mu = float(settings.sdlm_mu), decay = float(settings.weight_decay);
  for (std::size_t i = 0; i < count; ++i) {
    const float g = gradients[i] + decay * params[i];
    const float step = lr / (mu + hessian[i] + decay);
    params[i] -= step * g;
  }
}

namespace {

std::vector<std::string> sdlm_state(const SgdSettings&) {
  return {kHessianState};
}

void sdlm_update_cpu(const SgdSettings& settings, float lr, const float* gradients, float* params,
                     float* const* state, std::size_t count) {
  sdlm_step_cpu(settings, lr, gradients, params, state[0], count);
}

}  // namespace

const OptimizerDescription& sdlm_optimizer() {
  static const OptimizerDescription sdlm{
      kSdlmName, {kHessianState}, sdlm_state, sdlm_update_cpu, kHessianState};
  return sdlm;
}

}  // namespace lenet5
