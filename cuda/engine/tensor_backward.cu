// The dense layers' backward pass on the tensor cores, and TensorBackward, which runs it and the
// convolutions' part (tensor_conv_backward.cu); tensor_backward.cuh has the plan.
//
// Every product is a set of m16n8 output tiles (tensor_tile.cuh's mma_tile), each tile's k running
// in steps of 8 in the same order every time (C5's forward product, C5Tile, in an order of its
// own, the same in both forward kernels): over the forward kernel's warps for the products
// over a tile (gemm_tiles), a warp each across the dense gradient blocks
// (tensor_dense_gradient.cuh) and dL/dS4's grid for the products over the batch. The operands are
// read through two functions, a(m, k) and b(k, n), that read at a clamped index and give zero
// outside the matrices, so that the transposed reads of the weight gradients (A = dLᵀ: a(m, k) =
// dL[k][m]) and the padded shapes (10 classes, 84 F6 units) need no separate code.
#include <algorithm>
#include <string>

#include "core/error.hpp"
#include "cuda/engine/block_cluster.cuh"
#include "cuda/engine/dependent_launch.cuh"
#include "cuda/engine/tensor_backward.cuh"
#include "cuda/engine/tensor_dense_gradient.cuh"
#include "cuda/engine/tensor_forward.cuh"
#include "cuda/engine/tensor_tile.cuh"
#include "cuda/runtime/check.hpp"

