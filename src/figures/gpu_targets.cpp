#include "figures/figures.hpp"

namespace lenet5::figures {

std::vector<Target> gpu_targets() { return {}; }

}  // namespace lenet5::figures
