// Convolution kernels, version 2, "tiled": the book's shared-memory tiled forward kernel
// (Fig 16.13), corrected, and the two backward passes tiled the same way.
//
// Layout NCHW, float32, valid stride-1 cross-correlation, as in cuda/kernels/conv/direct.cu:
//   x      (N, C, H, W)          C1: (N, 1, 32, 32)  C3: (N, 6, 14, 14)  C5: (N, 16, 5, 5)
//   weight (M, C, K, K)          C1: (6, 1, 5, 5)    C3: (16, 6, 5, 5)   C5: (120, 16, 5, 5)
//   y      (N, M, H_out, W_out)  C1: (N, 6, 28, 28)  C3: (N, 16, 10, 10) C5: (N, 120, 1, 1)
//
// Errata of the printed Fig 16.13 fixed here (textbook-figures.md §1.12, §2.1, §2.2):
//   E11  W_grid = W_out/TILE_WIDTH truncates and nothing is guarded: no LeNet layer has H_out a
//        multiple of 16 (C1 would compute 256 of 784 outputs per map, C3 and C5 get a zero grid).
//        Grids are rounded up, tile loads outside X read 0, and the store is guarded.
//   E13  The signature (C, W_grid, K, X, W, Y) lacks M, H, W, H_out, W_out, without which X, W and
//        Y cannot be addressed linearly: every size travels in ConvDims.
//   E14  TILE_SIZE is undefined; the tile base is (tile index) * TILE_WIDTH (kTileWidth).
//   E15  The tile load copies X[n,c,h,w], the thread's own pixel, into every slot it fills; it
//        must copy X[n,c,i,j]. Invisible while the input fits in one tile (C3, C5); C1 and the
//        "one tile" case (H = 20) get wrong outputs.
//   E16  The sum reads X_shared[h+p, w+q] with global output coordinates, out of the tile from the
//        second tile on; the tile-local X_shared[(h0+p)*X_tile_width + (w0+q)] is meant.
//   E17  Missing semicolons after the tile store (and a barrier, in B): it does not compile.
//   E18  h0 = threadIdx.x, w0 = threadIdx.y is transposed relative to Fig 16.12: correct results,
//        but a warp then walks down columns (uncoalesced X loads and Y stores, bank conflicts).
//        Here h0 = threadIdx.y, w0 = threadIdx.x.
// Hazard H5: the filter is loaded by the threads h0 < K, w0 < K, so K <= TILE_WIDTH is checked
// when the object is made; the weight barrier of the listing is merged with the tile barrier (two
// barriers per channel, not three).
//
// Every sum has one owner thread and a fixed order, and the weight gradient reduces its partial
// sums in a fixed shape: results are bit-identical from run to run (no atomics). The CPU
// references are conv_*_cpu in layers/conv_cpu.cpp; tests/gpu/test_conv_kernels.cpp checks this
// version against them through the registry.
#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>

#include "core/error.hpp"
#include "cuda/kernels/block_reduce.cuh"
#include "cuda/kernels/conv/conv.cuh"
#include "cuda/kernels/conv/conv_dims.cuh"
#include "cuda/kernels/conv/registry.hpp"
#include "cuda/kernels/conv/sum_partials.cuh"
#include "cuda/runtime/buffer.hpp"
#include "cuda/runtime/check.hpp"

