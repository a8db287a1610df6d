// CPU backend: Layer<T> objects around the reference functions of reference_cpu.hpp (the book's
// kernel set) or around the fast functions of fast_cpu.hpp (the fast and whole-step sets).
#pragma once

#include <memory>

#include "core/layer.hpp"
#include "core/net_config.hpp"
#include "core/topology.hpp"

namespace lenet5 {

// params/grads are the flat host buffers; the layer keeps views at its tensors' offsets.
// c3_mask (may be null) zeroes gradients of C3 weights that the connection table disconnects.
// The kernel set's fused_layers (core/net_config.hpp) chooses: the fast layers, which take the
// fused topology, or the reference, which takes the plain one.
template <class T>
std::unique_ptr<Layer<T>> make_cpu_layer(const LayerSpec& spec, const NetConfig& config, T* weight,
                                         T* weight_grad, T* bias, T* bias_grad,
                                         const float* c3_mask);

// The RBF output layer (LayerKind::rbf), the same in both sets: its 840 multiply-adds per sample
// in each direction, samples in parallel, are already what a fast form would be.
template <class T>
std::unique_ptr<Layer<T>> make_rbf_cpu_layer(const LayerSpec& spec);

// The fast layers alone (fast_cpu_layers.cpp): also what the tests compare with the reference.
template <class T>
std::unique_ptr<Layer<T>> make_fast_cpu_layer(const LayerSpec& spec, const NetConfig& config,
                                              T* weight, T* weight_grad, T* bias, T* bias_grad,
                                              const float* c3_mask);

}  // namespace lenet5
