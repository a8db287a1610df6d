// The SGD update on the host (the formulas are core/sgd.hpp's): the CPU engine's update and the
// reference of the GPU's (cuda/kernels/optimizer.cuh).
#pragma once

#include <cstddef>

#include "core/sgd.hpp"

namespace lenet5 {

void sgd_step_cpu(const SgdSettings& settings, float lr, const float* gradients, float* params,
                  float* velocity, std::size_t count);

}  // namespace lenet5
