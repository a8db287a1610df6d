// The SGD update of one parameter, shared by the update kernels (cuda/kernels/optimizer.cu and the
// whole-step kernels, cuda/engine/whole_step.cu), so that every kernel set updates bit for bit alike.
#pragma once

namespace lenet5::cuda {

// A parameter's operands for its step, read before its gradient is known, so that their round trip
// to memory overlaps the gradient's own: its value, its velocity (0 without momentum, where it is
// not read) and the step's learning rate.
struct SgdOperands {
  float w = 0.0f, v = 0.0f, lr = 0.0f;
};
__device__ inline SgdOperands sgd_read_operands(float mu, const float* lr, const float* param,
                                                const float* velocity) {
  return {*param, mu == 0.0f ? 0.0f : *velocity, *lr};
}

// The formula of sgd_step_cpu (core/sgd.hpp):
//   g = grad + decay * w;   v = mu * v + g;   w -= lr * (nesterov ? g + mu * v : v)
//   (mu = 0: w -= lr * g, and the velocity is not touched)
// written with explicit round-to-nearest intrinsics. nvcc would otherwise contract each
// "a * b + c" into one FMA, which rounds once instead of twice; the CPU reference is compiled
// without contraction (GCC in ISO C++ mode uses -ffp-contract=off, and baseline x86-64 has no FMA
// instruction anyway), so these intrinsics are what make the two updates bit-identical.
// Here with the operands read already (sgd_read_operands); sgd_update_element reads them itself.
__device__ inline void sgd_update_read(float mu, bool nesterov, float decay, const SgdOperands& in,
                                       float gradient, float* param, float* velocity) {
  const float g = __fadd_rn(gradient, __fmul_rn(decay, in.w));
  if (mu == 0.0f) {
    *param = __fsub_rn(in.w, __fmul_rn(in.lr, g));
    return;
  }
  const float v = __fadd_rn(__fmul_rn(mu, in.v), g);
  *velocity = v;
  const float direction = nesterov ? __fadd_rn(g, __fmul_rn(mu, v)) : v;
  *param = __fsub_rn(in.w, __fmul_rn(in.lr, direction));
}

__device__ inline void sgd_update_element(float mu, bool nesterov, float decay, float lr,
                                          float gradient, float* param, float* velocity) {
  sgd_update_read(mu, nesterov, decay, sgd_read_operands(mu, &lr, param, velocity), gradient, param,
                  velocity);
}

}  // namespace lenet5::cuda
