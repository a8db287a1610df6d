// Subsampling kernels, version 1: K x K windows with stride K, average (Fig 16.5, corrected), max
// (Exercise 1) or trainable (LeCun et al. 1998, section II.B: a per-map coefficient times the
// window's sum), plus a per-map bias; and their backward passes. The activation that Fig 16.5
// applies is a layer of its own here, or fused in (the fast kernel set).
//
// Layout NCHW, float32:
//   x (N, C, H, W)          S2: (N, 6, 28, 28)  S4: (N, 16, 10, 10)
//   y (N, C, H/K, W/K)      S2: (N, 6, 14, 14)  S4: (N, 16, 5, 5)
//   bias (C), coef (C): trainable subsampling's coefficients
// Rows and columns beyond the last full window (odd H or W) are ignored by the forward pass and get
// zero gradient. Every result matches subsample_*_cpu (layers/subsample_cpu.cpp) exactly: the same
// operations in the same order, and no atomics; tests/gpu/test_subsample_kernels.cpp checks it.
#include <algorithm>
#include <cstddef>

#include "core/activation_math.hpp"
#include "cuda/kernels/block_reduce.cuh"
#include "cuda/kernels/element_grid.cuh"
#include "cuda/kernels/map_element.cuh"
#include "cuda/kernels/subsample.cuh"
#include "cuda/runtime/check.hpp"

namespace lenet5::cuda {
namespace {

struct PoolDims {
  int N, C, H, W, K, H_out, W_out;
};

PoolDims dims_of(const PoolShape& s) {
  return PoolDims{s.n, s.c, s.h, s.w, s.k, s.h_out(), s.w_out()};
}

constexpr int kReduceThreads = 256;  // reduction kernel: a power of two (tree below)

// The K x K window whose top-left element is `window` (rows `row_stride` apart), summed row by
// row: the CPU's order, so integer inputs give identical sums.
__device__ float window_sum(const float* window, int row_stride, int K) {
  float sum = 0.0f;
  for (int p = 0; p < K; ++p)
    for (int q = 0; q < K; ++q) sum += window[p * row_stride + q];
  return sum;
}

// Row-major index p*K + q of the first maximum of the K x K window whose top-left element is
// `window` (rows `row_stride` apart): the same strict '>' scan as the CPU's first_max_in_window, so
// ties go to the earliest element in both, and forward and backward agree on the winner.
__device__ int first_max_in_window(const float* window, int row_stride, int K) {
  int best = 0;
  float best_value = window[0];
  for (int p = 0; p < K; ++p)
    for (int q = 0; q < K; ++q) {
      const float v = window[p * row_stride + q];
      if (v > best_value) {
        best = p * K + q;
        best_value = v;
      }
    }
  return best;
}

// S[n,c,h,w] = pool_{p,q} X[n,c,K*h+p,K*w+q] + bias[c]; pool = average (sum over p, then q, divided
// by K*K: the CPU's order, so integer inputs give identical results), the first maximum, or
// coef[c] times the sum (rounded before the bias is added, __fmul_rn: the CPU has no fused
// multiply-add, and a contracted fmaf would round once instead of twice).
// One thread per output element, 1-D grid-stride loop over i = ((n*C + c)*H_out + h)*W_out + w
// (S2: N*1,176 threads).
// dL/dz at output element i: dL/dy itself, or with a fused activation dL/dy * f'(z) through y.
__device__ __forceinline__ float pre_activation_gradient(FusedActivation activation,
                                                        const float* dL_dy, const float* y,
                                                        std::size_t i) {
  return activation.enabled ? dL_dy[i] * activation_slope(activation.kind, y[i]) : dL_dy[i];
}

__global__ void subsample_forward_kernel1(PoolDims d, Subsampling kind, const float* __restrict__ x,
                                          const float* __restrict__ bias, float* __restrict__ y,
                                          FusedActivation activation,
                                          const float* __restrict__ coef) {
  const std::size_t count = std::size_t(d.N) * d.C * d.H_out * d.W_out;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const auto [w, h, map] = map_element(i, d.H_out, d.W_out);
    const int c = int(map % d.C);
    const float* window = x + (map * d.H + std::size_t(d.K) * h) * d.W + std::size_t(d.K) * w;
    float pooled;
    if (kind == Subsampling::max) {
      const int best = first_max_in_window(window, d.W, d.K);
      pooled = window[(best / d.K) * d.W + best % d.K];
    } else if (kind == Subsampling::trainable) {
      pooled = __fmul_rn(coef[c], window_sum(window, d.W, d.K));
    } else {
      pooled = window_sum(window, d.W, d.K) / float(d.K * d.K);
    }
    const float z = pooled + bias[c];
    y[i] = activation.enabled ? activate(activation.kind, z) : z;
  }
}

// dL/dX[n,c,h,w] for the window (h/K, w/K) that holds the element: average: dL/dS / (K*K);
// max: dL/dS if the element is its window's first maximum, else 0; trainable: coef[c] * dL/dS;
// 0 for elements beyond the last
// full window (h >= H_out*K or w >= W_out*K). Gather form: one thread per INPUT element, which
// finds its own window, so every element is written exactly once (no zero-fill pass, no races).
// 1-D grid-stride loop over i = ((n*C + c)*H + h)*W + w (S2: N*4,704 threads).
__global__ void subsample_backward_input_kernel1(
    PoolDims d, Subsampling kind, const float* __restrict__ x, const float* __restrict__ dL_dy,
    float* __restrict__ dL_dx, FusedActivation activation, const float* __restrict__ y,
    const float* __restrict__ coef) {
  const std::size_t count = std::size_t(d.N) * d.C * d.H * d.W;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const auto [w, h, map] = map_element(i, d.H, d.W);
    const int h_out = h / d.K, w_out = w / d.K;
    float grad = 0.0f;
    if (h_out < d.H_out && w_out < d.W_out) {
      const float dy =
          pre_activation_gradient(activation, dL_dy, y, (map * d.H_out + h_out) * d.W_out + w_out);
      if (kind == Subsampling::max) {
        const float* window =
            x + (map * d.H + std::size_t(d.K) * h_out) * d.W + std::size_t(d.K) * w_out;
        const int best = first_max_in_window(window, d.W, d.K);
        const int mine = (h - d.K * h_out) * d.K + (w - d.K * w_out);
        grad = best == mine ? dy : 0.0f;
      } else if (kind == Subsampling::trainable) {
        grad = coef[map % d.C] * dy;
      } else {
        grad = dy / float(d.K * d.K);
      }
    }
    dL_dx[i] = grad;
  }
}

