// The SGD update on the host (the formulas are core/sgd.hpp's): the CPU engine's update and the
// reference of the GPU's (cuda/kernels/optimizer.cuh). SGD's entry in the optimizers' table,
// sgd_optimizer(), is defined beside it (layers/sgd_cpu.cpp; declared in engine/optimizers.cpp).
#pragma once

#include <cstddef>

#include "core/sgd.hpp"

namespace lenet5 {

// velocity may be null when settings.momentum is 0 (it is then never touched).
void sgd_step_cpu(const SgdSettings& settings, float lr, const float* gradients, float* params,
                  float* velocity, std::size_t count);

}  // namespace lenet5
