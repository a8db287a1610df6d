// The SDLM update over the flat parameter buffer (core/layout.hpp): one launch for all parameters
// (plus alignment padding, whose gradient stays zero, so it stays zero).
// Contract: exactly sdlm_step_cpu of layers/sdlm_cpu.hpp, bit for bit, on device pointers
// (the formulas are core/sdlm.hpp's).
//
// Version 1, sdlm_step_kernel1: one thread per parameter (grid-stride loop).
//
// SDLM's device update in the optimizers' table, sdlm_update, is defined in sdlm.cu (declared in
// engine/optimizers.cpp).
#pragma once

#include <cstddef>

#include "core/sgd.hpp"
#include "cuda/runtime/stream_handle.hpp"

namespace lenet5::cuda {

// The learning rate is read on the device from *lr (a captured CUDA graph replays its launches
// with fixed arguments); hessian is read, never written.
void sdlm_step(const SgdSettings& settings, const float* lr, const float* gradients, float* params,
               const float* hessian, std::size_t count, cudaStream_t stream);

}  // namespace lenet5::cuda
