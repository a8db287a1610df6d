// Device names as the command line and the logs write them.
#include "core/device.hpp"

namespace lenet5 {

const char* to_string(Device device) { return device == Device::gpu ? "gpu" : "cpu"; }

}  // namespace lenet5
