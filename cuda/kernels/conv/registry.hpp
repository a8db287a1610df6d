// One object per convolution version of the table (core/conv_algo.hpp): the three directions of
// a convolution layer behind one interface, so that the layers, `lenet5 figures`, the benchmarks
// and the GPU tests run every version the same way.
//
// Contract of every version (the same as the CPU references conv_*_cpu in
// layers/reference_cpu.hpp): NCHW float32 device pointers, valid stride-1 cross-correlation,
// outputs overwritten (never accumulated), launches enqueued on `stream` without synchronising,
// every launch and library call checked, and results bit-identical from run to run (no float
// atomics). Any scratch memory (unrolled inputs, partial sums) and any library handle is owned by
// the object and allocated in make_conv_algorithm, never during a call: the GPU engine captures
// calls into a CUDA graph, where allocation is not allowed. Two calls of the same direction never
// overlap in time, but backward_weights may run on another stream at the same time as forward
// or backward_input (the fast kernel set overlaps them, engine/network.cpp): scratch memory or a
// library handle used by backward_weights must not be shared with the other two directions.
#pragma once

#include <cuda_runtime.h>

#include <memory>

#include "core/conv_algo.hpp"
#include "core/net_config.hpp"
#include "core/shapes.hpp"

namespace lenet5::cuda {

class ConvAlgorithm {
 public:
  virtual ~ConvAlgorithm() = default;

  // Y = X * W (+ bias[m] when bias is not null).
  virtual void forward(const ConvShape& s, const float* x, const float* weight, const float* bias,
                       float* y, cudaStream_t stream) = 0;
  // dL/dX[c,h,w] = sum_m sum_{p,q} dL/dY[m,h-p,w-q] W[m,c,p,q] over valid h-p, w-q.
  virtual void backward_input(const ConvShape& s, const float* dL_dy, const float* weight,
                              float* dL_dx, cudaStream_t stream) = 0;
  // dL/dW[m,c,p,q] = sum_{n,h,w} X[n,c,h+p,w+q] dL/dY[n,m,h,w], times mask[m,c,p,q] when mask is
  // not null (C3's connection table); dL/dbias[m] = sum_{n,h,w} dL/dY[n,m,h,w] when not null.
  virtual void backward_weights(const ConvShape& s, const float* x, const float* dL_dy,
                                float* dL_dweight, float* dL_dbias, const float* mask,
                                cudaStream_t stream) = 0;
};

// The kernels of `algo` for shapes with the same C, H, W, M and K as `largest` and a batch of at
// most largest.n. Throws lenet5::Error if the version cannot run that shape.
std::unique_ptr<ConvAlgorithm> make_conv_algorithm(ConvAlgo algo, const ConvShape& largest);

// Makes a version's kernels for `largest` (the contract of make_conv_algorithm).
using ConvFactory = std::unique_ptr<ConvAlgorithm> (*)(const ConvShape& largest);

// The factory of a version whose ConvAlgorithm is constructed from the largest shape.
template <class Version>
std::unique_ptr<ConvAlgorithm> make_version(const ConvShape& largest) {
  return std::make_unique<Version>(largest);
}

// The forward and backward_input of a version whose two directions are free functions with the
// interface's parameters (versions 1 and 5): the version adds its constructor and
// backward_weights.
using ConvForwardFunction = void (*)(const ConvShape&, const float* x, const float* weight,
                                     const float* bias, float* y, cudaStream_t);
using ConvBackwardInputFunction = void (*)(const ConvShape&, const float* dL_dy,
                                           const float* weight, float* dL_dx, cudaStream_t);
template <ConvForwardFunction Forward, ConvBackwardInputFunction BackwardInput>
class FunctionConvolution : public ConvAlgorithm {
 public:
  void forward(const ConvShape& s, const float* x, const float* weight, const float* bias, float* y,
               cudaStream_t stream) override {
    Forward(s, x, weight, bias, y, stream);
  }
  void backward_input(const ConvShape& s, const float* dL_dy, const float* weight, float* dL_dx,
                      cudaStream_t stream) override {
    BackwardInput(s, dL_dy, weight, dL_dx, stream);
  }
};

// A version's one registration, at namespace scope in its own file under cuda/kernels/conv/:
//   const ConvRegistration kTiled{2, "tiled", "PMPP Fig 16.13", make_version<TiledConvolution>,
//                                 "what it does, in one line"};
// It adds the version to the table of core/conv_algo.hpp (number, name for --conv-algo, source,
// description) and its factory to make_conv_algorithm's, before main() runs. Adding a version is
// its file plus its test (and its row in tests/errata.md): no enum constant, no switch case.
class ConvRegistration {
 public:
  ConvRegistration(int number, const char* name, const char* source, ConvFactory make,
                   const char* description);
};

}  // namespace lenet5::cuda
