// The convolutions' part of the training step on the tensor cores (tensor_backward.cuh has the
// plan): their forward pass, a block per sample, before the dense part, and their backward pass
// from dL/dS4 down to C1's weight gradient, a block per sample, after it; that launch also runs
// the dense layers' weight gradients (tensor_dense_gradient.cuh) in blocks after the samples'.
//
// tensor_conv_forward_kernel2, for its sample (its field read from the batch gathered before the
// step, or, given no field, its image read and normalised): the block's 8 warps share the sample's
// C1-S2 window pairs out (tensor_tile.cuh's c1_s2, pairs warp, warp + 8, ...), then one (window
// pair, n-tile) of C3-S4 each (c3_s4): the forward pass's own code, so in TF32 the same bits as the
// evaluation's (with BF16 operands, C3 reads S2 as BF16 pairs, pair_s2, written where the field
// was). S4's activations go to the sample's row for the dense part; S2's activations and each max
// window's first maximum to the sample's record in global memory (about 6 KB a sample: a batch's
// records stay in L2 until the backward kernel reads them).
//
// tensor_conv_backward_kernel2 (kernel1, in the history, ran a sample per warp and recomputed the
// forward pass, 8 samples a block: a batch of 128 filled 16 SMs), for its sample:
//   dL/dz4 = dL/dS4 f'(S4), S4's bias gradient the sum of each map's dL/dz4;
//   dL/dC3 = dL/dz4 sent back through each 2x2 window (pool_window.cuh's window_gradient);
//   C3's rows T (140 x 30): T[(u, v)][(c, p)] = sum over output maps m and tap columns q of
//     W3[m][c][p][q] dL/dC3[m][u][v - q] (zero past the map's columns), for C3's rows u (0-9) and
//     S2's columns v (0-13): the transposed convolution along each row alone, an implicit GEMM of
//     9 m-tiles x 4 n-tiles x 10 k-steps, W3 the C3 table's masked weights staged for it
//     (ConvWeightReads::write_c3_rows): a 2-D transposed convolution as one implicit GEMM
//     (S2's 196 positions x 16 maps x 25 taps) spends most of its products on the zeros past
//     dL/dC3's borders, this one only on the 4 columns past each row's ends;
//   C3's weight gradient G3 (16 maps x 150) = dL/dC3 (16 x 100) X2 (100 x 150), X2 gathered from
//     S2 (X2[(y, x)][(c, 5 p + q)] = S2[c][y + p][x + q]), its 19 n-tiles 2 or 3 a warp;
//   dL/dz2 = f'(S2) times the rows' sums down each column (dL/dS2[c][u][v] = the sum over tap rows
//     p of T[(u - p, v)][(c, p)], in order), and dL/dC1 from it through each window (its average or
//     first maximum), a thread per window; S2's bias gradient the sum of each map's dL/dz2;
//   C1's weight gradient G1 (25 taps x 6 maps) = X (25 x 784 positions) dL/dC1 (784 x 6), where
//     dL/dC1 is the one written with dL/dz2 (over dL/dC3's room, free by then) and X read from
//     the input field: warp w takes m-tile w % 2 over the positions' quarter w / 2, and the
//     quarters are added in order.
// The bias gradients are each map's values summed by one warp, in a fixed order. Every product is
// m16n8k8 tiles of mma.sync through Operands<R> (tensor_mma.cuh), each tile's k-steps in order.
// Each sample's gradients go to its own slot of partial sums (tensor_tile.cuh's partial::), added
// in a fixed order by the step's gradient kernel (tensor_backward.cu's
// tensor_step_gradient_kernel1): the same bits every run (in a training step, that launch also
// applies SGD's update to the convolutions' parameters, and the dense blocks of this one to the
// dense layers': TensorBackward::train_step).
#include <string>

#include "core/error.hpp"
#include "cuda/engine/dependent_launch.cuh"
#include "cuda/engine/tensor_backward.cuh"
#include "cuda/engine/tensor_dense_gradient.cuh"
#include "cuda/engine/tensor_tile.cuh"
#include "cuda/runtime/check.hpp"
#include "cuda/runtime/runtime.hpp"

