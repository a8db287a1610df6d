// The kernels' entry points that host code names (the GPU layers of engine/network.cpp, the
// optimizers' device updates of engine/optimizers.cpp), in a build without GPU support: compiled
// instead of the .cu files when no CUDA compiler was found (CMakeLists.txt, LENET5_WITH_CUDA).
// Nothing reaches them there (no GPU buffer can be made first), but should anything try, it is
// told how to get GPU support. A new optimizer's device update gets its line here too.
#include <cstddef>
#include <memory>

#include "core/error.hpp"
#include "cuda/kernels/gpu_layers.hpp"
#include "cuda/kernels/optimizer.cuh"
#include "cuda/runtime/runtime.hpp"

namespace lenet5 {

std::unique_ptr<Layer<float>> make_gpu_layer(const LayerSpec&, const NetConfig&, float*, float*,
                                             float*, float*, const float*, int) {
  throw UsageError(cuda::kBuiltWithoutGpu);
}

namespace cuda {

void sgd_update(const SgdSettings&, const float*, const float*, float*, float* const*, std::size_t,
                cudaStream_t) {
  throw UsageError(kBuiltWithoutGpu);
}

void sdlm_update(const SgdSettings&, const float*, const float*, float*, float* const*, std::size_t,
                 cudaStream_t) {
  throw UsageError(kBuiltWithoutGpu);
}

}  // namespace cuda
}  // namespace lenet5