namespace lenet5::cuda {
namespace {

constexpr int kTile = TensorDenseBackward::kTile;

// The dense forward kernel's block: kDenseWarps warps, so that each of the output layer's input
// gradient's 11 tiles is one warp's, and, when a block ran a tile alone (kernel2), each of C5's 15
// and F6's 11 output n-tiles too (with 8 warps, two of them each, one after the other, made the
// kernel's chain).
constexpr int kDenseWarps = 16, kDenseThreads = 32 * kDenseWarps;

// The dense forward kernel runs a cluster of kDenseBlocks blocks per tile: the cluster's warps,
// numbered rank + kDenseBlocks warp (block `rank`'s warp `warp`), share C5's, F6's and C5's input
// gradient's output n-tiles out, so that each block reads a quarter of C5's weights from L2 (192
// KB) and runs a quarter of those layers' chains; each block sends its C5 and F6 columns to the
// others' shared memory. (Clusters of 8 were slower at batch 256: 256 blocks, two waves.) The
// output layer and its input gradient (two and eleven small tiles) run in every block, as does the
// loss: the same bits everywhere, and one cluster barrier fewer each. Every n-tile is computed as
// in a block alone, so the bits are those of one block per tile.
constexpr int kDenseBlocks = 4;
constexpr int kClusterWarps = kDenseBlocks * kDenseWarps;
// The warps of a block that own one of C5's n-tiles (at most): the others stage the later layers'
// weights meanwhile.
constexpr int kC5Warps = ((kC5 + 7) / 8 + kDenseBlocks - 1) / kDenseBlocks;

// Its shared memory, in floats from its start: a row per sample of S4's, C5's and F6's activations
// (stored for the products), the logits, and the output gradients of the output layer, F6 and C5.
namespace dense_layout {
constexpr int kD7Row = 12;
// S4's rows 400 floats apart (16 mod 32): C5Tile's float4 reads of rows g and g + 1, a quarter
// of a warp, take the 32 banks once.
constexpr int kS4Row = kFlat4;
constexpr int a4 = 0;
constexpr int a5 = a4 + kTile * kS4Row;
constexpr int a6 = a5 + kTile * kA5Row;
constexpr int z = a6 + kTile * kA6Row;
constexpr int d7 = z + kTile * kZRow;    // dL/dlogits
constexpr int d6 = d7 + kTile * kD7Row;  // dL/d(F6 pre-activation)
constexpr int d5 = d6 + kTile * kA6Row;  // dL/d(C5 pre-activation)
constexpr int w6 = d5 + kTile * kA5Row;  // F6's weights (84, 120) and biases, and the output
constexpr int b6 = w6 + kF6 * kC5;       // layer's (10, 84), staged while C5's products run
constexpr int w7 = b6 + kF6;
constexpr int b7 = w7 + kOut * kF6;
constexpr int floats = b7 + kOut;
static_assert(a4 % 4 == 0 && kS4Row % 32 == 16 && kFlat4 % 16 == 0,
              "S4's rows copied and read as float4s, two rows' reads in distinct banks");
}  // namespace dense_layout

struct DenseForwardArgs {
  const float* params;
  WholeStepOffsets at;
  int n;
  const std::uint8_t* labels;
  const float* s4_rows;          // (n, 400): the samples' S4 activations, 16-byte aligned
  float* records;                // (tiles * kTile, dense_record::floats)
  double* sample_loss;           // (n): each sample's loss, for the step's statistics
  std::int32_t* sample_correct;  // (n): 1 where the sample's prediction is its label
};

// The tile's S4 rows into shared memory, zero rows for a short last tile's missing samples. The
// copy's time is its reads' latency: all of a thread's in flight at once, 16 bytes each (rows of
// 400 floats keep every float4 aligned).
__device__ void load_s4_rows(const DenseForwardArgs& args, int first, float* a4) {
  constexpr int kQuads = kFlat4 / 4;
  constexpr int kPerThread = (kTile * kQuads + kDenseThreads - 1) / kDenseThreads;
  const float4* rows = reinterpret_cast<const float4*>(args.s4_rows);
  float4 value[kPerThread];
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const int i = min(int(threadIdx.x) + j * kDenseThreads, kTile * kQuads - 1);
    value[j] = rows[std::size_t(min(first + i / kQuads, args.n - 1)) * kQuads + i % kQuads];
  }
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const int i = int(threadIdx.x) + j * kDenseThreads, local = i / kQuads;
    if (i < kTile * kQuads)
      *reinterpret_cast<float4*>(a4 + local * dense_layout::kS4Row + 4 * (i % kQuads)) =
          first + local < args.n ? value[j] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
}

// The lanes that take one sample in logits_gradient: a half-warp, its first kOut lanes a class
// each.
constexpr int kLossLanes = 16;
static_assert(kOut <= kLossLanes && 32 % kLossLanes == 0, "a sample's classes in a half-warp");
static_assert(kTile * kLossLanes % 32 == 0 && kTile * kLossLanes <= kDenseThreads,
              "the tile's samples in whole warps of the block");

// dL/dlogits = (softmax(z) - onehot(label)) / n for the tile's samples (stored for R's products,
// which alone read it: tensor_dense_gradient.cuh's dense_record), each sample's loss and
// whether its prediction (the first maximum) is its label (whole_step_forward.cuh's
// loss_and_gradient's formula, in float as there: its sum of exponentials runs in class order
// where there it is a butterfly, so the two agree to float's rounding, not to the bit), and zero
// rows for a short last tile's missing ones, which then add nothing to any weight gradient. A
// half-warp per sample (threads 16 s to 16 s + 15: sample first + s), lane k computing class k's
// exponential, each lane adding all ten in class order from its neighbours' registers (the same
// sum, bit for bit, in every lane and as one thread adding them in a loop), so that the phase's
// chain is one exponential and one sum, not ten of each. `label` is the thread's sample's, read at
// the kernel's start (thread_sample_label). Every block of a tile's cluster computes it; only one
// (writes_loss) writes the loss and the correctness.
template <Precision R>
__device__ void logits_gradient(float* shared, const DenseForwardArgs& args, int first, int label,
                                bool writes_loss) {
  namespace D = dense_layout;
  const int local = int(threadIdx.x) / kLossLanes, k = int(threadIdx.x) % kLossLanes;
  if (local >= kTile) return;  // whole warps: the shuffles below take all 32 lanes
  const int sample = first + local;
  const float* z = shared + D::z + local * kZRow;
  int best = 0;
  float top = z[0];
  for (int c = 1; c < kOut; ++c)
    if (z[c] > top) {
      best = c;
      top = z[c];
    }
  const float exponential = expf(z[min(k, kOut - 1)] - top);
  const int lane0 = int(threadIdx.x) % 32 - k;  // the sample's first lane in the warp
  float sum = 0.0f;
#pragma unroll
  for (int c = 0; c < kOut; ++c) sum += __shfl_sync(0xffffffffu, exponential, lane0 + c);
  if (k >= kOut) return;
  float* d7 = shared + D::d7 + local * D::kD7Row;
  if (sample >= args.n) {
    d7[k] = 0.0f;
    return;
  }
  if (writes_loss && k == 0) {
    args.sample_loss[sample] = double(logf(sum) + top - z[label]);
    args.sample_correct[sample] = best == label;
  }
  d7[k] = Operands<R>::stored((exponential / sum - float(k == label)) / float(args.n));
}

// The label of the tile's sample that the calling thread's logits_gradient takes (threads 16 s to
// 16 s + 15, sample first + s; 0 for the others and past the batch), read at a kernel's start so
// that the read is not waited for later.
__device__ int thread_sample_label(const DenseForwardArgs& args, int first) {
  const int local = int(threadIdx.x) / kLossLanes;
  return local < kTile && first + local < args.n ? args.labels[first + local] : 0;
}

// The forward kernel's reads a chunk, in k-steps: F6's and C5's input gradients (k = 10 and 84
// outputs) read all their weights at once in TF32 (4 k-steps at a time in BF16 and FP32), and the
// dense layers' forward pass reads 50 k-steps of weights in TF32 (100 registers: C5's whole row),
// 25 in BF16 and FP32, whose products need registers of their own (the packed or split operands)
// and would spill with 50.
template <Precision R>
constexpr int kInputGradientChunk = R == Precision::tf32 ? 11 : 4;
template <Precision R>
constexpr int kDenseForwardChunk = R == Precision::tf32 ? 50 : 25;

// dL/d(pre-activation) (rows of `Ld`) = (dL/dy W) f'(y) for a dense layer y = f(W x + b) whose
// output gradient d_out (a row of LdOut per sample, Out wide) it reads, W (Out, In) row-major
// (staged in shared memory), y (rows of LdY) the activation of the layer below, stored by the
// forward pass; stored for R's products, which alone read it (dense_record). Warp `warp` of Warps
// takes the tiles warp, warp + Warps, ... (gemm_tiles).
template <Precision R, Activation A, int Out, int In, int LdOut, int Ld, int LdY, int Warps>
__device__ void input_gradient(const float* d_out, const float* weight, const float* y, float* d,
                               int warp, int lane) {
  gemm_tiles<R, kTile, In, Out, Warps, kInputGradientChunk<R>>(
      [d_out](int m, int k) { return d_out[m * LdOut + k]; },
      [weight](int k, int n) {
        const float value = weight[k * In + min(n, In - 1)];
        return n < In ? value : 0.0f;
      },
      [d, y](int m, int n, float value) {
        d[m * Ld + n] = Operands<R>::stored(value * activation_slope(A, y[m * LdY + n]));
      },
      warp, lane);
}

// Columns [0, Count) of block `rank`'s rows of the tile (rank, rank + Blocks, ...: a tile's Blocks
// blocks share them out; Ld floats apart in shared memory) into the same columns of their records,
// from record column `to`.
template <int Count, int Ld, int Blocks>
__device__ void rows_to_records(const float* rows, float* records, int to, int rank) {
  static_assert(kTile % Blocks == 0, "the blocks share the tile's rows out evenly");
  constexpr int kRows = kTile / Blocks;
  for (int i = int(threadIdx.x); i < kRows * Count; i += kDenseThreads) {
    const int row = rank + Blocks * (i / Count), column = i % Count;
    records[row * dense_record::floats + to + column] = rows[row * Ld + column];
  }
}

// Calls at(row, column) for every place of the tile's rows in block `rank`'s output n-tiles of an
// N-wide product (rank, rank + kDenseBlocks, ...: the tiles its warps took, numbered as the
// cluster's), by the whole block. With one m-tile, gemm_tiles' tile t is n-tile t, so its products
// and dense_tile's share their n-tiles out alike.
static_assert(kTile == 16, "one m-tile: a product's tiles are its n-tiles");
template <int N, class At>
__device__ void for_own_columns(int rank, At at) {
  constexpr int kOwnTiles = ((N + 7) / 8 + kDenseBlocks - 1) / kDenseBlocks;
  for (int i = int(threadIdx.x); i < kOwnTiles * kTile * 8; i += kDenseThreads) {
    const int column = 8 * (rank + kDenseBlocks * (i / (8 * kTile))) + i % 8;
    if (column < N) at(i / 8 % kTile, column);
  }
}

// Block `rank`'s columns of the tile's rows (an N-wide product's, Ld floats apart) into the same
// places of every other block of the cluster, whose products read whole rows.
template <int N, int Ld>
__device__ void send_own_columns(float* rows, int rank) {
  for (int peer = 1; peer < kDenseBlocks; ++peer) {
    float* remote = BlockCluster::peer(rows, (rank + peer) % kDenseBlocks);
    for_own_columns<N>(rank, [rows, remote](int row, int column) {
      remote[row * Ld + column] = rows[row * Ld + column];
    });
  }
}

// Count floats from global memory into shared memory by thread `thread` of Threads, all of its
// reads in flight at once.
template <int Count, int Threads>
__device__ void copy_to_shared(const float* from, float* to, int thread) {
  GlobalReads<Count, Threads> reads;
  reads.read(from, thread);
  reads.each(thread, [to](int i, float value) { to[i] = value; });
}

// C5's weights read 13 k-step pairs (52 registers) at a time, in every precision: the first chunk
// stays in registers while S4's rows load (C5Tile::read), and all 25 pairs held there took TF32's
// kernels to 128 registers with spills (ptxas).
constexpr int kC5PairChunk = 13;

// C5's n-tile nt of the tile's activations, Y = f(S4 W5ᵀ + b) stored for R's products, by one
// warp (C5's 15 n-tiles, a warp each in both kernels), as dense_tile computes a tile but each lane
// reading its weights and S4's values 16 bytes at a time: in k-steps 2j and 2j + 1, lane t takes
// the k's 16 j + 4 t and + 1 (step 2j), + 2 and + 3 (step 2j + 1), where dense_tile's takes 8 j + t
// and + 4. The same permutation of each step's k's on both sides, so the sums are C5's, added in
// another order. A weight read of a lane is then one float4 where it was four floats, each
// instruction reading eight rows of W5 either way, so the L1 handles a quarter of the wavefronts
// (what the phase waited for: docs/tensor-cores.md). In two halves: read() takes the first chunk
// of the lane's weights into registers, before S4's rows are in shared memory (the two reads' round
// trips then overlap); products() the rest. x's rows are kS4Row floats apart; W5 16-byte aligned.
static_assert(kC5 % 8 == 0 && kFlat4 % 16 == 0, "C5's n-tiles and k-step pairs whole");
template <Precision R>
class C5Tile {
 public:
  static constexpr int kPairs = kFlat4 / 16, kChunk = kC5PairChunk;

