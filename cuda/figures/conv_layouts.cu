// Exercise 2's kernels (cuda/figures/conv_layouts.cuh says what each layout and mapping is): the basic
// forward kernel of Fig 16.12 and the unroll kernel of Fig 16.18, each instantiated for the layout
// tags NCHW, NHWC and CHWN, with their launchers (the host-side conversions are in
// conv_layouts.cpp).
//
// Shapes (LeNet, N = 64 in the `ex2` target):
//   C1  x (64, 1, 32, 32)  -> y (64, 6, 28, 28)    unrolled 64 x 25 x 784
//   C3  x (64, 6, 14, 14)  -> y (64, 16, 10, 10)   unrolled 64 x 150 x 100
//   C5  x (64, 16, 5, 5)   -> y (64, 120, 1, 1)    unrolled 64 x 400 x 1
// The kernels' names carry the layout tag (conv_forward_layout_kernel<lenet5::cuda::layout::NHWC>),
// which is how Nsight Compute's --kernel-name filter finds them (scripts/ncu_layouts.sh).
#include <climits>
#include <cstddef>
#include <string>

#include "core/error.hpp"
#include "cuda/figures/conv_layouts.cuh"
#include "cuda/runtime/check.hpp"

namespace lenet5::cuda {

// ---- kernels ------------------------------------------------------------------------------------

// Y[n,m,h,w] = sum_c sum_p sum_q X[n,c,h+p,w+q] * W[m,c,p,q], X and Y in layout L. One thread per
// output element (direct_thread<L> says which); the sum runs c, p, q as the CPU reference does.
// Per thread C*K*K X loads and as many W loads, one Y store: the warp requests the `ex2` target's
// sector model counts.
template <class L>
__global__ void conv_forward_layout_kernel(ConvDims d, const float* __restrict__ x,
                                           const float* __restrict__ weight,
                                           float* __restrict__ y) {
  const DirectThread t = direct_thread<L>(d, blockIdx, threadIdx);
  if (!t.active) return;
  const Extents xe = x_extents(d);
  float acc = 0.0f;
  for (int c = 0; c < d.C; ++c)
    for (int p = 0; p < d.K; ++p)
      for (int q = 0; q < d.K; ++q)
        acc += x[L::offset(xe, t.n, c, t.h + p, t.w + q)] * weight[weight_index(d, t.m, c, p, q)];
  y[L::offset(y_extents(d), t.n, t.m, t.h, t.w)] = acc;
}

// X_unroll(n, c*K*K + p*K + q, s) = X[n, c, h+p, w+q] with s = h*W_out + w: Fig 16.18 over a
// batch, with errata E23-E25 fixed as in conv_unroll_kernel3. Each thread copies the K*K taps of
// one (n, c, s) (unroll_thread<L>), loads in layout L, stores at unrolled_offset<L>: per thread K*K
// loads and K*K stores.
template <class L>
__global__ void conv_unroll_layout_kernel(ConvDims d, const float* __restrict__ x,
                                          float* __restrict__ x_unroll) {
  const UnrollThread u =
      unroll_thread<L>(d, std::size_t(blockIdx.x) * kUnrollThreads + threadIdx.x);
  if (!u.active) return;
  const Extents xe = x_extents(d);
  for (int p = 0; p < d.K; ++p)
    for (int q = 0; q < d.K; ++q) {
      const int row = (u.c * d.K + p) * d.K + q;
      x_unroll[unrolled_offset<L>(d, u.n, row, u.s)] = x[L::offset(xe, u.n, u.c, u.h + p, u.w + q)];
    }
}

// ---- launchers ----------------------------------------------------------------------------------

namespace {

void check_grid(const dim3& grid, const char* what) {
  // gridDim.y and gridDim.z are limited to 65,535 (gridDim.x to 2^31 - 1).
  if (grid.y > 65535 || grid.z > 65535)
    throw Error(std::string(what) + ": grid (" + std::to_string(grid.x) + ", " +
                std::to_string(grid.y) + ", " + std::to_string(grid.z) +
                ") exceeds the hardware's 65,535 blocks in y or z");
}

template <class L>
void forward(const ConvShape& s, const float* x, const float* weight, float* y,
             cudaStream_t stream) {
  const ConvDims d = dims_of(s);
  if (std::size_t(s.n) * s.m * s.h_out() * s.w_out() == 0) return;
  const LaunchShape launch = direct_launch_shape<L>(d);
  check_grid(launch.grid, "conv_forward_layout");
  conv_forward_layout_kernel<L><<<launch.grid, launch.block, 0, stream>>>(d, x, weight, y);
  CUDA_CHECK_LAUNCH();
}

template <class L>
void unroll(const ConvShape& s, const float* x, float* x_unroll, cudaStream_t stream) {
  const ConvDims d = dims_of(s);
  const std::size_t threads = std::size_t(s.n) * s.c * s.h_out() * s.w_out();
  if (threads == 0) return;
  const std::size_t blocks = (threads + kUnrollThreads - 1) / kUnrollThreads;  // E23: rounded up
  if (blocks > std::size_t(INT_MAX))
    throw Error("conv_unroll_layout: " + std::to_string(threads) + " threads exceed one grid");
  conv_unroll_layout_kernel<L><<<unsigned(blocks), kUnrollThreads, 0, stream>>>(d, x, x_unroll);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void conv_forward_layout(Layout layout, const ConvShape& s, const float* x, const float* weight,
                         float* y, cudaStream_t stream) {
  with_layout(layout, [&](auto tag) { forward<decltype(tag)>(s, x, weight, y, stream); });
}

void conv_unroll_layout(Layout layout, const ConvShape& s, const float* x, float* x_unroll,
                        cudaStream_t stream) {
  with_layout(layout, [&](auto tag) { unroll<decltype(tag)>(s, x, x_unroll, stream); });
}

}  // namespace lenet5::cuda