namespace lenet5::cuda {
namespace {

using pool::window_gradient;

constexpr int kSide1 = 2 * kSide2, kC1Positions = kSide1 * kSide1;  // C1: 28 x 28
constexpr int kSide3 = 2 * kSide4, kC3Positions = kSide3 * kSide3;  // C3: 10 x 10
constexpr int kW1 = kMaps1 * kTaps;                                 // C1's weights
constexpr int kQuarters = kWarps / 2;               // C1's weight gradient: 2 m-tiles x 4 quarters
constexpr int kQuarter = kC1Positions / kQuarters;  // 196 positions
static_assert(kC1Positions % kQuarters == 0, "whole quarters");
// dL/dC3's maps in the backward kernel: rows kD3Row floats apart after kD3Pad zeros, so that
// each row's 4 zeros past its 10 values are the next row's 4 before them, and C3's rows read
// dL/dC3[m][u][v - q] for every v (0-13) and q (0-4) without a bounds test; maps kD3Map floats
// apart, 164 = 4 (mod 32), so that both products' A loads cover every bank once: C3's rows' (lane
// (g, t) position g of maps 2 t and 2 t + 1, 8 t + g and 8 t + 4 + g) and C3's weight gradient's
// (map g at position t, 4 g + t). With maps t and t + 4 a lane, as the fragment's k's come, 152 =
// 24 (mod 32) served the first and only 164 the second.
constexpr int kD3Pad = kK - 1, kD3Row = kSide3 + kD3Pad, kD3Map = 164;
static_assert(kD3Map >= kD3Pad + kSide3 * kD3Row && kD3Map % 32 == 4, "a map's rows, banks");
// With BF16 operands C3's rows read dL/dC3 as BF16 words of two maps (d3_pair_half), word pairs
// kD3PairMap words apart: 152 = 24 (mod 32), so that lane (g, t)'s A loads (position g of pair t)
// cover every bank once (8 t + g).
constexpr int kMapPairs3 = kMaps3 / 2, kD3PairMap = 152;
static_assert(kD3PairMap >= kD3Pad + kSide3 * kD3Row && kD3PairMap % 32 == 24, "pairs, banks");
// C3's rows T (c3_rows), stored transposed: a row of kTRow floats for each column (c, p), one
// for each (u, v) of the 9 m-tiles, 164 = 4 (mod 32) so that a warp's writes of one accumulator
// register (columns 2 t, positions g) cover every bank once.
constexpr int kRowPositions = kSide3 * kSide2, kRowColumns = kMaps1 * kK;  // 140, 30
constexpr int kRowMTiles = (kRowPositions + 15) / 16, kTRow = 164;         // 9
static_assert(kTRow >= 16 * kRowMTiles && kTRow % 32 == 4, "whole m-tiles a row, banks");
static_assert(kRowMTiles == kWarps + 1 && kC3RowNTiles <= kWarps, "a warp's m-tile, and one more");

// A sample's record in global memory, what the forward kernel keeps for the backward one, in
// floats from its start (the first maxima as bytes; average subsampling writes and reads none).
namespace record {
constexpr int a2 = 0;  // S2's activation (6, 14, 14), stored for the products
constexpr int which2 = a2 + kWarpS2;          // S2's first maxima, bytes (6 x 196)
constexpr int which4 = which2 + kWarpS2 / 4;  // S4's first maxima, bytes (400)
constexpr int floats = which4 + kFlat4 / 4;
static_assert(kWarpS2 % 4 == 0 && kFlat4 % 4 == 0, "whole floats of bytes");
}  // namespace record

// S2's rows in the forward kernel's shared memory are kS2Row floats apart (its maps 14 rows): C3's
// gathers (a lane a window's corner plus a tap, c3_s4) then meet fewer bank conflicts than with
// rows 14 floats apart, as floats and as BF16 pairs (docs/tensor-cores.md counts them). The record
// keeps S2 unpadded.
constexpr int kS2Row = 22;

// The forward kernel's shared memory, in floats from its start.
namespace forward_layout {
constexpr int w1 = 0;                // C1's B layout, as the forward pass stages it
constexpr int w3 = w1 + 8 * kW1Row;  // C3's B layout
constexpr int s2_bias = w3 + kMaps3 * kW3Row;
constexpr int s4_bias = s2_bias + 8;
constexpr int x = s4_bias + kMaps3;  // the input field (32 x 32), stored for the products
constexpr int a2 = x + kWarpX;       // S2's activation (6, 14, 14), the same, rows kS2Row apart
constexpr int floats = a2 + kMaps1 * kSide2 * kS2Row;
static_assert(kMapPairs1 * kSide2 * kS2Row <= kWarpX, "S2's BF16 pairs fit where the field was");
}  // namespace forward_layout

// The backward kernel's shared memory, in floats from its start.
namespace conv_layout {
constexpr int w3_rows = 0;  // C3's weights as c3_rows reads them (c3_row_pair's layout)
// The input field (32 x 32), stored for the products, its rows x_row floats apart: 40 = 8 (mod
// 32), so that each of C1's weight gradient's A loads (a lane a tap of 8 consecutive ones, at 4
// consecutive positions) finds its rows' values in distinct banks, where rows 32 floats apart put
// taps (p, q) and (p + 1, q) in one bank: every load two wavefronts.
constexpr int x = w3_rows + kC3RowFloats, x_row = kField + 8;
constexpr int rec = x + kField * x_row;   // the sample's record, as record:: lays it out
constexpr int a4 = rec + record::floats;  // S4's activation, then dL/dz4 (400)
// dL/dC3 (16 maps of kD3Map floats, d3_at), stored for R's products.
constexpr int d3 = a4 + kFlat4;
constexpr int c1_gradient = d3;  // then dL/dC1 (6, 28, 28), stored for R's products, over dL/dC3
// dL/dC1's maps c1_map floats apart: 804 = 4 (mod 32), so that the six maps' columns that C1's
// weight gradient reads at once (B's, a lane per map and position) lie in banks 4 apart, where
// 784 = 16 (mod 32) put maps 0, 2 and 4 in one bank.
constexpr int c1_map = kC1Positions + 20;
constexpr int d3_floats = kMaps3 * kD3Map, c1_floats = kMaps1 * c1_map;
// With BF16 operands, dL/dC3 a second time after it, as BF16 words of output maps 2 P and 2 P + 1
// (2 P's in the lower half), kD3PairMap words a pair, in the room dL/dC1 takes later.
constexpr int d3_pairs = d3 + d3_floats, d3_pair_floats = kMapPairs3 * kD3PairMap;
static_assert(d3_floats + d3_pair_floats <= c1_floats, "dL/dC3's BF16 words fit in the room");
constexpr int d2 = d3 + (d3_floats > c1_floats ? d3_floats : c1_floats);  // dL/dz2 (6, 14, 14)
constexpr int bias2 = d2 + kWarpS2;                                       // s2.bias's gradient (6)
constexpr int bias4 = bias2 + 8;                                          // s4.bias's (16)
constexpr int rows = bias4 + kMaps3;  // C3's rows T, transposed (30 rows of kTRow)
constexpr int g1 = rows;  // C1's weight gradient by quarter (4, 6, 25), over T once it is read
constexpr int floats = rows + kRowColumns * kTRow;
static_assert(c1_map % 32 == 4, "B's six map columns in banks 4 apart");
static_assert(w3_rows % 2 == 0 && d3 % 2 == 0 && d3_floats % 2 == 0, "float2s");
static_assert(kQuarters * kW1 <= kRowColumns * kTRow, "G1's quarters fit where T was");
}  // namespace conv_layout

struct ConvForwardArgs {
  TileInputs in;
  float* s4_rows;  // (n, 400)
  float* records;  // (n, record::floats)
};

struct ConvBackwardArgs {
  TileInputs in;
  const float* s4_rows;  // (n, 400): S4's activations
  const float* records;  // (n, record::floats)
  const float* d4;       // (n, 400): dL/d(S4's activation)
  float* partials;       // (n, partial::floats)
  DenseGradientWork dense;  // run by the blocks past the samples' (none where the grid has n)
  // Where not null, the samples' blocks add the slots themselves (add_slots_once_written), with
  // dense's gradients and update: [0] counts the slots written, [1] the blocks done adding; zero
  // before the launch, and left zero by it.
  int* slot_counts;
  ConvSlot slot;  // where the slots' floats go in the layout
};

// A gpu-scope acquire load: what the writers released before their count is visible after it.
__device__ inline int load_acquire(const int* at) {
  int value;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(value) : "l"(at) : "memory");
  return value;
}

// After a sample's block has written its slot: the block counts it, and the last kConvSlotBlocks
// blocks to count (or all n, where fewer) each add a share of the slots' 32-float chunks, as the
// slots' own launch does (sum_conv_slots: the same bits), once the count reaches n; the last to
// finish sets the counts back to zero. The others leave at once. Those that wait hold an SM each
// while the blocks they wait for run: the owner launches this only where the GPU holds more of the
// kernel's blocks at once than ever wait (TensorConvBackward::can_add_slots). The count is a grid
// barrier's: the block's writes, a barrier, then one thread's fence and atomic add.
static_assert(conv_layout::floats > kSumWarps * 32,
              "room for warp_sums and the place in the count");
// The sample's block's shared memory, no longer read, holds the block's place in the count and the
// sums' warp_sums (as static shared memory they would take room from every launch's blocks).
__device__ void add_slots_once_written(const ConvBackwardArgs& args, float* shared) {
  float(*warp_sums)[32] = reinterpret_cast<float(*)[32]>(shared);
  int* place_in_count = reinterpret_cast<int*>(shared + kSumWarps * 32);
  __syncthreads();  // every thread's slot writes, and its last read of `shared`, before the count
  if (threadIdx.x == 0) {
    __threadfence();
    *place_in_count = atomicAdd(args.slot_counts, 1);
  }
  __syncthreads();
  const int n = args.in.n, adders = min(n, kConvSlotBlocks);
  const int adder = *place_in_count - (n - adders);
  if (adder < 0) return;
  if (threadIdx.x == 0)
    while (load_acquire(args.slot_counts) < n) {
    }
  __syncthreads();
  for (int chunk = adder; chunk < kConvSlotBlocks; chunk += adders) {
    sum_conv_slots<true>(args.partials, n, args.slot, args.in.c3_mask, args.dense.args.gradients,
                         args.dense.update, chunk, warp_sums);
    __syncthreads();  // warp_sums read before the next chunk writes them
  }
  if (threadIdx.x == 0 && atomicAdd(args.slot_counts + 1, 1) == adders - 1) {
    args.slot_counts[0] = 0;  // every adder is past its wait: the next step's launch counts anew
    args.slot_counts[1] = 0;
  }
}

template <Precision R, Activation A, Subsampling P>
__global__ void __launch_bounds__(kThreads, 2) tensor_conv_forward_kernel2(ConvForwardArgs args) {
  wait_for_previous_grid();
  namespace F = forward_layout;
  float* const shared = dynamic_shared_floats();
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int sample = int(blockIdx.x);
  float* rec = args.records + std::size_t(sample) * record::floats;
  std::uint8_t* which2 = reinterpret_cast<std::uint8_t*>(rec + record::which2);
  std::uint8_t* which4 = reinterpret_cast<std::uint8_t*>(rec + record::which4);
  // The weights' reads are issued first and the sample's field with them, all in flight at once,
  // so that the kernel waits for one round trip to L2 where reads one after another waited for
  // several; each is written to shared memory after.
  ConvWeightReads<R> weights;
  weights.read(args.in);
  const bool reads_field = args.in.field != nullptr;
  GlobalReads<kWarpX, kThreads> field;
  if (reads_field) {
    field.read(args.in.field + std::size_t(sample) * kWarpX, int(threadIdx.x));
    field.each(int(threadIdx.x),
               [shared](int i, float value) { shared[F::x + i] = Operands<R>::stored(value); });
  } else {
    load_sample<R>(args.in, sample, shared + F::x, int(threadIdx.x), kThreads);
  }
  weights.write(shared, F::w1, F::w3, F::s2_bias, F::s4_bias);
  __syncthreads();
  c1_s2<R, A, P, kS2Row>(shared + F::x, shared + F::w1, shared + F::s2_bias, shared + F::a2, lane,
                         which2, warp, kWarps);
  __syncthreads();
  if constexpr (R == Precision::bf16) {  // S2's BF16 pairs where the field was
    pair_s2<kS2Row>(shared + F::a2, reinterpret_cast<std::uint32_t*>(shared + F::x),
                    int(threadIdx.x), kThreads);
    __syncthreads();
  }
  static_assert(kWarps == 8, "a warp per (window pair, n-tile) of C3: 4 x 2");
  c3_s4<R, A, P, 1, 1, kS2Row>(shared + (R == Precision::bf16 ? F::x : F::a2), shared + F::w3,
                               shared + F::s4_bias, args.s4_rows + std::size_t(sample) * kFlat4,
                               lane, which4, warp / 2, warp % 2);
  for (int i = int(threadIdx.x); i < kWarpS2; i += kThreads)
    rec[record::a2 + i] = shared[F::a2 + i / kSide2 * kS2Row + i % kSide2];
}

// Each map's values summed, a warp per map: each lane its strided share in order, then the lanes'
// sums in a fixed butterfly; lane 0 writes the bias gradient.
__device__ void map_sums(const float* values, int maps, int per_map, float* sums, int warp,
                         int lane) {
  for (int m = warp; m < maps; m += kWarps) {
    float sum = 0.0f;
    for (int i = lane; i < per_map; i += 32) sum += values[m * per_map + i];
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(~0u, sum, offset);
    if (lane == 0) sums[m] = sum;
  }
}

// Where dL/dC3[m][y][x] sits in the backward kernel's maps (x from -4 to 13: the zeros past the
// map's columns).
__device__ inline int d3_at(int m, int y, int x) {
  return m * kD3Map + kD3Pad + y * kD3Row + x;
}

// Where half m % 2 of dL/dC3's BF16 words (conv_layout::d3_pairs) holds dL/dC3[m][y][x], in
// halves: word (m / 2, y, x), as d3_at places float (m, y, x).
__device__ inline int d3_pair_half(int m, int y, int x) {
  return 2 * (m / 2 * kD3PairMap + kD3Pad + y * kD3Row + x) + m % 2;
}

// The zeros that dL/dC3's rows need, in count maps map_floats floats apart (s4_backward writes the
// rest): the kD3Pad floats before a map's first row and after each of its rows, gap k at k kD3Row,
// two float2 writes a gap. Nothing reads the room past a map's last gap before it is written again.
__device__ void zero_row_gaps(float* maps, int map_floats, int count) {
  constexpr int kGaps = kSide3 + 1;
  static_assert(kD3Pad == 4 && kD3Row % 2 == 0 && kD3Map % 2 == 0 && kD3PairMap % 2 == 0,
                "a gap is two float2s from a float2's boundary");
  for (int i = int(threadIdx.x); i < 2 * kGaps * count; i += kThreads) {
    const int gap = i / 2, map = gap / kGaps;
    float* at = maps + map * map_floats + gap % kGaps * kD3Row;
    reinterpret_cast<float2*>(at)[i % 2] = make_float2(0.0f, 0.0f);
  }
}

// What the backward kernel reads of its sample before its first barrier, read before any of it is
// written (with the convolutions' weights, ConvWeightReads), so that the kernel waits for one
// round trip to L2 where the copies one after another and dL/dS4's read after the barrier waited
// for several: the record (the first maxima only where max subsampling wrote them), S4's row, the
// input field (where the step gathered one: an image is read by load_sample after the others) and
// dL/dS4's row.
template <Subsampling P>
struct SampleReads {
  static constexpr int kRecord = P == Subsampling::max ? record::floats : record::a2 + kWarpS2;
  GlobalReads<kRecord, kThreads> rec;
  GlobalReads<kFlat4, kThreads> a4;
  GlobalReads<kWarpX, kThreads> field;
  GlobalReads<kFlat4, kThreads> d4;