  __device__ C5Tile(const float* weight, int nt, int lane)
      : m_nt(nt),
        m_row(reinterpret_cast<const float4*>(weight + (8 * nt + lane / 4) * kFlat4) + lane % 4) {}

  // The lane's float4s of pairs first, first + 1, ... (a chunk; past the last, the last again).
  __device__ void read(int first = 0) {
#pragma unroll
    for (int i = 0; i < kChunk; ++i) m_w[i] = m_row[4 * min(first + i, kPairs - 1)];
  }

  template <Activation A>
  __device__ void products(const float* x, const float* bias, float* y, int lane) {
    const int g = lane / 4, t = lane % 4;
    const float4* top = reinterpret_cast<const float4*>(x + g * dense_layout::kS4Row) + t;
    const float4* bottom = top + 8 * dense_layout::kS4Row / 4;
    float acc[4] = {};
#pragma unroll
    for (int first = 0; first < kPairs; first += kChunk) {
      if (first > 0) read(first);
#pragma unroll
      for (int i = 0; i < kChunk && first + i < kPairs; ++i) {
        const float4 a_top = top[4 * (first + i)], a_bottom = bottom[4 * (first + i)];
        const float4 w = m_w[i];
        // S4's rows are stored for R's products: their bits are the operands.
        const std::uint32_t a0[4] = {__float_as_uint(a_top.x), __float_as_uint(a_bottom.x),
                                     __float_as_uint(a_top.y), __float_as_uint(a_bottom.y)};
        const std::uint32_t b0[2] = {Operands<R>::operand(w.x), Operands<R>::operand(w.y)};
        Operands<R>::mma(acc, a0, b0);
        const std::uint32_t a1[4] = {__float_as_uint(a_top.z), __float_as_uint(a_bottom.z),
                                     __float_as_uint(a_top.w), __float_as_uint(a_bottom.w)};
        const std::uint32_t b1[2] = {Operands<R>::operand(w.z), Operands<R>::operand(w.w)};
        Operands<R>::mma(acc, a1, b1);
      }
    }
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int row = g + 8 * (r / 2), out = 8 * m_nt + 2 * t + r % 2;
      y[row * kA5Row + out] = Operands<R>::stored(activate(A, acc[r] + bias[out]));
    }
  }

