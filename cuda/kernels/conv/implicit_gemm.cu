// Convolution version 4, "implicit-gemm": the cuDNN paper's approach (cuDNN paper §3,
// textbook-figures.md §3.3) on the CUTLASS GEMM hierarchy (CUTLASS blog, textbook-figures.md §5).
//
// Each direction of a convolution layer is one matrix product O = A * B, where O is rows x cols,
// A is rows x depth and B is depth x cols ("depth" is the GEMM's reduction dimension; the letter K
// stays the filter size, as in the chapter). With k = (c,p,q) = (c*K + p)*K + q, one filter tap:
//
//   forward          y   (M x N*H_out*W_out) = weight (M x C*K*K)  * D  (C*K*K x N*H_out*W_out)
//   backward_input   dx  (C x N*H*W)         = W'     (C x M*K*K)  * G  (M*K*K x N*H*W)
//   backward_weights dW  (M x C*K*K [+1])    = dy     (M x N*H_out*W_out) * D^T (... x C*K*K [+1])
//
// D is the lowered ("unrolled") input of Fig 16.14, cuDNN's D_m (CRS x NPQ): D[(c,p,q)][(n,h,w)] =
// X[n,c,h+p,w+q]. Version 3 (unroll-gemm) writes D to global memory (up to K*K = 25 copies of each
// input element) and calls cuBLAS; here D is NEVER stored: "implicit" means that each thread block
// builds, in shared memory, only the depth x cols tile of D it is about to multiply, reading X
// through the index mapping (row, column) -> (n, c, h+p, w+q), as cuDNN does (it materialises
// "tiles of D_m lazily in on-chip memory"). The mapping is separable, which keeps it cheap:
//   address of D[k][j] in x = base(j) + offset(k), base(j) = (n*C*H + h)*W + w  (column: n,h,w)
//                                                 offset(k) = (c*H + p)*W + q    (row: c,p,q)
// A thread loads the same column j at every K-step (its base is computed once per block) and
// consecutive rows k (two divisions per K-step to place the first, then a carry-propagating
// increment of (p, q) per row: no division per element). The other implicit matrices:
//   G[(m,p,q)][(n,h,w)] = dY[n,m,h-p,w-q] when 0 <= h-p < H_out and 0 <= w-q < W_out, else 0
//     (the gather form of Fig 16.8), at dy + n*M*H_out*W_out + h*W_out + w  +  m*H_out*W_out -
//     p*W_out - q; W'[c][(m,p,q)] = W[m,c,p,q] is the weight tensor read with m and c swapped;
//   D^T[(n,h,w)][(c,p,q)] = X[n,c,h+p,w+q] as above, roles swapped, plus a last column of ones
//     when the bias gradient is asked for: O's column C*K*K is then sum_{n,h,w} dY[n,m,h,w].
//
// The hierarchy (CUTLASS): a block computes a BM x BN tile of O, stepping over the depth in
// K-steps of BK = 16: global -> shared memory (A tile BM x BK, B tile BK x BN, double-buffered:
// the next step's tiles are fetched into registers while the current ones are multiplied, so one
// __syncthreads per step), then shared memory -> registers -> a TM x TN thread tile of
// accumulators, updated by the outer product of a TM x 1 and a 1 x TN fragment at each k. All
// blocks have 128 threads (4 warps, as the blog's "Tall" SGEMM policy). LeNet's rows are few
// (M = 6, 16, 120; C = 1, 6, 16) and its columns many (N*784 for C1), so the tile is chosen by the
// row count instead of one 128 x 32 tile that would leave most rows empty:
//   rows <= 8:  8 x 128, thread tile 2 x 4   (C1 forward, C1 and C3 input gradients)
//               8 x 32,  thread tile 2 x 1   (when cols <= 32: C1's weight gradient is 6 x 26)
//   rows <= 16: 16 x 64, thread tile 4 x 2   (C3 forward and weights, C5 input gradient)
//   otherwise:  32 x 64, thread tile 4 x 4   (C5 forward and weights: 120 rows)
// BK = 16: the depths 25, 150, 400 take 2, 10, 25 steps; at most 17,472 bytes of static shared
// memory (Tile8x128: two 8 x 17 A tiles and two 16 x 128 B tiles).
// Ragged edges (rows < BM, depths not multiples of 16, the last column tile) are zero-filled in
// the tiles and guarded in the stores.
//
// Split-K: where the output has fewer than 256 tiles (too few blocks for the GPU), the depth is
// cut into `splits` chunks of whole K-steps, blockIdx.z = chunk; each block writes its partial
// tile to scratch memory (splits, rows, cols), and a second kernel adds the partials of each
// output in order z = 0, 1, ... (after the bias, for the forward pass) and writes the result. At
// the training batch (N = 64), tiles x splits = blocks:
//            forward        input gradient   weight gradient
//   C1       392 x 1        512 x 1          1 x 242
//   C3       100 x 2        98 x 3           3 x 80
//   C5       4 x 5          25 x 11          28 x 1
// No atomics: each output is a fixed sequence of float operations (its depth in order within a
// chunk, then the chunks in order), so results are bit-identical from run to run, and exact on
// small integers. The splits depend only on the shape. Scratch is one buffer per direction (the
// weight gradient runs on a side stream beside the input gradient, see engine/network.cpp), sized in
// the constructor for every batch up to the largest.
//
// Layout NCHW throughout (textbook-figures.md §0.2); CPU references in layers/conv_cpu.cpp.
#include <algorithm>
#include <climits>
#include <cstddef>
#include <memory>