  // What the convolutions' forward kernel and the gather wrote, which completed before dL/dS4's
  // wait returned (dL/dS4 lets this launch be scheduled only after it): issued before this
  // kernel's own wait.
  __device__ void read_forward(const ConvBackwardArgs& args, int sample) {
    const int thread = int(threadIdx.x);
    rec.read(args.records + std::size_t(sample) * record::floats, thread);
    a4.read(args.s4_rows + std::size_t(sample) * kFlat4, thread);
    if (args.in.field) field.read(args.in.field + std::size_t(sample) * kWarpX, thread);
  }

  // dL/dS4's row: the kernel before's, read after the wait.
  __device__ void read_d4(const ConvBackwardArgs& args, int sample) {
    d4.read(args.d4 + std::size_t(sample) * kFlat4, int(threadIdx.x));
  }

  // The record, S4's row and the input field (rounded for R's products) into shared memory.
  template <Precision R>
  __device__ void write(const ConvBackwardArgs& args, int sample, float* shared) const {
    namespace C = conv_layout;
    const int thread = int(threadIdx.x);
    rec.each(thread, [shared](int i, float value) { shared[C::rec + i] = value; });
    a4.each(thread, [shared](int i, float value) { shared[C::a4 + i] = value; });
    if (args.in.field)
      field.each(thread, [shared](int i, float value) {
        shared[C::x + i / kField * C::x_row + i % kField] = Operands<R>::stored(value);
      });
    else
      load_sample<R, C::x_row>(args.in, sample, shared + C::x, thread, kThreads);
  }
};

// dL/dz4 = dL/dS4 f'(S4), in place over S4's activation, and dL/dC3 of each window (stored for
// R's products: only products read it), by the block, from the thread's values of dL/dS4's row.
template <Precision R, Activation A, Subsampling P>
__device__ void s4_backward(const GlobalReads<kFlat4, kThreads>& d4, float* shared) {
  namespace C = conv_layout;
  float* a4 = shared + C::a4;
  const std::uint8_t* which =
      reinterpret_cast<const std::uint8_t*>(shared + C::rec + record::which4);
  d4.each(int(threadIdx.x), [a4, which, shared](int i, float d) {
    const float dz = d * activation_slope(A, a4[i]);
    a4[i] = dz;
    const int m = i / kWindows4, window = i % kWindows4;
    float* corner = shared + C::d3 + d3_at(m, 2 * (window / kSide4), 2 * (window % kSide4));
    const int best = P == Subsampling::max ? which[i] : 0;
    corner[0] = Operands<R>::stored(window_gradient<P>(dz, best, 0));
    corner[1] = Operands<R>::stored(window_gradient<P>(dz, best, 1));
    corner[kD3Row] = Operands<R>::stored(window_gradient<P>(dz, best, 2));
    corner[kD3Row + 1] = Operands<R>::stored(window_gradient<P>(dz, best, 3));
    if constexpr (R == Precision::bf16) {  // C3's rows' operands, rounded as mma would round them
      std::uint16_t* half = reinterpret_cast<std::uint16_t*>(shared + C::d3_pairs) +
                            d3_pair_half(m, 2 * (window / kSide4), 2 * (window % kSide4));
      half[0] = mma::to_bf16(corner[0]);
      half[2] = mma::to_bf16(corner[1]);
      half[2 * kD3Row] = mma::to_bf16(corner[kD3Row]);
      half[2 * kD3Row + 2] = mma::to_bf16(corner[kD3Row + 1]);
    }
  });
}

// C3's rows T's k-steps for the warp's m-tile (rows at own[0] and own[1], positions as d3_at's
// (u, v)) over the 4 n-tiles, and where TakesLast for n-tile `warp` of the last m-tile too (rows
// at last[0] and last[1]): 10 k-steps of (tap column q = s / 2, output maps 8 (s % 2) to 8 (s % 2)
// + 7) in order, column t of a step map 2 t of its 8 and column t + 4 map 2 t + 1 (c3_row_pair).
// Lane (g, t)'s A values are dL/dC3 at its rows' positions minus q, those two maps: its pointer
// plus a constant for each k-step; its B fragment one float2.
template <Precision R, bool TakesLast>
__device__ void c3_row_k_steps(const float* shared, const int (&own)[2], const int (&last)[2],
                               int warp, int lane, float (&acc)[kC3RowNTiles][4],
                               float (&last_acc)[4]) {
  namespace C = conv_layout;
  const float* maps = shared + C::d3 + d3_at(2 * (lane % 4), 0, 0);
  const float2* pairs = reinterpret_cast<const float2*>(shared + C::w3_rows) + lane;
#pragma unroll
  for (int s = 0; s < kC3RowKSteps; ++s) {
    const int offset = 8 * (s % 2) * kD3Map - s / 2;  // maps 8 (s % 2) + 2 t, tap column s / 2
    // The A fragment of rows at (upper, lower): their two maps at the step's tap column.
    const auto fragment = [maps, offset](const int(&at)[2], std::uint32_t(&a)[4]) {
      a[0] = __float_as_uint(maps[at[0] + offset]);
      a[1] = __float_as_uint(maps[at[1] + offset]);
      a[2] = __float_as_uint(maps[at[0] + offset + kD3Map]);
      a[3] = __float_as_uint(maps[at[1] + offset + kD3Map]);
    };
    std::uint32_t a[4];
    fragment(own, a);
#pragma unroll
    for (int j = 0; j < kC3RowNTiles; ++j) {
      const float2 pair = pairs[c3_row_pair(s, j, 0, 0)];
      const std::uint32_t b[2] = {__float_as_uint(pair.x), __float_as_uint(pair.y)};
      Operands<R>::mma(acc[j], a, b);
    }
    if constexpr (TakesLast) {
      std::uint32_t a_last[4];
      fragment(last, a_last);
      const float2 pair = pairs[c3_row_pair(s, warp, 0, 0)];
      const std::uint32_t b[2] = {__float_as_uint(pair.x), __float_as_uint(pair.y)};
      Operands<R>::mma(last_acc, a_last, b);
    }
  }
}

// The same k-steps with BF16 operands, from dL/dC3's and W3's BF16 words (d3_pairs, and
// write_c3_rows' words): a lane's k's t and t + 4, maps 2 t and 2 t + 1 of the step's 8, are the
// halves of one word, so that a row's A register is one 32-bit load and B's one, where the float
// operands took two and one 64-bit load and three conversions to BF16 pairs for each mma.sync.
// The same roundings (mma::to_bf16 is bf16_pair's), so the same bits.
template <bool TakesLast>
__device__ void c3_row_bf16_k_steps(const float* shared, const int (&own)[2], const int (&last)[2],
                                    int warp, int lane, float (&acc)[kC3RowNTiles][4],
                                    float (&last_acc)[4]) {
  namespace C = conv_layout;
  const std::uint32_t* maps =
      reinterpret_cast<const std::uint32_t*>(shared + C::d3_pairs) + lane % 4 * kD3PairMap + kD3Pad;
  const std::uint32_t* weights = reinterpret_cast<const std::uint32_t*>(shared + C::w3_rows) + lane;
#pragma unroll
  for (int s = 0; s < kC3RowKSteps; ++s) {
    const int offset = 4 * (s % 2) * kD3PairMap - s / 2;  // pair 4 (s % 2) + t, tap column s / 2
    const std::uint32_t a[2] = {maps[own[0] + offset], maps[own[1] + offset]};
#pragma unroll
    for (int j = 0; j < kC3RowNTiles; ++j)
      mma::mma_bf16(acc[j], a, weights[c3_row_pair(s, j, 0, 0)]);
    if constexpr (TakesLast) {
      const std::uint32_t a_last[2] = {maps[last[0] + offset], maps[last[1] + offset]};
      mma::mma_bf16(last_acc, a_last, weights[c3_row_pair(s, warp, 0, 0)]);
    }
  }
}

// C3's rows T (140 x 30) by the block, transposed into C::rows (the file's plan): warp w m-tile w
// over the 4 n-tiles, and warps 0-3 n-tile w of the last m-tile too (c3_row_k_steps). Positions
// past the 140th read the last one's: their sums go to places that no window reads.
template <Precision R>
__device__ void c3_rows(float* shared, int warp, int lane) {
  constexpr int kLast = kRowMTiles - 1;
  const int g = lane / 4, t = lane % 4;
  // Rows g and g + 8 of the warp's m-tile and of the last: a position (u, v) is also d3_at's
  // offset of row u, column v, since dL/dC3's rows are S2's width apart.
  static_assert(kD3Row == kSide2, "a position is its place in dL/dC3's rows");
  int own[2], last[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    own[h] = min(16 * warp + g + 8 * h, kRowPositions - 1);
    last[h] = min(16 * kLast + g + 8 * h, kRowPositions - 1);
  }
  float acc[kC3RowNTiles][4] = {}, last_acc[4] = {};
  const bool takes_last = warp < kC3RowNTiles;
  if constexpr (R == Precision::bf16) {
    if (takes_last)
      c3_row_bf16_k_steps<true>(shared, own, last, warp, lane, acc, last_acc);
    else
      c3_row_bf16_k_steps<false>(shared, own, last, warp, lane, acc, last_acc);
  } else if (takes_last) {
    c3_row_k_steps<R, true>(shared, own, last, warp, lane, acc, last_acc);
  } else {
    c3_row_k_steps<R, false>(shared, own, last, warp, lane, acc, last_acc);
  }
  float* rows = shared + conv_layout::rows;
  const auto write = [rows, g, t](const float(&sums)[4], int m_tile, int n_tile) {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int column = 8 * n_tile + 2 * t + r % 2, position = 16 * m_tile + g + 8 * (r / 2);
      if (column < kRowColumns) rows[column * kTRow + position] = sums[r];
    }
  };
#pragma unroll
  for (int j = 0; j < kC3RowNTiles; ++j) write(acc[j], warp, j);
  if (takes_last) write(last_acc, kLast, warp);
}

