// Stochastic diagonal Levenberg-Marquardt (LeCun, Bottou, Bengio, Haffner 1998, section V.A and
// Appendix C; LeCun, Bottou, Orr, Mueller, "Efficient BackProp" 1998, section 9.1), over the flat
// parameter buffer in one pass (one launch on the GPU):
//   g_k   = grad_k + weight_decay * w_k
//   eps_k = lr / (mu + h_kk + weight_decay)
//   w_k  -= eps_k * g_k
// h_kk is the optimizer's state, an estimate of the diagonal of the Gauss-Newton approximation of
// the loss's Hessian (engine/curvature.hpp), which the engine re-estimates before each pass from
// the first sdlm_samples samples of that pass. mu keeps the step finite where the curvature is
// near zero; lr is the schedule's global step (the paper's per-pass schedule is `lecun1998`,
// train/schedule.hpp).
//
// The gradient is the engine's, the batch mean: the paper updates after every sample, which is
// --batch-size 1. Weight decay, when asked for, is part of the objective, E + decay/2 |w|^2: its
// gradient decay * w enters g, and its curvature, exactly decay on every diagonal entry, enters
// the denominator; with decay 0 (the paper's) the update is the paper's.
#pragma once

namespace lenet5 {

// SDLM's one state buffer, the Hessian diagonal estimate (checkpoint tensors "<tensor>.hessian").
constexpr const char* kHessianState = "hessian";

}  // namespace lenet5
