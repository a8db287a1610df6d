// Fast CPU layers, one chunk of samples at a time (fast_cpu.hpp). Matrices are row-major; the
// GEMM arguments are named as blas_cpu.hpp's gemm_cpu takes them (m, n, k, then leading
// dimensions).
#include "layers/fast_cpu.hpp"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/error.hpp"
#include "layers/blas_cpu.hpp"
#include "layers/reference_cpu.hpp"

namespace lenet5 {
namespace {

template <class T>
void activate_in_place(FusedActivation activation, T* y, std::size_t count) {
  if (!activation.enabled) return;
  if constexpr (std::is_same_v<T, float>) {
    // tanh takes a fifth of a step through the C library; this one vectorises.
    if (activation.kind == Activation::tanh) {
      for (std::size_t i = 0; i < count; ++i) y[i] = tanh_fast_cpu(y[i]);
      return;
    }
    if (activation.kind == Activation::scaled_tanh) {
      constexpr float a = float(kScaledTanhA), s = float(kScaledTanhS);
      for (std::size_t i = 0; i < count; ++i) y[i] = a * tanh_fast_cpu(s * y[i]);
      return;
    }
  }
  for (std::size_t i = 0; i < count; ++i) y[i] = activate(activation.kind, y[i]);
}

// The fold of Fig 16.16's unroll (its adjoint): unrolled row (c, p, q), column (h, w) adds into
// X[c, h + p, w + q]. dL_dx_sample must be zeroed first.
template <class T>
void conv_fold_cpu(const ConvShape& s, const T* unrolled, T* dL_dx_sample) {
  const int K = s.k, H_out = s.h_out(), W_out = s.w_out();
  for (int c = 0; c < s.c; ++c)
    for (int p = 0; p < K; ++p)
      for (int q = 0; q < K; ++q) {
        const T* row = unrolled + ((std::size_t(c) * K + p) * K + q) * H_out * W_out;
        for (int h = 0; h < H_out; ++h) {
          T* dx = dL_dx_sample + (std::size_t(c) * s.h + h + p) * s.w + q;
          const T* from = row + std::size_t(h) * W_out;
          for (int w = 0; w < W_out; ++w) dx[w] += from[w];
        }
      }
}

}  // namespace

template <class T>
void conv_forward_fast_cpu(const ConvShape& s, const T* x, const T* weight, const T* bias, T* y,
                           T* unrolled) {
  const int hw = s.h_out() * s.w_out(), ckk = s.c * s.k * s.k;
  for (int n = 0; n < s.n; ++n) {
    conv_unroll_cpu(s, x + std::size_t(n) * s.c * s.h * s.w, unrolled);
    T* y_n = y + std::size_t(n) * s.m * hw;  // (M, H_out, W_out)
    gemm_cpu(Transpose::no, Transpose::no, s.m, hw, ckk, T(1), weight, ckk, unrolled, hw, T(0), y_n,
             hw);
    if (bias)
      for (int m = 0; m < s.m; ++m)
        for (int i = 0; i < hw; ++i) y_n[std::size_t(m) * hw + i] += bias[m];
  }
}

template <class T>
void conv_backward_input_fast_cpu(const ConvShape& s, const T* dL_dy, const T* weight, T* dL_dx,
                                  T* unrolled) {
  const int hw = s.h_out() * s.w_out(), ckk = s.c * s.k * s.k;
  const std::size_t x_per_sample = std::size_t(s.c) * s.h * s.w;
  std::fill(dL_dx, dL_dx + s.n * x_per_sample, T(0));
  for (int n = 0; n < s.n; ++n) {
    // (CKK x HW) = W^T (CKK x M) * dE/dY[n] (M x HW)
    gemm_cpu(Transpose::yes, Transpose::no, ckk, hw, s.m, T(1), weight, ckk,
             dL_dy + std::size_t(n) * s.m * hw, hw, T(0), unrolled, hw);
    conv_fold_cpu(s, unrolled, dL_dx + n * x_per_sample);
  }
}

template <class T>
void conv_backward_weights_fast_cpu(const ConvShape& s, const T* x, const T* dL_dy, T* dL_dweight,
                                    T* dL_dbias, T* unrolled) {
  const int hw = s.h_out() * s.w_out(), ckk = s.c * s.k * s.k;
  for (int n = 0; n < s.n; ++n) {
    conv_unroll_cpu(s, x + std::size_t(n) * s.c * s.h * s.w, unrolled);
    // (M x CKK) (+)= dE/dY[n] (M x HW) * unroll(X[n])^T (HW x CKK); the first sample overwrites.
    gemm_cpu(Transpose::no, Transpose::yes, s.m, ckk, hw, T(1), dL_dy + std::size_t(n) * s.m * hw,
             hw, unrolled, hw, n == 0 ? T(0) : T(1), dL_dweight, ckk);
  }
  if (!dL_dbias) return;
  for (int m = 0; m < s.m; ++m) {
    T sum = T(0);
    for (int n = 0; n < s.n; ++n) {
      const T* map = dL_dy + (std::size_t(n) * s.m + m) * hw;
      for (int i = 0; i < hw; ++i) sum += map[i];
    }
    dL_dbias[m] = sum;
  }
}

template <class T>
void dense_forward_fast_cpu(const FcShape& s, FusedActivation activation, const T* x,
                            const T* weight, const T* bias, T* y) {
  for (int n = 0; n < s.n; ++n) std::copy(bias, bias + s.out, y + std::size_t(n) * s.out);
  // Y (N x out) += X (N x in) * W^T (in x out)
  gemm_cpu(Transpose::no, Transpose::yes, s.n, s.out, s.in, T(1), x, s.in, weight, s.in, T(1), y,
           s.out);
  activate_in_place(activation, y, std::size_t(s.n) * s.out);
}

template <class T>
void dense_backward_input_fast_cpu(const FcShape& s, const T* dL_dz, const T* weight, T* dL_dx) {
  // dE/dX (N x in) = dE/dZ (N x out) * W (out x in)
  gemm_cpu(Transpose::no, Transpose::no, s.n, s.in, s.out, T(1), dL_dz, s.out, weight, s.in, T(0),
           dL_dx, s.in);
}

template <class T>
void dense_backward_weights_fast_cpu(const FcShape& s, const T* x, const T* dL_dz, T* dL_dweight,
                                     T* dL_dbias) {
  // dE/dW (out x in) = dE/dZ^T (out x N) * X (N x in)
  gemm_cpu(Transpose::yes, Transpose::no, s.out, s.in, s.n, T(1), dL_dz, s.out, x, s.in, T(0),
           dL_dweight, s.in);
  if (!dL_dbias) return;
  std::fill(dL_dbias, dL_dbias + s.out, T(0));
  for (int n = 0; n < s.n; ++n)
    for (int o = 0; o < s.out; ++o) dL_dbias[o] += dL_dz[std::size_t(n) * s.out + o];
}

namespace {

template <class T>
void require_coefficients(Subsampling kind, const T* coef) {
  if (kind == Subsampling::trainable && !coef)
    throw Error("internal: trainable subsampling without its coefficients");
}

}  // namespace

// LeNet's subsampling: average (or trainable coefficient times sum) over 2x2 windows that tile the
// map exactly. The loops below then run over whole rows (vectorised) instead of window by window;
// the other cases take the reference's loops.
bool tiles_in_2x2(const PoolShape& s, Subsampling kind) {
  return kind != Subsampling::max && s.k == 2 && s.h % 2 == 0 && s.w % 2 == 0;
}

template <class T>
void subsample_forward_fast_cpu(const PoolShape& s, Subsampling kind, FusedActivation activation,
                                const T* x, const T* bias, T* y, const T* coef) {
  const int H_out = s.h_out(), W_out = s.w_out();
  if (!tiles_in_2x2(s, kind)) {
    subsample_forward_cpu(s, kind, x, bias, y, coef);
  } else {
    require_coefficients(kind, coef);
    for (int n = 0; n < s.n; ++n)
      for (int c = 0; c < s.c; ++c)
        for (int h = 0; h < H_out; ++h) {
          const T* top = x + ((std::size_t(n) * s.c + c) * s.h + 2 * h) * s.w;
          const T* bottom = top + s.w;
          T* out = y + ((std::size_t(n) * s.c + c) * H_out + h) * W_out;
          // The reference's order: the window summed row by row, divided by 4 (or multiplied by
          // the coefficient), then the bias.
          if (kind == Subsampling::trainable) {
            for (int w = 0; w < W_out; ++w)
              out[w] = coef[c] * (top[2 * w] + top[2 * w + 1] + bottom[2 * w] + bottom[2 * w + 1]) +
                       bias[c];
          } else {
            for (int w = 0; w < W_out; ++w)
              out[w] = (top[2 * w] + top[2 * w + 1] + bottom[2 * w] + bottom[2 * w + 1]) / T(4) +
                       bias[c];
          }
        }
  }
  activate_in_place(activation, y, std::size_t(s.n) * s.c * H_out * W_out);
}

template <class T>
void subsample_backward_input_fast_cpu(const PoolShape& s, Subsampling kind, const T* x,
                                       const T* dL_dz, T* dL_dx, const T* coef) {
  if (!tiles_in_2x2(s, kind)) return subsample_backward_input_cpu(s, kind, x, dL_dz, dL_dx, coef);
  require_coefficients(kind, coef);
  const int H_out = s.h_out(), W_out = s.w_out();
  for (int n = 0; n < s.n; ++n)
    for (int c = 0; c < s.c; ++c)
      for (int h = 0; h < H_out; ++h) {
        const T* dz = dL_dz + ((std::size_t(n) * s.c + c) * H_out + h) * W_out;
        T* top = dL_dx + ((std::size_t(n) * s.c + c) * s.h + 2 * h) * s.w;
        T* bottom = top + s.w;
        // Each input of the window gets a quarter, or the coefficient times dE/dZ.
        if (kind == Subsampling::trainable) {
          for (int w = 0; w < W_out; ++w)
            top[2 * w] = top[2 * w + 1] = bottom[2 * w] = bottom[2 * w + 1] = coef[c] * dz[w];
        } else {
          for (int w = 0; w < W_out; ++w)
            top[2 * w] = top[2 * w + 1] = bottom[2 * w] = bottom[2 * w + 1] = dz[w] / T(4);
        }
      }
}

template <class T>
void activation_forward_fast_cpu(Activation kind, const T* x, T* y, std::size_t count) {
  std::copy(x, x + count, y);
  activate_in_place(FusedActivation{true, kind}, y, count);
}

template <class T>
void activation_gradient_fast_cpu(FusedActivation activation, const T* y, const T* dL_dy, T* dL_dz,
                                  std::size_t count) {
  if (!activation.enabled) {
    std::copy(dL_dy, dL_dy + count, dL_dz);
    return;
  }
  for (std::size_t i = 0; i < count; ++i)
    dL_dz[i] = dL_dy[i] * activation_slope(activation.kind, y[i]);
}

template <class T>
void sum_chunks_cpu(const T* partials, int chunks, std::size_t count, T* out) {
  std::copy(partials, partials + count, out);
  for (int c = 1; c < chunks; ++c) {
    const T* partial = partials + std::size_t(c) * count;
    for (std::size_t i = 0; i < count; ++i) out[i] += partial[i];
  }
}

#define LENET5_INSTANTIATE(T)                                                                     \
  template void conv_forward_fast_cpu<T>(const ConvShape&, const T*, const T*, const T*, T*, T*); \
  template void conv_backward_input_fast_cpu<T>(const ConvShape&, const T*, const T*, T*, T*);    \
  template void conv_backward_weights_fast_cpu<T>(const ConvShape&, const T*, const T*, T*, T*,   \
                                                  T*);                                            \
  template void dense_forward_fast_cpu<T>(const FcShape&, FusedActivation, const T*, const T*,    \
                                          const T*, T*);                                          \
  template void dense_backward_input_fast_cpu<T>(const FcShape&, const T*, const T*, T*);         \
  template void dense_backward_weights_fast_cpu<T>(const FcShape&, const T*, const T*, T*, T*);   \
  template void subsample_forward_fast_cpu<T>(const PoolShape&, Subsampling, FusedActivation,     \
                                              const T*, const T*, T*, const T*);                  \
  template void subsample_backward_input_fast_cpu<T>(const PoolShape&, Subsampling, const T*,     \
                                                     const T*, T*, const T*);                     \
  template void activation_forward_fast_cpu<T>(Activation, const T*, T*, std::size_t);            \
  template void activation_gradient_fast_cpu<T>(FusedActivation, const T*, const T*, T*,          \
                                                std::size_t);                                     \
  template void sum_chunks_cpu<T>(const T*, int, std::size_t, T*);
LENET5_INSTANTIATE(float)
LENET5_INSTANTIATE(double)
#undef LENET5_INSTANTIATE

}  // namespace lenet5