#include "core/error.hpp"
#include "cuda/kernels/conv/conv_dims.cuh"
#include "cuda/kernels/conv/registry.hpp"
#include "cuda/runtime/buffer.hpp"
#include "cuda/runtime/check.hpp"

namespace lenet5::cuda {
namespace {

// O = A * B: rows x cols, reduction over depth.
struct GemmSize {
  int rows, cols, depth;
};

// What every direction's GEMM below holds besides its tensors.
struct GemmView {
  ConvDims d;
  GemmSize size;
};

// Where index j = (n*H + h)*W + w falls in N maps of H x W (hw = h*W + w, per_map = H*W). Each
// remainder is j - quotient * divisor, one division per level.
struct MapPosition {
  int n, hw, h, w, per_map;
};
__device__ __forceinline__ MapPosition map_position(int j, int H, int W) {
  const int per_map = H * W;
  const int n = j / per_map, hw = j - n * per_map;
  const int h = hw / W, w = hw - h * W;
  return {n, hw, h, w, per_map};
}

// The same place in the NCHW tensor of N x maps maps of H x W, in map `map` of sample n.
__device__ __forceinline__ std::size_t index_in_map(const MapPosition& at, int maps, int map) {
  return (std::size_t(at.n) * maps + map) * at.per_map + at.hw;
}

// Where depth index k = (map*K + p)*K + q falls among the K x K taps of the filters (map: the
// channel c or output map m the depth runs over; pq = p*K + q), computed as map_position does.
struct Tap {
  int map, pq, p, q;
};
__device__ __forceinline__ Tap tap_of(int k, int K) {
  const int taps = K * K;
  const int map = k / taps, pq = k - map * taps;
  const int p = pq / K, q = pq - p * K;
  return {map, pq, p, q};
}

// The cursors' step through B's rows: a two-digit counter (outer, inner), inner in [0, inner_end)
// and outer in [0, outer_end), that keeps a flat offset in step: `step` per count, `inner_wrap`
// more when inner wraps to 0, and `outer_wrap` more when outer wraps too.
template <class Offset>
__device__ __forceinline__ void advance_odometer(int& outer, int& inner, Offset& offset,
                                                 int outer_end, int inner_end, int step,
                                                 Offset inner_wrap, Offset outer_wrap) {
  ++inner;
  offset += step;
  if (inner == inner_end) {
    inner = 0;
    offset += inner_wrap;
    if (++outer == outer_end) {
      outer = 0;
      offset += outer_wrap;
    }
  }
}

// ---- the three implicit GEMMs -------------------------------------------------------------------
//
// Each direction is a struct that the GEMM kernel below calls to build its tiles and store O:
//   init(row)              what an output's sum starts from (the bias, or 0)
//   a(row, k)              A[row][k], for row < rows and k < depth
//   column(j), cursor(k)   the per-thread state of B's column j and of row k;
//   b(column, cursor)      B[k][j] (for j < cols and k < depth), and advance(cursor): k -> k + 1
//   store(row, j, value)   O[row][j] -> its place in the output tensor

// Forward: rows m (6, 16, 120), cols j = (n*H_out + h)*W_out + w (N*784, N*100, N*1),
// depth k = (c*K + p)*K + q (25, 150, 400). A = the weights, already row-major M x C*K*K.
struct ForwardGemm : GemmView {
  const float* __restrict__ x;
  const float* __restrict__ weight;
  const float* __restrict__ bias;  // may be null
  float* __restrict__ y;

