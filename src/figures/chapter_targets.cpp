#include "figures/figures.hpp"

namespace lenet5::figures {

std::vector<Target> chapter_cpu_targets() { return {}; }

}  // namespace lenet5::figures
