// The arithmetic of the RBF output layer and of the paper's MAP criterion (LeCun et al. 1998,
// section II.B, equation (9)), shared by the CPU reference and the CUDA kernels so that they
// cannot drift apart. Every sum runs in index order.
#pragma once

#include <cmath>

#include "core/host_device.hpp"

namespace lenet5 {

// y = sum_j (x_j - w_j)^2 over `units` inputs, in T, in index order.
template <class T>
LENET5_HD inline T rbf_distance(const T* x, const float* prototype, int units) {
  T sum = T(0);
  for (int j = 0; j < units; ++j) {
    const T difference = x[j] - T(prototype[j]);
    sum += difference * difference;
  }
  return sum;
}

// The first smallest distance: the nearest prototype's class (ties go to the lower class, as the
// softmax prediction's ties go to the first maximum).
template <class T>
LENET5_HD inline int nearest_class(const T* y, int classes) {
  int best = 0;
  for (int k = 1; k < classes; ++k)
    if (y[k] < y[best]) best = k;
  return best;
}

// log(e^-j + sum_k e^-y_k) in double, by log-sum-exp: with m the smallest of j and the y_k, every
// exponent -(y_k - m) and -(j - m) is at most 0, so nothing overflows and the largest term is 1,
// so the log never sees 0.
template <class T>
LENET5_HD inline double map_log_denominator(const T* y, int classes, double j) {
  double m = j;
  for (int k = 0; k < classes; ++k) m = double(y[k]) < m ? double(y[k]) : m;
  double sum = exp(-(j - m));
  for (int k = 0; k < classes; ++k) sum += exp(-(double(y[k]) - m));
  return log(sum) - m;
}

// p_k = e^-y_k / (e^-j + sum_i e^-y_i): the probability of class k that the criterion implies.
// The ten sum to less than 1; the rest, e^-j / (...), is the criterion's "none of these".
LENET5_HD inline double map_probability(double y_k, double log_denominator) {
  return exp(-y_k - log_denominator);
}

// E = y_D + log(e^-j + sum_i e^-y_i) = -log p_D: the sample's loss (equation (9) without the mean
// over samples, which the callers take).
LENET5_HD inline double map_sample_loss(double y_label, double log_denominator) {
  return y_label + log_denominator;
}

}  // namespace lenet5
