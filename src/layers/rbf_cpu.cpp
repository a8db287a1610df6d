// The RBF output layer and the MAP criterion of LeCun et al. 1998 (reference_cpu.hpp's contract;
// the arithmetic is core/rbf_math.hpp's, shared with the CUDA kernels).
#include <cstddef>

#include "core/rbf_math.hpp"
#include "core/rbf_prototypes.hpp"
#include "layers/reference_cpu.hpp"

namespace lenet5 {

template <class T>
void rbf_forward_cpu(int n, int units, int classes, const T* x, const float* prototypes, T* y) {
#pragma omp parallel for schedule(static)
  for (int s = 0; s < n; ++s)
    for (int i = 0; i < classes; ++i)
      y[std::size_t(s) * classes + i] =
          rbf_distance(x + std::size_t(s) * units, prototypes + std::size_t(i) * units, units);
}

template <class T>
void rbf_backward_input_cpu(int n, int units, int classes, const T* x, const float* prototypes,
                            const T* dL_dy, T* dL_dx) {
#pragma omp parallel for schedule(static)
  for (int s = 0; s < n; ++s)
    for (int j = 0; j < units; ++j) {
      const T x_j = x[std::size_t(s) * units + j];
      T sum = T(0);
      for (int i = 0; i < classes; ++i)
        sum += dL_dy[std::size_t(s) * classes + i] * T(2) *
               (x_j - T(prototypes[std::size_t(i) * units + j]));
      dL_dx[std::size_t(s) * units + j] = sum;
    }
}

template <class T>
LossStats map_loss_cpu(const T* y, const std::uint8_t* labels, int n, int classes, T* dL_dy,
                       int* predictions) {
  LossStats stats;
  for (int s = 0; s < n; ++s) {
    const T* row = y + std::size_t(s) * classes;
    const int label = labels[s];
    const int best = nearest_class(row, classes);
    const double log_denominator = map_log_denominator(row, classes, kMapRejectionConstant);
    stats.loss_sum += map_sample_loss(double(row[label]), log_denominator);
    stats.correct += best == label;
    if (predictions) predictions[s] = best;
    if (dL_dy)
      for (int k = 0; k < classes; ++k) {
        const double p = map_probability(double(row[k]), log_denominator);
        dL_dy[std::size_t(s) * classes + k] = T(((k == label) - p) / n);
      }
  }
  return stats;
}

template <class T>
void map_probabilities_cpu(const T* y, int n, int classes, float* probabilities) {
  for (int s = 0; s < n; ++s) {
    const T* row = y + std::size_t(s) * classes;
    const double log_denominator = map_log_denominator(row, classes, kMapRejectionConstant);
    for (int k = 0; k < classes; ++k)
      probabilities[std::size_t(s) * classes + k] =
          float(map_probability(double(row[k]), log_denominator));
  }
}

template <class T>
LossStats output_loss_cpu(OutputLayer output, const T* outputs, const std::uint8_t* labels, int n,
                          int classes, T* dL_doutputs, int* predictions) {
  if (output == OutputLayer::rbf)
    return map_loss_cpu(outputs, labels, n, classes, dL_doutputs, predictions);
  return softmax_cross_entropy_cpu(outputs, labels, n, classes, dL_doutputs, predictions);
}

#define LENET5_INSTANTIATE(T)                                                                     \
  template void rbf_forward_cpu<T>(int, int, int, const T*, const float*, T*);                    \
  template void rbf_backward_input_cpu<T>(int, int, int, const T*, const float*, const T*, T*);   \
  template LossStats map_loss_cpu<T>(const T*, const std::uint8_t*, int, int, T*, int*);          \
  template void map_probabilities_cpu<T>(const T*, int, int, float*);                             \
  template LossStats output_loss_cpu<T>(OutputLayer, const T*, const std::uint8_t*, int, int, T*, \
                                        int*);
LENET5_INSTANTIATE(float)
LENET5_INSTANTIATE(double)
#undef LENET5_INSTANTIATE

}  // namespace lenet5
