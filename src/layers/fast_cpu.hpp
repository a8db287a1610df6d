// Fast CPU versions of the layers, in the fused form of core/topology.hpp (each activation computed
// by the layer before it): the same function as the sequential reference (reference_cpu.hpp),
// computed by GEMMs from the BLAS (layers/blas_cpu.hpp) where the work is a matrix product.
//   convolution (C1, C3): the unroll of Fig 16.16 (conv_unroll_cpu) and one GEMM per sample
//   convolution with a 1x1 output (C5), fully connected (F6, output): one GEMM per chunk
//   subsampling: the reference's pooling, then the fused activation
//
// Each function here computes ONE chunk of samples (the shapes' n), serially. The layers around
// them (fast_cpu_layers.cpp) split the batch into chunks of kCpuChunkSamples, whatever the number
// of threads, run the chunks in parallel, and sum the chunks' weight gradients in chunk order:
// every result, and so every checkpoint, is the same for any number of threads.
//
// Layout NCHW, as core/shapes.hpp. Every function OVERWRITES its outputs.
#pragma once

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
template <class T>
void subsample_forward_fast_cpu(const PoolShape& s, Subsampling kind, FusedActivation activation,
                                const T* x, const T* bias, T* y);

// dE/dZ = dE/dY * f'(z), through the layer's output y (count elements); a copy when the
// activation is off.
template <class T>
void activation_gradient_fast_cpu(FusedActivation activation, const T* y, const T* dL_dy, T* dL_dz,
                                  std::size_t count);

// out[i] = sum over chunks c = 0, 1, ... of partials[c * count + i], in that order.
template <class T>
void sum_chunks_cpu(const T* partials, int chunks, std::size_t count, T* out);

}  // namespace lenet5