// C3's weight gradient's n-tiles n_tile[0..Tiles) of the sample, by one warp, into its slot: G3 (16
// maps x 150 (input map c, tap)) = dL/dC3 (16 x 100 positions) X2 (100 x 150), with a(m, k) =
// dL/dC3[m][k / 10][k % 10] and b(k, n) = S2[n / 25][k / 10 + p][k % 10 + q] (tap n % 25 = 5 p +
// q; columns 150 and 151, the last n-tile's padding, read column 149's and are dropped), each
// gather at a per-lane pointer plus a constant of the unrolled k-steps: lane t's position in k-step
// s is 8 s + 4 h + t, whose row is (8 s + 4 h) / 10 but for lanes t >= 2 where (8 s + 4 h) % 10 ==
// 8, which have passed into the next row. The warp's n-tiles take their k-steps together, so that
// each k-step's A fragment (the same for every n-tile: the m-tile is all 16 maps) is loaded once
// for them all. Each n-tile adds its k-steps in order. Both operands are stored for R's products,
// so their bits go in as they are.
template <Precision R, int Tiles>
__device__ void c3_weight_tiles(const float* shared, float* slot, const int (&n_tile)[Tiles],
                                int lane) {
  namespace C = conv_layout;
  constexpr int kSteps = (kC3Positions + 7) / 8, kColumns = kMaps1 * kTaps;  // 13, 150
  const int g = lane / 4, t = lane % 4;
  const bool next_row = t >= 2;  // where the step's first position is column 8 of its row
  const float* a_row = shared + C::d3 + d3_at(g, 0, t);  // A's rows g and g + 8: maps
  const float* a_next = a_row + (next_row ? kD3Row - kSide3 : 0);
  const int b_next = next_row ? kSide2 - kSide3 : 0;
  const float* b_row[Tiles];
#pragma unroll
  for (int i = 0; i < Tiles; ++i) {
    const int n = min(8 * n_tile[i] + g, kColumns - 1), c = n / kTaps, tap = n % kTaps;
    b_row[i] = shared + C::rec + record::a2 + c * kWindows2 + tap / kK * kSide2 + tap % kK + t;
  }
  float acc[Tiles][4] = {};
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    std::uint32_t a[4] = {}, b[Tiles][2] = {};  // positions past the 100th: zeros both sides
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int k = 8 * s + 4 * h, y = k / kSide3, x = k % kSide3;
      if (k >= kC3Positions) continue;
      static_assert(kSide3 % 2 == 0, "a step's 4 lanes pass into the next row only from x = 8");
      const bool passes = x + 3 >= kSide3;
      const float* a_at = (passes ? a_next : a_row) + y * kD3Row + x;
      a[2 * h] = __float_as_uint(a_at[0]);
      a[2 * h + 1] = __float_as_uint(a_at[8 * kD3Map]);
#pragma unroll
      for (int i = 0; i < Tiles; ++i)
        b[i][h] = __float_as_uint(b_row[i][(passes ? b_next : 0) + y * kSide2 + x]);
    }
