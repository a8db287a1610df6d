// CPU reference convolution: Figs 16.4, 16.8, 16.9, 16.10 (see reference_cpu.hpp for the errata).
#include <cstddef>

#include "layers/reference_cpu.hpp"

namespace lenet5 {

template <class T>
void conv_forward_cpu(const ConvShape& s, const T* x, const T* weight, const T* bias, T* y) {
  const int H_out = s.h_out(), W_out = s.w_out(), K = s.k;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < s.n; ++n)
    for (int m = 0; m < s.m; ++m)              // for each output feature map
      for (int h = 0; h < H_out; ++h)          // for each output element
        for (int w = 0; w < W_out; ++w) {
          T acc = bias ? bias[m] : T(0);
          for (int c = 0; c < s.c; ++c) {      // sum over all input feature maps
            const T* x_c = x + ((std::size_t(n) * s.c + c) * s.h + h) * s.w + w;
            const T* w_mc = weight + (std::size_t(m) * s.c + c) * K * K;
            for (int p = 0; p < K; ++p)        // K x K filter
              for (int q = 0; q < K; ++q) acc += x_c[p * s.w + q] * w_mc[p * K + q];
          }
          y[((std::size_t(n) * s.m + m) * H_out + h) * W_out + w] = acc;
        }
}

template <class T>
void conv_backward_input_cpu(const ConvShape& s, const T* dL_dy, const T* weight, T* dL_dx) {
  const int H_out = s.h_out(), W_out = s.w_out(), K = s.k;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < s.n; ++n) {
    T* dx_n = dL_dx + std::size_t(n) * s.c * s.h * s.w;
    for (std::size_t i = 0; i < std::size_t(s.c) * s.h * s.w; ++i) dx_n[i] = T(0);
    for (int m = 0; m < s.m; ++m)
      for (int h = 0; h < H_out; ++h)
        for (int w = 0; w < W_out; ++w) {
          const T dy = dL_dy[((std::size_t(n) * s.m + m) * H_out + h) * W_out + w];
          for (int c = 0; c < s.c; ++c) {
            T* dx_c = dx_n + (std::size_t(c) * s.h + h) * s.w + w;
            const T* w_mc = weight + (std::size_t(m) * s.c + c) * K * K;
            for (int p = 0; p < K; ++p)
              for (int q = 0; q < K; ++q) dx_c[p * s.w + q] += dy * w_mc[p * K + q];
          }
        }
  }
}

template <class T>
void conv_backward_weights_cpu(const ConvShape& s, const T* x, const T* dL_dy, T* dL_dweight,
                               T* dL_dbias) {
  const int H_out = s.h_out(), W_out = s.w_out(), K = s.k;
#pragma omp parallel for schedule(static)
  for (int m = 0; m < s.m; ++m) {
    for (int c = 0; c < s.c; ++c)
      for (int p = 0; p < K; ++p)
        for (int q = 0; q < K; ++q) {
          T acc = T(0);
          for (int n = 0; n < s.n; ++n)
            for (int h = 0; h < H_out; ++h) {
              const T* x_row = x + ((std::size_t(n) * s.c + c) * s.h + h + p) * s.w + q;
              const T* dy_row = dL_dy + ((std::size_t(n) * s.m + m) * H_out + h) * W_out;
              for (int w = 0; w < W_out; ++w) acc += x_row[w] * dy_row[w];
            }
          dL_dweight[((std::size_t(m) * s.c + c) * K + p) * K + q] = acc;
        }
    if (dL_dbias) {
      T acc = T(0);
      for (int n = 0; n < s.n; ++n) {
        const T* dy_map = dL_dy + (std::size_t(n) * s.m + m) * H_out * W_out;
        for (int i = 0; i < H_out * W_out; ++i) acc += dy_map[i];
      }
      dL_dbias[m] = acc;
    }
  }
}

template <class T>
void conv_unroll_cpu(const ConvShape& s, const T* x_sample, T* x_unroll) {
  const int K = s.k, H_out = s.h_out(), W_out = s.w_out();
  const std::size_t HW = std::size_t(H_out) * W_out;  // the text's H_unroll (hazard H3)
  for (int c = 0; c < s.c; ++c)
    for (int p = 0; p < K; ++p)
      for (int q = 0; q < K; ++q) {
        const std::size_t row = (std::size_t(c) * K + p) * K + q;  // w_unroll: the filter tap
        for (int h = 0; h < H_out; ++h)
          for (int w = 0; w < W_out; ++w)  // h_unroll = h*W_out + w: consecutive addresses
            x_unroll[row * HW + std::size_t(h) * W_out + w] =
                x_sample[(std::size_t(c) * s.h + h + p) * s.w + w + q];
      }
}

#define LENET5_INSTANTIATE(T)                                                                \
  template void conv_unroll_cpu<T>(const ConvShape&, const T*, T*);                          \
  template void conv_forward_cpu<T>(const ConvShape&, const T*, const T*, const T*, T*);     \
  template void conv_backward_input_cpu<T>(const ConvShape&, const T*, const T*, T*);        \
  template void conv_backward_weights_cpu<T>(const ConvShape&, const T*, const T*, T*, T*);
LENET5_INSTANTIATE(float)
LENET5_INSTANTIATE(double)
#undef LENET5_INSTANTIATE

}  // namespace lenet5
