// Fast CPU versions of the layers, in the fused form of core/topology.hpp (each activation computed
// by the layer before it): the same function as the sequential reference (reference_cpu.hpp),
// computed by GEMMs from the BLAS (layers/blas_cpu.hpp) where the work is a matrix product.
//   convolution (C1, C3): the unroll of Fig 16.16 (conv_unroll_cpu) and one GEMM per sample
//   convolution with a 1x1 output (C5), fully connected (F6, output): one GEMM per chunk
//   subsampling: row-wise 2x2 averages or trainable sums (the reference's loops for max or other
//                windows), then the fused activation
//
// Each function here computes ONE chunk of samples (the shapes' n), serially. The layers around
// them (fast_cpu_layers.cpp) split the batch into chunks of kCpuChunkSamples, whatever the number
// of threads, run the chunks in parallel, and sum the chunks' weight gradients in chunk order:
// every result, and so every checkpoint, is the same for any number of threads.
//
// Layout NCHW, as core/shapes.hpp. Every function OVERWRITES its outputs.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "core/activation_math.hpp"
#include "core/net_config.hpp"
#include "core/shapes.hpp"

namespace lenet5 {

// Samples per chunk: a batch of 64 gives 8 chunks, enough for the cores of a laptop; a GEMM over
// 8 rows still runs near the BLAS's speed for the dense tail.
constexpr int kCpuChunkSamples = 8;
inline int cpu_chunk_count(int n) {
  return (n + kCpuChunkSamples - 1) / kCpuChunkSamples;
}

// Floats of the unrolled input of one sample (Fig 16.16's C*K*K x H_out*W_out matrix).
inline std::size_t unrolled_count(const ConvShape& s) {
  return std::size_t(s.c) * s.k * s.k * s.h_out() * s.w_out();
}

// Y[n] (M x HW) = W (M x CKK) * unroll(X[n]) (CKK x HW), plus bias[m] when bias is not null.
// unrolled: scratch of unrolled_count(s).
template <class T>
void conv_forward_fast_cpu(const ConvShape& s, const T* x, const T* weight, const T* bias, T* y,
                           T* unrolled);
// dE/dX[n] = the fold (col2im) of W^T (CKK x M) * dE/dY[n] (M x HW): each unrolled entry adds
// into the input element it was copied from.
template <class T>
void conv_backward_input_fast_cpu(const ConvShape& s, const T* dL_dy, const T* weight, T* dL_dx,
                                  T* unrolled);
// The chunk's dE/dW = sum_n dE/dY[n] (M x HW) * unroll(X[n])^T (HW x CKK), and dE/db (may be
// null) = sum_{n,h,w} dE/dY.
template <class T>
void conv_backward_weights_fast_cpu(const ConvShape& s, const T* x, const T* dL_dy, T* dL_dweight,
                                    T* dL_dbias, T* unrolled);

// Y (N x out) = f(X (N x in) * W^T + b); W is (out, in) row-major as FcShape says.
template <class T>
void dense_forward_fast_cpu(const FcShape& s, FusedActivation activation, const T* x,
                            const T* weight, const T* bias, T* y);
// dE/dX (N x in) = dE/dZ (N x out) * W, with dE/dZ = dE/dY * f'(z) (already formed by
// activation_gradient_fast_cpu when the layer has an activation).
template <class T>
void dense_backward_input_fast_cpu(const FcShape& s, const T* dL_dz, const T* weight, T* dL_dx);
// The chunk's dE/dW (out x in) = dE/dZ^T * X and dE/db = the column sums of dE/dZ.
template <class T>
void dense_backward_weights_fast_cpu(const FcShape& s, const T* x, const T* dL_dz, T* dL_dweight,
                                     T* dL_dbias);

// S = f(pool(Y) + b): the reference's pooling (subsample_forward_cpu), then the activation.
// coef: trainable subsampling's coefficients (C), read by that kind only.
template <class T>
void subsample_forward_fast_cpu(const PoolShape& s, Subsampling kind, FusedActivation activation,
                                const T* x, const T* bias, T* y, const T* coef = nullptr);

// dE/dX from dE/dZ (the gradient before the activation): subsample_backward_input_cpu's values.
template <class T>
void subsample_backward_input_fast_cpu(const PoolShape& s, Subsampling kind, const T* x,
                                       const T* dL_dz, T* dL_dx, const T* coef = nullptr);

// y = f(x) over count elements, with the fast layers' tanh: an activation that is a layer of its
// own (a1, a3 of --conv-units squashed), where no layer before it fuses one.
template <class T>
void activation_forward_fast_cpu(Activation kind, const T* x, T* y, std::size_t count);

// dE/dZ = dE/dY * f'(z), through the layer's output y (count elements); a copy when the
// activation is off.
template <class T>
void activation_gradient_fast_cpu(FusedActivation activation, const T* y, const T* dL_dy, T* dL_dz,
                                  std::size_t count);

// tanh(x) in float, the fast layers' tanh and scaled tanh (double uses std::tanh): Eigen's
// generic_fast_tanh_float, a 13/6 rational approximation on [-c, c], where c is the float beyond
// which tanh rounds to +-1, and x itself where |x| < 4e-4 keeps the relative error small.
// Branch-free and inline, so the loops that call it vectorise; within a few units in the last
// place of std::tanh (tests/cpu/test_fast_layers.cpp measures it).
inline float tanh_fast_cpu(float x) {
  constexpr float clamp = 7.90531110763549805f;
  const float v = std::min(clamp, std::max(-clamp, x));
  const float v2 = v * v;
  float p = -2.76076847742355e-16f;
  p = p * v2 + 2.00018790482477e-13f;
  p = p * v2 + -8.60467152213735e-11f;
  p = p * v2 + 5.12229709037114e-08f;
  p = p * v2 + 1.48572235717979e-05f;
  p = p * v2 + 6.37261928875436e-04f;
  p = p * v2 + 4.89352455891786e-03f;
  p = p * v;
  float q = 1.19825839466702e-06f;
  q = q * v2 + 1.18534705686654e-04f;
  q = q * v2 + 2.26843463243900e-03f;
  q = q * v2 + 4.89352518554385e-03f;
  return std::fabs(x) < 0.0004f ? x : p / q;
}

// out[i] = sum over chunks c = 0, 1, ... of partials[c * count + i], in that order.
template <class T>
void sum_chunks_cpu(const T* partials, int chunks, std::size_t count, T* out);

}  // namespace lenet5