 private:
  int m_nt;
  const float4* m_row;
  float4 m_w[kChunk];
};

// F6's and the output layer's weights and biases into shared memory, by the warps that own none of
// C5's n-tiles, while the others run C5's products: the later layers' products then wait for no
// read from L2.
__device__ void stage_late_weights(const float* params, const WholeStepOffsets& at, float* shared,
                                   int warp) {
  namespace D = dense_layout;
  static_assert(kC5Warps < kDenseWarps, "warps left over from C5's n-tiles to stage with");
  constexpr int kThreads = kDenseThreads - 32 * kC5Warps;
  if (warp < kC5Warps) return;
  const int thread = int(threadIdx.x) - 32 * kC5Warps;
  copy_to_shared<kF6 * kC5, kThreads>(params + at.f6_weight, shared + D::w6, thread);
  copy_to_shared<kF6, kThreads>(params + at.f6_bias, shared + D::b6, thread);
  copy_to_shared<kOut * kF6, kThreads>(params + at.output_weight, shared + D::w7, thread);
  copy_to_shared<kOut, kThreads>(params + at.output_bias, shared + D::b7, thread);
}

// dL/dS4's kernel runs a block an SM (50 blocks at batch 128), so registers do not limit its
// blocks: FP32 reads its 15 k-steps at once too (one round trip to L2 where 8 made two). BF16
// keeps kGradientChunk's 8.
template <Precision R>
constexpr int kS4Chunk = R == Precision::bf16 ? kGradientChunk : 16;

// A block of kDenseWarps warps per tile of kTile samples: the dense layers' forward pass on the
// tile's S4 rows (C5 by C5Tile, F6 and the output layer by f6_and_output_layers as the evaluation
// runs them), the softmax
// cross-entropy's gradient and the input gradients of the output layer and F6 (products over the
// tile, the weights read from L2), then the tile's records and each sample's loss and
// correctness: what GPUs without thread block clusters run (compute capability 8.x), with
// kernel3's bits.
template <Precision R, Activation A>
__global__ void __launch_bounds__(kDenseThreads, 1)
    tensor_dense_forward_kernel2(DenseForwardArgs args) {
  wait_for_previous_grid();
  namespace D = dense_layout;
  float* const shared = dynamic_shared_floats();
  const int first = int(blockIdx.x) * kTile;
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int label = thread_sample_label(args, first);
  const float* params = args.params;
  const WholeStepOffsets& at = args.at;
  static_assert(kDenseWarps >= kC5 / 8, "a warp for each of C5's n-tiles");
  const bool c5_warp = warp < kC5 / 8;
  C5Tile<R> c5(params + at.c5_weight, min(warp, kC5 / 8 - 1), lane);
  if (c5_warp) c5.read();
  load_s4_rows(args, first, shared + D::a4);
  __syncthreads();
  if (c5_warp) c5.template products<A>(shared + D::a4, params + at.c5_bias, shared + D::a5, lane);
  __syncthreads();
  f6_and_output_layers<R, A, kTile, kDenseForwardChunk<R>, kDenseWarps>(
      shared + D::a5, shared + D::a6, shared + D::z, params, at, warp, lane);
  logits_gradient<R>(shared, args, first, label, true);
  __syncthreads();
  input_gradient<R, A, kOut, kF6, D::kD7Row, kA6Row, kA6Row, kDenseWarps>(
      shared + D::d7, params + at.output_weight, shared + D::a6, shared + D::d6, warp, lane);
  __syncthreads();
  input_gradient<R, A, kF6, kC5, kA6Row, kA5Row, kA5Row, kDenseWarps>(
      shared + D::d6, params + at.f6_weight, shared + D::a5, shared + D::d5, warp, lane);
  __syncthreads();
  float* records = args.records + std::size_t(first) * dense_record::floats;
  rows_to_records<kC5, kA5Row, 1>(shared + D::a5, records, dense_record::a5, 0);
  rows_to_records<kF6, kA6Row, 1>(shared + D::a6, records, dense_record::a6, 0);
  rows_to_records<kOut, D::kD7Row, 1>(shared + D::d7, records, dense_record::d7, 0);
  rows_to_records<kF6, kA6Row, 1>(shared + D::d6, records, dense_record::d6, 0);
  rows_to_records<kC5, kA5Row, 1>(shared + D::d5, records, dense_record::d5, 0);
}

