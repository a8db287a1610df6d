#include "figures/figures.hpp"

namespace lenet5::figures {

std::vector<Target> paper_cpu_targets() { return {}; }

}  // namespace lenet5::figures
