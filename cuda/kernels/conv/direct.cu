// Convolution version 1, "direct": the book's direct forward kernel (Fig 16.12, corrected) and the
// two backward passes (Figs 16.8 and 16.9) in race-free, deterministic forms.
//
// Layout NCHW, float32, valid stride-1 cross-correlation (textbook-figures.md §0.2):
//   x      (N, C, H, W)          C1: (N, 1, 32, 32)  C3: (N, 6, 14, 14)  C5: (N, 16, 5, 5)
//   weight (M, C, K, K)          C1: (6, 1, 5, 5)    C3: (16, 6, 5, 5)   C5: (120, 16, 5, 5)
//   y      (N, M, H_out, W_out)  C1: (N, 6, 28, 28)  C3: (N, 16, 10, 10) C5: (N, 120, 1, 1)
// with H_out = H - K + 1, W_out = W - K + 1.
//
// Version 1 of each direction is the plain one: one thread (forward, input gradient) or one block
// (weight gradient) per output element, every sum in a fixed order, no atomics, so every result is
// bit-identical from run to run. Version 5 (staged.cu) falls back to these launchers where its
// operands do not fit in shared memory. The CPU references are conv_*_cpu in layers/conv_cpu.cpp;
// tests/gpu/test_conv_kernels.cpp checks every version against them (exactly on small integers).
#include <cstddef>
#include <memory>

#include "cuda/kernels/block_reduce.cuh"
#include "cuda/kernels/conv/conv.cuh"
#include "cuda/kernels/conv/conv_dims.cuh"
#include "cuda/kernels/conv/registry.hpp"
#include "cuda/kernels/element_grid.cuh"
#include "cuda/kernels/map_element.cuh"
#include "cuda/runtime/check.hpp"

namespace lenet5::cuda {
namespace {

constexpr int kReduceThreads = 256;  // reduction kernels: a power of two (tree below)

// ---- forward ------------------------------------------------------------------------------------

// Y[n,m,h,w] = bias[m] + sum_c sum_p sum_q X[n,c,h+p,w+q] * W[m,c,p,q]   (bias may be null)
// Fig 16.12 with errata E10-E13 fixed. Grid (N, M, H_grid*W_grid), block 16x16: one thread per
// output element, n = blockIdx.x, m = blockIdx.y, and blockIdx.z names a 16x16 tile of the output
// map, row-major over W_grid = ceil(W_out/16) tiles per row:
//   h = (blockIdx.z / W_grid)*16 + threadIdx.y,  w = (blockIdx.z % W_grid)*16 + threadIdx.x.
// The printed kernel dropped the *16 (E10) and truncated the grid (E11); no LeNet layer has
// H_out a multiple of 16, so the guard is needed (C1: 784 of 1024 threads per map are active).
// The sum runs c, p, q as in the CPU reference.
__global__ void conv_forward_kernel1(ConvDims d, int W_grid, const float* __restrict__ x,
                                     const float* __restrict__ weight,
                                     const float* __restrict__ bias, float* __restrict__ y) {
  const int n = blockIdx.x;
  const int m = blockIdx.y;
  const int h = int(blockIdx.z / W_grid) * kTileWidth + int(threadIdx.y);
  const int w = int(blockIdx.z % W_grid) * kTileWidth + int(threadIdx.x);
  if (h >= d.H_out || w >= d.W_out) return;
  float acc = bias ? bias[m] : 0.0f;
  for (int c = 0; c < d.C; ++c)
    for (int p = 0; p < d.K; ++p)
      for (int q = 0; q < d.K; ++q)
        acc += x[x_index(d, n, c, h + p, w + q)] * weight[weight_index(d, m, c, p, q)];
  y[y_index(d, n, m, h, w)] = acc;
}

// ---- backward: input gradient -------------------------------------------------------------------

// dL/dX[n,c,h,w] = sum_m sum_p sum_q dL/dY[n,m,h-p,w-q] * W[m,c,p,q], over 0 <= h-p < H_out and
// 0 <= w-q < W_out. Fig 16.8 scatters (dX[c,h+p,w+q] += ...), which races when parallelised; this
// gather form gives each dL/dX element one thread that owns its sum: no atomics, fixed order
// m, p, q. 1-D grid-stride loop over i = ((n*C + c)*H + h)*W + w (C1: N*1,024 threads).
// Overwrites dL/dX.
__global__ void conv_backward_input_kernel1(ConvDims d, const float* __restrict__ dL_dy,
                                            const float* __restrict__ weight,
                                            float* __restrict__ dL_dx) {
  const std::size_t count = std::size_t(d.N) * d.C * d.H * d.W;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const auto [w, h, map] = map_element(i, d.H, d.W);
    const int c = int(map % d.C);
    const int n = int(map / d.C);
    const TapsReaching t = taps_reaching(d, h, w);
    float acc = 0.0f;
    for (int m = 0; m < d.M; ++m)
      for (int p = t.p_begin; p < t.p_end; ++p)
        for (int q = t.q_begin; q < t.q_end; ++q)
          acc += dL_dy[y_index(d, n, m, h - p, w - q)] * weight[weight_index(d, m, c, p, q)];
    dL_dx[i] = acc;
  }
}

// ---- backward: weight and bias gradients --------------------------------------------------------

// dL/dW[m,c,p,q] = mask[m,c,p,q] * sum_n sum_h sum_w X[n,c,h+p,w+q] * dL/dY[n,m,h,w]   (Fig 16.9,
// E08 fixed: dL/dY has no channel index), and dL/dbias[m] = sum_n sum_h sum_w dL/dY[n,m,h,w].
// Grid: one block of kReduceThreads threads per weight (blockIdx.x = ((m*C + c)*K + p)*K + q,
// C5: 48,000 blocks, C1: 150), then, when dL_dbias is not null, M more blocks, block M*C*K*K + m
// for bias m. Thread t of a block sums the terms t, t + 256, t + 512, ... of the N*H_out*W_out
// terms (term j = (n*H_out + h)*W_out + w), then block_sum adds the 256 partial sums in a fixed
// tree: the assignment and the order depend only on the shape, so results are bit-identical from
// run to run (float atomics would not be). Overwrites both outputs.
__global__ void conv_backward_weights_kernel1(ConvDims d, const float* __restrict__ x,
                                              const float* __restrict__ dL_dy,
                                              float* __restrict__ dL_dweight,
                                              float* __restrict__ dL_dbias,
                                              const float* __restrict__ mask) {
  const int n_weights = d.M * d.C * d.K * d.K;
  const int per_map = d.H_out * d.W_out;
  const int n_terms = d.N * per_map;
  const int block = blockIdx.x;
  float acc = 0.0f;
  if (block < n_weights) {
    const int q = block % d.K;
    const int p = block / d.K % d.K;
    const int c = block / (d.K * d.K) % d.C;
    const int m = block / (d.K * d.K * d.C);
    for (int j = threadIdx.x; j < n_terms; j += kReduceThreads) {
      const int w = j % d.W_out;
      const int h = j / d.W_out % d.H_out;
      const int n = j / per_map;
      acc += x[x_index(d, n, c, h + p, w + q)] * dL_dy[y_index(d, n, m, h, w)];
    }
    const float sum = block_sum<kReduceThreads>(acc);
    if (threadIdx.x == 0) dL_dweight[block] = mask ? sum * mask[block] : sum;
  } else {
    const int m = block - n_weights;  // only launched when dL_dbias is not null
    for (int j = threadIdx.x; j < n_terms; j += kReduceThreads) {
      const int n = j / per_map;
      acc += dL_dy[(std::size_t(n) * d.M + m) * per_map + j % per_map];
    }
    const float sum = block_sum<kReduceThreads>(acc);
    if (threadIdx.x == 0) dL_dbias[m] = sum;
  }
}

}  // namespace

