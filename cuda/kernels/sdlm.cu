// SDLM kernel (see sdlm.cuh for the contract), and SDLM's device update in the optimizers' table.
#include <algorithm>

#include "cuda/kernels/sdlm.cuh"
#include "cuda/runtime/check.hpp"

namespace lenet5::cuda {
namespace {

constexpr int kSdlmThreads = 256;
constexpr int kMaxSdlmBlocks = 1024;

}  // namespace

// One thread per parameter (grid-stride). The formula of sdlm_step_cpu (core/sdlm.hpp):
//   g = grad + decay * w;   step = lr / (mu + h + decay);   w -= step * g
// written with explicit round-to-nearest intrinsics: nvcc would otherwise contract "a * b + c"
// into one FMA (one rounding instead of two), and __fdiv_rn is IEEE division whatever the
// compiler's flags; the CPU reference rounds each operation (sgd_element.cuh says why), so the
// two are bit-identical.
__global__ void sdlm_step_kernel1(float mu, float decay, const float* lr_pointer,
                                  const float* gradients, float* params, const float* hessian,
                                  std::size_t count) {
  const float lr = *lr_pointer;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const float w = params[i];
    const float g = __fadd_rn(gradients[i], __fmul_rn(decay, w));
    const float step = __fdiv_rn(lr, __fadd_rn(__fadd_rn(mu, hessian[i]), decay));
    params[i] = __fsub_rn(w, __fmul_rn(step, g));
  }
}

void sdlm_step(const SgdSettings& settings, const float* lr, const float* gradients, float* params,
               const float* hessian, std::size_t count, cudaStream_t stream) {
  if (count == 0) return;
  const int blocks =
      int(std::min<std::size_t>((count + kSdlmThreads - 1) / kSdlmThreads, kMaxSdlmBlocks));
  // The same float conversions as sdlm_step_cpu, done once on the host.
  const float mu = float(settings.sdlm_mu), decay = float(settings.weight_decay);
  sdlm_step_kernel1<<<blocks, kSdlmThreads, 0, stream>>>(mu, decay, lr, gradients, params, hessian,
                                                         count);
  CUDA_CHECK_LAUNCH();
}

// The table's form of sdlm_step: state[0] is the Hessian estimate, SDLM's one state buffer
// (sdlm_optimizer in layers/sdlm_cpu.cpp declares it).
void sdlm_update(const SgdSettings& settings, const float* lr, const float* gradients,
                 float* params, float* const* state, std::size_t count, cudaStream_t stream) {
  sdlm_step(settings, lr, gradients, params, state[0], count, stream);
}

}  // namespace lenet5::cuda
