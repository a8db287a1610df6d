// What every engine checks alike: a parameter vector's length against the layout.
#include "engine/engine.hpp"

#include <string>

#include "core/error.hpp"

namespace lenet5 {

void check_parameter_count(const ParamLayout& layout, const std::vector<float>& parameters) {
  if (parameters.size() != layout.buffer_floats)
    throw Error("internal: set_state needs " + std::to_string(layout.buffer_floats) +
                " parameters, got " + std::to_string(parameters.size()));
}

}  // namespace lenet5