  struct Column {
    long long base;  // n*C*H*W + h*W + w
  };
  struct Cursor {
    int p, q, offset;  // offset = (c*H + p)*W + q
  };

  __device__ float init(int m) const { return bias ? bias[m] : 0.0f; }
  __device__ float a(int m, int k) const { return weight[std::size_t(m) * size.depth + k]; }
  __device__ Column column(int j) const {
    const MapPosition o = map_position(j, d.H_out, d.W_out);
    return Column{(long long)o.n * d.C * d.H * d.W + o.h * d.W + o.w};
  }
  __device__ Cursor cursor(int k) const {
    const Tap t = tap_of(k, d.K);  // t.map = c
    return Cursor{t.p, t.q, (t.map * d.H + t.p) * d.W + t.q};
  }
  __device__ void advance(Cursor& u) const {  // (c,p,q) -> the next tap, offset kept in step
    // to (c, p, q+1): +1; to (c, p+1, 0): W - K more; to (c+1, 0, 0): (H - K)*W more
    advance_odometer(u.p, u.q, u.offset, d.K, d.K, 1, d.W - d.K, (d.H - d.K) * d.W);
  }
  __device__ float b(const Column& col, const Cursor& u) const { return x[col.base + u.offset]; }
  __device__ void store(int m, int j, float value) const {
    y[index_in_map(map_position(j, d.H_out, d.W_out), d.M, m)] = value;
  }
};

// Input gradient: rows c (1, 6, 16), cols j = (n*H + h)*W + w over the INPUT maps (N*1,024,
// N*196, N*25), depth k = (m*K + p)*K + q (150, 400, 3,000). A = W'[c][(m,p,q)] = W[m,c,p,q];
// B = G[(m,p,q)][(n,h,w)] = dY[n,m,h-p,w-q], 0 outside dY (most of G: C5's dY is 1 x 1, so 24 of
// every 25 entries are 0; they are the terms version 1's gather loop skips).
struct BackwardInputGemm : GemmView {
  const float* __restrict__ dL_dy;
  const float* __restrict__ weight;
  float* __restrict__ dL_dx;

  struct Column {
    long long base;  // n*M*H_out*W_out + h*W_out + w
    int h, w;
  };
  struct Cursor {
    int p, q, offset;  // offset = m*H_out*W_out - p*W_out - q
  };

  __device__ float init(int) const { return 0.0f; }
  __device__ float a(int c, int k) const {
    const Tap t = tap_of(k, d.K);  // t.map = m
    return weight[(std::size_t(t.map) * d.C + c) * (d.K * d.K) + t.pq];
  }
  __device__ Column column(int j) const {
    const MapPosition i = map_position(j, d.H, d.W);
    return Column{(long long)i.n * d.M * d.H_out * d.W_out + i.h * d.W_out + i.w, i.h, i.w};
  }
  __device__ Cursor cursor(int k) const {
    const Tap t = tap_of(k, d.K);  // t.map = m
    return Cursor{t.p, t.q, t.map * d.H_out * d.W_out - t.p * d.W_out - t.q};
  }
  __device__ void advance(Cursor& u) const {  // (m,p,q) -> the next tap
    // to (m, p, q+1): -1; to (m, p+1, 0): K - W_out more; to (m+1, 0, 0): (K + H_out)*W_out more
    advance_odometer(u.p, u.q, u.offset, d.K, d.K, -1, d.K - d.W_out,
                     d.K * d.W_out + d.H_out * d.W_out);
  }
  __device__ float b(const Column& col, const Cursor& u) const {
    // 0 <= h-p < H_out and 0 <= w-q < W_out, with one unsigned comparison each
    const bool inside =
        unsigned(col.h - u.p) < unsigned(d.H_out) && unsigned(col.w - u.q) < unsigned(d.W_out);
    return inside ? dL_dy[col.base + u.offset] : 0.0f;
  }
  __device__ void store(int c, int j, float value) const {
    dL_dx[index_in_map(map_position(j, d.H, d.W), d.C, c)] = value;
  }
};

// Weight and bias gradients: rows m (6, 16, 120), cols k = (c*K + p)*K + q plus, when dL_dbias is
// not null, column C*K*K of ones (26, 151, 401), depth j = (n*H_out + h)*W_out + w (N*784, N*100,
// N*1). A = dY as M x N*H_out*W_out (row m, column (n,h,w)); B = D^T.
struct BackwardWeightsGemm : GemmView {
  const float* __restrict__ x;
  const float* __restrict__ dL_dy;
  const float* __restrict__ mask;  // may be null
  float* __restrict__ dL_dweight;
  float* __restrict__ dL_dbias;  // may be null; then cols = C*K*K