namespace lenet5::cuda {
namespace {


constexpr std::size_t kMaxShared2 = 48 * 1024;           // bytes per block without an opt-in
constexpr int kWeightThreads = kTileWidth * kTileWidth;  // weight gradient: one per dL/dY tile slot
constexpr int kReduceThreads2 = 256;
// Weight gradient: the batch is split into slices until about this many blocks exist.
constexpr int kTargetBlocks2 = 256;
constexpr int kMaxGridYZ = 65535;

constexpr int ceil_div(int a, int b) {  // host and device (--expt-relaxed-constexpr)
  return (a + b - 1) / b;
}

// Side of the staged square tile: a 16x16 tile of outputs needs (16 + K - 1)^2 inputs (forward
// and weight gradient), and a 16x16 tile of dL/dX needs (16 + K - 1)^2 elements of dL/dY.
int halo_width(int K) {
  return kTileWidth + K - 1;
}
std::size_t forward_shared_bytes(int K) {  // also the input gradient's
  return (std::size_t(halo_width(K)) * halo_width(K) + std::size_t(K) * K) * sizeof(float);
}
std::size_t weights_shared_bytes(int K) {  // dynamic part; block_sum adds kWeightThreads floats
  return (std::size_t(halo_width(K)) * halo_width(K) + 2 * kWeightThreads) * sizeof(float);
}

// The block's dynamic shared memory (the three kernels below): the staged halo_width(K)^2 tile
// first (X, or dL/dY for the input gradient), then what the kernel stages beside it.
struct SharedTile {
  int width;     // halo_width(K)
  float* tile;   // width x width
  float* after;  // the rest
};
__device__ __forceinline__ SharedTile shared_tile(int K) {
  extern __shared__ float shmem2[];
  const int width = kTileWidth + K - 1;
  return {width, shmem2, shmem2 + width * width};
}

// The thread's place in the grid's 16x16 tiles (both kernels below): (h0, w0) inside the tile
// whose first row and column are (h_base, w_base); blockIdx.z names the tile, row-major over
// W_grid tiles per row.
struct TilePlace {
  int h0, w0, h_base, w_base;
};

__device__ __forceinline__ TilePlace tile_place(int W_grid) {
  return {int(threadIdx.y),  // E18: threadIdx.x runs along a row, as in Fig 16.12
          int(threadIdx.x),
          int(blockIdx.z / W_grid) * kTileWidth,  // E14: TILE_WIDTH
          int(blockIdx.z % W_grid) * kTileWidth};
}

// ---- forward (Fig 16.13, corrected) -------------------------------------------------------------

// Y[n,m,h,w] = bias[m] + sum_c sum_p sum_q X[n,c,h+p,w+q] * W[m,c,p,q]   (bias may be null)
// Grid (N, M, H_grid*W_grid) with rounded-up H_grid = ceil(H_out/16), W_grid = ceil(W_out/16);
// block 16x16, thread (h0, w0) = (threadIdx.y, threadIdx.x) owns output (h_base+h0, w_base+w0).
// Shared memory: X_shared (X_tile_width^2), then W_shared (K^2); K = 5: 400 + 25 floats = 1,700
// bytes. Per channel c: the block stages W[m,c] and X[n,c, h_base.., w_base..] (zeros beyond H
// and W), synchronises, accumulates K*K products from shared memory, and synchronises again before
// the next channel overwrites the tiles. Out-of-range threads (C1: 240 of each 1,024 per map)
// still load and reach every barrier; only the store is guarded. The sum runs bias, c, p, q: the
// CPU reference's order. KT is K when known at compile time (5: the p, q loops unroll), else 0.
template <int KT>
__global__ void conv_forward_kernel2(ConvDims d, int W_grid, const float* __restrict__ x,
                                     const float* __restrict__ weight,
                                     const float* __restrict__ bias, float* __restrict__ y) {
  const int K = KT > 0 ? KT : d.K;
  const auto [X_tile_width, X_shared, W_shared] = shared_tile(K);
  const int n = blockIdx.x;
  const int m = blockIdx.y;
  const auto [h0, w0, h_base, w_base] = tile_place(W_grid);
  const int h = h_base + h0;
  const int w = w_base + w0;

  float acc = bias ? bias[m] : 0.0f;
  for (int c = 0; c < d.C; ++c) {
    if (h0 < K && w0 < K) W_shared[h0 * K + w0] = weight[weight_index(d, m, c, h0, w0)];
    // Rows h_base + i and columns w_base + j of X[n,c] for i, j < X_tile_width (E15: element
    // (i, j), not the thread's own (h, w); E11: zero beyond the input).
    for (int i = h0; i < X_tile_width; i += kTileWidth)
      for (int j = w0; j < X_tile_width; j += kTileWidth) {
        const int row = h_base + i, col = w_base + j;
        X_shared[i * X_tile_width + j] =
            row < d.H && col < d.W ? x[x_index(d, n, c, row, col)] : 0.0f;
      }
    __syncthreads();
#pragma unroll
    for (int p = 0; p < K; ++p)
#pragma unroll
      for (int q = 0; q < K; ++q)  // E16: tile-local coordinates
        acc += X_shared[(h0 + p) * X_tile_width + (w0 + q)] * W_shared[p * K + q];
    __syncthreads();
  }
  if (h < d.H_out && w < d.W_out) y[y_index(d, n, m, h, w)] = acc;  // E11
}

// ---- backward: input gradient -------------------------------------------------------------------

// dL/dX[n,c,h,w] = sum_m sum_p sum_q dL/dY[n,m,h-p,w-q] * W[m,c,p,q] over 0 <= h-p < H_out,
// 0 <= w-q < W_out: the gather form (one owner thread per element; Fig 16.8's scatter races).
// Grid (N, C, H_grid*W_grid) over 16x16 tiles of dL/dX (H_grid = ceil(H/16): C1 2x2, C3 1x1);
// block 16x16, thread (h0, w0) owns dL/dX[n,c,h_base+h0,w_base+w0]. Element (h, w) reads dL/dY
// rows h-K+1 .. h, so per map m the block stages rows h_base-K+1 .. h_base+15 and the same range
// of columns: dY_shared (X_tile_width^2, zeros outside [0,H_out) x [0,W_out)), then W[m,c] in
// W_shared (K^2). Row h - p of dL/dY sits at tile row h0 - p + K - 1, in [0, X_tile_width) for
// every p < K, so every (m, p, q) term is read without a bounds test: the terms outside dL/dY
// read +0 and add nothing (x + 0*w = x exactly). Order m, p, q, as version 1.
template <int KT>
__global__ void conv_backward_input_kernel2(ConvDims d, int W_grid, const float* __restrict__ dL_dy,
                                            const float* __restrict__ weight,
                                            float* __restrict__ dL_dx) {
  const int K = KT > 0 ? KT : d.K;
  const auto [tile_width, dY_shared, W_shared] = shared_tile(K);
  const int n = blockIdx.x;
  const int c = blockIdx.y;
  const auto [h0, w0, h_base, w_base] = tile_place(W_grid);
  const int row0 = h_base - (K - 1), col0 = w_base - (K - 1);  // dL/dY position of tile (0, 0)

  float acc = 0.0f;
  for (int m = 0; m < d.M; ++m) {
    if (h0 < K && w0 < K) W_shared[h0 * K + w0] = weight[weight_index(d, m, c, h0, w0)];
    for (int i = h0; i < tile_width; i += kTileWidth)
      for (int j = w0; j < tile_width; j += kTileWidth) {
        const int row = row0 + i, col = col0 + j;
        const bool inside = row >= 0 && row < d.H_out && col >= 0 && col < d.W_out;
        dY_shared[i * tile_width + j] = inside ? dL_dy[y_index(d, n, m, row, col)] : 0.0f;
      }
    __syncthreads();
#pragma unroll
    for (int p = 0; p < K; ++p)
#pragma unroll
      for (int q = 0; q < K; ++q)
        acc += dY_shared[(h0 - p + K - 1) * tile_width + (w0 - q + K - 1)] * W_shared[p * K + q];
    __syncthreads();
  }
  const int h = h_base + h0, w = w_base + w0;
  if (h < d.H && w < d.W) dL_dx[x_index(d, n, c, h, w)] = acc;
}

// ---- backward: weight and bias gradients, phase 1 (partial sums per slice of the batch) --------

// dL/dW[m,c,p,q] = sum_{n,h,w} X[n,c,h+p,w+q] * dL/dY[n,m,h,w] and dL/dbias[m] = sum dL/dY[n,m,..],
// each split into `slices` partial sums over consecutive samples n in [s*N/S, (s+1)*N/S).
// Grid (M*C, S): block (m*C + c, s), kWeightThreads (256) threads. One block per (m, c) alone
// would leave C1 with 6 blocks, so the batch is split until about kTargetBlocks2 blocks exist
// (C1: 43 slices, C3: 3, C5: 1). For each sample of its slice and each 16x16 tile of the output
// map, the block stages dY_shared = dL/dY[n,m] on the tile (16x16, zeros outside) and
// X_shared = X[n,c] on rows h_base .. h_base+X_tile_width-1 (the same halo as the forward pass).
// Thread t < KK*G, with KK = K*K taps and G = 256 / KK position groups (K = 5: G = 10, 250
// threads busy), owns tap t % KK = p*K + q and group g = t / KK: it adds, over every tile, the
// terms of the tile's valid positions g, g+G, g+2G, ... (row-major in the tile) in one register.
// The G partial sums of each tap are then added in order g = 0..G-1 by one thread, and the bias
// (c == 0 blocks only) in block_sum's fixed tree: fixed shapes, so bit-identical runs. Writes
// partial_weight (S, M, C, K, K) and, when not null, partial_bias (S, M). Needs K <= 16.
__global__ void conv_backward_weights_kernel2(ConvDims d, int slices, const float* __restrict__ x,
                                              const float* __restrict__ dL_dy,
                                              float* __restrict__ partial_weight,
                                              float* __restrict__ partial_bias) {
  const int K = d.K, KK = K * K;
  const auto [X_tile_width, X_shared, dY_shared] = shared_tile(K);  // dY_shared: (16, 16)
  float* tap_partial = dY_shared + kWeightThreads;                    // (G, KK)
  const int t = threadIdx.x;
  const int m = int(blockIdx.x) / d.C, c = int(blockIdx.x) % d.C;
  const int slice = blockIdx.y;
  const int groups = kWeightThreads / KK;
  const int tap = t % KK, g = t / KK;
  const int p = tap / K, q = tap % K;
  const bool busy = g < groups;
  const int W_grid = ceil_div(d.W_out, kTileWidth);
  const int tiles = ceil_div(d.H_out, kTileWidth) * W_grid;

  float acc = 0.0f, bias_acc = 0.0f;
  for (int n = slice * d.N / slices; n < (slice + 1) * d.N / slices; ++n)
    for (int tile = 0; tile < tiles; ++tile) {
      const int h_base = tile / W_grid * kTileWidth, w_base = tile % W_grid * kTileWidth;
      for (int i = t; i < X_tile_width * X_tile_width; i += kWeightThreads) {
        const int row = h_base + i / X_tile_width, col = w_base + i % X_tile_width;
        X_shared[i] = row < d.H && col < d.W ? x[x_index(d, n, c, row, col)] : 0.0f;
      }
      const int row = h_base + t / kTileWidth, col = w_base + t % kTileWidth;
      const float dy = row < d.H_out && col < d.W_out ? dL_dy[y_index(d, n, m, row, col)] : 0.0f;
      dY_shared[t] = dy;
      bias_acc += dy;  // thread t sums slot t of every tile (zeros add nothing)
      __syncthreads();
      const int tile_h = min(kTileWidth, d.H_out - h_base),
                tile_w = min(kTileWidth, d.W_out - w_base);
      if (busy)
        for (int pos = g; pos < tile_h * tile_w; pos += groups) {
          const int ph = pos / tile_w, pw = pos % tile_w;
          acc += X_shared[(ph + p) * X_tile_width + pw + q] * dY_shared[ph * kTileWidth + pw];
        }
      __syncthreads();  // before the next tile overwrites the staged operands
    }

  tap_partial[t] = busy ? acc : 0.0f;  // t = g*KK + tap
  __syncthreads();
  if (t < KK) {
    float sum = 0.0f;
    for (int gg = 0; gg < groups; ++gg) sum += tap_partial[gg * KK + t];
    partial_weight[(std::size_t(slice) * d.M * d.C + blockIdx.x) * KK + t] = sum;
  }
  if (partial_bias && c == 0) {  // uniform over the block: block_sum's barriers are safe
    const float sum = block_sum<kWeightThreads>(bias_acc);
    if (t == 0) partial_bias[std::size_t(slice) * d.M + m] = sum;
  }
}

// ---- the ConvAlgorithm object -------------------------------------------------------------------

// Slices of the batch in the weight gradient: about kTargetBlocks2 blocks, at most one per sample.
int weight_slices(const ConvShape& s) {
  if (s.n <= 0) return 0;
  return std::clamp(ceil_div(kTargetBlocks2, s.m * s.c), 1, s.n);
}

[[noreturn]] void cannot_run(const ConvShape& s, const std::string& why) {
  throw Error("convolution version 2 (tiled) cannot run the layer C=" + std::to_string(s.c) +
              " H=" + std::to_string(s.h) + " W=" + std::to_string(s.w) +
              " M=" + std::to_string(s.m) + " K=" + std::to_string(s.k) + ": " + why +
              "; use another --conv-algo (direct or staged)");
}

class TiledConvolution final : public ConvAlgorithm {
 public:
  explicit TiledConvolution(const ConvShape& largest) : m_largest(largest) {
    if (largest.c < 1 || largest.m < 1) cannot_run(largest, "no input or output maps");
    if (largest.k > kTileWidth)  // H5: W_shared is loaded by the threads h0 < K, w0 < K
      cannot_run(largest, "Fig 16.13 needs K <= TILE_WIDTH = " + std::to_string(kTileWidth));
    if (forward_shared_bytes(largest.k) > kMaxShared2 ||
        weights_shared_bytes(largest.k) + kWeightThreads * sizeof(float) > kMaxShared2)
      cannot_run(largest, "its tiles need more than 48 KiB of shared memory");
    const int out_tiles =
        ceil_div(largest.h_out(), kTileWidth) * ceil_div(largest.w_out(), kTileWidth);
    const int in_tiles = ceil_div(largest.h, kTileWidth) * ceil_div(largest.w, kTileWidth);
    if (std::max({largest.m, largest.c, out_tiles, in_tiles, weight_slices(largest)}) > kMaxGridYZ)
      cannot_run(largest, "its grid would exceed 65,535 blocks in y or z");
    m_max_slices = weight_slices(largest);
    const std::size_t n_weights = std::size_t(largest.m) * largest.c * largest.k * largest.k;
    m_scratch = Buffer<float>(Device::gpu, std::size_t(m_max_slices) * (n_weights + largest.m));
  }

