#include "engine/engine.hpp"

#include <string>

#include "core/error.hpp"

namespace lenet5 {

void check_state_sizes(const ParamLayout& layout, const std::vector<float>& parameters,
                       const std::vector<float>& velocity) {
  const std::size_t floats = layout.buffer_floats;
  if (parameters.size() != floats || velocity.size() != floats)
    throw Error("internal: set_state needs " + std::to_string(floats) +
                " parameters and velocities, got " + std::to_string(parameters.size()) + " and " +
                std::to_string(velocity.size()));
}

}  // namespace lenet5
