#include "core/device.hpp"

#include <spdlog/spdlog.h>

#include "core/error.hpp"
#include "cuda/layers.hpp"
#include "cuda/runtime.hpp"

namespace lenet5 {

const char* to_string(Device device) { return device == Device::gpu ? "gpu" : "cpu"; }

Device resolve_device(const std::string& request, bool warn_on_cpu_fallback) {
  if (request == "cpu") return Device::cpu;
  if (request != "auto" && request != "gpu")
    throw UsageError("--device must be auto, gpu or cpu, not '" + request + "'");
  const bool have_gpu = cuda::device_count() > 0;
  if (request == "gpu" && !have_gpu)
    throw Error("--device gpu: no usable CUDA device (no GPU or no driver); use --device cpu");
  if (request == "gpu" && !gpu_layers_available())
    throw Error("--device gpu: this build has no CUDA kernels for the network; use --device cpu");
  if (!have_gpu || !gpu_layers_available()) {
    spdlog::log(warn_on_cpu_fallback ? spdlog::level::warn : spdlog::level::debug,
                "{}: running on the CPU (slow; pass --device cpu to silence this)",
                have_gpu ? "this build has no CUDA kernels for the network" : "no usable CUDA device");
    return Device::cpu;
  }
  spdlog::info("device: {}", cuda::device_description());
  return Device::gpu;
}

}  // namespace lenet5
