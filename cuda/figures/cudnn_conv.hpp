// cuDNN as a reference row in `lenet5 figures` (cudnn.tab3): the forward convolution of one
// ConvShape through cuDNN's convolution API, optional at build time (CMake option
// LENET5_WITH_CUDNN). Without cuDNN the class still exists and cudnn_built() says why it cannot
// run, so that callers need no #if. This header does not include cudnn.h.
//
// Contract: the same as the registry's forward (cuda/kernels/conv/registry.hpp) without bias: NCHW
// float32 device pointers, valid stride-1 CROSS-CORRELATION (cuDNN's CUDNN_CROSS_CORRELATION;
// its default CUDNN_CONVOLUTION flips the filters, textbook-figures.md §0.2), output
// overwritten, launched on `stream` without synchronising. FP32 arithmetic with FMA math only
// (CUDNN_FMA_MATH: no TF32 tensor cores), so that its TFLOP/s compare with the FP32 peak and
// with our kernels. Every cuDNN call is checked (lenet5::Error with cudnnGetErrorString).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/shapes.hpp"

namespace lenet5::cuda {

// Whether this build links cuDNN.
bool cudnn_built();
// "cuDNN 9.19.0 (headers 9.19.0)", or "not built with cuDNN (configure with
// -DLENET5_WITH_CUDNN=ON and CUDNN_ROOT=...)".
std::string cudnn_description();

// One algorithm as cudnnFindConvolutionForwardAlgorithm measured it.
struct CudnnAlgorithm {
  int id = -1;                 // cudnnConvolutionFwdAlgo_t
  std::string name;            // "IMPLICIT_GEMM", "FFT_TILING", ...
  float milliseconds = 0;      // cuDNN's own measurement
  std::size_t workspace_bytes = 0;
};

class CudnnConvolution {
 public:
  // Descriptors for `s` (x (N,C,H,W), filters (M,C,K,K), y (N,M,H_out,W_out)). Throws
  // lenet5::Error when not built with cuDNN or when cuDNN rejects the shape.
  explicit CudnnConvolution(const ConvShape& s);
  ~CudnnConvolution();
  CudnnConvolution(const CudnnConvolution&) = delete;
  CudnnConvolution& operator=(const CudnnConvolution&) = delete;

  // cudnnGetConvolution2dForwardOutputDim: {N, M, H_out, W_out} as cuDNN computes them.
  std::vector<int> output_dims() const;
  // Every forward algorithm cudnnFindConvolutionForwardAlgorithm could run, fastest first.
  // cuDNN allocates its own scratch for the search (not one of lenet5's buffers).
  std::vector<CudnnAlgorithm> find_algorithms();
  // Workspace that `algo` needs for this shape (cudnnGetConvolutionForwardWorkspaceSize).
  std::size_t workspace_bytes(int algo) const;
  // Chooses the algorithm for forward() and allocates its workspace (a Buffer).
  void use_algorithm(int algo);
  static int implicit_gemm_id();  // CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM
  static std::string algorithm_name(int algo);

  // y = x * filters (cross-correlation), on `stream`.
  void forward(const float* x, const float* weight, float* y, cudaStream_t stream);

 private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

}  // namespace lenet5::cuda
