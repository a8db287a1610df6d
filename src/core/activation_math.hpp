// Activation functions and their derivatives, shared by the CPU reference and the CUDA kernels.
// Each derivative is written in terms of the activation's OUTPUT y, so backward passes need only
// the stored forward output, never the pre-activation.
#pragma once

#include <cmath>

#include "core/host_device.hpp"
#include "core/net_config.hpp"

namespace lenet5 {

// A layer's own output activation, fused into its kernels (the GPU's fast path): forward writes
// f(z); the backward passes get dL/df and the output y and form dL/dz = dL/df * f'(z) through y.
struct FusedActivation {
  bool enabled = false;
  Activation kind = Activation::tanh;
};

// LeCun's scaled tanh, f(x) = A tanh(S x), chosen so that f(1) = 1 and f(-1) = -1.
constexpr double kScaledTanhA = 1.7159;
constexpr double kScaledTanhS = 2.0 / 3.0;

template <class T>
LENET5_HD inline T activate(Activation kind, T x) {
  switch (kind) {
    case Activation::tanh: return std::tanh(x);
    case Activation::sigmoid: return T(1) / (T(1) + std::exp(-x));
    case Activation::scaled_tanh: return T(kScaledTanhA) * std::tanh(T(kScaledTanhS) * x);
    case Activation::relu: return x > T(0) ? x : T(0);
  }
  return x;
}

// dy/dx expressed through y = activate(kind, x).
template <class T>
LENET5_HD inline T activation_slope(Activation kind, T y) {
  switch (kind) {
    case Activation::tanh: return T(1) - y * y;
    case Activation::sigmoid: return y * (T(1) - y);
    case Activation::scaled_tanh: {
      const T t = y / T(kScaledTanhA);  // tanh(S x)
      return T(kScaledTanhA * kScaledTanhS) * (T(1) - t * t);
    }
    case Activation::relu: return y > T(0) ? T(1) : T(0);
  }
  return T(1);
}

}  // namespace lenet5
