// Exercise 2 (textbook-figures.md §1.22): the basic forward kernel (Fig 16.12) and the unroll
// kernel (Fig 16.18), templated on the layout of the activations X and Y: NCHW, NHWC or CHWN.
// The filters stay W[M][C][K][K] in every layout (within a warp every thread reads the same
// filter element, whatever the layout), so the layouts differ in their X and Y accesses only.
//
//   NCHW  X[((n*C + c)*H + h)*W + w]   (the project's layout, conv_dims.cuh's x_index)
//   NHWC  X[((n*H + h)*W + w)*C + c]   neighbouring w are C floats apart
//   CHWN  X[((c*H + h)*W + w)*N + n]   neighbouring n are adjacent (cuda-convnet's layout)
//
// Thread mappings (the exercise's guidance): NCHW and NHWC map threads to (h, w) exactly as
// Fig 16.12 does (16x16 tiles, threadIdx.x along w); CHWN maps threadIdx.x to n, so a warp's 32
// threads take 32 consecutive samples. The index helpers and the mappings are __host__ __device__:
// the kernels use them, and so do the host conversions, the sector model of the `ex2` figure
// target (src/figures/layout_math.cpp) and the unit tests.
//
// The unroll writes the Fig 16.14 matrix (row c*K*K + p*K + q, column h*W_out + w) of every
// sample. Where the batch sits in the unrolled buffer follows the layout: N outermost for NCHW and
// NHWC (N matrices of CKK x HW one after the other, as conv_unroll_kernel3 writes them), N
// innermost for CHWN (one CKK x (HW*N) matrix, column s*N + n). A threads-on-n mapping stores
// coalesced only into the second, and a GEMM on it yields Y in CHWN directly.
//
// No bias. Every launch is checked; launches are asynchronous on `stream`.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "core/shapes.hpp"
#include "cuda/kernels/conv/conv.cuh"  // kTileWidth, Fig 16.12's 16x16 output tiles
#include "cuda/kernels/conv/conv_dims.cuh"

