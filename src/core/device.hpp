// Where buffers live and where the network runs.
#pragma once

#include <string>

namespace lenet5 {

enum class Device { cpu, gpu };

const char* to_string(Device device);

// Resolves --device auto|gpu|cpu. "auto" picks the GPU when one is usable, else the CPU with a
// warning; "gpu" without a usable GPU is an error that says so.
Device resolve_device(const std::string& request);

}  // namespace lenet5
