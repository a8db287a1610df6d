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

#include "layers/reference_cpu.hpp"
#include "core/buffer.hpp"
#include "net/config.hpp"

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

 private:
  cublasHandle_t m_handle = nullptr;
  cudaStream_t m_stream = kDefaultStream;
  // cuBLAS's workspace, given explicitly so that no allocation happens while a graph is captured.
  Buffer<std::uint8_t> m_workspace;
};

// The process's one handle on kDefaultStream, created on first use (the GPU layers are built by
// net/network.cpp through make_gpu_layer, which carries no context, so they share this one).
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

}  // namespace lenet5::cuda
