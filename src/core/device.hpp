// Where buffers live and where the network runs.
#pragma once

namespace lenet5 {

enum class Device { cpu, gpu };

const char* to_string(Device device);

}  // namespace lenet5
