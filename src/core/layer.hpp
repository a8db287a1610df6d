// The layer interface every backend implements (CPU reference here, CUDA kernels in cuda/).
// Pointers are on the layer's device; tensors are NCHW with the batch size n given per call.
#pragma once

#include <cstddef>
#include <string>

#include "core/shapes.hpp"

namespace lenet5 {

template <class T>
class Layer {
 public:
  Layer(std::string name, Dims in, Dims out) : m_name(std::move(name)), m_in(in), m_out(out) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  // y (n, out) = f(x (n, in)). Overwrites y.
  virtual void forward(const T* x, T* y, int n) = 0;
  // dL/dx from dL/dy; x and y are this layer's forward input and output. Overwrites dL_dx.
  virtual void backward_input(const T* x, const T* y, const T* dL_dy, T* dL_dx, int n) = 0;
  // This layer's slices of the flat gradient buffer, summed over the batch. Overwrites them.
  // y is the forward output (a layer with a fused activation needs it for f'(z)).
  virtual void backward_weights(const T* x, const T* y, const T* dL_dy, int n) {
    (void)x, (void)y, (void)dL_dy, (void)n;
  }

  const std::string& name() const { return m_name; }
  Dims in() const { return m_in; }
  Dims out() const { return m_out; }

 private:
  std::string m_name;
  Dims m_in, m_out;
};

}  // namespace lenet5
