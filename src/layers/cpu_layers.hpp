// CPU backend: Layer<T> objects around the reference functions of reference_cpu.hpp.
#pragma once

#include <memory>

#include "core/layer.hpp"
#include "core/net_config.hpp"
#include "core/topology.hpp"

namespace lenet5 {

// params/grads are the flat host buffers; the layer keeps views at its tensors' offsets.
// c3_mask (may be null) zeroes gradients of C3 weights that the connection table disconnects.
template <class T>
std::unique_ptr<Layer<T>> make_cpu_layer(const LayerSpec& spec, const NetConfig& config,
                                         T* weight, T* weight_grad, T* bias, T* bias_grad,
                                         const float* c3_mask);

}  // namespace lenet5
