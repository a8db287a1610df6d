// SGD kernel (see optimizer.cuh for the contract), and SGD's device update in the optimizers'
// table.
#include <algorithm>

#include "cuda/kernels/optimizer.cuh"
#include "cuda/kernels/sgd_element.cuh"
#include "cuda/runtime/check.hpp"

namespace lenet5::cuda {
namespace {

constexpr int kSgdThreads = 256;
constexpr int kMaxSgdBlocks = 1024;

}  // namespace

// One thread per parameter (grid-stride); the update itself is sgd_update_element.
__global__ void sgd_step_kernel1(float mu, bool nesterov, float decay, float lr_value,
                                 const float* lr_pointer, const float* gradients, float* params,
                                 float* velocity, std::size_t count) {
  const float lr = lr_pointer ? *lr_pointer : lr_value;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    sgd_update_element(mu, nesterov, decay, lr, gradients[i], params + i,
                       velocity ? velocity + i : nullptr);
}

namespace {

void launch_sgd_step(const SgdSettings& settings, float lr_value, const float* lr_pointer,
                     const float* gradients, float* params, float* velocity, std::size_t count,
                     cudaStream_t stream) {
  if (count == 0) return;
  const int blocks =
      int(std::min<std::size_t>((count + kSgdThreads - 1) / kSgdThreads, kMaxSgdBlocks));
  // The same float conversions as sgd_step_cpu, done once on the host.
  const float mu = float(settings.momentum), decay = float(settings.weight_decay);
  sgd_step_kernel1<<<blocks, kSgdThreads, 0, stream>>>(mu, settings.nesterov, decay, lr_value,
                                                       lr_pointer, gradients, params, velocity,
                                                       count);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void sgd_step(const SgdSettings& settings, float lr, const float* gradients, float* params,
              float* velocity, std::size_t count, cudaStream_t stream) {
  launch_sgd_step(settings, lr, nullptr, gradients, params, velocity, count, stream);
}

void sgd_step(const SgdSettings& settings, const float* lr, const float* gradients, float* params,
              float* velocity, std::size_t count, cudaStream_t stream) {
  launch_sgd_step(settings, 0.0f, lr, gradients, params, velocity, count, stream);
}

// The table's form of sgd_step: state[0] is the velocity, SGD's one state buffer (null without
// momentum; sgd_optimizer in layers/sgd_cpu.cpp declares it).
void sgd_update(const SgdSettings& settings, const float* lr, const float* gradients,
                float* params, float* const* state, std::size_t count, cudaStream_t stream) {
  sgd_step(settings, lr, gradients, params, state[0], count, stream);
}

}  // namespace lenet5::cuda
