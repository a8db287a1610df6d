// Where buffers live and where the network runs.
#pragma once

#include <string>

namespace lenet5 {

enum class Device { cpu, gpu };

const char* to_string(Device device);

// Resolves --device auto|gpu|cpu. "auto" picks the GPU when one is usable, else the CPU (with a
// warning when slowness matters, i.e. for training); "gpu" without a usable GPU is an error.
Device resolve_device(const std::string& request, bool warn_on_cpu_fallback = true);

}  // namespace lenet5