#pragma unroll
    for (int i = 0; i < Tiles; ++i) Operands<R>::mma(acc[i], a, b[i]);
  }
  // A lane's places r and r + 1 are neighbours in a row (columns 2 t and 2 t + 1), both real or
  // both padding: one 8-byte store for the pair, where two stores of 4 bytes wrote each sector
  // twice.
  static_assert(partial::floats % 2 == 0 && partial::c3_weight % 2 == 0 && kColumns % 2 == 0,
                "a pair's place is 8-byte aligned in every sample's slot");
#pragma unroll
  for (int i = 0; i < Tiles; ++i)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int m = g + 8 * half, n = 8 * n_tile[i] + 2 * t;
      if (n < kColumns)
        *reinterpret_cast<float2*>(slot + partial::c3_weight + m * kColumns + n) =
            make_float2(acc[i][2 * half], acc[i][2 * half + 1]);
    }
}

// C3's weight gradient of the sample: its 19 n-tiles, two a warp (warp and warp + 8) and the last
// three (16-18) for warps 4-6, which take no n-tile of C3's rows' last m-tile (c3_rows: warps 0-3
// do), so that the phase's longest warp is as short as the shares allow.
template <Precision R>
__device__ void c3_weight_gradient(const float* shared, float* slot, int warp, int lane) {
  constexpr int kNTiles = (kMaps1 * kTaps + 7) / 8, kThirds = kNTiles - 2 * kWarps;  // 19, 3
  static_assert(kThirds > 0 && kC3RowNTiles + kThirds <= kWarps, "thirds for warps past c3_rows'");
  const int third = warp - kC3RowNTiles;
  if (third >= 0 && third < kThirds) {
    const int tiles[3] = {warp, warp + kWarps, 2 * kWarps + third};
    c3_weight_tiles<R, 3>(shared, slot, tiles, lane);
  } else {
    const int tiles[2] = {warp, warp + kWarps};
    c3_weight_tiles<R, 2>(shared, slot, tiles, lane);
  }
}

