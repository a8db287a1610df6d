// The sizes and NCHW index arithmetic shared by every convolution version's kernels.
#pragma once

#include <cstddef>

#include "layers/reference_cpu.hpp"

namespace lenet5::cuda {

// Every size the linear indexing needs, passed to the kernels by value (erratum E13: the printed
// kernels get only C, W_grid and K and could not address X, W or Y).
struct ConvDims {
  int N, C, H, W, M, K, H_out, W_out;
};

inline ConvDims dims_of(const ConvShape& s) {
  return ConvDims{s.n, s.c, s.h, s.w, s.m, s.k, s.h_out(), s.w_out()};
}

// Linear NCHW offsets (never the chapter's A[i, j, k], which C++ reads as the comma operator,
// hazard H1). n is a std::size_t so that batch offsets never overflow an int.
__device__ __forceinline__ std::size_t x_index(const ConvDims& d, std::size_t n, int c, int h,
                                               int w) {
  return ((n * d.C + c) * d.H + h) * d.W + w;
}
__device__ __forceinline__ std::size_t weight_index(const ConvDims& d, int m, int c, int p, int q) {
  return ((std::size_t(m) * d.C + c) * d.K + p) * d.K + q;
}
__device__ __forceinline__ std::size_t y_index(const ConvDims& d, std::size_t n, int m, int h,
                                               int w) {
  return ((n * d.M + m) * d.H_out + h) * d.W_out + w;
}

}  // namespace lenet5::cuda