  struct Column {
    int offset;  // (c*H + p)*W + q
    bool ones;   // the bias column
  };
  struct Cursor {
    int h, w;
    long long base;  // n*C*H*W + h*W + w
  };

  __device__ float init(int) const { return 0.0f; }
  __device__ float a(int m, int j) const {
    return dL_dy[index_in_map(map_position(j, d.H_out, d.W_out), d.M, m)];
  }
  __device__ Column column(int k) const {
    const Tap t = tap_of(k, d.K);  // t.map = c
    return Column{(t.map * d.H + t.p) * d.W + t.q, k == d.C * (d.K * d.K)};
  }
  __device__ Cursor cursor(int j) const {
    const MapPosition o = map_position(j, d.H_out, d.W_out);
    return Cursor{o.h, o.w, (long long)o.n * d.C * d.H * d.W + o.h * d.W + o.w};
  }
  __device__ void advance(Cursor& u) const {  // (n,h,w) -> the next output position
    // to (n, h, w+1): +1; to (n, h+1, 0): W - W_out more; to (n+1, 0, 0): (C*H - H_out)*W more
    advance_odometer(u.h, u.w, u.base, d.H_out, d.W_out, 1, (long long)(d.W - d.W_out),
                     (long long)(d.C * d.H - d.H_out) * d.W);
  }
  __device__ float b(const Column& col, const Cursor& u) const {
    return col.ones ? 1.0f : x[u.base + col.offset];
  }
  __device__ void store(int m, int k, float value) const {
    const int taps = d.C * d.K * d.K;
    if (k < taps) {
      const std::size_t i = std::size_t(m) * taps + k;
      dL_dweight[i] = mask ? value * mask[i] : value;
    } else {
      dL_dbias[m] = value;  // k == taps: the column of ones
    }
  }
};

// ---- the GEMM kernel ----------------------------------------------------------------------------

constexpr int kBlockK = 16;     // BK: depth of one K-step
constexpr int kThreads4 = 128;  // every tile below: 4 warps

template <int BM_, int BN_, int TM_, int TN_>
struct Tile {
  static constexpr int BM = BM_, BN = BN_, TM = TM_, TN = TN_, BK = kBlockK;
  static constexpr int kThreads = (BM / TM) * (BN / TN);
  static constexpr int kLoadA = BM * BK / kThreads;  // A elements per thread per K-step
  static constexpr int kLoadB = BK * BN / kThreads;  // B rows per thread per K-step (one column)
  static_assert(kThreads == kThreads4, "one block size for every tile");
  static_assert(BM % TM == 0 && BN % TN == 0, "whole thread tiles");
  static_assert(BM * BK % kThreads == 0 && kThreads % BN == 0 && BK % (kThreads / BN) == 0,
                "even global -> shared loads");
};
using Tile8x32 = Tile<8, 32, 2, 1>;
using Tile8x128 = Tile<8, 128, 2, 4>;
using Tile16x64 = Tile<16, 64, 4, 2>;
using Tile32x64 = Tile<32, 64, 4, 4>;

// One BM x BN tile of O = A * B, over the depth range [z*chunk, min(depth, (z+1)*chunk)) with
// z = blockIdx.z; chunk is a multiple of BK. Block tile: rows row0.., columns col0... Thread t:
//   loads   A elements e = t + i*128 (row e / BK, depth e % BK), for coalesced reads along depth;
//           B column t % BN, rows (t / BN)*kLoadB .. + kLoadB - 1 of each K-step (a warp reads
//           32 consecutive columns: consecutive w, or consecutive q for the weight gradient);
//   owns    rows ty*TM + r and columns tx + i*(BN/TN) of the tile (tx = t % (BN/TN), ty the rest):
//           the columns of a thread are BN/TN apart so that a warp's stores are contiguous and its
//           shared-memory reads of a B row hit 32 different banks.
// With gridDim.z == 1 each output starts from init(row) and goes to store(); otherwise the block
// writes its partial sums to partial[(z*rows + row)*cols + j] for conv_split_reduce_kernel4.
template <class Tl, class Gemm>
__device__ void implicit_gemm_tile(const Gemm& g, int chunk, float* __restrict__ partial) {
  constexpr int BM = Tl::BM, BN = Tl::BN, BK = Tl::BK, TM = Tl::TM, TN = Tl::TN;
  constexpr int kColStride = BN / TN;
  // As rows padded to BK + 1 words: the transposing store (consecutive threads, consecutive k)
  // and the reads of two rows TM apart (Tile32x64) fall on different banks.
  __shared__ float As[2][BM][BK + 1];
  __shared__ float Bs[2][BK][BN];

  const int t = threadIdx.x;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  const int k_begin = blockIdx.z * chunk;
  const int k_end = std::min(g.size.depth, k_begin + chunk);
  const int n_steps = k_end > k_begin ? (k_end - k_begin + BK - 1) / BK : 0;

  const int b_col = t % BN, b_row0 = t / BN * Tl::kLoadB;
  const bool b_col_ok = col0 + b_col < g.size.cols;
  const auto column = g.column(col0 + b_col);  // the same column at every K-step
  float a_next[Tl::kLoadA], b_next[Tl::kLoadB];

  // Global -> registers: the tiles of the K-step starting at k0, zero outside O's rows, columns
  // and this chunk's depth (the ragged edges).
  auto fetch = [&](int k0) {
#pragma unroll
    for (int i = 0; i < Tl::kLoadA; ++i) {
      const int e = t + i * Tl::kThreads;
      const int row = row0 + e / BK, k = k0 + e % BK;
      a_next[i] = row < g.size.rows && k < k_end ? g.a(row, k) : 0.0f;
    }
    auto cursor = g.cursor(k0 + b_row0);
#pragma unroll
    for (int i = 0; i < Tl::kLoadB; ++i) {
      b_next[i] = b_col_ok && k0 + b_row0 + i < k_end ? g.b(column, cursor) : 0.0f;
      g.advance(cursor);
    }
  };
  // Registers -> shared buffer `buf`.
  auto stash = [&](int buf) {
#pragma unroll
    for (int i = 0; i < Tl::kLoadA; ++i) {
      const int e = t + i * Tl::kThreads;
      As[buf][e / BK][e % BK] = a_next[i];
    }
#pragma unroll
    for (int i = 0; i < Tl::kLoadB; ++i) Bs[buf][b_row0 + i][b_col] = b_next[i];
  };

  const int tx = t % kColStride, ty = t / kColStride;
  const bool single = gridDim.z == 1;
  float acc[TM][TN];
#pragma unroll
  for (int r = 0; r < TM; ++r) {
    const int row = row0 + ty * TM + r;
    const float start = single && row < g.size.rows ? g.init(row) : 0.0f;
#pragma unroll
    for (int i = 0; i < TN; ++i) acc[r][i] = start;
  }

  if (n_steps > 0) {
    fetch(k_begin);
    stash(0);
  }
  __syncthreads();
  // Step s multiplies buffer s % 2 while step s+1's tiles travel to registers and then to the
  // other buffer. One barrier per step suffices: the barrier ending step s-1 is passed only when
  // every thread has finished reading buffer (s+1) % 2, which step s then overwrites; the barrier
  // ending step s publishes it for step s+1.
  for (int step = 0; step < n_steps; ++step) {
    const int buf = step & 1;
    const bool more = step + 1 < n_steps;
    if (more) fetch(k_begin + (step + 1) * BK);
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float a[TM], b[TN];
#pragma unroll
      for (int r = 0; r < TM; ++r) a[r] = As[buf][ty * TM + r][kk];
#pragma unroll
      for (int i = 0; i < TN; ++i) b[i] = Bs[buf][kk][tx + i * kColStride];
#pragma unroll
      for (int r = 0; r < TM; ++r)
#pragma unroll
        for (int i = 0; i < TN; ++i) acc[r][i] = fmaf(a[r], b[i], acc[r][i]);
    }
    if (more) stash(buf ^ 1);
    __syncthreads();
  }

#pragma unroll
  for (int r = 0; r < TM; ++r) {
    const int row = row0 + ty * TM + r;
    if (row >= g.size.rows) continue;
#pragma unroll
    for (int i = 0; i < TN; ++i) {
      const int j = col0 + tx + i * kColStride;
      if (j >= g.size.cols) continue;
      if (single)
        g.store(row, j, acc[r][i]);
      else
        partial[(std::size_t(blockIdx.z) * g.size.rows + row) * g.size.cols + j] = acc[r][i];
    }
  }
}

// One kernel per direction, so that a profile names the direction and the version.
template <class Tl>
__global__ void __launch_bounds__(kThreads4)
    conv_forward_kernel4(ForwardGemm g, int chunk, float* __restrict__ partial) {
  implicit_gemm_tile<Tl>(g, chunk, partial);
}
template <class Tl>
__global__ void __launch_bounds__(kThreads4)
    conv_backward_input_kernel4(BackwardInputGemm g, int chunk, float* __restrict__ partial) {
  implicit_gemm_tile<Tl>(g, chunk, partial);
}
template <class Tl>
__global__ void __launch_bounds__(kThreads4)
    conv_backward_weights_kernel4(BackwardWeightsGemm g, int chunk, float* __restrict__ partial) {
  implicit_gemm_tile<Tl>(g, chunk, partial);
}

template <class Tl>
auto kernel_for(const ForwardGemm&) {
  return conv_forward_kernel4<Tl>;
}
template <class Tl>
auto kernel_for(const BackwardInputGemm&) {
  return conv_backward_input_kernel4<Tl>;
}
template <class Tl>
auto kernel_for(const BackwardWeightsGemm&) {
  return conv_backward_weights_kernel4<Tl>;
}

// Split-K, second pass: O[row][j] = init(row) + partial[0][row][j] + partial[1][row][j] + ...
// in that order, one thread per output (grid-stride), neighbouring threads on neighbouring j
// (coalesced reads of the partials and, through store(), of the outputs).
template <class Gemm>
__global__ void conv_split_reduce_kernel4(Gemm g, int splits, const float* __restrict__ partial) {
  const std::size_t count = std::size_t(g.size.rows) * g.size.cols;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const int row = int(i / g.size.cols), j = int(i % g.size.cols);
    float acc = g.init(row);
    for (int z = 0; z < splits; ++z) acc += partial[z * count + i];
    g.store(row, j, acc);
  }
}