// C3's input gradient, by the block, a thread per window of S2 (input map c, position (u, v)):
// dL/dS2[c][u][v], the sum over tap rows p, in order, of T[(u - p, v)][(c, p)] where row u - p is
// one of C3's (c3_rows' T: consecutive lanes' windows consecutive places); dL/dz2 = dL/dS2 f'(S2)
// into C::d2, and dL/dC1 (6, 28, 28), stored for R's products (only C1's weight product reads it),
// from it through the window (its average, or its first maximum) into C::c1_gradient: each value
// computed once, the window's dL/dz2 and first maximum read once.
template <Precision R, Activation A, Subsampling P>
__device__ void c3_input_gradient(float* shared) {
  namespace C = conv_layout;
  const float* a2 = shared + C::rec + record::a2;
  const std::uint8_t* which =
      reinterpret_cast<const std::uint8_t*>(shared + C::rec + record::which2);
  for (int window = int(threadIdx.x); window < kMaps1 * kWindows2; window += kThreads) {
    const int map = window / kWindows2, position = window % kWindows2, u = position / kSide2;
    const float* column = shared + C::rows + map * kK * kTRow + position;
    float sum = 0.0f;
#pragma unroll
    for (int p = 0; p < kK; ++p)
      if (p <= u && u - p < kSide3) sum += column[p * (kTRow - kSide2)];
    const float dz = sum * activation_slope(A, a2[window]);
    shared[C::d2 + window] = dz;
    float* corner =
        shared + C::c1_gradient + map * C::c1_map + 2 * u * kSide1 + 2 * (position % kSide2);
    const int best = P == Subsampling::max ? which[window] : 0;
    corner[0] = Operands<R>::stored(window_gradient<P>(dz, best, 0));
    corner[1] = Operands<R>::stored(window_gradient<P>(dz, best, 1));
    corner[kSide1] = Operands<R>::stored(window_gradient<P>(dz, best, 2));
    corner[kSide1 + 1] = Operands<R>::stored(window_gradient<P>(dz, best, 3));
  }
}

