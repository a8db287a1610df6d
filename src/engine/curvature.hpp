// The diagonal of the Gauss-Newton approximation of the loss's Hessian with respect to every
// parameter: SDLM's curvature (core/sdlm.hpp), estimated on the host for both engines.
//
// LeCun et al. 1998, Appendix C (and "Efficient BackProp" 1998, section 9.1): second derivatives
// are back-propagated like first derivatives, with every cross term dropped and the terms in f''
// dropped (the Gauss-Newton approximation), which keeps them non-negative:
//   at the output      d2E/dz_k^2   = the loss's own (softmax cross-entropy: p_k (1 - p_k); the
//                      MAP criterion on RBF outputs: q_k (1 - q_k), q_k its class probability)
//   through the RBF units y_i = sum_j (x_j - w_ij)^2 (fixed w): d2E/dx_j^2 = sum_i 4 (x_j - w_ij)^2
//                      d2E/dy_i^2 + 2, the second term the curvature of the criterion's y_label
//                      term in x (curvature.cpp says why it is kept)
//   through f          d2E/da^2     = f'(a)^2 d2E/dy^2
//   through a layer    a_i = sum_j w_ij x_j (+ b_i), linear in weights and inputs:
//                      d2E/dx_j^2   = sum_i w_ij^2 d2E/da_i^2
//                      d2E/dw_ij^2  = sum over the connections sharing w_ij of x_j^2 d2E/da_i^2
//                      d2E/db_i^2   = sum over the connections sharing b_i of d2E/da_i^2
//   average subsampling (a = (1/K^2) sum of the window + b): each input gets d2E/da^2 / K^4
//   max subsampling: the window's maximum gets d2E/da^2, as it gets the gradient.
//   trainable subsampling (a = c * (sum of the window) + b): each input gets c^2 d2E/da^2, and
//                      d2E/dc^2 = sum over the map's outputs of (window sum)^2 d2E/da^2
// These are the first-order backward functions of the CPU reference (layers/reference_cpu.hpp)
// applied to squared weights, squared inputs and squared slopes, which is exact: each of them is a
// sum of products in which the weight, the input or the slope appears once. The layers run in
// double, the book's plain topology, whatever kernel set trains.
//
// The estimate is the mean over the samples of each sample's second derivatives. The paper keeps
// a running average instead, h <- (1 - gamma) h + gamma * (sample's), over the same 500 samples of
// each pass; with gamma = 1/t at sample t that running average is this mean, and it forgets each
// pass's estimate at the next re-estimation just as this one is replaced.
#pragma once

#include <cstdint>
#include <vector>

#include "core/augment.hpp"
#include "core/net_config.hpp"
#include "data/mnist.hpp"

namespace lenet5 {

// The mean over n samples of the Gauss-Newton diagonal, one value per float of the flat parameter
// buffer (core/layout.hpp; padding and the C3 weights the table disconnects stay 0). params: that
// buffer; inputs: (n, 1, 32, 32) as the network takes them.
std::vector<double> gauss_newton_diagonal(const NetConfig& net, const std::vector<float>& params,
                                          const double* inputs, int n);

// SDLM's estimate for a pass: the first `samples` samples of the pass's order `permutation` (or
// all of them, if the pass is shorter), shown to the network as that pass's training steps show
// them (augmented for `epoch` by the reference gather, data/batch.hpp), as floats.
std::vector<float> estimate_curvature(const NetConfig& net, const std::vector<float>& params,
                                      const Dataset& train, const Augmentation& augmentation,
                                      std::uint32_t epoch,
                                      const std::vector<std::int32_t>& permutation, int samples);

}  // namespace lenet5
