// The SGD update over the flat parameter buffer (core/layout.hpp): one launch for all 61,706
// parameters (plus alignment padding, whose gradient and velocity stay zero).
// Contract: exactly sgd_step_cpu of core/sgd.hpp, bit for bit, on device pointers.
//
// Version 1, sgd_step_kernel1: one thread per parameter (grid-stride loop).
//
// Also the type of an optimizer's device update in the optimizers' table (engine/optimizers.hpp);
// SGD's, sgd_update, is defined in optimizer.cu (declared in engine/optimizers.cpp).
#pragma once

#include "cuda/runtime/stream_handle.hpp"

#include <cstddef>

#include "core/sgd.hpp"

namespace lenet5::cuda {

// lr travels as a kernel argument, so a step needs no host-to-device copy. velocity may be null
// when settings.momentum is 0 (it is then never touched).
void sgd_step(const SgdSettings& settings, float lr, const float* gradients, float* params,
              float* velocity, std::size_t count, cudaStream_t stream);
// The same, with the learning rate read on the device from *lr (a captured CUDA graph replays
// its launches with fixed arguments, so a rate that changes every epoch must live in memory).
void sgd_step(const SgdSettings& settings, const float* lr, const float* gradients, float* params,
              float* velocity, std::size_t count, cudaStream_t stream);

// An optimizer's update on the device, the counterpart of HostUpdate (core/optimizer.hpp): device
// pointers (`state` itself a host array of them, as for HostUpdate), and the learning rate read
// on the device from *lr, as a captured CUDA graph needs.
using DeviceUpdate = void (*)(const SgdSettings& settings, const float* lr,
                              const float* gradients, float* params, float* const* state,
                              std::size_t count, cudaStream_t stream);

}  // namespace lenet5::cuda