// dL/dbias[c] = sum_n sum_h sum_w dL/dS[n,c,h,w]. One block of kReduceThreads threads per channel
// (blockIdx.x = c; S2: 6 blocks, S4: 16). Thread t sums the terms t, t + 256, ... of the
// N*H_out*W_out terms (term j = n*H_out*W_out + (h*W_out + w)), then block_sum adds the partial
// sums in a fixed tree: bit-identical from run to run. Overwrites.
__global__ void subsample_backward_bias_kernel1(PoolDims d, const float* __restrict__ dL_dy,
                                                float* __restrict__ dL_dbias,
                                                FusedActivation activation,
                                                const float* __restrict__ y) {
  const int c = blockIdx.x;
  const int per_map = d.H_out * d.W_out;
  const int n_terms = d.N * per_map;
  float acc = 0.0f;
  for (int j = threadIdx.x; j < n_terms; j += kReduceThreads) {
    const int n = j / per_map;
    acc += pre_activation_gradient(activation, dL_dy, y,
                                   (std::size_t(n) * d.C + c) * per_map + j % per_map);
  }
  const float sum = block_sum<kReduceThreads>(acc);
  if (threadIdx.x == 0) dL_dbias[c] = sum;
}

// dL/dcoef[c] = sum_n sum_h sum_w dL/dS[n,c,h,w] * (the sum of the window under S[n,c,h,w]): the
// bias kernel's reduction (one block of kReduceThreads per channel, term j = n*H_out*W_out +
// (h*W_out + w), fixed tree), each term weighted by its window's sum. Overwrites.
__global__ void subsample_backward_coef_kernel1(PoolDims d, const float* __restrict__ x,
                                                const float* __restrict__ dL_dy,
                                                float* __restrict__ dL_dcoef,
                                                FusedActivation activation,
                                                const float* __restrict__ y) {
  const int c = blockIdx.x;
  const int per_map = d.H_out * d.W_out;
  const int n_terms = d.N * per_map;
  float acc = 0.0f;
  for (int j = threadIdx.x; j < n_terms; j += kReduceThreads) {
    const int n = j / per_map, h = (j % per_map) / d.W_out, w = j % d.W_out;
    const std::size_t map = std::size_t(n) * d.C + c;
    const float* window = x + (map * d.H + std::size_t(d.K) * h) * d.W + std::size_t(d.K) * w;
    acc += pre_activation_gradient(activation, dL_dy, y, map * per_map + j % per_map) *
           window_sum(window, d.W, d.K);
  }
  const float sum = block_sum<kReduceThreads>(acc);
  if (threadIdx.x == 0) dL_dcoef[c] = sum;
}

