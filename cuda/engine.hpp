// The GPU engine (see train/engine.hpp for the contract).
#pragma once

#include <memory>

#include "net/config.hpp"
#include "train/engine.hpp"

namespace lenet5 {

std::unique_ptr<Engine> make_gpu_engine(const NetConfig& net, const SgdSettings& sgd,
                                        int batch_size);

}  // namespace lenet5
