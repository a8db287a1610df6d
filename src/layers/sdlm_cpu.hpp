// The SDLM update on the host (the formulas are core/sdlm.hpp's): the CPU engine's update and the
// reference of the GPU's (cuda/kernels/sdlm.cuh). SDLM's entry in the optimizers' table,
// sdlm_optimizer(), is defined beside it (layers/sdlm_cpu.cpp; declared in engine/optimizers.cpp).
#pragma once

#include <cstddef>

#include "core/sgd.hpp"

namespace lenet5 {

// hessian: the Gauss-Newton diagonal estimate, one value per parameter (read, never written).
void sdlm_step_cpu(const SgdSettings& settings, float lr, const float* gradients, float* params,
                   const float* hessian, std::size_t count);

}  // namespace lenet5