// Trainable subsampling reads coefficients that no other kind has.
void require_coefficients(Subsampling kind, const float* coef) {
  if (kind == Subsampling::trainable && !coef)
    throw Error("internal: trainable subsampling without its coefficients");
}

}  // namespace

// ---- launchers ----------------------------------------------------------------------------------

void subsample_forward(const PoolShape& s, Subsampling kind, const float* x, const float* bias,
                       float* y, cudaStream_t stream, FusedActivation activation,
                       const float* coef) {
  require_coefficients(kind, coef);
  const PoolDims d = dims_of(s);
  const std::size_t count = std::size_t(d.N) * d.C * d.H_out * d.W_out;
  if (count == 0) return;
  subsample_forward_kernel1<<<blocks_for(count), kThreads, 0, stream>>>(d, kind, x, bias, y,
                                                                        activation, coef);
  CUDA_CHECK_LAUNCH();
}

void subsample_backward_input(const PoolShape& s, Subsampling kind, const float* x,
                              const float* dL_dy, float* dL_dx, cudaStream_t stream,
                              FusedActivation activation, const float* y, const float* coef) {
  if (activation.enabled && !y) throw Error("internal: a fused activation needs the output y");
  require_coefficients(kind, coef);
  const PoolDims d = dims_of(s);
  const std::size_t count = std::size_t(d.N) * d.C * d.H * d.W;
  if (count == 0) return;
  subsample_backward_input_kernel1<<<blocks_for(count), kThreads, 0, stream>>>(
      d, kind, x, dL_dy, dL_dx, activation, y, coef);
  CUDA_CHECK_LAUNCH();
}

void subsample_backward_bias(const PoolShape& s, const float* dL_dy, float* dL_dbias,
                             cudaStream_t stream, FusedActivation activation, const float* y) {
  if (activation.enabled && !y) throw Error("internal: a fused activation needs the output y");
  const PoolDims d = dims_of(s);
  if (d.C <= 0) return;
  subsample_backward_bias_kernel1<<<d.C, kReduceThreads, 0, stream>>>(d, dL_dy, dL_dbias,
                                                                     activation, y);
  CUDA_CHECK_LAUNCH();
}

void subsample_backward_coef(const PoolShape& s, const float* x, const float* dL_dy,
                             float* dL_dcoef, cudaStream_t stream, FusedActivation activation,
                             const float* y) {
  if (activation.enabled && !y) throw Error("internal: a fused activation needs the output y");
  const PoolDims d = dims_of(s);
  if (d.C <= 0) return;
  subsample_backward_coef_kernel1<<<d.C, kReduceThreads, 0, stream>>>(d, x, dL_dy, dL_dcoef,
                                                                      activation, y);
  CUDA_CHECK_LAUNCH();
}

}  // namespace lenet5::cuda