// ---- launchers ----------------------------------------------------------------------------------

void conv_forward1(const ConvShape& s, const float* x, const float* weight, const float* bias,
                   float* y, cudaStream_t stream) {
  const ConvDims d = dims_of(s);
  if (d.N <= 0 || d.M <= 0 || d.H_out <= 0 || d.W_out <= 0) return;  // nothing to write
  // Rounded up (E11): C1 28x28 -> 2x2 tiles, C3 10x10 and C5 1x1 -> one partly idle tile.
  const int H_grid = (d.H_out + kTileWidth - 1) / kTileWidth;
  const int W_grid = (d.W_out + kTileWidth - 1) / kTileWidth;
  const dim3 grid(unsigned(d.N), unsigned(d.M), unsigned(H_grid * W_grid));
  const dim3 block(kTileWidth, kTileWidth, 1);
  conv_forward_kernel1<<<grid, block, 0, stream>>>(d, W_grid, x, weight, bias, y);
  CUDA_CHECK_LAUNCH();
}

void conv_backward_input1(const ConvShape& s, const float* dL_dy, const float* weight, float* dL_dx,
                          cudaStream_t stream) {
  const ConvDims d = dims_of(s);
  const std::size_t count = std::size_t(d.N) * d.C * d.H * d.W;
  if (count == 0) return;
  conv_backward_input_kernel1<<<blocks_for(count), kThreads, 0, stream>>>(d, dL_dy, weight, dL_dx);
  CUDA_CHECK_LAUNCH();
}

void conv_backward_weights1(const ConvShape& s, const float* x, const float* dL_dy,
                            float* dL_dweight, float* dL_dbias, const float* mask,
                            cudaStream_t stream) {
  const ConvDims d = dims_of(s);
  const int n_weights = d.M * d.C * d.K * d.K;
  const int n_blocks = n_weights + (dL_dbias ? d.M : 0);
  if (n_blocks <= 0) return;
  // With N = 0 every block sums nothing and writes 0, as the CPU reference does.
  conv_backward_weights_kernel1<<<n_blocks, kReduceThreads, 0, stream>>>(d, x, dL_dy, dL_dweight,
                                                                         dL_dbias, mask);
  CUDA_CHECK_LAUNCH();
}

// ---- the ConvAlgorithm object and its registration ----------------------------------------------

namespace {

class DirectConvolution final : public FunctionConvolution<conv_forward1, conv_backward_input1> {
 public:
  explicit DirectConvolution(const ConvShape&) {}  // no scratch: any shape, any batch

  void backward_weights(const ConvShape& s, const float* x, const float* dL_dy, float* dL_dweight,
                        float* dL_dbias, const float* mask, cudaStream_t stream) override {
    conv_backward_weights1(s, x, dL_dy, dL_dweight, dL_dbias, mask, stream);
  }
};

const ConvRegistration kDirect{
    1, "direct", "PMPP Fig 16.12", make_version<DirectConvolution>,
    "one thread per output element, every operand read from global memory"};

}  // namespace

}  // namespace lenet5::cuda