namespace lenet5::cuda {

enum class Layout { nchw, nhwc, chwn };
constexpr Layout kLayouts[] = {Layout::nchw, Layout::nhwc, Layout::chwn};
const char* layout_name(Layout layout);  // "NCHW", "NHWC", "CHWN"

// The logical sizes of an activation tensor: X is (N, C, H, W) and Y is (N, M, H_out, W_out).
struct Extents {
  int N, C, H, W;
};
LENET5_HOST_DEVICE Extents x_extents(const ConvDims& d) {
  return Extents{d.N, d.C, d.H, d.W};
}
LENET5_HOST_DEVICE Extents y_extents(const ConvDims& d) {
  return Extents{d.N, d.M, d.H_out, d.W_out};
}

constexpr int kLayoutWarp = 32;       // threads of a warp
constexpr int kChwnSamples = 32;      // CHWN direct kernel: threadIdx.x over 32 samples
constexpr int kChwnPositions = 8;     //   and threadIdx.y over 8 output positions (256 threads)
constexpr int kUnrollThreads = 1024;  // Fig 16.17's CUDA_MAX_NUM_THREADS: 1-D unroll blocks

// What a thread of the direct kernel computes: Y[n, m, h, w]. `active` false: an idle thread
// (past the edge of the output, or past N), which returns at once and issues no memory request.
struct DirectThread {
  int n, m, h, w;
  bool active;
};
// What a thread of the unroll kernel copies: the K*K taps of channel c of sample n at output
// position s = h*W_out + w (h, w derived from s).
struct UnrollThread {
  int n, c, s, h, w;
  bool active;
};

// The layout tags. Each gives the offset of element (n, c, h, w) of a tensor of extents e, the
// thread mappings of the two kernels, and where unrolled element (n, row, s) lives.
namespace layout {

struct NCHW {
  static constexpr Layout id = Layout::nchw;
  LENET5_HOST_DEVICE static std::size_t offset(const Extents& e, std::size_t n, int c, int h,
                                               int w) {
    return ((n * e.C + c) * e.H + h) * e.W + w;
  }
};
struct NHWC {
  static constexpr Layout id = Layout::nhwc;
  LENET5_HOST_DEVICE static std::size_t offset(const Extents& e, std::size_t n, int c, int h,
                                               int w) {
    return ((n * e.H + h) * e.W + w) * e.C + c;
  }
};
struct CHWN {
  static constexpr Layout id = Layout::chwn;
  LENET5_HOST_DEVICE static std::size_t offset(const Extents& e, std::size_t n, int c, int h,
                                               int w) {
    return ((std::size_t(c) * e.H + h) * e.W + w) * e.N + n;
  }
};

}  // namespace layout

// ---- the direct kernel's thread mapping ---------------------------------------------------------

// NCHW, NHWC: Fig 16.12's grid (N, M, H_grid*W_grid) of 16x16 blocks, n = blockIdx.x,
// m = blockIdx.y, h = (blockIdx.z / W_grid)*16 + threadIdx.y, w = (blockIdx.z % W_grid)*16 +
// threadIdx.x (errata E10, E11 fixed): a warp is two 16-wide output rows.
// CHWN: grid (ceil(N/32), M, ceil(H_out*W_out/8)) of 32x8 blocks, n = blockIdx.x*32 + threadIdx.x,
// m = blockIdx.y, s = blockIdx.z*8 + threadIdx.y: a warp is 32 samples at one output position.
template <class L>
LENET5_HOST_DEVICE DirectThread direct_thread(const ConvDims& d, uint3 block, uint3 thread) {
  DirectThread t{};
  t.m = int(block.y);
  if constexpr (L::id == Layout::chwn) {
    t.n = int(block.x) * kChwnSamples + int(thread.x);
    const int s = int(block.z) * kChwnPositions + int(thread.y);
    t.h = s / d.W_out;
    t.w = s % d.W_out;
    t.active = t.n < d.N && s < d.H_out * d.W_out;
  } else {
    const int W_grid = (d.W_out + kTileWidth - 1) / kTileWidth;
    t.n = int(block.x);
    t.h = int(block.z) / W_grid * kTileWidth + int(thread.y);
    t.w = int(block.z) % W_grid * kTileWidth + int(thread.x);
    t.active = t.h < d.H_out && t.w < d.W_out;
  }
  return t;
}

struct LaunchShape {
  dim3 grid, block;
};
// The grid and block the direct kernel of layout L is launched with (checked against the
// hardware's grid limits by the launcher).
template <class L>
LaunchShape direct_launch_shape(const ConvDims& d) {
  if constexpr (L::id == Layout::chwn) {
    const int positions = d.H_out * d.W_out;
    return {dim3(unsigned((d.N + kChwnSamples - 1) / kChwnSamples), unsigned(d.M),
                 unsigned((positions + kChwnPositions - 1) / kChwnPositions)),
            dim3(kChwnSamples, kChwnPositions)};
  } else {
    const int W_grid = (d.W_out + kTileWidth - 1) / kTileWidth;
    const int H_grid = (d.H_out + kTileWidth - 1) / kTileWidth;
    return {dim3(unsigned(d.N), unsigned(d.M), unsigned(H_grid * W_grid)),
            dim3(kTileWidth, kTileWidth)};
  }
}

// ---- the unroll kernel's thread mapping and output ----------------------------------------------

// Thread t = blockIdx.x*1024 + threadIdx.x (Fig 16.17's 1-D blocks), N*C*H_out*W_out threads.
// NCHW, NHWC: t = (n*C + c)*HW + s, s fastest (conv_unroll_kernel3's order: the threads walk along
// an output row). CHWN: t = (c*HW + s)*N + n, n fastest.
template <class L>
LENET5_HOST_DEVICE UnrollThread unroll_thread(const ConvDims& d, std::size_t t) {
  const std::size_t HW = std::size_t(d.H_out) * d.W_out;
  UnrollThread u{};
  u.active = t < std::size_t(d.N) * d.C * HW;
  if constexpr (L::id == Layout::chwn) {
    u.n = int(t % d.N);
    u.s = int(t / d.N % HW);
    u.c = int(t / d.N / HW);
  } else {
    u.s = int(t % HW);
    u.c = int(t / HW % d.C);
    u.n = int(t / HW / d.C);
  }
  u.h = u.s / d.W_out;
  u.w = u.s % d.W_out;
  return u;
}

// Offset of unrolled element (sample n, row c*K*K + p*K + q, column s) in the unroll's output of
// unrolled_floats(s) floats.
template <class L>
LENET5_HOST_DEVICE std::size_t unrolled_offset(const ConvDims& d, std::size_t n, int row, int s) {
  const std::size_t HW = std::size_t(d.H_out) * d.W_out, CKK = std::size_t(d.C) * d.K * d.K;
  if constexpr (L::id == Layout::chwn)
    return (row * HW + s) * d.N + n;
  else
    return (n * CKK + row) * HW + s;
}

// N*C*K*K*H_out*W_out: the unroll's output (C1 at N = 64: 1,254,400 floats).
std::size_t unrolled_floats(const ConvShape& s);

// Calls f(L{}) with the tag of `layout`.
template <class F>
decltype(auto) with_layout(Layout layout, F&& f) {
  switch (layout) {
    case Layout::nhwc:
      return f(layout::NHWC{});
    case Layout::chwn:
      return f(layout::CHWN{});
    default:
      return f(layout::NCHW{});
  }
}

// ---- launchers ----------------------------------------------------------------------------------

// Y = X * W (valid, stride 1, no bias) with x and y in `layout`, the weights (M, C, K, K).
// Overwrites y. The sum runs c, p, q as in conv_forward_cpu: exact on small integers.
void conv_forward_layout(Layout layout, const ConvShape& s, const float* x, const float* weight,
                         float* y, cudaStream_t stream);
// The unroll of all N samples of x (in `layout`) into x_unroll (unrolled_floats(s) floats, placed
// by unrolled_offset); every element is written.
void conv_unroll_layout(Layout layout, const ConvShape& s, const float* x, float* x_unroll,
                        cudaStream_t stream);

// ---- host conversions ---------------------------------------------------------------------------

// A host tensor of extents e from NCHW to `layout`, and back.
std::vector<float> to_layout(Layout layout, const Extents& e, const std::vector<float>& nchw);
std::vector<float> from_layout(Layout layout, const Extents& e, const std::vector<float>& data);
// The unroll's output rearranged as the N per-sample Fig 16.14 matrices one after the other (what
// conv_unroll_cpu gives for x + n*C*H*W, n = 0..N-1).
std::vector<float> unrolled_per_sample(Layout layout, const ConvShape& s,
                                       const std::vector<float>& x_unroll);

}  // namespace lenet5::cuda
