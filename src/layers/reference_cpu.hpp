// Sequential CPU versions of every layer: the book's Figures 16.4, 16.5, 16.8, 16.9 and 16.10 with
// the errata of the printed code fixed (see the comments at each function), plus fully connected,
// activation and softmax cross-entropy. They are the oracle for every GPU kernel and for the fast
// CPU layers (fast_cpu.hpp), and the backend of --device cpu --kernels book. Templated on float
// (training) and double (gradient checks).
//
// Layout NCHW throughout; the shapes and the index convention are core/shapes.hpp's.
// Parallelism (OpenMP) is over samples or over output channels only, each output element is
// written by exactly one thread, and every sum runs in a fixed order: results do not depend on
// the number of threads.
//
// Every backward function OVERWRITES its outputs (never accumulates).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/net_config.hpp"
#include "core/shapes.hpp"

namespace lenet5 {

// Fig 16.4 / 16.10 (mini-batch): Y[n,m,h,w] = sum_{c,p,q} X[n,c,h+p,w+q] * W[m,c,p,q] (+ bias[m]).
// Errata fixed: E01 (A's "Y += Y + ..." doubled the running sum), E02 (the int width W and the
// filter pointer W shared a name: the filters are `weight` here), E09 (stray brace).
// bias may be null (C1 and C3 take their bias in the following subsampling layer, Fig 16.5).
template <class T>
void conv_forward_cpu(const ConvShape& s, const T* x, const T* weight, const T* bias, T* y);

// Fig 16.16, the unroll (im2col) of ONE sample (N ignored), in the Fig 16.14 layout: a
// C*K*K x H_out*W_out row-major matrix whose row c*K*K + p*K + q holds X[c, h+p, w+q] at column
// h*W_out + w. Read column-major (as cuBLAS does) it is the HW x CKK matrix of Fig 16.15's
// gemm call (hazard H2: the listing's X_unroll(h_unroll, w_unroll) is column-major). Needs the
// per-sample offset of erratum E21: pass x + n*C*H*W.
template <class T>
void conv_unroll_cpu(const ConvShape& s, const T* x_sample, T* x_unroll);

// Fig 16.8: dE/dX[c, h+p, w+q] += dE/dY[m,h,w] * W[m,c,p,q] after zeroing dE/dX (scatter form, as
// printed; correct as sequential code). Samples are independent.
template <class T>
void conv_backward_input_cpu(const ConvShape& s, const T* dL_dy, const T* weight, T* dL_dx);

// Fig 16.9 summed over the mini-batch: dE/dW[m,c,p,q] = sum_{n,h,w} X[n,c,h+p,w+q] * dE/dY[n,m,h,w].
// Erratum E08 fixed: the printed dE_dY[m, c, h, w] has a channel index that dE/dY does not have.
// dL_dbias (may be null) gets sum_{n,h,w} dE/dY[n,m,h,w].
template <class T>
void conv_backward_weights_cpu(const ConvShape& s, const T* x, const T* dL_dy, T* dL_dweight,
                               T* dL_dbias);

// Subsampling of K x K windows (stride K) plus a per-map bias, Fig 16.5 without its activation
// (which is a layer of its own here): S[n,c,h,w] = pool(Y[n,c,K*h+p,K*w+q]) + b[c].
// Errata fixed: E03-E07 (undeclared loop variables, the doubled sum "S += S + ...", the bias and
// sigmoid statement placed outside the loops in rendering B, the missing b parameter).
// Trainable (LeCun et al. 1998, section II.B): pool = coef[c] * (the window's sum, row by row),
// with the coefficients `coef` (C), which only this kind reads (and needs).
template <class T>
void subsample_forward_cpu(const PoolShape& s, Subsampling kind, const T* x, const T* bias, T* y,
                           const T* coef = nullptr);
// Average: each input of a window receives dE/dS / K^2. Max: the window's first maximum (in
// row-major order) receives dE/dS, the others 0. Trainable: each input receives coef[c] * dE/dS.
template <class T>
void subsample_backward_input_cpu(const PoolShape& s, Subsampling kind, const T* x, const T* dL_dy,
                                  T* dL_dx, const T* coef = nullptr);
template <class T>
void subsample_backward_bias_cpu(const PoolShape& s, const T* dL_dy, T* dL_dbias);
// Trainable subsampling's dE/dcoef[c] = sum_{n,h,w} dE/dS[n,c,h,w] * (window sum at n,c,h,w),
// summed in the order n, h, w (the window row by row, as the forward pass).
template <class T>
void subsample_backward_coef_cpu(const PoolShape& s, const T* x, const T* dL_dy, T* dL_dcoef);

template <class T>
void activation_forward_cpu(Activation kind, const T* x, T* y, std::size_t count);
template <class T>
void activation_backward_cpu(Activation kind, const T* y, const T* dL_dy, T* dL_dx,
                             std::size_t count);

// Fully connected (core/shapes.hpp's FcShape).
template <class T>
void fc_forward_cpu(const FcShape& s, const T* x, const T* weight, const T* bias, T* y);
// Figs 16.6/16.7: dE/dX = W^T dE/dY, dE/dW = dE/dY X^T (summed over the batch), dE/db = dE/dY.
template <class T>
void fc_backward_input_cpu(const FcShape& s, const T* dL_dy, const T* weight, T* dL_dx);
template <class T>
void fc_backward_weights_cpu(const FcShape& s, const T* x, const T* dL_dy, T* dL_dweight,
                             T* dL_dbias);

// Softmax cross-entropy over `classes` logits per sample, mean over the batch. Writes
// dL/dlogits = (softmax - onehot) / n when dL_dlogits is not null (the 1/n is the book's
// "average gradient over the mini-batch"), and argmax predictions when predictions is not null.
struct LossStats {
  double loss_sum = 0;  // sum over the batch of -log p(label)
  int correct = 0;
};
template <class T>
LossStats softmax_cross_entropy_cpu(const T* logits, const std::uint8_t* labels, int n,
                                    int classes, T* dL_dlogits, int* predictions);
// The diagonal of the same loss's Hessian with respect to the logits, per sample (no 1/n):
// d2L/dz_k^2 = p_k (1 - p_k) with p = softmax(z), whatever the label. The logits are the output
// of a linear layer, so this is also the diagonal of the Gauss-Newton matrix there: where SDLM's
// curvature (engine/curvature.hpp) starts.
template <class T>
void softmax_cross_entropy_curvature_cpu(const T* logits, int n, int classes, T* d2L_dlogits2);

// LeCun et al. 1998's output layer of Euclidean RBF units (--output rbf): y (n, classes) with
// y[s,i] = sum_j (x[s,j] - w[i,j])^2 over `units` inputs, w the fixed (classes, units) prototypes
// (core/rbf_prototypes.hpp). Samples in parallel, each sum in index order.
template <class T>
void rbf_forward_cpu(int n, int units, int classes, const T* x, const float* prototypes, T* y);
// dL/dx[s,j] = sum_i dL/dy[s,i] * 2 (x[s,j] - w[i,j]), the sum over i in order. The prototypes are
// fixed: there is no weight gradient.
template <class T>
void rbf_backward_input_cpu(int n, int units, int classes, const T* x, const float* prototypes,
                            const T* dL_dy, T* dL_dx);

// The paper's MAP criterion, equation (9), over the RBF outputs y (n, classes), mean over the
// batch as the softmax loss: per sample E = y_D + log(e^-j + sum_i e^-y_i) with D the label and
// j = kMapRejectionConstant, which is -log p_D for map_probability's p. Writes dL/dy (may be null)
// = ([i == D] - p_i) / n, and predictions (may be null): the nearest prototype's class.
template <class T>
LossStats map_loss_cpu(const T* y, const std::uint8_t* labels, int n, int classes, T* dL_dy,
                       int* predictions);
// p (n, classes): each class's probability as the criterion implies, in double and rounded once;
// a row sums to less than 1 (the rest is "none of these").
template <class T>
void map_probabilities_cpu(const T* y, int n, int classes, float* probabilities);

// The loss of the network's output layer: softmax_cross_entropy_cpu or map_loss_cpu.
template <class T>
LossStats output_loss_cpu(OutputLayer output, const T* outputs, const std::uint8_t* labels, int n,
                          int classes, T* dL_doutputs, int* predictions);

}  // namespace lenet5