// ---- launch plan --------------------------------------------------------------------------------

enum class TileKind { m8n32, m8n128, m16n64, m32n64 };

// Split-K aims at about kTargetBlocks blocks (two per SM of an H100's 132) with at least
// kMinStepsPerSplit K-steps per chunk; larger outputs are not split. Fixed numbers rather than the
// device's SM count: the splits, and so the bits of the results, depend on the shape only.
constexpr int kTargetBlocks = 256;
constexpr int kMinStepsPerSplit = 4;
constexpr int kReduceThreads = 256;

struct GemmPlan {
  TileKind tile;
  int bm, bn;
  int splits;  // blockIdx.z = 0 .. splits-1
  int chunk;   // depth per split, a multiple of kBlockK
  std::size_t scratch_floats;
};

template <class Tl>
void use_tile(GemmPlan& plan, TileKind kind) {
  plan.tile = kind;
  plan.bm = Tl::BM;
  plan.bn = Tl::BN;
}

GemmPlan plan_gemm(const GemmSize& s) {
  GemmPlan plan{};
  if (s.rows <= 8 && s.cols <= 32)
    use_tile<Tile8x32>(plan, TileKind::m8n32);
  else if (s.rows <= 8)
    use_tile<Tile8x128>(plan, TileKind::m8n128);
  else if (s.rows <= 16)
    use_tile<Tile16x64>(plan, TileKind::m16n64);
  else
    use_tile<Tile32x64>(plan, TileKind::m32n64);
  const long long tiles =
      (long long)((s.rows + plan.bm - 1) / plan.bm) * ((s.cols + plan.bn - 1) / plan.bn);
  const int steps = (s.depth + kBlockK - 1) / kBlockK;
  int splits = 1;
  if (tiles > 0 && tiles < kTargetBlocks) {
    const int wanted = int((kTargetBlocks + tiles - 1) / tiles);
    splits = std::max(1, std::min(wanted, steps / kMinStepsPerSplit));
  }
  const int chunk_steps = steps > 0 ? (steps + splits - 1) / splits : 1;
  plan.splits = steps > 0 ? (steps + chunk_steps - 1) / chunk_steps : 1;  // no empty chunk
  plan.chunk = chunk_steps * kBlockK;
  plan.scratch_floats = plan.splits > 1 ? std::size_t(plan.splits) * s.rows * s.cols : 0;
  return plan;
}