// A cluster of kDenseBlocks blocks of kDenseWarps warps per tile of kTile samples: the dense
// layers' forward pass on the tile's S4 rows (C5 by C5Tile, the later layers by dense_tile as the
// evaluation runs them), the softmax
// cross-entropy's gradient and the input gradients of the output layer and F6 (products over the
// tile; C5's weights read from L2, the later layers' staged in shared memory meanwhile), then the
// tile's records and each sample's loss and correctness. dL/dS4 is tensor_s4_gradient_kernel1's;
// the products over the whole batch (the weight gradients) and the step's statistics are
// dense_gradient_block's (tensor_dense_gradient.cuh: in a training step, blocks of the
// convolutions' backward launch).
// Thread block clusters need compute capability 9.0: GPUs without them run kernel2.
template <Precision R, Activation A>
__global__ void __launch_bounds__(kDenseThreads, 1)
    tensor_dense_forward_kernel3(DenseForwardArgs args) {
  wait_for_previous_grid();
  namespace D = dense_layout;
  constexpr int kChunk = kDenseForwardChunk<R>;
  float* const shared = dynamic_shared_floats();
  const int rank = BlockCluster::rank(), first = int(blockIdx.x) / kDenseBlocks * kTile;
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int cluster_warp = rank + kDenseBlocks * warp;
  const float* params = args.params;
  const WholeStepOffsets& at = args.at;
  BlockCluster::arrive();
  const int label = thread_sample_label(args, first);
  static_assert(kClusterWarps >= kC5 / 8, "a warp for each of C5's n-tiles");
  const bool c5_warp = cluster_warp < kC5 / 8;
  C5Tile<R> c5(params + at.c5_weight, min(cluster_warp, kC5 / 8 - 1), lane);
  if (c5_warp) c5.read();
  load_s4_rows(args, first, shared + D::a4);
  __syncthreads();
  if (c5_warp) c5.template products<A>(shared + D::a4, params + at.c5_bias, shared + D::a5, lane);
  stage_late_weights(params, at, shared, warp);
  __syncthreads();
  BlockCluster::wait();  // every block has started: its shared memory may be written
  send_own_columns<kC5, kA5Row>(shared + D::a5, rank);
  BlockCluster::sync();
  // Each layer's rows go to the records as soon as they are final (stores that no warp waits
  // for), where writing them all after the last barrier made that phase a loop of its own.
  float* records = args.records + std::size_t(first) * dense_record::floats;
  rows_to_records<kC5, kA5Row, kDenseBlocks>(shared + D::a5, records, dense_record::a5, rank);
  dense_tile<R, kC5, kF6, kA5Row, kA6Row, kTile, true, true, A, kChunk, kClusterWarps>(
      shared + D::a5, shared + D::w6, shared + D::b6, shared + D::a6, cluster_warp, lane);
  __syncthreads();
  send_own_columns<kF6, kA6Row>(shared + D::a6, rank);
  // After the last remote writes: no block leaves while another may still write its memory.
  BlockCluster::sync();
  rows_to_records<kF6, kA6Row, kDenseBlocks>(shared + D::a6, records, dense_record::a6, rank);
  dense_tile<R, kF6, kOut, kA6Row, kZRow, kTile, false, false, A, kChunk, kDenseWarps>(
      shared + D::a6, shared + D::w7, shared + D::b7, shared + D::z, warp, lane);
  __syncthreads();
  logits_gradient<R>(shared, args, first, label, rank == 0);
  __syncthreads();
  rows_to_records<kOut, D::kD7Row, kDenseBlocks>(shared + D::d7, records, dense_record::d7, rank);
  input_gradient<R, A, kOut, kF6, D::kD7Row, kA6Row, kA6Row, kDenseWarps>(
      shared + D::d7, shared + D::w7, shared + D::a6, shared + D::d6, warp, lane);
  __syncthreads();
  rows_to_records<kF6, kA6Row, kDenseBlocks>(shared + D::d6, records, dense_record::d6, rank);
  input_gradient<R, A, kF6, kC5, kA6Row, kA5Row, kA5Row, kClusterWarps>(
      shared + D::d6, shared + D::w6, shared + D::a5, shared + D::d5, cluster_warp, lane);
  __syncthreads();
  const float* d5 = shared + D::d5;
  for_own_columns<kC5>(rank, [d5, records](int row, int column) {
    records[row * dense_record::floats + dense_record::d5 + column] = d5[row * kA5Row + column];
  });
}

