// CPU reference for the element-wise and fully connected layers and the loss.
#include <algorithm>
#include <cmath>
#include <cstddef>

#include "core/activation_math.hpp"
#include "layers/reference_cpu.hpp"

namespace lenet5 {

template <class T>
void activation_forward_cpu(Activation kind, const T* x, T* y, std::size_t count) {
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t i = 0; i < std::ptrdiff_t(count); ++i) y[i] = activate(kind, x[i]);
}

template <class T>
void activation_backward_cpu(Activation kind, const T* y, const T* dL_dy, T* dL_dx,
                             std::size_t count) {
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t i = 0; i < std::ptrdiff_t(count); ++i)
    dL_dx[i] = dL_dy[i] * activation_slope(kind, y[i]);
}

template <class T>
void fc_forward_cpu(const FcShape& s, const T* x, const T* weight, const T* bias, T* y) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < s.n; ++n)
    for (int o = 0; o < s.out; ++o) {
      T acc = bias ? bias[o] : T(0);
      const T* w_row = weight + std::size_t(o) * s.in;
      const T* x_n = x + std::size_t(n) * s.in;
      for (int i = 0; i < s.in; ++i) acc += w_row[i] * x_n[i];
      y[std::size_t(n) * s.out + o] = acc;
    }
}

template <class T>
void fc_backward_input_cpu(const FcShape& s, const T* dL_dy, const T* weight, T* dL_dx) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < s.n; ++n)
    for (int i = 0; i < s.in; ++i) {
      T acc = T(0);
      for (int o = 0; o < s.out; ++o) acc += weight[std::size_t(o) * s.in + i] * dL_dy[std::size_t(n) * s.out + o];
      dL_dx[std::size_t(n) * s.in + i] = acc;
    }
}

template <class T>
void fc_backward_weights_cpu(const FcShape& s, const T* x, const T* dL_dy, T* dL_dweight,
                             T* dL_dbias) {
#pragma omp parallel for schedule(static)
  for (int o = 0; o < s.out; ++o) {
    T* dw_row = dL_dweight + std::size_t(o) * s.in;
    for (int i = 0; i < s.in; ++i) dw_row[i] = T(0);
    T bias_acc = T(0);
    for (int n = 0; n < s.n; ++n) {
      const T dy = dL_dy[std::size_t(n) * s.out + o];
      const T* x_n = x + std::size_t(n) * s.in;
      for (int i = 0; i < s.in; ++i) dw_row[i] += dy * x_n[i];
      bias_acc += dy;
    }
    if (dL_dbias) dL_dbias[o] = bias_acc;
  }
}

template <class T>
LossStats softmax_cross_entropy_cpu(const T* logits, const std::uint8_t* labels, int n,
                                    int classes, T* dL_dlogits, int* predictions) {
  LossStats stats;
  for (int s = 0; s < n; ++s) {
    const T* z = logits + std::size_t(s) * classes;
    int best = 0;
    for (int k = 1; k < classes; ++k)
      if (z[k] > z[best]) best = k;
    // Subtracting the maximum keeps exp() finite; log-sum-exp gives the loss without log(0).
    double sum = 0;
    for (int k = 0; k < classes; ++k) sum += std::exp(double(z[k]) - double(z[best]));
    const double log_sum = std::log(sum) + double(z[best]);
    stats.loss_sum += log_sum - double(z[labels[s]]);
    stats.correct += best == labels[s];
    if (predictions) predictions[s] = best;
    if (dL_dlogits)
      for (int k = 0; k < classes; ++k) {
        const double p = std::exp(double(z[k]) - log_sum);
        dL_dlogits[std::size_t(s) * classes + k] = T((p - (k == labels[s])) / n);
      }
  }
  return stats;
}

template <class T>
void softmax_cross_entropy_curvature_cpu(const T* logits, int n, int classes, T* d2L_dlogits2) {
  for (int s = 0; s < n; ++s) {
    const T* z = logits + std::size_t(s) * classes;
    const T top = *std::max_element(z, z + classes);
    double sum = 0;
    for (int k = 0; k < classes; ++k) sum += std::exp(double(z[k]) - double(top));
    for (int k = 0; k < classes; ++k) {
      const double p = std::exp(double(z[k]) - double(top)) / sum;
      d2L_dlogits2[std::size_t(s) * classes + k] = T(p * (1 - p));
    }
  }
}

#define LENET5_INSTANTIATE(T)                                                                  \
  template void activation_forward_cpu<T>(Activation, const T*, T*, std::size_t);              \
  template void activation_backward_cpu<T>(Activation, const T*, const T*, T*, std::size_t);   \
  template void fc_forward_cpu<T>(const FcShape&, const T*, const T*, const T*, T*);           \
  template void fc_backward_input_cpu<T>(const FcShape&, const T*, const T*, T*);              \
  template void fc_backward_weights_cpu<T>(const FcShape&, const T*, const T*, T*, T*);        \
  template LossStats softmax_cross_entropy_cpu<T>(const T*, const std::uint8_t*, int, int, T*, \
                                                  int*);                                       \
  template void softmax_cross_entropy_curvature_cpu<T>(const T*, int, int, T*);
LENET5_INSTANTIATE(float)
LENET5_INSTANTIATE(double)
#undef LENET5_INSTANTIATE

}  // namespace lenet5
