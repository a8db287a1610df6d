// GPU backend: Layer<float> objects whose forward and backward passes are CUDA kernels.
#pragma once

#include <memory>

#include "core/layer.hpp"
#include "core/net_config.hpp"
#include "core/topology.hpp"

namespace lenet5 {

// Same contract as make_cpu_layer, with every pointer in device memory. max_batch sizes the
// scratch memory some kernels need, allocated here so that no allocation happens while a step is
// being captured into a CUDA graph.
std::unique_ptr<Layer<float>> make_gpu_layer(const LayerSpec& spec, const NetConfig& config,
                                             float* weight, float* weight_grad, float* bias,
                                             float* bias_grad, const float* c3_mask,
                                             int max_batch);

}  // namespace lenet5
