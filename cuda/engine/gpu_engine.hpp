// The GPU engine (see engine/engine.hpp for the contract).
#pragma once

#include <memory>

#include "core/net_config.hpp"
#include "engine/engine.hpp"

namespace lenet5 {

// use_graphs: replay whole epochs as one captured CUDA graph (the default; off only to compare
// against launching every kernel directly).
std::unique_ptr<Engine> make_gpu_engine(const NetConfig& net, const SgdSettings& sgd,
                                        int batch_size, bool use_graphs = true);

}  // namespace lenet5