struct S4GradientArgs {
  const float* records;  // (tiles * kTile, dense_record::floats): dL/dC5 at dense_record::d5
  const float* w5;       // c5.weight (120, 400)
  int n;
  float* d4;  // (n, 400)
};
constexpr int kS4Tiles = kFlat4 / 8;  // dL/dS4's n-tiles
static_assert(kFlat4 % 8 == 0, "whole n-tiles");

// dL/dS4 = dL/dC5 W5 (C5's input gradient, a row of 400 per sample: where the convolutions'
// backward pass starts; S4's own slope is theirs to apply), a warp per m16n8 tile over the batch
// (50 tiles per 16 samples), dL/dC5 read from the records. A launch of its own, between the dense
// forward kernel and the convolutions' backward: at the end of the dense forward kernel's chain
// (one tile a warp of the cluster, or a quarter of k a block) it cost more than this launch
// (docs/tensor-cores.md). Its launch bounds name a minimum of one block an SM (a batch of 128 is
// 50 blocks), which lets ptxas give a thread more registers: without it ptxas kept 34 a thread in
// TF32, too few for the chunk's 15 k-steps of operands to be read before their products.
template <Precision R>
__global__ void __launch_bounds__(kThreads, 1) tensor_s4_gradient_kernel1(S4GradientArgs args) {
  wait_for_previous_grid();
  // The convolutions' backward may be scheduled now, beside this launch's few blocks: its samples'
  // blocks read and stage what the forward kernels wrote meanwhile, and wait for this kernel's
  // end before they read dL/dS4's rows (its dense blocks before anything: they write C5's weights,
  // which this kernel reads).
  allow_next_grid();
  const int tile = int(blockIdx.x) * kWarps + int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  if (tile >= tiles_of(args.n, 16) * kS4Tiles) return;
  const float* records = args.records;
  const float* w5 = args.w5;
  float* d4 = args.d4;
  const int n = args.n;
  mma_tile<R, kS4Chunk<R>>(
      tile / kS4Tiles * 16, tile % kS4Tiles * 8, std::integral_constant<int, kC5>{},
      [records](int m, int k) {  // dL/dC5, stored for R's products (dense_record): its operand
        return __float_as_uint(
            records[std::size_t(m) * dense_record::floats + dense_record::d5 + k]);
      },
      [w5](int k, int j) { return w5[k * kFlat4 + j]; },  // the parameters: rounded here
      [d4, n](int m, int j, float value) {
        if (m < n) d4[std::size_t(m) * kFlat4 + j] = value;
      },
      lane);
}

// The step gradient kernel's: the convolutions' slots, or where conv.slots is null the dense
// layers' part (the slots' sum reads only dense.n and dense.gradients), and SGD's step (none where
// update.lr is null).
struct StepGradientArgs {
  DenseGradientArgs dense;
  ConvPartials conv;
  ConvSlot slot;
  SgdUpdate update;
};

// The step's last launch, once the convolutions' backward kernel has written its slots: its
// kConvSlotBlocks blocks add the convolutions' slots (tensor_tile.cuh's sum_conv_slots), each
// gradient written, and SGD's step taken with it, where it is final (TensorDenseBackward::
// add_conv_slots). Where conv.slots is null, its dense_gradient_blocks blocks compute the dense
// weight gradients and the step's statistics instead (dense_gradient_block, which a training
// step runs in the convolutions' backward launch: TensorDenseBackward::weight_gradients).
// Two blocks an SM (at most 128 registers a thread).
template <Precision R>
__global__ void __launch_bounds__(kThreads, 2) tensor_step_gradient_kernel1(StepGradientArgs args) {
  wait_for_previous_grid();
  static_assert(kSumWarps == kWarps, "the slots' sum takes the kernel's block");
  __shared__ float warp_sums[kSumWarps][32];
  const int block = int(blockIdx.x);
  if (args.conv.slots)
    sum_conv_slots(args.conv.slots, args.dense.n, args.slot, args.conv.c3_mask,
                   args.dense.gradients, args.update, block, warp_sums);
  else
    dense_gradient_block<R>(block, args.dense, args.update);
}

using ForwardKernel = void (*)(DenseForwardArgs);
using S4Kernel = void (*)(S4GradientArgs);
using GradientKernel = void (*)(StepGradientArgs);

// kernel_for_training's kernels: the dense forward kernel (a cluster of blocks a tile, or a block
// alone), whose layers have no subsampling, and the step gradient kernel, which has no activation
// either.
struct DenseKernels {
  bool clusters;
  template <Precision R, Activation A, Subsampling>
  ForwardKernel of() const {
    return clusters ? tensor_dense_forward_kernel3<R, A> : tensor_dense_forward_kernel2<R, A>;
  }
};
struct S4GradientKernels {
  template <Precision R, Activation, Subsampling>
  S4Kernel of() const {
    return tensor_s4_gradient_kernel1<R>;
  }
};
struct StepGradientKernels {
  template <Precision R, Activation, Subsampling>
  GradientKernel of() const {
    return tensor_step_gradient_kernel1<R>;
  }
};