// C1's weight gradient over the positions' quarter warp / 2 (m-tile warp % 2 of the 25 taps, rows
// 25-31 dropped), 25 k-steps, into the quarter's part of C::g1. The tiles, k-steps, operands and
// order of gemm_tiles<R, 25, 6, 196, 2> with a(tap, k) = x[pos / 28 + p][pos % 28 + q] (tap 5 p +
// q, pos = 196 quarter + k) and b(k, map) = dL/dC1[map][pos], so the same bits, but each gather
// at a per-lane pointer plus a constant of the unrolled k-steps: a quarter is 7 whole rows of C1
// and a k-step's 4 lanes t never cross a row (28 and the steps' starts are multiples of 4). Both
// operands are stored for R's products (the input field, and dL/dC1 by c3_input_gradient), so the
// product takes their bits as they are; a row or column past the matrix reads a real element at a
// clamped index and gives zero.
template <Precision R>
__device__ void c1_weight_gradient(float* shared, int warp, int lane) {
  namespace C = conv_layout;
  constexpr int kSteps = (kQuarter + 7) / 8;  // 25
  static_assert(kQuarter % kSide1 == 0 && kSide1 % 4 == 0, "a k-step's lanes stay in a row of C1");
  const int g = lane / 4, t = lane % 4, quarter = warp / 2, first_tap = 16 * (warp % 2) + g;
  const float* x = shared + C::x + quarter * (kQuarter / kSide1) * C::x_row + t;
  const float* a_row[2];  // A's rows g and g + 8: taps first_tap and first_tap + 8
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int tap = min(first_tap + 8 * h, kTaps - 1);
    a_row[h] = x + tap / kK * C::x_row + tap % kK;
  }
  // The zeros of rows 25-31 and columns 6-7 as masks on the loaded bits: a ternary there becomes
  // a branch around each load.
  const std::uint32_t lower_mask = first_tap + 8 < kTaps ? ~0u : 0u;
  const std::uint32_t map_mask = g < kMaps1 ? ~0u : 0u;  // B's column g: map g
  const float* b_col =
      shared + C::c1_gradient + min(g, kMaps1 - 1) * C::c1_map + quarter * kQuarter + t;
  float acc[4] = {};
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    std::uint32_t a[4] = {}, b[2] = {};  // positions past the quarter: zeros on both sides
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int k = 8 * s + 4 * h;
      if (k >= kQuarter) continue;
      const int at = k / kSide1 * C::x_row + k % kSide1;
      a[2 * h] = __float_as_uint(a_row[0][at]);  // taps 16 (warp % 2) + g: all real
      a[2 * h + 1] = __float_as_uint(a_row[1][at]) & lower_mask;
      b[h] = __float_as_uint(b_col[k]) & map_mask;
    }
    Operands<R>::mma(acc, a, b);
  }
  float* g1 = shared + C::g1 + quarter * kW1;
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int tap = first_tap + 8 * (r / 2), map = 2 * t + r % 2;
    if (tap < kTaps && map < kMaps1) g1[map * kTaps + tap] = acc[r];
  }
}

// A block per sample (tensor_backward.cuh has the plan); the blocks past the n samples' run the
// dense layers' weight gradients and the step's statistics (dense_gradient_block), which share the
// SMs with the samples' blocks, so that the step's last launch only adds the slots.
template <Precision R, Activation A, Subsampling P>
__global__ void __launch_bounds__(kThreads, 2) tensor_conv_backward_kernel2(ConvBackwardArgs args) {
  namespace C = conv_layout;
  float* const shared = dynamic_shared_floats();
  const int sample = int(blockIdx.x);
  if (sample >= args.in.n) {
    // The dense blocks write the dense layers' weights (SGD's step), which dL/dS4 reads: after
    // the wait, every read and write.
    wait_for_previous_grid();
    if (!args.slot_counts) allow_next_grid();
    dense_gradient_block<R>(sample - args.in.n, args.dense.args, args.dense.update);
    return;
  }
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  float* slot = args.partials + std::size_t(sample) * partial::floats;
  // A sample's block reads and stages all but dL/dS4's row before its wait, so that these reads
  // overlap dL/dS4's products (which let this launch be scheduled after their own wait): the
  // weights, which the step before's update wrote, and what the forward kernels wrote.
  ConvWeightReads<R> weights;
  weights.read(args.in);
  SampleReads<P> reads;
  reads.read_forward(args, sample);
  weights.write_c3_rows(shared + C::w3_rows);
  reads.template write<R>(args, sample, shared);
  zero_row_gaps(shared + C::d3, kD3Map, kMaps3);
  if constexpr (R == Precision::bf16) zero_row_gaps(shared + C::d3_pairs, kD3PairMap, kMapPairs3);
  wait_for_previous_grid();
  // The slots' sum may be scheduled now: its small blocks wait at their start for this kernel's
  // end, where otherwise their launch would begin only as this kernel's last block exits. Where
  // this launch adds the slots itself, the next launch is the next step's first, and released
  // early the step was longer (docs/tensor-cores.md).
  if (!args.slot_counts) allow_next_grid();
  reads.read_d4(args, sample);
  __syncthreads();
  s4_backward<R, A, P>(reads.d4, shared);
  __syncthreads();
  map_sums(shared + C::a4, kMaps3, kWindows4, shared + C::bias4, warp, lane);
  c3_rows<R>(shared, warp, lane);
  c3_weight_gradient<R>(shared, slot, warp, lane);
  __syncthreads();
  c3_input_gradient<R, A, P>(shared);
  __syncthreads();
  map_sums(shared + C::d2, kMaps1, kWindows2, shared + C::bias2, warp, lane);
  c1_weight_gradient<R>(shared, warp, lane);
  __syncthreads();
  for (int i = int(threadIdx.x); i < kW1; i += kThreads) {
    float sum = 0.0f;
    for (int q = 0; q < kQuarters; ++q) sum += shared[C::g1 + q * kW1 + i];
    slot[partial::c1_weight + i] = sum;
  }
  for (int i = int(threadIdx.x); i < kMaps1; i += kThreads)
    slot[partial::s2_bias + i] = shared[C::bias2 + i];
  for (int i = int(threadIdx.x); i < kMaps3; i += kThreads)
    slot[partial::s4_bias + i] = shared[C::bias4 + i];
  if (args.slot_counts) add_slots_once_written(args, shared);
}

