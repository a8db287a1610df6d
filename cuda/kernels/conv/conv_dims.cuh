// The sizes and NCHW index arithmetic shared by every convolution version's kernels. Host code may
// include it too (the index functions are __host__ __device__ under nvcc, plain inline functions
// under a host compiler): the layout exercise's sector model and tests use the same arithmetic.
#pragma once

#include <cstddef>
#include <type_traits>

#include "core/shapes.hpp"

// __host__ __device__ inline under nvcc; inline for a host compiler, which knows neither keyword.
#if defined(__CUDACC__)
#define LENET5_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define LENET5_HOST_DEVICE inline
#endif

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
LENET5_HOST_DEVICE std::size_t x_index(const ConvDims& d, std::size_t n, int c, int h, int w) {
  return ((n * d.C + c) * d.H + h) * d.W + w;
}
LENET5_HOST_DEVICE std::size_t weight_index(const ConvDims& d, int m, int c, int p, int q) {
  return ((std::size_t(m) * d.C + c) * d.K + p) * d.K + q;
}
LENET5_HOST_DEVICE std::size_t y_index(const ConvDims& d, std::size_t n, int m, int h, int w) {
  return ((n * d.M + m) * d.H_out + h) * d.W_out + w;
}

// Calls launch(std::integral_constant<int, KT>{}) with KT = 5 when K is 5, KT = 0 otherwise: the
// kernels templated on KT unroll their p, q loops for LeNet-5's 5x5 filters and read K from
// ConvDims for any other size (versions 2 and 5).
template <class Launch>
void with_filter_size(int K, Launch&& launch) {
  if (K == 5)
    launch(std::integral_constant<int, 5>{});
  else
    launch(std::integral_constant<int, 0>{});
}

#if defined(__CUDACC__)
// The filter taps (p, q) whose output (h - p, w - q) lies inside the H_out x W_out map, for input
// element (h, w): p in [p_begin, p_end), q in [q_begin, q_end). They are the terms that element
// receives in the gather form of the input gradient (versions 1 and 3), visited in the order of
// a p, q loop that skips the outputs outside the map.
struct TapsReaching {
  int p_begin, p_end, q_begin, q_end;
};

__device__ __forceinline__ TapsReaching taps_reaching(const ConvDims& d, int h, int w) {
  return {max(0, h - d.H_out + 1), min(d.K, h + 1), max(0, w - d.W_out + 1), min(d.K, w + 1)};
}
#endif

}  // namespace lenet5::cuda