ForwardKernel forward_kernel_for(const NetConfig& config, bool clusters) {
  return kernel_for_training(config, DenseKernels{clusters});
}

// Whether this GPU runs the cluster kernel: thread block clusters need compute capability 9.0, and
// the kernel compiled for it (not the default build's compute_75 PTX, whose traps stand in).
bool clusters_run(const NetConfig& config) {
  return loaded_ptx_version(reinterpret_cast<const void*>(forward_kernel_for(config, true))) >= 90;
}

// The forward kernel's shared memory: kernel3's stages the later layers' weights past the rows.
std::size_t forward_shared_bytes(bool clusters) {
  return sizeof(float) * std::size_t(clusters ? dense_layout::floats : dense_layout::w6);
}

// The forward kernel's blocks for the tiles of n samples.
int tile_blocks(int n, bool clusters) {
  return tiles_of(n, kTile) * (clusters ? kDenseBlocks : 1);
}

// The forward kernel over args.n samples: a cluster of kDenseBlocks blocks per tile, or a block,
// in one launch path (launch_kernel: the cluster's size where it has clusters, programmatic where
// it may).
void launch_dense_forward(ForwardKernel kernel, bool clusters, const DenseForwardArgs& args,
                          cudaStream_t stream, bool programmatic) {
  launch_kernel(
      {dim3(unsigned(tile_blocks(args.n, clusters))), dim3(kDenseThreads),
       forward_shared_bytes(clusters), stream, programmatic, unsigned(clusters ? kDenseBlocks : 1)},
      kernel, args);
}

}  // namespace

TensorDenseBackward::TensorDenseBackward(const NetConfig& config, const ParamLayout& layout,
                                         int max_batch, bool allow_clusters)
    : m_config(supported(config)),
      m_offsets(offsets_of(layout)),
      m_max_batch(checked_batch(max_batch)),
      m_clusters(allow_clusters && clusters_run(config)),
      m_programmatic(has_programmatic_launch(forward_kernel_for(config, m_clusters))),
      m_records(Device::gpu,
                std::size_t(tiles_of(max_batch, kTile)) * kTile * dense_record::floats),
      m_sample_loss(Device::gpu, std::size_t(max_batch)),
      m_sample_correct(Device::gpu, std::size_t(max_batch)) {
  prepare_tile_kernel(forward_kernel_for(config, m_clusters), forward_shared_bytes(m_clusters),
                      kTile);
}

void TensorDenseBackward::check_params(const float* params) const {
  // C5's weights are read as float4s (C5Tile).
  if (reinterpret_cast<std::uintptr_t>(params + m_offsets.c5_weight) % alignof(float4) != 0)
    throw Error("internal: C5's weights for the tensor cores' dense part must be 16-byte aligned");
}

void TensorDenseBackward::forward(const std::uint8_t* labels, int n, const float* params,
                                  const float* s4_rows, float* d4, cudaStream_t stream) {
  check_fits(n, m_max_batch);
  // The forward kernel copies S4's rows as float4s.
  if (!s4_rows || reinterpret_cast<std::uintptr_t>(s4_rows) % alignof(float4) != 0)
    throw Error(
        "internal: S4's rows for the tensor cores' dense part must be given, 16-byte "
        "aligned");
  check_params(params);
  const DenseForwardArgs args{params,
                              m_offsets,
                              n,
                              labels,
                              s4_rows,
                              m_records.data(),
                              m_sample_loss.data(),
                              m_sample_correct.data()};
  launch_dense_forward(forward_kernel_for(m_config, m_clusters), m_clusters, args, stream,
                       m_programmatic);
  const S4GradientArgs s4_args{m_records.data(), params + m_offsets.c5_weight, n, d4};
  const int warps = tiles_of(n, 16) * kS4Tiles;
  launch_kernel(
      {dim3(unsigned((warps + kWarps - 1) / kWarps)), dim3(kThreads), 0, stream, m_programmatic},
      kernel_for_training(m_config, S4GradientKernels{}), s4_args);
}

namespace {

// What the launches that take SGD's step need for it (none: the gradient only).
SgdUpdate sgd_update_of(const SgdStep* step) {
  if (!step) return {};
  if (step->settings.optimizer != kSgdName)
    throw Error("internal: the tensor-core step applies SGD, not " + step->settings.optimizer);
  if (step->settings.momentum > 0 && !step->velocity)
    throw Error("internal: the tensor-core step's SGD has momentum and no velocity");
  SgdUpdate update;
  // The same float conversions as cuda/kernels/optimizer.cu's.
  update.mu = float(step->settings.momentum);
  update.decay = float(step->settings.weight_decay);
  update.nesterov = step->settings.nesterov;
  update.lr = step->lr;
  update.params = step->params;
  update.velocity = step->velocity;
  return update;
}

}  // namespace