// Split-K only: the partials of plan.splits chunks in `scratch` -> the outputs.
template <class Gemm>
void launch_split_reduce(const Gemm& g, const GemmPlan& plan, const float* scratch,
                         cudaStream_t stream) {
  const std::size_t count = std::size_t(g.size.rows) * g.size.cols;
  const std::size_t blocks = (count + kReduceThreads - 1) / kReduceThreads;
  conv_split_reduce_kernel4<<<int(std::min<std::size_t>(blocks, 1 << 20)), kReduceThreads, 0,
                              stream>>>(g, plan.splits, scratch);
  CUDA_CHECK_LAUNCH();
}

template <class Tl, class Gemm>
void launch_tile(const Gemm& g, const GemmPlan& plan, float* scratch, cudaStream_t stream) {
  const dim3 grid(unsigned((g.size.cols + Tl::BN - 1) / Tl::BN),
                  unsigned((g.size.rows + Tl::BM - 1) / Tl::BM), unsigned(plan.splits));
  const auto kernel = kernel_for<Tl>(g);
  kernel<<<grid, Tl::kThreads, 0, stream>>>(g, plan.chunk, scratch);
  CUDA_CHECK_LAUNCH();
  if (plan.splits > 1) launch_split_reduce(g, plan, scratch, stream);
}