  void forward(const ConvShape& s, const float* x, const float* weight, const float* bias, float* y,
               cudaStream_t stream) override {
    check(s);
    const ConvDims d = dims_of(s);
    if (d.N <= 0) return;  // nothing to write
    // Rounded up (E11): C1 28x28 -> 2x2 tiles, C3 10x10 and C5 1x1 -> one partly idle tile.
    const int W_grid = ceil_div(d.W_out, kTileWidth);
    const int H_grid = ceil_div(d.H_out, kTileWidth);
    const dim3 grid(unsigned(d.N), unsigned(d.M), unsigned(H_grid * W_grid));
    const dim3 block(kTileWidth, kTileWidth, 1);
    const std::size_t shared = forward_shared_bytes(d.K);  // K = 5: 1,700 bytes
    with_filter_size(d.K, [&](auto KT) {
      conv_forward_kernel2<decltype(KT)::value>
          <<<grid, block, shared, stream>>>(d, W_grid, x, weight, bias, y);
    });
    CUDA_CHECK_LAUNCH();
  }

  void backward_input(const ConvShape& s, const float* dL_dy, const float* weight, float* dL_dx,
                      cudaStream_t stream) override {
    check(s);
    const ConvDims d = dims_of(s);
    if (d.N <= 0) return;
    // Tiles of dL/dX (H x W), not of the output: C1 32x32 -> 2x2, C3 14x14 -> 1, C5 5x5 -> 1.
    const int W_grid = ceil_div(d.W, kTileWidth);
    const int H_grid = ceil_div(d.H, kTileWidth);
    const dim3 grid(unsigned(d.N), unsigned(d.C), unsigned(H_grid * W_grid));
    const dim3 block(kTileWidth, kTileWidth, 1);
    const std::size_t shared = forward_shared_bytes(d.K);
    with_filter_size(d.K, [&](auto KT) {
      conv_backward_input_kernel2<decltype(KT)::value>
          <<<grid, block, shared, stream>>>(d, W_grid, dL_dy, weight, dL_dx);
    });
    CUDA_CHECK_LAUNCH();
  }

