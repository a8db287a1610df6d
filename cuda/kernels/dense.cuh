// Element-wise activation kernels and the fully connected layer (F6 84x120, output 10x84) on
// cuBLAS, plus the stream and cuBLAS handle every layer runs on.
// Contract: exactly activation_*_cpu and fc_*_cpu of layers/reference_cpu.hpp, on device
// pointers, launched without synchronising; every backward launcher OVERWRITES its outputs. A
// batch of n = 0 launches nothing (Network never asks for one).
//
// Layout: activations row-major (n, units), e.g. F6's input (N, 120) and output (N, 84); weights
// W (out, in) row-major, F6's W (84, 120).
//
// Version 1 of each kernel:
//   activation_forward_kernel1 / activation_backward_kernel1: one thread per element (grid-stride).
//   fc_bias_forward_kernel1: adds the bias row to the GEMM's (n, out) result.
//   fc_bias_backward_kernel1: dL/db = column sums of dL/dy, one block per output unit, fixed-order
//   tree reduction (deterministic, no atomics).
// The three products (Y = X W^T, dX = dY W, dW = dY^T X) are cublasSgemm calls (dense.cu carries
// the row-major/column-major derivation).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "core/activation_math.hpp"
#include "core/net_config.hpp"
#include "core/shapes.hpp"
#include "cuda/runtime/buffer.hpp"

namespace lenet5::cuda {

// Every layer, the loss, the optimiser and the engine launch on the per-thread default stream.
// Unlike the legacy default stream it can be captured into a CUDA graph (the GPU engine replays a
// whole epoch as one graph), and it still synchronises with the legacy stream that carries the
// cudaMemcpy / cudaMemset calls of lenet5::Buffer, so uploads, kernels and downloads stay ordered
// without events.
inline const cudaStream_t kDefaultStream = cudaStreamPerThread;

// An owned cuBLAS handle bound to one stream, in FP32 pedantic math (see dense.cu for why).
class CublasHandle {
 public:
  explicit CublasHandle(cudaStream_t stream = kDefaultStream);
  ~CublasHandle();
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;

  cublasHandle_t get() const { return m_handle; }
  cudaStream_t stream() const { return m_stream; }
  // Rebinds the handle (and the bias kernels of fc_*) to another stream.
  void use_stream(cudaStream_t stream);

 private:
  cublasHandle_t m_handle = nullptr;
  cudaStream_t m_stream = kDefaultStream;
  // cuBLAS's workspace, given explicitly so that no allocation happens while a graph is captured.
  Buffer<std::uint8_t> m_workspace;
};

// The process's one handle on kDefaultStream, created on first use (the GPU layers are built by
// engine/network.cpp through make_gpu_layer, which carries no context, so they share this one).
CublasHandle& default_cublas_handle();

// y = f(x) element-wise over count elements, e.g. a2: (N, 6, 14, 14).
void activation_forward(Activation kind, const float* x, float* y, std::size_t count,
                        cudaStream_t stream);
// dL/dx = dL/dy * f'(x), with f' written through the stored forward output y.
void activation_backward(Activation kind, const float* y, const float* dL_dy, float* dL_dx,
                         std::size_t count, cudaStream_t stream);

// y (n, out) = x (n, in) W^T + b. bias may be null. Runs on cublas.stream().
void fc_forward(const CublasHandle& cublas, const FcShape& s, const float* x, const float* weight,
                const float* bias, float* y);
// dL/dx (n, in) = dL/dy (n, out) W.
void fc_backward_input(const CublasHandle& cublas, const FcShape& s, const float* dL_dy,
                       const float* weight, float* dL_dx);
// dL/dW (out, in) = dL/dy^T x, summed over the batch; dL/db (out) = column sums of dL/dy (may be
// null). Deterministic: cuBLAS SGEMM on one stream and a fixed-order bias reduction.
void fc_backward_weights(const CublasHandle& cublas, const FcShape& s, const float* x,
                         const float* dL_dy, float* dL_dweight, float* dL_dbias);

// ---- fully connected, version 2: small deterministic kernels with bias and activation fused ----
// LeNet's products are tiny (batch 64: C5 64x400 by 400x120, F6 64x120 by 120x84, output 64x84 by
// 84x10); a cuBLAS call costs more fixed latency than their arithmetic, and the bias and the
// activation would each need a launch of their own. Every sum runs in a fixed order (no atomics):
// results are bit-identical from run to run. C5 runs here too, as a dense layer over its 400
// inputs (a 5x5 convolution of a 5x5 input). activation: see FusedActivation; with it disabled
// these compute exactly what fc_forward / fc_backward_* compute.
//
// y (n, out) = f(x (n, in) W^T + b); bias may be null.
void dense_forward2(const FcShape& s, const float* x, const float* weight, const float* bias,
                    FusedActivation activation, float* y, cudaStream_t stream);
// dL/dx (n, in) = dL/dz W, with dL/dz = dL/dy * f'(z) formed through the forward output y.
void dense_backward_input2(const FcShape& s, const float* dL_dy, const float* y,
                           FusedActivation activation, const float* weight, float* dL_dx,
                           cudaStream_t stream);
// dL/dW (out, in) = dL/dz^T x and dL/db (out) = column sums of dL/dz (may be null), over the batch.
void dense_backward_weights2(const FcShape& s, const float* x, const float* dL_dy, const float* y,
                             FusedActivation activation, float* dL_dweight, float* dL_dbias,
                             cudaStream_t stream);

}  // namespace lenet5::cuda
