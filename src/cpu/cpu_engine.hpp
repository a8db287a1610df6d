// The CPU engine (see engine/engine.hpp for the contract): the reference layers of src/layers/,
// the SGD update on the host.
#pragma once

#include <memory>

#include "core/net_config.hpp"
#include "core/sgd.hpp"
#include "engine/engine.hpp"

namespace lenet5 {

std::unique_ptr<Engine> make_cpu_engine(const NetConfig& net, const SgdSettings& sgd,
                                        int batch_size);

}  // namespace lenet5
