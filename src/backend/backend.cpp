// Resolving --device against the machine and making the engine (or group of engines) for it.
#include "backend/backend.hpp"

#include <spdlog/spdlog.h>

#include <mutex>
#include <string>

#include "core/error.hpp"
#include "cpu/cpu_engine.hpp"
#include "cuda/engine/gpu_engine.hpp"
#include "cuda/runtime/runtime.hpp"

namespace lenet5 {
namespace {

// The fallback is said once a process: a sweep resolves the device again for every model, and
// the answer never changes within one run of the program.
void warn_of_cpu_fallback() {
  static std::once_flag said;
  std::call_once(said, [] {
    spdlog::warn(
        "no usable CUDA device: running on the CPU (slow; pass --device cpu to silence this)");
  });
}

}  // namespace

Device resolve_device(const std::string& request, bool warn_on_cpu_fallback) {
  if (request == "cpu") return Device::cpu;
  if (request != "auto" && request != "gpu")
    throw UsageError("--device must be auto, gpu or cpu, not '" + request + "'");
  if (!cuda::gpu_available_in_build()) {
    // The build said so when it was configured: auto runs on the CPU without a word.
    if (request == "gpu") throw UsageError(std::string("--device gpu: ") + cuda::kBuiltWithoutGpu);
    spdlog::debug("built without GPU support: running on the CPU");
    return Device::cpu;
  }
  if (cuda::device_count() == 0) {
    if (request == "gpu")
      throw Error("--device gpu: no usable CUDA device (no GPU or no driver); use --device cpu");
    if (warn_on_cpu_fallback)
      warn_of_cpu_fallback();
    else
      spdlog::debug("no usable CUDA device: running on the CPU");
    return Device::cpu;
  }
  spdlog::info("device: {}", cuda::device_description());
  return Device::gpu;
}

DeviceStart::DeviceStart(const std::string& request, bool warn_on_cpu_fallback)
    : m_device(std::async(std::launch::async, [request, warn_on_cpu_fallback] {
        const Device device = resolve_device(request, warn_on_cpu_fallback);
        if (device == Device::gpu) cuda::create_context();
        return device;
      })) {}

Device DeviceStart::wait() {
  return m_device.get();
}

void check_runs_on(Device device, const NetConfig& net) {
  if (device == Device::gpu) return;
  // The CPU computes in float alone: a tf32 or bf16 run there would silently be an fp32 one.
  if (net.precision != Precision::fp32)
    throw UsageError(std::string("--precision ") + to_string(net.precision) +
                     " runs on a GPU's tensor cores; this run is on the CPU, which computes in "
                     "fp32: use --precision fp32, or --device gpu on a machine with a GPU");
  // Nor has it tensor cores: --kernels tensor there would silently train and evaluate in fp32.
  if (gpu_kernel_set(net.kernels).tensor_evaluation)
    throw UsageError(std::string("--kernels ") + to_string(net.kernels) +
                     " trains and evaluates on a GPU's tensor cores; this run is on the CPU: use "
                     "--kernels whole-step (or fast), or --device gpu on a machine with a GPU");
}

std::unique_ptr<Engine> make_engine(Device device, const NetConfig& net, const SgdSettings& sgd,
                                    int batch_size) {
  check_runs_on(device, net);
  if (device == Device::gpu) return make_gpu_engine(net, sgd, batch_size);
  return make_cpu_engine(net, sgd, batch_size);
}

namespace {

// A group of one lone engine: its steps run as soon as it asks for them.
class LoneEngineGroup final : public EngineGroup {
 public:
  explicit LoneEngineGroup(std::unique_ptr<Engine> engine) : m_engine(std::move(engine)) {}
  int size() const override { return 1; }
  Engine& model(int i) override {
    if (i != 0) throw Error("internal: model " + std::to_string(i) + " of a group of one");
    return *m_engine;
  }

 private:
  std::unique_ptr<Engine> m_engine;
};

}  // namespace

bool packs_models(Device device, const NetConfig& net) {
  // Packed models train with the whole-step kernels, whose products are fp32 or tf32: bf16 models
  // (--kernels tensor) train one at a time, each with the tensor cores' step.
  return device == Device::gpu && gpu_kernel_set(net.kernels).whole_step &&
         net.precision != Precision::bf16;
}

std::unique_ptr<EngineGroup> make_engine_group(Device device, const NetConfig& net,
                                               const SgdSettings& sgd, int batch_size, int models) {
  if (models == 1)
    return std::make_unique<LoneEngineGroup>(make_engine(device, net, sgd, batch_size));
  if (!packs_models(device, net))
    throw Error("internal: only the GPU's whole-step kernels pack models into one step");
  return make_gpu_engine_group(net, sgd, batch_size, models);
}

}  // namespace lenet5
