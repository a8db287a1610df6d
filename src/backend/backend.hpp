// Which engine runs: the --device choice resolved against the machine, and the engine made for
// it. The one place that knows both engines (src/cpu/, cuda/engine/); everything that trains,
// evaluates or classifies asks here.
#pragma once

#include <future>
#include <memory>
#include <string>

#include "core/device.hpp"
#include "core/net_config.hpp"
#include "core/sgd.hpp"
#include "engine/engine.hpp"

namespace lenet5 {

// Resolves --device auto|gpu|cpu. "auto" picks the GPU when one is usable, else the CPU (with a
// warning when slowness matters, i.e. for training); "gpu" without a usable GPU is an error. In a
// build without GPU support, "auto" is the CPU (quietly) and "gpu" a UsageError saying so.
Device resolve_device(const std::string& request, bool warn_on_cpu_fallback = true);

// resolve_device on another thread, which for the GPU then creates the CUDA context: about 0.2 s
// on an H100 host, that reading the data set and the checkpoint overlap instead of waiting for.
class DeviceStart {
 public:
  explicit DeviceStart(const std::string& request, bool warn_on_cpu_fallback = true);
  // The resolved device, once it is ready; rethrows what resolving or starting it threw. Once.
  Device wait();
  // work() while the device starts. When work throws, an error of the device's is thrown in its
  // place: a device that cannot run is reported first, as when the two ran one after the other.
  template <class Work>
  auto overlapping(Work&& work) {
    try {
      return work();
    } catch (...) {
      wait();
      throw;
    }
  }

 private:
  std::future<Device> m_device;
};

// Refuses (UsageError, naming the way out) a network that `device` cannot compute as asked: on the
// CPU, a precision other than fp32 or the tensor-core kernel set, which would silently train in
// fp32 there. make_engine asks it; so may a command before it reports anything.
void check_runs_on(Device device, const NetConfig& net);

std::unique_ptr<Engine> make_engine(Device device, const NetConfig& net, const SgdSettings& sgd,
                                    int batch_size);

// Whether the engine of `device` packs several models into one step: the GPU's whole-step kernels.
bool packs_models(Device device, const NetConfig& net);

// `models` engines trained in lockstep (engine.hpp's EngineGroup). One model is the lone engine of
// make_engine; several must be packs_models, and share their steps' launches.
std::unique_ptr<EngineGroup> make_engine_group(Device device, const NetConfig& net,
                                               const SgdSettings& sgd, int batch_size, int models);

}  // namespace lenet5
