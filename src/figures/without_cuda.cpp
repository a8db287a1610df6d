// gpu_targets() in a build without GPU support, compiled instead of gpu_targets.cpp and its parts
// (CMakeLists.txt, LENET5_GPU_HOST_SOURCES): the same targets, listed, each refusing to run.
#include <vector>

#include "figures/figures.hpp"

namespace lenet5::figures {

std::vector<Target> gpu_targets() {
  return gpu_target_list();
}

}  // namespace lenet5::figures
