// The CPU engine (see engine/engine.hpp for the contract): the layers of src/layers/ (the fast ones,
// or the sequential reference with --kernels book), the SGD update on the host.
#pragma once

#include <memory>

#include "core/net_config.hpp"
#include "core/sgd.hpp"
#include "engine/engine.hpp"

namespace lenet5 {

std::unique_ptr<Engine> make_cpu_engine(const NetConfig& net, const SgdSettings& sgd,
                                        int batch_size);

}  // namespace lenet5
