// Convolution version 5, "staged": the contracts of version 1 (direct.cu), with each block
// copying one sample's operands into shared memory and computing from there; its weight gradient
// takes two deterministic launches (per-sample partial sums into a scratch buffer, then a sum over
// the batch in order n).
//
// Layout NCHW, float32, valid stride-1 cross-correlation (textbook-figures.md §0.2):
//   x      (N, C, H, W)          C1: (N, 1, 32, 32)  C3: (N, 6, 14, 14)  C5: (N, 16, 5, 5)
//   weight (M, C, K, K)          C1: (6, 1, 5, 5)    C3: (16, 6, 5, 5)   C5: (120, 16, 5, 5)
//   y      (N, M, H_out, W_out)  C1: (N, 6, 28, 28)  C3: (N, 16, 10, 10) C5: (N, 120, 1, 1)
// with H_out = H - K + 1, W_out = W - K + 1.
//
// Every sum runs in a fixed order without atomics, so every result is bit-identical from run to
// run. The CPU references are conv_*_cpu in layers/conv_cpu.cpp; tests/gpu/test_conv_kernels.cpp
// checks every version against them (exactly on small integers).
#include <algorithm>
#include <cstddef>
#include <memory>

#include "core/error.hpp"
#include "cuda/kernels/conv/conv.cuh"
#include "cuda/kernels/conv/conv_dims.cuh"
#include "cuda/kernels/conv/registry.hpp"
#include "cuda/kernels/conv/sum_partials.cuh"
#include "cuda/kernels/element_grid.cuh"
#include "cuda/runtime/buffer.hpp"
#include "cuda/runtime/check.hpp"