// O = A * B for one direction: the tile kernel, then (split-K only) the reduction.
template <class Gemm>
void run_gemm(const Gemm& g, float* scratch, std::size_t scratch_floats, cudaStream_t stream) {
  if (g.size.rows <= 0 || g.size.cols <= 0) return;  // no output
  const GemmPlan plan = plan_gemm(g.size);
  if (plan.scratch_floats > scratch_floats)
    throw Error("internal: convolution shape larger than the one its scratch was sized for");
  switch (plan.tile) {
    case TileKind::m8n32:
      return launch_tile<Tile8x32>(g, plan, scratch, stream);
    case TileKind::m8n128:
      return launch_tile<Tile8x128>(g, plan, scratch, stream);
    case TileKind::m16n64:
      return launch_tile<Tile16x64>(g, plan, scratch, stream);
    case TileKind::m32n64:
      return launch_tile<Tile32x64>(g, plan, scratch, stream);
  }
}

// The GEMM sizes of the three directions; bwd-weights has one more column for the bias gradient.
GemmSize forward_size(const ConvDims& d) {
  return {d.M, d.N * d.H_out * d.W_out, d.C * d.K * d.K};
}
GemmSize backward_input_size(const ConvDims& d) {
  return {d.C, d.N * d.H * d.W, d.M * d.K * d.K};
}
GemmSize backward_weights_size(const ConvDims& d, bool with_bias) {
  return {d.M, d.C * d.K * d.K + (with_bias ? 1 : 0), d.N * d.H_out * d.W_out};
}