using ConvForwardKernel = void (*)(ConvForwardArgs);
using ConvKernel = void (*)(ConvBackwardArgs);

// kernel_for_training's kernels: the convolutions' forward and backward kernels.
struct ConvForwardKernels {
  template <Precision R, Activation A, Subsampling P>
  ConvForwardKernel of() const {
    return tensor_conv_forward_kernel2<R, A, P>;
  }
};
struct ConvKernels {
  template <Precision R, Activation A, Subsampling P>
  ConvKernel of() const {
    return tensor_conv_backward_kernel2<R, A, P>;
  }
};

// The layout as the step's gradient kernel takes it, checked once: the convolutions' slot
// (ConvSlot) holds every tensor below c5.weight and nothing at or past it, where the dense layers'
// products take over. Another tensor below C5 (a trainable subsampling's weight, a convolution's
// bias, which supported() refuses today) would otherwise never get a gradient.
void check_slot_covers(const ParamLayout& layout, const WholeStepOffsets& at) {
  const ConvSlot slot = ConvSlot::of(at);
  const auto in_slot = [&slot](std::size_t offset) {
    for (const SlotTensor& tensor : slot.tensor)
      if (std::size_t(tensor.to) == offset) return true;
    return false;
  };
  for (const ParamSpec& spec : layout.tensors)
    if (in_slot(spec.offset) != (spec.offset < std::size_t(at.c5_weight)))
      throw Error("internal: " + spec.name +
                  (in_slot(spec.offset) ? " lies past c5.weight, where the tensor-core step's "
                                          "dense products take over"
                                        : " has no gradient slot in the tensor-core step"));
}

constexpr std::size_t kForwardSharedBytes = sizeof(float) * std::size_t(forward_layout::floats);
constexpr std::size_t kConvSharedBytes = sizeof(float) * std::size_t(conv_layout::floats);

}  // namespace

TensorConvBackward::TensorConvBackward(const NetConfig& config, const ParamLayout& layout,
                                       int max_batch)
    : m_config(supported(config)),
      m_offsets(offsets_of(layout)),
      m_max_batch(checked_batch(max_batch)),
      m_programmatic(has_programmatic_launch(kernel_for_training(config, ConvKernels{}))),
      m_c3_mask(c3_mask_on_device(config)),
      m_s4_rows(Device::gpu, std::size_t(max_batch) * kFlat4),
      m_records(Device::gpu, std::size_t(max_batch) * record::floats),
      m_partials(Device::gpu, std::size_t(max_batch) * partial::floats),
      m_slot_counts(Device::gpu, 2) {  // zeroed
  prepare_tile_kernel(kernel_for_training(config, ConvForwardKernels{}), kForwardSharedBytes, 1);
  prepare_tile_kernel(kernel_for_training(config, ConvKernels{}), kConvSharedBytes, 1);
  check_slot_covers(layout, m_offsets);
  int blocks_an_sm = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &blocks_an_sm, kernel_for_training(config, ConvKernels{}), kThreads, kConvSharedBytes));
  m_resident_blocks = blocks_an_sm * current_multiprocessors();
}

bool TensorConvBackward::can_add_slots() const {
  return m_resident_blocks > kConvSlotBlocks;
}

int TensorConvBackward::dense_tiles_a_block(int n) const {
  return n + dense_gradient_blocks(kWarps) <= m_resident_blocks ? kWarps : kWarps / 2;
}

void TensorConvBackward::conv_forward(const std::uint8_t* images, int n, const float* params,
                                      cudaStream_t stream, const float* field) {
  check_fits(n, m_max_batch);
  const TileInputs in{
      images, n, pixel_scaling(m_config.input_scaling), params, m_offsets, m_c3_mask.data(), field};
  const ConvForwardArgs args{in, m_s4_rows.data(), m_records.data()};
  launch_kernel({dim3(unsigned(n)), dim3(kThreads), kForwardSharedBytes, stream, m_programmatic},
                kernel_for_training(m_config, ConvForwardKernels{}), args);
}

void TensorConvBackward::conv_gradients(const std::uint8_t* images, int n, const float* params,
                                        const float* d4, cudaStream_t stream, const float* field,
                                        const DenseGradientWork* dense, bool add_slots) {
  check_fits(n, m_max_batch);
  if (add_slots && (!dense || !can_add_slots()))
    throw Error(
        "internal: the convolutions' backward adds the slots only with the dense work's gradients "
        "and update, on a GPU that holds more of its blocks at once than add them");
  const TileInputs in{
      images, n, pixel_scaling(m_config.input_scaling), params, m_offsets, m_c3_mask.data(), field};
  DenseGradientWork work = dense ? *dense : DenseGradientWork{};
  work.args.tiles_a_block = dense_tiles_a_block(n);
  const ConvBackwardArgs args{in,
                              m_s4_rows.data(),
                              m_records.data(),
                              d4,
                              m_partials.data(),
                              work,
                              add_slots ? m_slot_counts.data() : nullptr,
                              ConvSlot::of(m_offsets)};
  // The samples' blocks first: blocks start in order, most likely an SM each (nothing guarantees
  // where), and the dense blocks after them.
  const int blocks = n + (dense ? dense_gradient_blocks(work.args.tiles_a_block) : 0);
  launch_kernel({dim3(unsigned(blocks)), dim3(kThreads), kConvSharedBytes, stream, m_programmatic},
                kernel_for_training(m_config, ConvKernels{}), args);
}

}  // namespace lenet5::cuda