namespace lenet5::cuda {
namespace {

// ==== version 5, "staged": one block per sample (and map group or channel), operands in shared ===
//
// At LeNet's sizes a whole sample fits in shared memory (C1's x[n] is 4 KiB, C3's 4.6 KiB), and
// every element of it is used by K*K*M outputs (C3: 400) which version 1 reads from global
// memory each time. Version 5 copies the operands of one sample into shared memory with coalesced
// loads, synchronises once, and computes from there. Each launcher falls back to version 1 where
// the staged operands would exceed kMaxShared5 (48 KiB, the limit without an opt-in attribute),
// which no LeNet layer does. Every thread runs the staging loop and reaches the barrier: nothing
// returns early. Blocks have kThreads threads; the loops stride by blockDim.x.

constexpr std::size_t kMaxShared5 = 48 * 1024;  // bytes of dynamic shared memory per block
constexpr int kMaxFilter5 = 7;  // weight gradient: K = 1..7 instantiated, larger K -> version 1

// Row stride of a padded shared-memory tile: odd, so that 32 threads reading the same column of
// 32 consecutive rows hit 32 different banks (C1's 32-wide rows would all fall on one bank).
constexpr int odd_stride5(int width) {
  return width | 1;
}

// ---- version 5: forward -------------------------------------------------------------------------

// Y[n,m,h,w] = bias[m] + sum_c sum_p sum_q X[n,c,h+p,w+q] * W[m,c,p,q], as version 1.
// Grid (N, ceil(M / maps_per_block)); block (n, g) handles maps m0 .. m0 + maps - 1 with
// m0 = g*maps_per_block and maps = min(maps_per_block, M - m0) (the last group may be short).
// Shared memory:  xs = x[n]                    (C, H, W)        C1: 1,024 floats  C3: 1,176
//                 ws = weight[m0 .. m0+maps)   (maps, C, K, K)  C1: 1*25          C3: 2*150
// Thread t then computes the outputs i = t, t + blockDim.x, ... of the block's maps*H_out*W_out,
// i = (mm*H_out + h)*W_out + w for map m0 + mm (C1: 784, C3: 2*100).
// Deterministic: each output has one owner thread, and its sum runs bias[m] (or 0), then c, p, q,
// the CPU reference's order. KT is the filter size when known at compile time (5 for LeNet: the
// p, q loops then unroll completely), 0 for any other size (read from d.K).
template <int KT>
__global__ void conv_forward_kernel5(ConvDims d, int maps_per_block, const float* __restrict__ x,
                                     const float* __restrict__ weight,
                                     const float* __restrict__ bias, float* __restrict__ y) {
  const int K = KT > 0 ? KT : d.K;
  extern __shared__ float shared5[];
  const int n = blockIdx.x;
  const int m0 = int(blockIdx.y) * maps_per_block;
  const int maps = std::min(maps_per_block, d.M - m0);
  const int x_floats = d.C * d.H * d.W;
  const int taps = d.C * K * K;  // weights per output map
  float* xs = shared5;
  float* ws = shared5 + x_floats;

  const float* x_n = x + std::size_t(n) * x_floats;
  for (int i = threadIdx.x; i < x_floats; i += blockDim.x) xs[i] = x_n[i];
  const float* weight_m0 = weight + std::size_t(m0) * taps;  // maps m0.. are contiguous
  for (int i = threadIdx.x; i < maps * taps; i += blockDim.x) ws[i] = weight_m0[i];
  __syncthreads();

  const int per_map = d.H_out * d.W_out;
  for (int i = threadIdx.x; i < maps * per_map; i += blockDim.x) {
    const int mm = i / per_map;
    const int h = i % per_map / d.W_out;
    const int w = i % d.W_out;
    float acc = bias ? bias[m0 + mm] : 0.0f;
    for (int c = 0; c < d.C; ++c) {
      const float* x_c = xs + (c * d.H + h) * d.W + w;  // X[n,c,h,w]
      const float* w_c = ws + (mm * d.C + c) * K * K;
#pragma unroll
      for (int p = 0; p < K; ++p)
#pragma unroll
        for (int q = 0; q < K; ++q) acc += x_c[p * d.W + q] * w_c[p * K + q];
    }
    y[y_index(d, n, m0 + mm, h, w)] = acc;
  }
}

// ---- version 5: input gradient ------------------------------------------------------------------

// dL/dX[n,c,h,w] = sum_m sum_p sum_q dL/dY[n,m,h-p,w-q] * W[m,c,p,q] over 0 <= h-p < H_out,
// 0 <= w-q < W_out: version 1's gather form. Grid (N, C); block (n, c) stages
//   dys = dL_dy[n] with a border of K-1 zeros on every side and one more zero column on the right
//         (M, H_out + 2(K-1), W_out + 2(K-1) + 1)   C1: 6*36*37 = 7,992 floats  C3: 16*18*19 = 5,472
//   ws  = W[:, c]  (M, K, K)                        C1: 150                     C3: 400
// Thanks to the zero border every (m, p, q) term can be read without a bounds test: the terms
// outside dL/dY read +0 and add nothing (x + 0 = x exactly), so each sum equals version 1's, term
// for term in its order m, p, q. Deterministic: one owner thread per element. Overwrites dL/dX.
// With KT = 5 (LeNet) the p, q loops unroll and each thread computes two horizontally adjacent
// elements (w0, w0 + 1) of a row: per (m, p) it reads the filter row once and the K + 1 values
// dL/dY[.., w0 - K + 1 .. w0 + 1] that both outputs need, about half the shared-memory loads of
// one element per thread, which is what bounds this kernel (C3: 7 pairs per row, 98 per block).
// The extra zero column is what the second element of the last pair of an odd-width row reads.
// Otherwise (KT = 0) thread t computes the elements i = t, t + blockDim.x, ... (i = h*W + w).
template <int KT>
__global__ void conv_backward_input_kernel5(ConvDims d, const float* __restrict__ dL_dy,
                                            const float* __restrict__ weight,
                                            float* __restrict__ dL_dx) {
  extern __shared__ float shared5[];
  const int K = KT > 0 ? KT : d.K;
  const int n = blockIdx.x;
  const int c = blockIdx.y;
  const int KK = K * K;
  const int padded_h = d.H_out + 2 * (K - 1), padded_w = d.W_out + 2 * (K - 1) + 1;
  const int padded_floats = d.M * padded_h * padded_w;
  float* dys = shared5;
  float* ws = shared5 + padded_floats;

  // Zero the whole padded block, then copy dL/dY[n] into its interior (contiguous, coalesced
  // reads): cheaper than deciding inside/outside for every padded element.
  for (int i = threadIdx.x; i < padded_floats; i += blockDim.x) dys[i] = 0.0f;
  __syncthreads();
  const int per_map = d.H_out * d.W_out;
  const float* dy_n = dL_dy + std::size_t(n) * d.M * per_map;
#pragma unroll 4
  for (int i = threadIdx.x; i < d.M * per_map; i += blockDim.x) {
    const int m = i / per_map, row = i % per_map / d.W_out, col = i % d.W_out;
    dys[(m * padded_h + row + K - 1) * padded_w + col + K - 1] = dy_n[i];
  }
  for (int i = threadIdx.x; i < d.M * KK; i += blockDim.x)  // i = m*K*K + p*K + q
    ws[i] = weight[(std::size_t(i / KK) * d.C + c) * KK + i % KK];
  __syncthreads();

  if constexpr (KT > 0) {
    const int pairs = (d.W + 1) / 2;
    for (int i = threadIdx.x; i < d.H * pairs; i += blockDim.x) {
      const int h = i / pairs, w0 = 2 * (i % pairs);
      float acc0 = 0.0f, acc1 = 0.0f;
      for (int m = 0; m < d.M; ++m) {
        const float* w_m = ws + m * KK;
#pragma unroll
        for (int p = 0; p < KT; ++p) {
          // Padded row h - p + K - 1 holds dL/dY[n,m,h-p,:]; padded column w - q + K - 1 holds
          // column w - q, so v[j] = padded column w0 + j gives tap q of w0 at j = K-1-q and of
          // w0 + 1 at j = K-q.
          const float* row = dys + (m * padded_h + h - p + KT - 1) * padded_w + w0;
          float v[KT + 1];
#pragma unroll
          for (int j = 0; j <= KT; ++j) v[j] = row[j];
#pragma unroll
          for (int q = 0; q < KT; ++q) {
            const float tap = w_m[p * KT + q];
            acc0 += v[KT - 1 - q] * tap;
            acc1 += v[KT - q] * tap;
          }
        }
      }
      dL_dx[x_index(d, n, c, h, w0)] = acc0;
      if (w0 + 1 < d.W) dL_dx[x_index(d, n, c, h, w0 + 1)] = acc1;
    }
  } else {
    for (int i = threadIdx.x; i < d.H * d.W; i += blockDim.x) {
      const int h = i / d.W;
      const int w = i % d.W;
      float acc = 0.0f;
      for (int m = 0; m < d.M; ++m) {
        // padded row of dL/dY[n,m,h-p,:] is h - p + K - 1; column of w - q is w - q + K - 1
        const float* dy_m = dys + (m * padded_h + h + K - 1) * padded_w + w + K - 1;
        const float* w_m = ws + m * KK;
        for (int p = 0; p < K; ++p)
          for (int q = 0; q < K; ++q) acc += dy_m[-p * padded_w - q] * w_m[p * K + q];
      }
      dL_dx[x_index(d, n, c, h, w)] = acc;
    }
  }
}

// ---- version 5: weight and bias gradients, phase 1 (per-sample partial sums) --------------------

// partial_weight[n,m,c,p,q] = sum_h sum_w X[n,c,h+p,w+q] * dL/dY[n,m,h,w]   (N, M, C, K, K)
// partial_bias[n,m]         = sum_h sum_w dL/dY[n,m,h,w]                     (N, M), if not null
// Grid (N, M): block (n, m) loops over all c, so that C3 launches 64*16 = 1,024 blocks of
// 150 weights each rather than 6,144 blocks of 25 (and C1, with C = 1, 384 blocks). It stages
//   xs  = x[n]             (C, H, W), rows padded to odd_stride5(W)      C1: 32*33  C3: 84*15
//   dys = dL_dy[n,m]       (H_out, W_out), rows padded to odd_stride5(W_out)  C1: 28*29  C3: 10*11
// One work unit is one row of terms: unit u = (c*K + p)*H_out + h (C1: 140, C3: 300) sums, for
// q = 0..K-1, the W_out terms X[n,c,h+p,w+q] * dL/dY[n,m,h,w] over w = 0..W_out-1 in order,
// keeping the K values X[n,c,h+p,w..w+K-1] in registers (a window that slides by one each step):
// two shared loads per K multiply-adds. When the bias is asked for, H_out more units (u - C*K*H_out
// = h) sum dL/dY[n,m,h,:]. Unit results go to rows (H_out, C*K*K + 1) in shared memory (column
// C*K*K for the bias; C1: 28*26 floats, C3: 10*151); after a barrier, thread j adds column j over
// h = 0..H_out-1 in order and writes it to the scratch. Deterministic: every sum has a fixed owner
// and order (w, then h), whatever the thread count. K is a template parameter so that the window
// and the K accumulators live in registers.
template <int K>
__global__ void conv_backward_weights_kernel5(ConvDims d, const float* __restrict__ x,
                                              const float* __restrict__ dL_dy,
                                              float* __restrict__ partial_weight,
                                              float* __restrict__ partial_bias) {
  extern __shared__ float shared5[];
  const int n = blockIdx.x;
  const int m = blockIdx.y;
  const int x_stride = odd_stride5(d.W), dy_stride = odd_stride5(d.W_out);
  const int taps = d.C * K * K;  // weights of map m
  const int row_width = taps + 1;
  float* xs = shared5;                      // (C*H, x_stride)
  float* dys = xs + d.C * d.H * x_stride;   // (H_out, dy_stride)
  float* rows = dys + d.H_out * dy_stride;  // (H_out, row_width)

  const float* x_n = x + std::size_t(n) * d.C * d.H * d.W;
  for (int i = threadIdx.x; i < d.C * d.H * d.W; i += blockDim.x)
    xs[i / d.W * x_stride + i % d.W] = x_n[i];
  const float* dy_nm = dL_dy + (std::size_t(n) * d.M + m) * d.H_out * d.W_out;
  for (int i = threadIdx.x; i < d.H_out * d.W_out; i += blockDim.x)
    dys[i / d.W_out * dy_stride + i % d.W_out] = dy_nm[i];
  __syncthreads();

  const int weight_units = d.C * K * d.H_out;
  const int units = weight_units + (partial_bias ? d.H_out : 0);
  for (int u = threadIdx.x; u < units; u += blockDim.x) {
    if (u < weight_units) {
      const int h = u % d.H_out;
      const int cp = u / d.H_out;                                        // c*K + p
      const float* x_row = xs + (cp / K * d.H + h + cp % K) * x_stride;  // X[n,c,h+p,:]
      const float* dy_row = dys + h * dy_stride;
      float acc[K], window[K];
#pragma unroll
      for (int q = 0; q < K; ++q) acc[q] = 0.0f;
#pragma unroll
      for (int q = 0; q + 1 < K; ++q) window[q] = x_row[q];
      for (int w = 0; w < d.W_out; ++w) {
        window[K - 1] = x_row[w + K - 1];  // window[q] = X[n,c,h+p,w+q]
        const float g = dy_row[w];
#pragma unroll
        for (int q = 0; q < K; ++q) acc[q] += window[q] * g;
#pragma unroll
        for (int q = 0; q + 1 < K; ++q) window[q] = window[q + 1];
      }
#pragma unroll
      for (int q = 0; q < K; ++q) rows[h * row_width + cp * K + q] = acc[q];
    } else {
      const int h = u - weight_units;
      float acc = 0.0f;
      for (int w = 0; w < d.W_out; ++w) acc += dys[h * dy_stride + w];
      rows[h * row_width + taps] = acc;
    }
  }
  __syncthreads();

  const int sums = taps + (partial_bias ? 1 : 0);
  for (int j = threadIdx.x; j < sums; j += blockDim.x) {
    float acc = 0.0f;
    for (int h = 0; h < d.H_out; ++h) acc += rows[h * row_width + j];
    if (j < taps)
      partial_weight[(std::size_t(n) * d.M + m) * taps + j] = acc;
    else
      partial_bias[std::size_t(n) * d.M + m] = acc;
  }
}

}  // namespace

// ---- launchers ----------------------------------------------------------------------------------

// Each computes its shared-memory size from the shape and falls back to
// version 1 where the staged operands would not fit in kMaxShared5 (no LeNet layer at any batch).

void conv_forward5(const ConvShape& s, const float* x, const float* weight, const float* bias,
                   float* y, cudaStream_t stream) {
  const ConvDims d = dims_of(s);
  if (d.N <= 0 || d.M <= 0 || d.H_out <= 0 || d.W_out <= 0) return;  // nothing to write
  const std::size_t x_floats = std::size_t(d.C) * d.H * d.W;
  const std::size_t taps = std::size_t(d.C) * d.K * d.K;
  const std::size_t max_floats = kMaxShared5 / sizeof(float);
  if (taps == 0 || x_floats + taps > max_floats)  // C = 0, or not one map's filters beside x[n]
    return conv_forward1(s, x, weight, bias, y, stream);
  // About kThreads outputs per block: C1 (784 per map) 1 map -> N*6 blocks (384 at N = 64);
  // C3 (100 per map) 2 maps -> N*8 blocks (512); C5 (1 per map) as many maps as fit beside x[n]
  // in shared memory, 29 -> N*5 blocks.
  const int per_map = d.H_out * d.W_out;
  const int by_threads = std::clamp(kThreads / per_map, 1, d.M);
  const int maps_per_block = int(std::min<std::size_t>(by_threads, (max_floats - x_floats) / taps));
  const int groups = (d.M + maps_per_block - 1) / maps_per_block;
  const std::size_t shared = (x_floats + maps_per_block * taps) * sizeof(float);
  // C1: 4,196 bytes, C3: 5,904, C5: 48,000.
  const dim3 grid(unsigned(d.N), unsigned(groups));
  with_filter_size(d.K, [&](auto KT) {
    conv_forward_kernel5<decltype(KT)::value>
        <<<grid, kThreads, shared, stream>>>(d, maps_per_block, x, weight, bias, y);
  });
  CUDA_CHECK_LAUNCH();
}

void conv_backward_input5(const ConvShape& s, const float* dL_dy, const float* weight, float* dL_dx,
                          cudaStream_t stream) {
  const ConvDims d = dims_of(s);
  if (d.N <= 0 || d.C <= 0 || d.H <= 0 || d.W <= 0) return;  // nothing to write
  const std::size_t padded = std::size_t(d.M) * (d.H_out + 2 * (d.K - 1)) *
                             (d.W_out + 2 * (d.K - 1) + 1);
  const std::size_t shared = (padded + std::size_t(d.M) * d.K * d.K) * sizeof(float);
  // Degenerate shapes (no output, so dL/dX = 0) and shapes that do not fit take version 1.
  // C1: 32,568 bytes, C3: 23,488; C5 (55,200) takes version 1.
  if (d.M <= 0 || d.H_out <= 0 || d.W_out <= 0 || shared > kMaxShared5)
    return conv_backward_input1(s, dL_dy, weight, dL_dx, stream);
  const dim3 grid(unsigned(d.N), unsigned(d.C));
  with_filter_size(d.K, [&](auto KT) {
    conv_backward_input_kernel5<decltype(KT)::value>
        <<<grid, kThreads, shared, stream>>>(d, dL_dy, weight, dL_dx);
  });
  CUDA_CHECK_LAUNCH();
}

std::size_t conv_backward_weights5_scratch_floats(const ConvShape& s) {
  if (s.n <= 0 || s.m <= 0) return 0;
  return std::size_t(s.n) * s.m * (std::size_t(s.c) * s.k * s.k + 1);
}

void conv_backward_weights5(const ConvShape& s, const float* x, const float* dL_dy,
                            float* dL_dweight, float* dL_dbias, const float* mask, float* scratch,
                            cudaStream_t stream) {
  using Phase1 = void (*)(ConvDims, const float*, const float*, float*, float*);
  static const Phase1 phase1_for_k[kMaxFilter5 + 1] = {
      nullptr,
      conv_backward_weights_kernel5<1>,
      conv_backward_weights_kernel5<2>,
      conv_backward_weights_kernel5<3>,
      conv_backward_weights_kernel5<4>,
      conv_backward_weights_kernel5<5>,
      conv_backward_weights_kernel5<6>,
      conv_backward_weights_kernel5<7>,
  };
  const ConvDims d = dims_of(s);
  const int n_weights = d.M * d.C * d.K * d.K;
  const int n_bias = dL_dbias ? d.M : 0;
  if (n_weights + n_bias <= 0) return;
  const bool has_terms = d.N > 0 && d.H_out > 0 && d.W_out > 0;
  const std::size_t shared =
      (std::size_t(d.C) * d.H * odd_stride5(d.W) + std::size_t(d.H_out) * odd_stride5(d.W_out) +
       std::size_t(d.H_out) * (std::size_t(d.C) * d.K * d.K + 1)) *
      sizeof(float);
  // C1: 10,384 bytes, C3: 11,520, C5: 3,208.
  if (has_terms && (d.K < 1 || d.K > kMaxFilter5 || shared > kMaxShared5))
    return conv_backward_weights1(s, x, dL_dy, dL_dweight, dL_dbias, mask, stream);

  float* partial_weight = scratch;  // (N, M, C, K, K)
  float* partial_bias = dL_dbias ? scratch + std::size_t(d.N) * n_weights : nullptr;  // (N, M)
  if (has_terms) {
    phase1_for_k[d.K]<<<dim3(unsigned(d.N), unsigned(d.M)), kThreads, shared, stream>>>(
        d, x, dL_dy, partial_weight, partial_bias);
    CUDA_CHECK_LAUNCH();
  }
  // Phase 2: the N per-sample partial sums added in order n, one thread per output (C1: 150 + 6,
  // C3: 2,400 + 16). Without terms (N = 0 or an empty output) it sums nothing and writes zeros,
  // as the CPU reference does.
  conv_backward_weights_reduce_kernel<5><<<blocks_for(std::size_t(n_weights) + n_bias), kThreads,
                                           0, stream>>>(has_terms ? d.N : 0, n_weights, n_bias,
                                                        partial_weight, partial_bias, mask,
                                                        dL_dweight, dL_dbias);
  CUDA_CHECK_LAUNCH();
}

// ---- the ConvAlgorithm object and its registration ----------------------------------------------

namespace {

// The weight gradient's per-sample partial sums go to a scratch buffer sized for the largest batch.
class StagedConvolution final : public FunctionConvolution<conv_forward5, conv_backward_input5> {
 public:
  explicit StagedConvolution(const ConvShape& largest)
      : m_max_batch(largest.n),
        m_scratch(Device::gpu, conv_backward_weights5_scratch_floats(largest)) {}

  void backward_weights(const ConvShape& s, const float* x, const float* dL_dy, float* dL_dweight,
                        float* dL_dbias, const float* mask, cudaStream_t stream) override {
    if (s.n > m_max_batch || conv_backward_weights5_scratch_floats(s) > m_scratch.size())
      throw Error("internal: convolution shape larger than the one its scratch was sized for");
    conv_backward_weights5(s, x, dL_dy, dL_dweight, dL_dbias, mask, m_scratch.data(), stream);
  }

 private:
  int m_max_batch;
  Buffer<float> m_scratch;
};

const ConvRegistration kStaged{
    5, "staged", "this project", make_version<StagedConvolution>,
    "one sample's operands staged in shared memory, specialised for 5x5 filters"};

}  // namespace

}  // namespace lenet5::cuda
