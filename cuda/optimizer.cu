// SGD kernel (see optimizer.cuh for the contract).
#include <algorithm>

#include "cuda/check.hpp"
#include "cuda/optimizer.cuh"

namespace lenet5::cuda {
namespace {

constexpr int kSgdThreads = 256;
constexpr int kMaxSgdBlocks = 1024;

}  // namespace

// The formula of sgd_step_cpu (train/sgd.hpp):
//   g = grad + decay * w;   v = mu * v + g;   w -= lr * (nesterov ? g + mu * v : v)
//   (mu = 0: w -= lr * g)
// written with explicit round-to-nearest intrinsics. nvcc would otherwise contract each
// "a * b + c" into one FMA, which rounds once instead of twice; the CPU reference is compiled
// without contraction (GCC in ISO C++ mode uses -ffp-contract=off, and baseline x86-64 has no FMA
// instruction anyway), so these intrinsics are what make the two updates bit-identical.
__global__ void sgd_step_kernel1(float mu, bool nesterov, float decay, float lr_value,
                                 const float* lr_pointer, const float* gradients, float* params,
                                 float* velocity, std::size_t count) {
  const float lr = lr_pointer ? *lr_pointer : lr_value;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const float w = params[i];
    const float g = __fadd_rn(gradients[i], __fmul_rn(decay, w));
    if (mu == 0.0f) {
      params[i] = __fsub_rn(w, __fmul_rn(lr, g));
      continue;
    }
    const float v = __fadd_rn(__fmul_rn(mu, velocity[i]), g);
    velocity[i] = v;
    const float direction = nesterov ? __fadd_rn(g, __fmul_rn(mu, v)) : v;
    params[i] = __fsub_rn(w, __fmul_rn(lr, direction));
  }
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

}  // namespace lenet5::cuda
