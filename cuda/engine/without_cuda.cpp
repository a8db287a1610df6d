// The GPU engine's factories in a build without GPU support: compiled instead of gpu_engine.cu
// when no CUDA compiler was found (CMakeLists.txt, LENET5_WITH_CUDA). Asking for the engine says
// how to get GPU support (a UsageError: exit code 2), as every other GPU request there does.
#include <memory>

#include "core/error.hpp"
#include "cuda/engine/gpu_engine.hpp"
#include "cuda/runtime/runtime.hpp"

namespace lenet5 {

std::unique_ptr<Engine> make_gpu_engine(const NetConfig&, const SgdSettings&, int, bool) {
  throw UsageError(cuda::kBuiltWithoutGpu);
}

std::unique_ptr<EngineGroup> make_gpu_engine_group(const NetConfig&, const SgdSettings&, int, int) {
  throw UsageError(cuda::kBuiltWithoutGpu);
}

std::unique_ptr<Engine> make_marked_gpu_engine(const NetConfig&, const SgdSettings&, int,
                                               PhaseMarks&) {
  throw UsageError(cuda::kBuiltWithoutGpu);
}

}  // namespace lenet5