// The GEMM's row, column and depth indices are int (addresses are 64-bit): refuse shapes whose
// counts do not fit, and grids beyond gridDim.y's limit.
void check_fits_int(const ConvShape& s) {
  const long long n = s.n, c = s.c, h = s.h, w = s.w, m = s.m, k = s.k;
  const long long counts[] = {n * c * h * w, n * m * s.h_out() * s.w_out(), c * k * k + 1,
                              m * k * k};
  for (const long long count : counts)
    if (count > INT_MAX - 2 * kBlockK)
      throw Error("implicit-gemm convolution: shape too large for 32-bit GEMM indices");
  if (std::max(s.c, s.m) > 65535 * 8)
    throw Error("implicit-gemm convolution: too many maps for the grid");
}

class ImplicitGemmConvolution final : public ConvAlgorithm {
 public:
  explicit ImplicitGemmConvolution(const ConvShape& largest) : m_largest(largest) {
    check_fits_int(largest);
    // The splits of a direction depend on the batch (more columns, fewer splits, for the forward
    // and input-gradient passes; a longer depth, more splits, for the weight gradient): size each
    // scratch for the most any batch 1..largest.n needs.
    std::size_t forward = 0, input = 0, weights = 0;
    for (int n = 1; n <= largest.n; ++n) {
      ConvShape s = largest;
      s.n = n;
      const ConvDims d = dims_of(s);
      forward = std::max(forward, plan_gemm(forward_size(d)).scratch_floats);
      input = std::max(input, plan_gemm(backward_input_size(d)).scratch_floats);
      for (const bool bias : {false, true})
        weights = std::max(weights, plan_gemm(backward_weights_size(d, bias)).scratch_floats);
    }
    m_forward_scratch = Buffer<float>(Device::gpu, forward);
    m_input_scratch = Buffer<float>(Device::gpu, input);
    m_weights_scratch = Buffer<float>(Device::gpu, weights);
  }

  void forward(const ConvShape& s, const float* x, const float* weight, const float* bias, float* y,
               cudaStream_t stream) override {
    const ConvDims d = checked_dims(s);
    const ForwardGemm g{{d, forward_size(d)}, x, weight, bias, y};
    run_gemm(g, m_forward_scratch.data(), m_forward_scratch.size(), stream);
  }
  void backward_input(const ConvShape& s, const float* dL_dy, const float* weight, float* dL_dx,
                      cudaStream_t stream) override {
    const ConvDims d = checked_dims(s);
    const BackwardInputGemm g{{d, backward_input_size(d)}, dL_dy, weight, dL_dx};
    run_gemm(g, m_input_scratch.data(), m_input_scratch.size(), stream);
  }
  void backward_weights(const ConvShape& s, const float* x, const float* dL_dy, float* dL_dweight,
                        float* dL_dbias, const float* mask, cudaStream_t stream) override {
    const ConvDims d = checked_dims(s);
    // With N = 0 the depth is 0: the kernel runs no K-step and writes zeros, as the CPU does.
    const BackwardWeightsGemm g{
        {d, backward_weights_size(d, dL_dbias != nullptr)}, x, dL_dy, mask, dL_dweight, dL_dbias};
    run_gemm(g, m_weights_scratch.data(), m_weights_scratch.size(), stream);
  }

 private:
  ConvDims checked_dims(const ConvShape& s) const {
    if (s.n < 0 || s.n > m_largest.n || s.c != m_largest.c || s.h != m_largest.h ||
        s.w != m_largest.w || s.m != m_largest.m || s.k != m_largest.k)
      throw Error("internal: convolution shape other than the one its scratch was sized for");
    return dims_of(s);
  }

  ConvShape m_largest;
  Buffer<float> m_forward_scratch, m_input_scratch, m_weights_scratch;
};

const ConvRegistration kImplicitGemm{
    4, "implicit-gemm", "cuDNN paper, section 3", make_version<ImplicitGemmConvolution>,
    "GEMM whose unrolled-input tiles are built in shared memory only, never in global memory"};

}  // namespace

}  // namespace lenet5::cuda