  void backward_weights(const ConvShape& s, const float* x, const float* dL_dy, float* dL_dweight,
                        float* dL_dbias, const float* mask, cudaStream_t stream) override {
    check(s);
    const ConvDims d = dims_of(s);
    const int n_weights = d.M * d.C * d.K * d.K;
    const int n_bias = dL_dbias ? d.M : 0;
    const int slices = weight_slices(s);       // <= m_max_slices: check() bounds N
    float* partial_weight = m_scratch.data();  // (slices, M, C, K, K)
    float* partial_bias = partial_weight + std::size_t(m_max_slices) * n_weights;  // (slices, M)
    if (slices > 0) {
      const dim3 grid(unsigned(d.M * d.C), unsigned(slices));
      conv_backward_weights_kernel2<<<grid, kWeightThreads, weights_shared_bytes(d.K), stream>>>(
          d, slices, x, dL_dy, partial_weight, dL_dbias ? partial_bias : nullptr);
      CUDA_CHECK_LAUNCH();
    }
    // Phase 2: the slices' partial sums added in order s (no slices, an empty batch: zeros).
    const int blocks = ceil_div(n_weights + n_bias, kReduceThreads2);
    conv_backward_weights_reduce_kernel<2><<<blocks, kReduceThreads2, 0, stream>>>(
        slices, n_weights, n_bias, partial_weight, partial_bias, mask, dL_dweight, dL_dbias);
    CUDA_CHECK_LAUNCH();
  }

 private:
  // The kernels and the scratch were checked and sized for m_largest (the interface's contract).
  void check(const ConvShape& s) const {
    const ConvShape& l = m_largest;
    if (s.c != l.c || s.h != l.h || s.w != l.w || s.m != l.m || s.k != l.k || s.n > l.n)
      throw Error("internal: convolution shape differs from the one version 2 was made for");
  }

  ConvShape m_largest;
  int m_max_slices = 0;
  Buffer<float> m_scratch;  // weight gradient partial sums: (slices, M, C, K, K) then (slices, M)
};

const ConvRegistration kTiled{2, "tiled", "PMPP Fig 16.13", make_version<TiledConvolution>,
                              "input tile and filter staged in shared memory per input channel"};

}  // namespace

}  // namespace lenet5::cuda