DenseGradientWork TensorDenseBackward::gradient_work(int n, const float* s4_rows, float* gradients,
                                                     StepStats* stats, const SgdStep* step) const {
  check_fits(n, m_max_batch);
  return {{m_records.data(), s4_rows, n, gradients, m_offsets, m_sample_loss.data(),
           m_sample_correct.data(), stats},
          sgd_update_of(step)};
}

void TensorDenseBackward::weight_gradients(int n, const float* s4_rows, float* gradients,
                                           cudaStream_t stream, StepStats* stats) {
  const DenseGradientWork work = gradient_work(n, s4_rows, gradients, stats);
  const StepGradientArgs args{work.args, ConvPartials{}, ConvSlot::of(m_offsets), work.update};
  launch_kernel({dim3(unsigned(dense_gradient_blocks(work.args.tiles_a_block))), dim3(kThreads), 0,
                 stream, m_programmatic},
                kernel_for_training(m_config, StepGradientKernels{}), args);
}

void TensorDenseBackward::add_conv_slots(int n, float* gradients, cudaStream_t stream,
                                         const ConvPartials& conv, const SgdStep* step) {
  check_fits(n, m_max_batch);
  const StepGradientArgs args{
      {nullptr, nullptr, n, gradients, m_offsets, nullptr, nullptr, nullptr},
      conv,
      ConvSlot::of(m_offsets),
      sgd_update_of(step)};
  launch_kernel({dim3(kConvSlotBlocks), dim3(kThreads), 0, stream, m_programmatic},
                kernel_for_training(m_config, StepGradientKernels{}), args);
}

void TensorDenseBackward::dense_gradients(const std::uint8_t* labels, int n, const float* params,
                                          const float* s4_rows, float* gradients, float* d4,
                                          cudaStream_t stream, StepStats* stats) {
  forward(labels, n, params, s4_rows, d4, stream);
  weight_gradients(n, s4_rows, gradients, stream, stats);
}

TensorBackward::TensorBackward(const NetConfig& config, const ParamLayout& layout, int max_batch,
                               SlotSum slot_sum)
    : m_dense(config, layout, max_batch),
      m_conv(config, layout, max_batch),
      m_d4(Device::gpu, std::size_t(max_batch) * kFlat4),
      m_slot_sum(slot_sum),
      m_multiprocessors(current_multiprocessors()) {
  if (slot_sum == SlotSum::in_backward_launch && !m_conv.can_add_slots())
    throw Error(
        "internal: this GPU holds too few of the convolutions' backward blocks at once for them "
        "to add the slots");
}

bool TensorBackward::adds_slots_in_backward(int n) const {
  switch (m_slot_sum) {
    case SlotSum::own_launch:
      return false;
    case SlotSum::in_backward_launch:
      return true;
    case SlotSum::by_batch:
      return n > m_multiprocessors && m_conv.can_add_slots();
  }
  return false;
}

void TensorBackward::gradients(const std::uint8_t* images, const std::uint8_t* labels, int n,
                               const float* params, float* gradients, cudaStream_t stream,
                               const float* field, StepStats* stats) {
  run(images, labels, n, params, gradients, stream, field, stats, nullptr);
}

void TensorBackward::train_step(const float* field, const std::uint8_t* labels, int n,
                                const SgdStep& step, float* gradients, cudaStream_t stream,
                                StepStats* stats, const std::function<void()>& after_conv_forward) {
  if (!field || !labels)
    throw Error("internal: a training step needs its batch's field and labels");
  run(nullptr, labels, n, step.params, gradients, stream, field, stats, &step, after_conv_forward);
}

void TensorBackward::run(const std::uint8_t* images, const std::uint8_t* labels, int n,
                         const float* params, float* gradients, cudaStream_t stream,
                         const float* field, StepStats* stats, const SgdStep* step,
                         const std::function<void()>& after_conv_forward) {
  // The dense weight gradients run in the convolutions' backward launch, on the SMs its samples
  // leave room on (they need nothing it computes), and the last launch only adds the slots (where
  // that launch does not: adds_slots_in_backward).
  // Each launch is programmatic (dependent_launch.cuh) where the kernels allow it. Two kernels
  // call allow_next_grid after their wait: dL/dS4, so that the convolutions' backward's blocks
  // read and stage the forward kernels' outputs while its products run, and the convolutions'
  // backward, for the slots' sum (not where it adds them). The others' next kernel is scheduled
  // as their last block exits, and each kernel but the convolutions' backward waits as its first
  // statement: with every kernel released early, or the slots' sum or the dense forward too, the
  // step was longer (docs/tensor-cores.md).
  const DenseGradientWork dense =
      m_dense.gradient_work(n, m_conv.s4_rows(), gradients, stats, step);
  m_dense.check_params(params);  // before the step's first launch
  m_conv.conv_forward(images, n, params, stream, field);
  if (after_conv_forward) after_conv_forward();
  m_dense.forward(labels, n, params, m_conv.s4_rows(), m_d4.data(), stream);
  const bool in_backward = adds_slots_in_backward(n);
  m_conv.conv_gradients(images, n, params, m_d4.data(), stream, field, &dense, in_backward);
  if (!in_backward) m_dense.add_conv_slots(n, gradients, stream, m_conv.partials(), step);
}

}  // namespace lenet5::cuda
