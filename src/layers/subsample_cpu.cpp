// CPU reference subsampling (Fig 16.5, corrected; Exercise 1's max variant and backward pass;
// LeCun et al. 1998's trainable coefficient).
#include <cstddef>

#include "core/error.hpp"
#include "layers/reference_cpu.hpp"

namespace lenet5 {
namespace {

// Row-major index (p*K + q) of the first maximum of the K x K window whose top-left is `window`.
template <class T>
int first_max_in_window(const T* window, int row_stride, int K) {
  int best = 0;
  for (int p = 0; p < K; ++p)
    for (int q = 0; q < K; ++q)
      if (window[p * row_stride + q] > window[(best / K) * row_stride + best % K]) best = p * K + q;
  return best;
}

// The K x K window whose top-left is `window`, summed row by row.
template <class T>
T window_sum(const T* window, int row_stride, int K) {
  T sum = T(0);
  for (int p = 0; p < K; ++p)
    for (int q = 0; q < K; ++q) sum += window[p * row_stride + q];
  return sum;
}

template <class T>
void require_coefficients(Subsampling kind, const T* coef) {
  if (kind == Subsampling::trainable && !coef)
    throw Error("internal: trainable subsampling without its coefficients");
}

}  // namespace

template <class T>
void subsample_forward_cpu(const PoolShape& s, Subsampling kind, const T* x, const T* bias, T* y,
                           const T* coef) {
  require_coefficients(kind, coef);
  const int H_out = s.h_out(), W_out = s.w_out(), K = s.k;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < s.n; ++n)
    for (int c = 0; c < s.c; ++c)
      for (int h = 0; h < H_out; ++h)
        for (int w = 0; w < W_out; ++w) {
          const T* window = x + ((std::size_t(n) * s.c + c) * s.h + K * h) * s.w + K * w;
          T pooled;
          if (kind == Subsampling::max) {
            const int best = first_max_in_window(window, s.w, K);
            pooled = window[(best / K) * s.w + best % K];
          } else if (kind == Subsampling::trainable) {
            pooled = coef[c] * window_sum(window, s.w, K);
          } else {
            pooled = window_sum(window, s.w, K) / T(K * K);
          }
          y[((std::size_t(n) * s.c + c) * H_out + h) * W_out + w] = pooled + bias[c];
        }
}

template <class T>
void subsample_backward_input_cpu(const PoolShape& s, Subsampling kind, const T* x, const T* dL_dy,
                                  T* dL_dx, const T* coef) {
  require_coefficients(kind, coef);
  const int H_out = s.h_out(), W_out = s.w_out(), K = s.k;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < s.n; ++n)
    for (int c = 0; c < s.c; ++c) {
      T* dx_map = dL_dx + (std::size_t(n) * s.c + c) * s.h * s.w;
      // Rows and columns beyond the last full window (odd sizes) get no gradient.
      for (int i = 0; i < s.h * s.w; ++i) dx_map[i] = T(0);
      for (int h = 0; h < H_out; ++h)
        for (int w = 0; w < W_out; ++w) {
          const T dy = dL_dy[((std::size_t(n) * s.c + c) * H_out + h) * W_out + w];
          T* dx_window = dx_map + (K * h) * s.w + K * w;
          if (kind == Subsampling::max) {
            const T* window = x + ((std::size_t(n) * s.c + c) * s.h + K * h) * s.w + K * w;
            const int best = first_max_in_window(window, s.w, K);
            dx_window[(best / K) * s.w + best % K] = dy;
          } else {
            const T share = kind == Subsampling::trainable ? coef[c] * dy : dy / T(K * K);
            for (int p = 0; p < K; ++p)
              for (int q = 0; q < K; ++q) dx_window[p * s.w + q] = share;
          }
        }
    }
}

template <class T>
void subsample_backward_bias_cpu(const PoolShape& s, const T* dL_dy, T* dL_dbias) {
  const int per_map = s.h_out() * s.w_out();
  for (int c = 0; c < s.c; ++c) {
    T acc = T(0);
    for (int n = 0; n < s.n; ++n) {
      const T* dy_map = dL_dy + (std::size_t(n) * s.c + c) * per_map;
      for (int i = 0; i < per_map; ++i) acc += dy_map[i];
    }
    dL_dbias[c] = acc;
  }
}

template <class T>
void subsample_backward_coef_cpu(const PoolShape& s, const T* x, const T* dL_dy, T* dL_dcoef) {
  const int H_out = s.h_out(), W_out = s.w_out(), K = s.k;
  for (int c = 0; c < s.c; ++c) {
    T acc = T(0);
    for (int n = 0; n < s.n; ++n) {
      const T* x_map = x + (std::size_t(n) * s.c + c) * s.h * s.w;
      const T* dy_map = dL_dy + (std::size_t(n) * s.c + c) * H_out * W_out;
      for (int h = 0; h < H_out; ++h)
        for (int w = 0; w < W_out; ++w)
          acc += dy_map[h * W_out + w] * window_sum(x_map + (K * h) * s.w + K * w, s.w, K);
    }
    dL_dcoef[c] = acc;
  }
}

#define LENET5_INSTANTIATE(T)                                                                      \
  template void subsample_forward_cpu<T>(const PoolShape&, Subsampling, const T*, const T*, T*,    \
                                         const T*);                                                \
  template void subsample_backward_input_cpu<T>(const PoolShape&, Subsampling, const T*, const T*, \
                                                T*, const T*);                                     \
  template void subsample_backward_bias_cpu<T>(const PoolShape&, const T*, T*);                    \
  template void subsample_backward_coef_cpu<T>(const PoolShape&, const T*, const T*, T*);
LENET5_INSTANTIATE(float)
LENET5_INSTANTIATE(double)
#undef LENET5_INSTANTIATE

}  // namespace lenet5
