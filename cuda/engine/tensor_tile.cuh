// What the tensor-core kernels share (tensor_forward.cu, tensor_backward.cu,
// tensor_conv_backward.cu): the network's sizes, a block's shared-memory layout, the forward pass
// of a tile of samples up to its logits, every product an mma.sync m16n8k8 tile in the products'
// precision (tensor_mma.cuh's Operands<R>: TF32, BF16, or FP32 as three TF32 products), the
// products over a tile, the sum of the convolutions' per-sample partial gradients, and the host
// side's checks.
//
// Shapes (core/topology.hpp): input 32x32 -> C1 6@28x28 -> S2 6@14x14 -> C3 16@10x10 -> S4 16@5x5
// -> C5 120 -> F6 84 -> output 10; C5's 16x5x5 input flattened NCHW (m * 25 + 5 y + x) is a row of
// 400, as c5.weight's (120, 16, 5, 5) reads it.
//
// The convolutions as implicit GEMMs, one sample per warp: C = A B with A's rows the output
// positions, B's columns the output maps and k the taps (C1: k = 5 p + q; C3: k = (input map,
// 5 p + q)). Each map's 25 taps take four k-steps of 8 (taps 25-31: zero weights, and a lane that
// would gather one reads the window's corner instead, a finite value), so that a step's gather
// offsets are constants of the unrolled loop plus one per-lane value. The rows are ordered so that
// the subsampling needs no exchange between lanes: two m16 tiles cover 8 subsampling windows,
// window g of the pair in rows g, g + 8 of the first tile and g, g + 8 of the second, which hold
// its four positions in row-major order (dy, dx) = (0, 0), (0, 1), (1, 0), (1, 1). Lane (g, t) then
// holds all four positions of window g for output maps 2 t and 2 t + 1 (the C fragment's rows g
// and g + 8), pools them in the CPU reference's order, adds the bias and applies the activation.
//
// The dense layers as GEMMs over the tile: Y (Tile x N) = X (Tile x K) W^T, X in shared memory,
// W read from global memory (L2), or from shared memory where a kernel staged it, once per block as
// B fragments, each warp one n-tile (8 outputs) at a time over all of the tile's m-tiles, so that
// each weight it loads serves every sample.
//
// Every value that a product reads (the input field, S2, S4, C5 and F6 activations, C1's and C3's
// weights; the backward pass also takes the activations' slopes from them) is stored for the
// products (Operands<R>::stored: rounded to TF32 in tf32, the floats in bf16 and fp32, whose mma
// rounds or splits them), so the gathers need no conversion; the dense weights are rounded as they
// are loaded. Shared-memory matrices that a fragment load reads as 8 rows by 4 columns have row
// strides that are odd multiples of 4 floats: the 32 lanes then fall in 32 different banks.
//
// Included by tensor_forward.cu, tensor_backward.cu and tensor_conv_backward.cu, each of which
// compiles its kernels in a translation unit of its own (device code is not linked across files
// here): the unnamed namespace gives every definition internal linkage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "core/activation_math.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"
#include "core/net_config.hpp"
#include "core/shapes.hpp"
#include "cuda/engine/pool_window.cuh"
#include "cuda/engine/tensor_forward.cuh"
#include "cuda/engine/tensor_mma.cuh"
#include "cuda/engine/whole_step.cuh"
#include "cuda/kernels/pixel.cuh"
#include "cuda/kernels/sgd_element.cuh"
#include "cuda/runtime/buffer.hpp"
#include "cuda/runtime/check.hpp"
#include "cuda/runtime/runtime.hpp"

namespace lenet5::cuda {
namespace {

using mma::Operands;

// The block's dynamic shared memory as floats: declared as float4 so that it is 16-byte aligned
// for the kernels' float4 reads and writes, once for every tile kernel.
__device__ __forceinline__ float* dynamic_shared_floats() {
  extern __shared__ float4 shared_storage[];
  return reinterpret_cast<float*>(shared_storage);
}

constexpr int kThreads = 256;  // 8 warps: 8 samples through the convolutions at a time
constexpr int kWarps = kThreads / 32;

constexpr int kField = kInputSide, kK = 5, kTaps = kK * kK;
using mma::kPairTapSteps;  // BF16's k-steps of a map pair's 4 taps (taps 25-27 are zeros)
using mma::kTapSteps;      // k-steps of 8 per map's taps (taps 25-31 are zeros)
using mma::pair_tap_offsets;
using mma::tap_offsets;
using pool::first_max4;
using pool::pool4;
constexpr int kMaps1 = 6, kSide2 = 14, kWindows2 = kSide2 * kSide2;  // S2: 196 windows a map
constexpr int kMaps3 = 16, kSide4 = 5, kWindows4 = kSide4 * kSide4;  // S4: 25 windows a map
constexpr int kFlat4 = kMaps3 * kWindows4, kC5 = 120, kF6 = 84, kOut = kClasses;

// Row strides (floats), odd multiples of 4 where a fragment load reads the rows.
constexpr int kW1Row = 36;                          // C1's B: [8 maps][32 taps] (maps 6, 7 zero)
constexpr int kW3Row = kMaps1 * 8 * kTapSteps + 4;  // C3's B: [16 maps][6 input maps x 32 taps]
constexpr int kA4Row = kFlat4 + 4;                  // 404: S4's outputs, a row per sample
constexpr int kA5Row = kC5 + 4;                     // 124
constexpr int kA6Row = kF6 + 8;                     // 92: k-steps read columns 84-87 (as zeros)
constexpr int kZRow = 12;
static_assert(kW1Row % 8 == 4 && kW3Row % 8 == 4 && kA4Row % 8 == 4 && kA5Row % 8 == 4 &&
                  kA6Row % 8 == 4,
              "fragment rows in distinct banks");
// Each warp's working set for one sample: the input field and S2's activation.
constexpr int kWarpX = kField * kField, kWarpS2 = kMaps1 * kWindows2;
constexpr int kWarpFloats = kWarpX + kWarpS2;
// With BF16 operands, c3_s4's k-steps are input map pairs at four taps: C3's weights are staged as
// BF16 words of two input maps (ConvWeightReads::write), a row of kW3Bf16Row words an output map
// ([3 input map pairs][28 taps]) where its float row is, 84 = 20 (mod 32) so that a fragment's 8
// rows lie in distinct banks; and S2 as BF16 words of two maps (pair_s2, into room its caller
// chooses). Only the training step's convolutions' forward kernel (tensor_conv_backward.cu)
// runs them: the evaluation's products are TF32 whatever --precision says.
constexpr int kMapPairs1 = kMaps1 / 2, kW3Bf16Row = kMapPairs1 * 4 * kPairTapSteps;  // 3, 84
constexpr int kS2Pairs = kMapPairs1 * kWindows2;
static_assert(kW3Bf16Row % 32 == 20 && kW3Bf16Row <= kW3Row,
              "BF16 rows in distinct banks, where the float ones are");

// The block's shared memory, in floats from its start. The dense layers' outputs reuse the warps'
// working sets, which the convolutions have finished with by then.
template <int Tile>
struct SharedLayout {
  static constexpr int w1 = 0;
  static constexpr int w3 = w1 + 8 * kW1Row;
  static constexpr int s2_bias = w3 + kMaps3 * kW3Row;
  static constexpr int s4_bias = s2_bias + 8;
  static constexpr int warps = s4_bias + kMaps3;
  static constexpr int a4 = warps + kWarps * kWarpFloats;
  static constexpr int floats = a4 + Tile * kA4Row;
  static constexpr int a5 = warps;
  static constexpr int a6 = a5 + Tile * kA5Row;
  static constexpr int z = a6 + Tile * kA6Row;
  static_assert(z + Tile * kZRow <= a4, "the dense layers' outputs fit the warps' working sets");
  static_assert(Tile % 16 == 0, "the tile is whole m16 tiles");
};

// What the forward pass of a tile reads: the images (no permutation, no augmentation), n of them,
// scaled as the network's input is; one model's parameters, where its layout puts each tensor; the
// C3 table's mask (16, 6, 5, 5), 0 where a weight is disconnected; and, where field is not null,
// the n samples' input already gathered (n, 1, 32, 32), read instead of the images (a batch
// through a permutation and the augmentation, as cuda/kernels/batch.cuh gathers it: a training
// step's batch).
struct TileInputs {
  const std::uint8_t* images;
  int n;
  PixelScaling scaling;
  const float* params;
  WholeStepOffsets at;
  const float* c3_mask;
  const float* field = nullptr;
};

// The A fragment of one m16 tile whose rows g and g + 8 are the positions `top` and `top + 1`
// (the window's left and right columns), at k-step j.
__device__ inline void gather_a(const float* top, const int (&tap)[kTapSteps][2], int j,
                                std::uint32_t (&a)[4]) {
  a[0] = __float_as_uint(top[tap[j][0]]);
  a[1] = __float_as_uint(top[tap[j][0] + 1]);
  a[2] = __float_as_uint(top[tap[j][1]]);
  a[3] = __float_as_uint(top[tap[j][1] + 1]);
}

// The pooled window of lane (g, t)'s output map 2 t + h from a window pair's two m16 tiles.
template <Subsampling P>
__device__ inline float pooled(const float (&upper)[4], const float (&lower)[4], int h) {
  return pool4<P>(upper[h], upper[2 + h], lower[h], lower[2 + h]);
}

// The same window's first maximum (2 dy + dx), which max subsampling's backward pass sends the
// gradient to; written to which[at] when the caller keeps it (which non-null, max subsampling).
template <Subsampling P>
__device__ inline void keep_first_max(const float (&upper)[4], const float (&lower)[4], int h,
                                      std::uint8_t* which, int at) {
  if constexpr (P == Subsampling::max)
    if (which) which[at] = std::uint8_t(first_max4(upper[h], upper[2 + h], lower[h], lower[2 + h]));
}

// C1's and C3's weights (rounded for R's products, in their B layouts, the C3 table's
// disconnected weights zero) and S2's and S4's biases into shared memory, by the whole block
// (write); or C3's weights alone as the backward kernel's rows take them (write_c3_rows).
// Lane k of warp w takes tap column k of B's rows w, w + 8, ...: C1's 8 maps, a row each, and
// C3's 96 (output map, input map) rows, 12 each, whose weights and mask sit 25 floats a row
// apart. A thread's reads are then a pointer plus constants, where an index divided by a row's
// width for each value was two thirds of the staging's instructions; the 4 columns past a row's
// 32 are zeros of their own. Every read is issued before any write (read(), then write()): the
// staging waits for one round trip to L2, where loops that wrote what they had just read waited
// for up to five, and a kernel can issue its other reads between the two.
// C3's weights as the backward kernel's C3 rows take their B fragments (tensor_conv_backward.cu's
// c3_rows: k-step s the tap column q = s / 2 and output maps 8 (s % 2) to 8 (s % 2) + 7, its k t
// map 8 (s % 2) + 2 t and its k t + 4 map 8 (s % 2) + 2 t + 1; n = 5 c + p over input map c and tap
// row p): the float2 of k-step s, n-tile j and lane (g, t) holds B[k t][8 j + g] and B[k t +
// 4][8 j + g], so that a lane reads its fragment with one 64-bit load and a warp 32 consecutive
// float2s. Columns 30 and 31 (input map 6, the last n-tile's padding) are zeros.
constexpr int kC3RowKSteps = kMaps3 * kK / 8, kC3RowNTiles = (kMaps1 * kK + 7) / 8;  // 10, 4
__host__ __device__ constexpr int c3_row_pair(int s, int j, int g, int t) {
  return ((s * kC3RowNTiles + j) * 8 + g) * 4 + t;
}
constexpr int kC3RowFloats = 2 * c3_row_pair(kC3RowKSteps, 0, 0, 0);

template <Precision R>
struct ConvWeightReads {
  static constexpr int kColumns = 32, kC3Rows = kMaps3 * kMaps1, kRowsPerWarp = kC3Rows / kWarps;
  static constexpr int kW1Rows = 8, kPadColumns = kW1Row - kColumns;  // C1's maps, an n-tile
  static_assert(kC3Rows % kWarps == 0 && kWarps == kW1Rows && kPadColumns == 4 &&
                    kW3Row == kMaps1 * kColumns + kPadColumns,
                "a warp per C1 map, 12 C3 rows a warp, 4 columns of zeros past each");
  float c1, connected[kRowsPerWarp], weight[kRowsPerWarp], s2_bias, s4_bias;

  // The thread's values, every read issued (at a clamped index, its value dropped where it is
  // past the matrices).
  __device__ void read(const TileInputs& in) {
    const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
    const int tap = min(lane, kTaps - 1);
    const float* params = in.params;
    const WholeStepOffsets& at = in.at;
    c1 = params[at.c1_weight + min(warp, kMaps1 - 1) * kTaps + tap];
    const float* mask = in.c3_mask + warp * kTaps + tap;  // row warp + 8 s: 8 s rows on
    const float* c3 = params + at.c3_weight + warp * kTaps + tap;
#pragma unroll
    for (int s = 0; s < kRowsPerWarp; ++s) {
      connected[s] = mask[s * kWarps * kTaps];
      weight[s] = c3[s * kWarps * kTaps];
    }
    const int map = min(int(threadIdx.x), kMaps3 - 1);
    s2_bias = params[at.s2_bias + min(map, kMaps1 - 1)];
    s4_bias = params[at.s4_bias + map];
  }

  // The values into shared memory, as the forward pass stages them.
  __device__ void write(float* shared, int w1_at, int w3_at, int s2_bias_at, int s4_bias_at) const {
    const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
    const bool real_tap = lane < kTaps;
    shared[w1_at + warp * kW1Row + lane] =
        Operands<R>::stored(warp < kMaps1 && real_tap ? c1 : 0.0f);
    const int i = int(threadIdx.x);
    if (i < kW1Rows * kPadColumns)
      shared[w1_at + i / kPadColumns * kW1Row + kColumns + i % kPadColumns] = 0.0f;
    if (i < kMaps1) shared[s2_bias_at + i] = s2_bias;
    if (i < kMaps3) shared[s4_bias_at + i] = s4_bias;
    if constexpr (R == Precision::bf16)
      write_c3_bf16(shared + w3_at);
    else
      write_c3(shared + w3_at);
  }

  // C3's weights in the forward pass's B layout (kW3Row floats a row; the 4 columns past a row's
  // 32 zeros of their own).
  __device__ void write_c3(float* w3) const {
    const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
    const bool real_tap = lane < kTaps;
    // Rows warp + 8 s and warp + 8 (s + 3) are 24 rows apart, 4 whole maps: three pointers, one
    // for each s % 3, plus constants.
    constexpr int kPeriod = 3, kMapsAPeriod = kPeriod * kWarps / kMaps1;
    static_assert(kPeriod * kWarps % kMaps1 == 0 && kRowsPerWarp % kPeriod == 0, "whole maps");
    float* row_at[kPeriod];
#pragma unroll
    for (int r = 0; r < kPeriod; ++r) {
      const int row = warp + r * kWarps;  // (m, c) = 6 m + c
      row_at[r] = w3 + row / kMaps1 * kW3Row + row % kMaps1 * kColumns + lane;
    }
#pragma unroll
    for (int s = 0; s < kRowsPerWarp; ++s)
      row_at[s % kPeriod][s / kPeriod * kMapsAPeriod * kW3Row] =
          Operands<R>::stored(real_tap && connected[s] != 0.0f ? weight[s] : 0.0f);
    const int i = int(threadIdx.x);
    if (i < kMaps3 * kPadColumns)
      w3[i / kPadColumns * kW3Row + kMaps1 * kColumns + i % kPadColumns] = 0.0f;
  }

  // C3's weights in the forward pass's BF16 layout (kW3Bf16Row words a row): row (m, c)'s tap k
  // goes to half c % 2 of word m kW3Bf16Row + 28 (c / 2) + k (k = 4 j + t of c3_s4's tap steps);
  // taps 25-27 zeros. Rows warp + 8 s and warp + 8 (s + 3) are 4 output maps apart, as in write_c3.
  __device__ void write_c3_bf16(float* w3) const {
    const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
    constexpr int kPairRow = 4 * kPairTapSteps;  // 28 taps
    constexpr int kPeriod = 3, kMapsAPeriod = kPeriod * kWarps / kMaps1;
    std::uint16_t* const halves = reinterpret_cast<std::uint16_t*>(w3);
    std::uint16_t* row_at[kPeriod];
#pragma unroll
    for (int r = 0; r < kPeriod; ++r) {
      const int row = warp + r * kWarps, m = row / kMaps1, c = row % kMaps1;
      row_at[r] = halves + 2 * (m * kW3Bf16Row + c / 2 * kPairRow + min(lane, kTaps - 1)) + c % 2;
    }
    if (lane < kTaps)
#pragma unroll
      for (int s = 0; s < kRowsPerWarp; ++s)
        row_at[s % kPeriod][s / kPeriod * 2 * kMapsAPeriod * kW3Bf16Row] =
            mma::to_bf16(connected[s] != 0.0f ? weight[s] : 0.0f);
    constexpr int kPastTaps = kPairRow - kTaps;  // 3
    std::uint32_t* const words = reinterpret_cast<std::uint32_t*>(w3);
    for (int i = int(threadIdx.x); i < kMaps3 * kMapPairs1 * kPastTaps; i += kThreads)
      words[i / kPastTaps * kPairRow + kTaps + i % kPastTaps] = 0u;
  }

  // C3's weights alone, as c3_row_pair lays them out (the C3 table's disconnected weights and
  // the padding's columns zeros): the backward kernel's; with BF16 operands each float2 of the
  // layout a word of two BF16 halves in its place (the lower the float2's first), rounded as mma
  // rounds them, so that a lane's B register is one 32-bit load. Row (m, c)'s tap (p, q) is in
  // k-step 2 q + m / 8, at k (m % 8) / 2, or 4 past it for odd m, and column 5 c + p; rows warp + 8
  // s and warp + 8 (s + 6) are 8 output maps apart, the same input map, so that the second's place
  // is the first's one k-step on: six pointers plus constants.
  __device__ void write_c3_rows(float* rows) const {
    using Element = std::conditional_t<R == Precision::bf16, std::uint16_t, float>;
    const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
    constexpr int kPeriod = 6;
    static_assert(kPeriod * kWarps == 8 * kMaps1 && kRowsPerWarp % kPeriod == 0,
                  "a period is 8 output maps");
    const int tap = min(lane, kTaps - 1), p = tap / kK, q = tap % kK;
    Element* const elements = reinterpret_cast<Element*>(rows);
    Element* row_at[kPeriod];
#pragma unroll
    for (int r = 0; r < kPeriod; ++r) {
      const int row = warp + r * kWarps, m = row / kMaps1, n = row % kMaps1 * kK + p;
      row_at[r] = elements + 2 * c3_row_pair(2 * q, n / 8, n % 8, m / 2) + m % 2;
    }
    if (lane < kTaps)
#pragma unroll
      for (int s = 0; s < kRowsPerWarp; ++s) {
        const float value = connected[s] != 0.0f ? weight[s] : 0.0f;
        Element& at = row_at[s % kPeriod][s / kPeriod * 2 * c3_row_pair(1, 0, 0, 0)];
        if constexpr (R == Precision::bf16)
          at = mma::to_bf16(value);
        else
          at = Operands<R>::stored(value);
      }
    constexpr int kPadColumns = 8 * kC3RowNTiles - kMaps1 * kK;  // 2
    constexpr int kPadding = kC3RowKSteps * kPadColumns * 8;     // 2 columns x 4 t x 2 halves
    for (int i = int(threadIdx.x); i < kPadding; i += kThreads)
      elements[2 * c3_row_pair(i / 16, kC3RowNTiles - 1, 8 - kPadColumns, 0) + i % 16] = Element(0);
  }
};

// The staging itself, where nothing else is read meanwhile: the reads, then the writes.
template <Precision R>
__device__ void stage_conv_weights(float* shared, const TileInputs& in, int w1_at, int w3_at,
                                   int s2_bias_at, int s4_bias_at) {
  ConvWeightReads<R> weights;
  weights.read(in);
  weights.write(shared, w1_at, w3_at, s2_bias_at, s4_bias_at);
}

// Count floats of global memory read by thread `thread` of Threads (every Threads-th, all of its
// reads in flight at once, a clamped index past the end), then used by each(thread, f), which
// calls f(i, value) for each value i the thread read: a kernel issues several such reads before it
// uses any, so that it waits for one round trip to L2, not one a copy.
template <int Count, int Threads>
struct GlobalReads {
  static constexpr int kPerThread = (Count + Threads - 1) / Threads;
  float value[kPerThread];

  __device__ void read(const float* from, int thread) {
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) value[j] = from[min(thread + j * Threads, Count - 1)];
  }
  template <class F>
  __device__ void each(int thread, F f) const {
#pragma unroll
    for (int j = 0; j < kPerThread; ++j)
      if (thread + j * Threads < Count) f(thread + j * Threads, value[j]);
  }
};

// Sample `sample`'s input into the input field x, rounded for R's products: its row of in.field,
// or its image normalised and padded as gather_batch does (cuda/kernels/pixel.cuh). Thread `lane`
// of `threads` (a warp's 32 lanes, or a whole block) writes every threads-th value; x's rows are
// Row floats apart (the field's own 32, or more where a kernel pads them).
template <Precision R, int Row = kField>
__device__ void load_sample(const TileInputs& in, int sample, float* x, int lane,
                            int threads = 32) {
  if (in.field) {
    const float* field = in.field + std::size_t(sample) * (kField * kField);
    for (int i = lane; i < kField * kField; i += threads)
      x[i / kField * Row + i % kField] = Operands<R>::stored(field[i]);
    return;
  }
  const std::uint8_t* image = in.images + std::size_t(sample) * kImageBytes;
  const float background = normalise_pixel_device(0, in.scaling);
  for (int i = lane; i < kField * kField; i += threads) {
    const int y = i / kField - kPad, col = i % kField - kPad;
    const bool inside = y >= 0 && y < kImageSide && col >= 0 && col < kImageSide;
    x[i / kField * Row + i % kField] = Operands<R>::stored(
        inside ? normalise_pixel_device(image[y * kImageSide + col], in.scaling) : background);
  }
}

// C1 and S2 of one sample, by one warp: C1 (784 x 8) = X (784 x 32 taps) W1^T in 25 window
// pairs of m16 tiles (windows 196-199 recompute window 195 and are not written), B (the 6 maps'
// filters, 2 columns of zeros) held in registers for all of them. With max subsampling and
// `which` non-null, also each window's first maximum (map * 196 + window), for the backward pass.
// The warp takes the pairs first_pair, first_pair + pair_step, ... (all of them by default; a
// block's warps share one sample's pairs out with their index and count). S2's rows are S2Row
// floats apart, its maps kSide2 rows (c3_s4 reads them so).
template <Precision R, Activation A, Subsampling P, int S2Row = kSide2>
__device__ void c1_s2(const float* x, const float* w1, const float* bias, float* s2, int lane,
                      std::uint8_t* which = nullptr, int first_pair = 0, int pair_step = 1) {
  const int g = lane / 4, t = lane % 4;
  std::uint32_t b[kTapSteps][2];
#pragma unroll
  for (int j = 0; j < kTapSteps; ++j) {
    b[j][0] = __float_as_uint(w1[g * kW1Row + 8 * j + t]);
    b[j][1] = __float_as_uint(w1[g * kW1Row + 8 * j + t + 4]);
  }
  int tap[kTapSteps][2];
  tap_offsets(t, kField, tap);
  constexpr int kPairs = (kWindows2 + 7) / 8;  // 25
  for (int pair = first_pair; pair < kPairs; pair += pair_step) {
    const int window = min(pair * 8 + g, kWindows2 - 1);
    const float* corner = x + 2 * (window / kSide2) * kField + 2 * (window % kSide2);
    float acc[2][4] = {};  // m16 tile dy = 0 and 1
#pragma unroll
    for (int dy = 0; dy < 2; ++dy)
#pragma unroll
      for (int j = 0; j < kTapSteps; ++j) {
        std::uint32_t a[4];
        gather_a(corner + dy * kField, tap, j, a);
        Operands<R>::mma(acc[dy], a, b[j]);
      }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int map = 2 * t + h;
      if (map < kMaps1 && pair * 8 + g < kWindows2) {
        s2[(map * kSide2 + window / kSide2) * S2Row + window % kSide2] =
            Operands<R>::stored(activate(A, pooled<P>(acc[0], acc[1], h) + bias[map]));
        keep_first_max<P>(acc[0], acc[1], h, which, map * kWindows2 + window);
      }
    }
  }
}

// S2's activations (6 maps, rows S2Row floats apart) as BF16 words of two maps, map 2 p's value in
// the lower half, laid out as the floats are (a pair's word where its first map's float is, with
// the pairs' maps kSide2 rows apart): c3_s4's A operands with BF16 operands, windows i = index,
// index + stride, ... of the 588.
template <int S2Row = kSide2>
__device__ void pair_s2(const float* s2, std::uint32_t* pairs, int index, int stride) {
  constexpr int kMap = kSide2 * S2Row;
  for (int i = index; i < kS2Pairs; i += stride) {
    const int p = i / kWindows2, window = i % kWindows2;
    const int at = window / kSide2 * S2Row + window % kSide2;
    pairs[p * kMap + at] = mma::bf16_pair(s2[2 * p * kMap + at], s2[(2 * p + 1) * kMap + at]);
  }
}

// c3_s4's k-steps, added into acc: the 6 input maps' 4 steps of 8 taps each, in order, for the
// window pairs whose tiles' rows g sit at corner[pair] of S2's maps (and g + 8 one to the right),
// NTiles n-tiles from first_ntile. Each k-step's B fragments are loaded once for all the warp's
// tiles.
template <Precision R, int Pairs, int NTiles, int S2Row>
__device__ void c3_s4_k_steps(const float* s2, const float* w3, const int (&corner)[Pairs],
                              int first_ntile, int lane, float (&acc)[Pairs][2][NTiles][4]) {
  const int g = lane / 4, t = lane % 4;
  int tap[kTapSteps][2];
  tap_offsets(t, S2Row, tap);
  // One (pair, n-tile) a warp: the input maps unrolled, so that every load's address is one of
  // eight per-lane offsets plus a constant; all of a sample's (the evaluation's) keep the loop.
  constexpr int kUnrolledMaps = Pairs * NTiles == 1 ? kMaps1 : 1;
#pragma unroll(kUnrolledMaps)
  for (int c = 0; c < kMaps1; ++c) {
    const float* map = s2 + c * kSide2 * S2Row;
#pragma unroll
    for (int j = 0; j < kTapSteps; ++j) {
      std::uint32_t b[NTiles][2];
#pragma unroll
      for (int nt = 0; nt < NTiles; ++nt) {
        const float* filter = w3 + (8 * (first_ntile + nt) + g) * kW3Row + c * 32 + 8 * j + t;
        b[nt][0] = __float_as_uint(filter[0]);
        b[nt][1] = __float_as_uint(filter[4]);
      }
#pragma unroll
      for (int pair = 0; pair < Pairs; ++pair)
#pragma unroll
        for (int dy = 0; dy < 2; ++dy) {
          std::uint32_t a[4];
          gather_a(map + corner[pair] + dy * S2Row, tap, j, a);
#pragma unroll
          for (int nt = 0; nt < NTiles; ++nt) Operands<R>::mma(acc[pair][dy][nt], a, b[nt]);
        }
    }
  }
}

// The same with BF16 operands, from S2's and C3's BF16 pairs (pair_s2, kW3Bf16Row): the 3 input
// map pairs' 7 steps of 4 taps, in which lane t's register holds the pair's two maps at tap
// 4 j + t: one 32-bit word a row of A and one of B, where the float operands took two loads a row
// and two conversions to BF16 pairs for each mma.sync.
template <int Pairs, int NTiles, int S2Row>
__device__ void c3_s4_bf16_k_steps(const std::uint32_t* s2_pairs, const std::uint32_t* w3_pairs,
                                   const int (&corner)[Pairs], int first_ntile, int lane,
                                   float (&acc)[Pairs][2][NTiles][4]) {
  const int g = lane / 4, t = lane % 4;
  int tap[kPairTapSteps];
  pair_tap_offsets(t, S2Row, tap);
  constexpr int kUnrolledPairs = Pairs * NTiles == 1 ? kMapPairs1 : 1;
#pragma unroll(kUnrolledPairs)
  for (int p = 0; p < kMapPairs1; ++p) {
    const std::uint32_t* map = s2_pairs + p * kSide2 * S2Row;
#pragma unroll
    for (int j = 0; j < kPairTapSteps; ++j) {
      std::uint32_t b[NTiles];
#pragma unroll
      for (int nt = 0; nt < NTiles; ++nt)
        b[nt] =
            w3_pairs[(8 * (first_ntile + nt) + g) * kW3Bf16Row + 4 * (kPairTapSteps * p + j) + t];
#pragma unroll
      for (int pair = 0; pair < Pairs; ++pair)
#pragma unroll
        for (int dy = 0; dy < 2; ++dy) {
          const std::uint32_t* top = map + corner[pair] + dy * S2Row + tap[j];
          const std::uint32_t a[2] = {top[0], top[1]};
#pragma unroll
          for (int nt = 0; nt < NTiles; ++nt) mma::mma_bf16(acc[pair][dy][nt], a, b[nt]);
        }
    }
  }
}

// C3 and S4 of one sample, by one warp: C3 (100 x 16) = X (100 x 6 x 32 taps) W3^T with the 25
// windows in 4 pairs of m16 tiles (windows 25-31 recompute window 24 and are not written) and the
// 16 maps in 2 n-tiles. Each k-step's B fragments are loaded once for all the warp's tiles. Writes
// the sample's row of S4's activations (m * 25 + window), and with max subsampling and `which`
// non-null each window's first maximum at the same index. The warp computes Pairs window pairs
// from first_pair and NTiles n-tiles from first_ntile: all of them by default, one (pair, n-tile)
// each where a block's 8 warps share one sample out. An output's sum runs in the same order either
// way (input map, then tap), so every split gives the same bits. S2's rows are S2Row floats apart,
// its maps kSide2 rows (c1_s2's layout). With BF16 operands s2 and w3 point at their BF16 pairs
// instead (pair_s2's words, and ConvWeightReads::write's), and the k-steps are input map pairs at
// four taps (21 of them, c3_s4_bf16_k_steps).
template <Precision R, Activation A, Subsampling P, int Pairs = 4, int NTiles = 2,
          int S2Row = kSide2>
__device__ void c3_s4(const float* s2, const float* w3, const float* bias, float* a4_row, int lane,
                      std::uint8_t* which = nullptr, int first_pair = 0, int first_ntile = 0) {
  const int g = lane / 4, t = lane % 4;
  int corner[Pairs];
#pragma unroll
  for (int pair = 0; pair < Pairs; ++pair) {
    const int window = min((first_pair + pair) * 8 + g, kWindows4 - 1);
    corner[pair] = 2 * (window / kSide4) * S2Row + 2 * (window % kSide4);
  }
  float acc[Pairs][2][NTiles][4] = {};  // window pair, m16 tile dy, n-tile (maps 8 nt to 8 nt + 7)
  if constexpr (R == Precision::bf16)
    c3_s4_bf16_k_steps<Pairs, NTiles, S2Row>(reinterpret_cast<const std::uint32_t*>(s2),
                                             reinterpret_cast<const std::uint32_t*>(w3), corner,
                                             first_ntile, lane, acc);
  else
    c3_s4_k_steps<R, Pairs, NTiles, S2Row>(s2, w3, corner, first_ntile, lane, acc);
#pragma unroll
  for (int pair = 0; pair < Pairs; ++pair) {
    const int window = (first_pair + pair) * 8 + g;
    if (window >= kWindows4) continue;
#pragma unroll
    for (int nt = 0; nt < NTiles; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = 8 * (first_ntile + nt) + 2 * t + h;
        const float value = pooled<P>(acc[pair][0][nt], acc[pair][1][nt], h) + bias[m];
        a4_row[m * kWindows4 + window] = Operands<R>::stored(activate(A, value));
        keep_first_max<P>(acc[pair][0][nt], acc[pair][1][nt], h, which, m * kWindows4 + window);
      }
  }
}

// Y (Tile x N) = f(X (Tile x K) W^T + b), X in shared memory (rows LdX apart, stored for R's
// products), W (N, K) and b in global memory (or staged in shared memory); f the activation when
// Activate, and Y stored for R's products when Round (it is only a product's operand). Warp w of
// Warps takes n-tiles w, w + Warps, ...; per k-step it loads its B fragment once for the tile's
// Tile / 16 m-tiles. Columns k >= K (F6's 84 -> the output layer: 11 k-steps) are zeros on both
// sides.
template <Precision R, int K, int N, int LdX, int LdY, int Tile, bool Activate, bool Round,
          Activation A, int Chunk = 25, int Warps = kWarps>
__device__ void dense_tile(const float* x, const float* weight, const float* bias, float* y,
                           int warp, int lane) {
  constexpr int kNTiles = (N + 7) / 8, kKSteps = (K + 7) / 8, kMTiles = Tile / 16;
  static_assert(8 * kKSteps <= LdX, "k-steps stay inside X's rows");
  // A chunk of k-steps' weights is read before any of their products, unconditionally (a column
  // or k past the matrix reads a real weight and uses zero instead): reads that a branch guards
  // wait for one another, a round trip to L2 each. A chunk holds 2 Chunk registers.
  constexpr int kChunk = kKSteps < Chunk ? kKSteps : Chunk;
  const int g = lane / 4, t = lane % 4;
  for (int nt = warp; nt < kNTiles; nt += Warps) {
    const int column = 8 * nt + g;  // B's column g: output `column`
    const bool column_real = column < N;
    const float* w_row = weight + (column_real ? column : 0) * K;
    float acc[kMTiles][4] = {};
#pragma unroll(R == Precision::tf32 ? kKSteps : 1)
    for (int first = 0; first < kKSteps; first += kChunk) {
      float w[kChunk][2];
#pragma unroll
      for (int i = 0; i < kChunk; ++i) {
        const int k0 = 8 * (first + i) + t;
        w[i][0] = w_row[min(k0, K - 1)];
        w[i][1] = w_row[min(k0 + 4, K - 1)];
      }
#pragma unroll
      for (int i = 0; i < kChunk && first + i < kKSteps; ++i) {
        const int k0 = 8 * (first + i) + t, k1 = k0 + 4;
        const bool real0 = K % 8 == 0 || k0 < K, real1 = K % 8 == 0 || k1 < K;
        const std::uint32_t b[2] = {column_real && real0 ? Operands<R>::operand(w[i][0]) : 0u,
                                    column_real && real1 ? Operands<R>::operand(w[i][1]) : 0u};
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          const float* top = x + (16 * mt + g) * LdX;
          const float* bottom = top + 8 * LdX;
          const std::uint32_t a[4] = {
              real0 ? __float_as_uint(top[k0]) : 0u, real0 ? __float_as_uint(bottom[k0]) : 0u,
              real1 ? __float_as_uint(top[k1]) : 0u, real1 ? __float_as_uint(bottom[k1]) : 0u};
          Operands<R>::mma(acc[mt], a, b);
        }
      }
    }
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int row = 16 * mt + g + 8 * (r / 2), out = 8 * nt + 2 * t + r % 2;
        if (out >= N) continue;
        float value = acc[mt][r] + bias[out];
        if constexpr (Activate) value = activate(A, value);
        y[row * LdY + out] = Round ? Operands<R>::stored(value) : value;
      }
  }
}

// An operand's bits for R's products: a float rounded here (Operands<R>::operand), or bits an
// operand function returns as they are (a value stored already rounded, Operands<R>::stored,
// whose rounding would give the same bits for one more instruction a read).
template <Precision R>
__device__ inline std::uint32_t operand_bits(float value) {
  return Operands<R>::operand(value);
}
template <Precision R>
__device__ inline std::uint32_t operand_bits(std::uint32_t bits) {
  return bits;
}

// One m16n8 tile of a product, by the warp's 32 lanes: acc = sum over k < k_count of a(m, k)
// b(k, n) for the tile's rows m0.. and columns n0.., in steps of 8, always in the same order,
// operands rounded for R's products (operand_bits); then store(m, n, acc) for each of its 16 x 8
// places (the caller drops the ones past its matrix). a and b are called for every row and column
// of the tile, and only with k < k_count (a lane past the end reads the last k and uses zero
// instead), and must return a finite value there. They are read for Chunk k-steps before any of
// those steps' products: a read that a branch guards waits for the one before it, so every read
// here is unconditional (operand functions that read global memory should clamp an index rather
// than branch on it too; a shared-memory read's wait is short) and a chunk's reads are in flight
// together. k_count is an int, or a std::integral_constant where the products' depth is a constant
// of the kernel.
template <Precision R, int Chunk = 4, class KCount, class AAt, class BAt, class Store>
__device__ void mma_tile(int m0, int n0, KCount k_count, AAt a, BAt b, Store store, int lane) {
  const int g = lane / 4, t = lane % 4;
  const int count = k_count;
  float acc[4] = {};
  for (int k0 = 0; k0 < count; k0 += 8 * Chunk) {
    std::uint32_t af[Chunk][4], bf[Chunk][2];
#pragma unroll
    for (int i = 0; i < Chunk; ++i) {
      const int k1 = k0 + 8 * i + t, k2 = k1 + 4;
      const int at1 = min(k1, count - 1), at2 = min(k2, count - 1);
      const auto a0 = a(m0 + g, at1), a1 = a(m0 + g + 8, at1), a2 = a(m0 + g, at2),
                 a3 = a(m0 + g + 8, at2);
      const auto b0 = b(at1, n0 + g), b1 = b(at2, n0 + g);
      const bool real1 = k1 < count, real2 = k2 < count;
      af[i][0] = real1 ? operand_bits<R>(a0) : 0u;
      af[i][1] = real1 ? operand_bits<R>(a1) : 0u;
      af[i][2] = real2 ? operand_bits<R>(a2) : 0u;
      af[i][3] = real2 ? operand_bits<R>(a3) : 0u;
      bf[i][0] = real1 ? operand_bits<R>(b0) : 0u;
      bf[i][1] = real2 ? operand_bits<R>(b1) : 0u;
    }
#pragma unroll
    for (int i = 0; i < Chunk; ++i)
      if (k0 + 8 * i < count) Operands<R>::mma(acc, af[i], bf[i]);
  }
#pragma unroll
  for (int r = 0; r < 4; ++r) store(m0 + g + 8 * (r / 2), n0 + 2 * t + r % 2, acc[r]);
}

// For each m16n8 tile of an (M, N) product that warp `warp` of Warps owns (tiles warp, warp +
// Warps, ...): mma_tile over k < K (Chunk k-steps' reads at a time), stored for the tile's m < M,
// n < N. The operands are read through a(m, k) and b(k, n), so that transposed reads, padded shapes
// and implicit GEMMs (a convolution's operands gathered from its maps) need no code of their own;
// they are also called for the rows m < 16 ceil(M / 16) and columns n < 8 ceil(N / 8) past the
// matrices, whose results are dropped, and must return a finite value there. Warps = 1, warp 0: a
// warp's own product.
template <Precision R, int M, int N, int K, int Warps = kWarps, int Chunk = 4, class AAt, class BAt,
          class Store>
__device__ void gemm_tiles(AAt a, BAt b, Store store, int warp, int lane) {
  constexpr int kMTiles = (M + 15) / 16, kNTiles = (N + 7) / 8;
  for (int tile = warp; tile < kMTiles * kNTiles; tile += Warps)
    mma_tile<R, Chunk>(
        tile / kNTiles * 16, tile % kNTiles * 8, std::integral_constant<int, K>{}, a, b,
        [&store](int m, int n, float value) {
          if (m < M && n < N) store(m, n, value);
        },
        lane);
}

// forward_tile's convolutions: the tile's S4 rows into L::a4, a sample per warp at a time.
template <Precision R, Activation A, Subsampling P, int Tile>
__device__ void forward_tile_convolutions(float* shared, const TileInputs& in, int first, int warp,
                                          int lane) {
  using L = SharedLayout<Tile>;
  stage_conv_weights<R>(shared, in, L::w1, L::w3, L::s2_bias, L::s4_bias);
  __syncthreads();
  float* x = shared + L::warps + warp * kWarpFloats;
  float* s2 = x + kWarpX;
  for (int local = warp; local < Tile; local += kWarps) {
    float* a4_row = shared + L::a4 + local * kA4Row;
    const int sample = first + local;
    if (sample >= in.n) {
      for (int i = lane; i < kA4Row; i += 32) a4_row[i] = 0.0f;
      continue;
    }
    load_sample<R>(in, sample, x, lane);
    __syncwarp();
    c1_s2<R, A, P>(x, shared + L::w1, shared + L::s2_bias, s2, lane);
    __syncwarp();
    static_assert(R != Precision::bf16, "the evaluation's products are TF32: no S2 pairs here");
    c3_s4<R, A, P>(s2, shared + L::w3, shared + L::s4_bias, a4_row, lane);
    __syncwarp();  // before the warp's next sample overwrites x and S2
  }
}

// F6's and the output layer's products over a tile's samples, by the block's Warps warps, from
// C5's activations (rows of kA5Row floats from a5) to F6's (stored for R's products) and the
// logits, each layer's weights read from params Chunk k-steps at a time (2 Chunk registers). Ends
// with a barrier. The training step's dense forward kernel2 runs them after C5 as C5Tile computes
// it (tensor_backward.cu).
template <Precision R, Activation A, int Tile, int Chunk, int Warps>
__device__ void f6_and_output_layers(const float* a5, float* a6, float* z, const float* params,
                                     const WholeStepOffsets& at, int warp, int lane) {
  dense_tile<R, kC5, kF6, kA5Row, kA6Row, Tile, true, true, A, Chunk, Warps>(
      a5, params + at.f6_weight, params + at.f6_bias, a6, warp, lane);
  __syncthreads();
  dense_tile<R, kF6, kOut, kA6Row, kZRow, Tile, false, false, A, Chunk, Warps>(
      a6, params + at.output_weight, params + at.output_bias, z, warp, lane);
  __syncthreads();
}

// The dense layers of a tile's samples, by the block's Warps warps: C5's, F6's and the output
// layer's products over the tile, from S4's activations (rows of kA4Row floats from a4) to C5's
// and F6's (stored for R's products) and the logits, each layer's weights read
// Chunk k-steps at a time (2 Chunk registers). Ends with a barrier.
template <Precision R, Activation A, int Tile, int Chunk, int Warps>
__device__ void dense_layers(const float* a4, float* a5, float* a6, float* z, const float* params,
                             const WholeStepOffsets& at, int warp, int lane) {
  dense_tile<R, kFlat4, kC5, kA4Row, kA5Row, Tile, true, true, A, Chunk, Warps>(
      a4, params + at.c5_weight, params + at.c5_bias, a5, warp, lane);
  __syncthreads();
  f6_and_output_layers<R, A, Tile, Chunk, Warps>(a5, a6, z, params, at, warp, lane);
}

// The forward pass of samples [first, first + Tile) of in.n, by the whole block, up to the logits:
// afterwards shared memory holds, per local sample (row), S4's, C5's and F6's activations (L::a4,
// L::a5, L::a6, stored for R's products) and the logits (L::z); a short last tile's missing samples
// have zero S4 rows and results that nothing reads. Ends with a barrier.
template <Precision R, Activation A, Subsampling P, int Tile>
__device__ void forward_tile(float* shared, const TileInputs& in, int first) {
  using L = SharedLayout<Tile>;
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  forward_tile_convolutions<R, A, P, Tile>(shared, in, first, warp, lane);
  __syncthreads();
  dense_layers<R, A, Tile, 25, kWarps>(shared + L::a4, shared + L::a5, shared + L::a6,
                                       shared + L::z, in.params, in.at, warp, lane);
}

// A sample's slot of the convolutions' gradients (tensor_conv_backward.cu's backward kernel writes
// one a sample; the step's gradient kernel, tensor_backward.cu, adds them in a fixed order), in
// floats from its start.
namespace partial {
constexpr int c1_weight = 0;                                  // (6, 1, 5, 5)
constexpr int s2_bias = c1_weight + kMaps1 * kTaps;           // (6)
constexpr int c3_weight = s2_bias + kMaps1;                   // (16, 6, 5, 5)
constexpr int s4_bias = c3_weight + kMaps3 * kMaps1 * kTaps;  // (16)
constexpr int floats = s4_bias + kMaps3;
}  // namespace partial

// Where a tensor's gradient sits in the slot (from, count floats) and in the layout's gradient
// buffer (to); masked: times the C3 table's mask (c3.weight).
struct SlotTensor {
  int from, to, count;
  bool masked;
};

// The convolutions' slot: each tensor where partial:: keeps it and where the layout does.
struct ConvSlot {
  SlotTensor tensor[4];
  static ConvSlot of(const WholeStepOffsets& at) {
    return {{{partial::c1_weight, at.c1_weight, kMaps1 * kTaps, false},
             {partial::s2_bias, at.s2_bias, kMaps1, false},
             {partial::c3_weight, at.c3_weight, kMaps3 * kMaps1 * kTaps, true},
             {partial::s4_bias, at.s4_bias, kMaps3, false}}};
  }
};

// SGD's step, applied where a gradient is final (the slots' sum in the step's last launch,
// tensor_backward.cu, and the dense gradient blocks, tensor_dense_gradient.cuh):
// with lr null, the kernel writes the gradient only. The formula is sgd_update_element's
// (cuda/kernels/sgd_element.cuh), with mu and decay converted to float on the host as
// cuda/kernels/optimizer.cu converts them, so that the update's bits are the SGD kernel's. Each
// parameter is updated as its gradient is written.
struct SgdUpdate {
  float mu = 0.0f, decay = 0.0f;
  bool nesterov = false;
  const float* lr = nullptr;  // the step's learning rate, on the device
  float* params = nullptr;    // the layout's buffer
  float* velocity = nullptr;  // the same layout; null without momentum

  // Writes parameter p's gradient, and takes SGD's step on p with it where lr is given.
  __device__ void write(float* gradients, int p, float gradient) const {
    gradients[p] = gradient;
    if (lr)
      sgd_update_element(mu, nesterov, decay, *lr, gradient, params + p,
                         velocity ? velocity + p : nullptr);
  }
  // The same, in two halves: parameter p's operands read ahead of its gradient (none where lr is
  // null), then the gradient written and the step taken with them. The same bits as write.
  __device__ SgdOperands read(int p) const {
    return lr ? sgd_read_operands(mu, lr, params + p, velocity ? velocity + p : nullptr)
              : SgdOperands{};
  }
  __device__ void write(float* gradients, int p, float gradient,
                        const SgdOperands& operands) const {
    gradients[p] = gradient;
    if (lr)
      sgd_update_read(mu, nesterov, decay, operands, gradient, params + p,
                      velocity ? velocity + p : nullptr);
  }
};

// Floats [32 block, 32 block + 32) of the convolutions' slot: the partial sums of `samples` slots
// added in a fixed order (the same bits every run, no atomics), written where the layout keeps
// them, with SGD's step where `update` asks for it, by a block of 8 warps: warp w adds slots [w
// per, (w + 1) per) in order (each slot's 32 floats one coalesced read), and lane i of warp 0 adds
// the 8 warps' sums in warp order, through `warp_sums` (kSumWarps rows of 32 floats of the block's
// shared memory). (A thread per float over all the slots, a batch of 128 samples 128 slots, waited
// on one load after another.) kWrittenThisLaunch: the slots were written by other blocks of the
// calling kernel's own launch, so they are read from L2, never from an SM's L1 (which other SMs'
// writes do not reach).
constexpr int kSumWarps = 8;
template <bool kWrittenThisLaunch = false>
__device__ inline void sum_conv_slots(const float* partials, int samples, const ConvSlot& slot,
                                      const float* c3_mask, float* gradients,
                                      const SgdUpdate& update, int block, float (*warp_sums)[32]) {
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int i = block * 32 + lane;
  const int per = (samples + kSumWarps - 1) / kSumWarps;
  const int begin = min(warp * per, samples), end = min(begin + per, samples);
  // Warp 0 writes the totals: where each lane's goes, its mask and its step's operands, read
  // before the slots so that their round trip is the slots' own.
  int to = -1;
  float mask = 1.0f;
  SgdOperands operands;
  if (warp == 0 && i < partial::floats) {
    for (const SlotTensor& tensor : slot.tensor) {  // disjoint ranges of the slot: one matches
      const int j = i - tensor.from;
      if (j < 0 || j >= tensor.count) continue;
      to = tensor.to + j;
      if (tensor.masked) mask = c3_mask[j];
    }
    if (to >= 0) operands = update.read(to);
  }
  float sum = 0.0f;
  if (i < partial::floats) {
#pragma unroll 16  // the loads of 16 slots in flight at once; the additions stay in slot order
    for (int s = begin; s < end; ++s) {
      const float* at = partials + std::size_t(s) * partial::floats + i;
      sum += kWrittenThisLaunch ? __ldcg(at) : *at;
    }
  }
  warp_sums[warp][lane] = sum;
  __syncthreads();
  if (warp != 0 || to < 0) return;
  float total = 0.0f;
  for (int w = 0; w < kSumWarps; ++w) total += warp_sums[w][lane];
  update.write(gradients, to, total * mask, operands);
}
constexpr int kConvSlotBlocks = (partial::floats + 31) / 32;

// How many tiles of `tile` samples n samples take.
__host__ __device__ inline int tiles_of(int n, int tile) {
  return (n + tile - 1) / tile;
}

// ---- the host side's checks, shared by the kernels' owners --------------------------------------

// Where each parameter tensor starts in the flat buffer, in floats.
inline WholeStepOffsets offsets_of(const ParamLayout& layout) {
  const auto at = [&layout](const char* name) { return int(layout.find(name).offset); };
  WholeStepOffsets offsets{};
  offsets.c1_weight = at("c1.weight");
  offsets.s2_bias = at("s2.bias");
  offsets.c3_weight = at("c3.weight");
  offsets.s4_bias = at("s4.bias");
  offsets.c5_weight = at("c5.weight");
  offsets.c5_bias = at("c5.bias");
  offsets.f6_weight = at("f6.weight");
  offsets.f6_bias = at("f6.bias");
  offsets.output_weight = at("output.weight");
  offsets.output_bias = at("output.bias");
  offsets.buffer_floats = int(layout.buffer_floats);
  return offsets;
}

// Refuses a GPU without TF32 tensor cores, or a build whose kernels for it lack them (PTX older
// than 8.0 JIT-compiled for a newer GPU), and one whose blocks cannot have the tile's shared
// memory.
template <class Kernel>
void check_device_runs(Kernel kernel, std::size_t bytes, int tile) {
  int device = 0, shared_limit = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(
      cudaDeviceGetAttribute(&shared_limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  // PTX 8.0 or newer loaded: the GPU, too, has compute capability 8.0 or newer.
  if (loaded_ptx_version(reinterpret_cast<const void*>(kernel)) < 80)
    throw UsageError(
        "the tensor-core kernels need TF32 tensor cores (compute capability 8.0 or "
        "newer) and kernels built for them; this GPU is " +
        current_compute_capability() +
        ": use the whole-step or fast kernels, or rebuild with "
        "CMAKE_CUDA_ARCHITECTURES naming it");
  if (std::size_t(shared_limit) < bytes)
    throw UsageError("a tile of " + std::to_string(tile) + " samples keeps " +
                     std::to_string(bytes / 1024) + " KB in shared memory; this GPU allows " +
                     std::to_string(shared_limit / 1024) + " KB a block: use a tile of 16");
}

// check_device_runs, then lets the kernel have `bytes` of dynamic shared memory.
template <class Kernel>
void prepare_tile_kernel(Kernel kernel, std::size_t bytes, int tile) {
  check_device_runs(kernel, bytes, tile);
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

// The C3 table's mask (16, 6, 5, 5) on the device: 0 where a weight is disconnected.
inline Buffer<float> c3_mask_on_device(const NetConfig& config) {
  const std::vector<float> mask = c3_weight_mask(config);
  Buffer<float> device(Device::gpu, mask.size());
  device.copy_from_host(mask.data());
  return device;
}

// Refuses a pass of n samples where the buffers have room for max_batch.
inline void check_fits(int n, int max_batch) {
  if (n < 1 || n > max_batch)
    throw Error("internal: a tensor-core backward pass of " + std::to_string(n) +
                " samples, room for " + std::to_string(max_batch));
}

// The settings as they are, once they are known to be what the kernels compute (before the
// layout is read: the RBF output's has no output.weight).
inline const NetConfig& supported(const NetConfig& config) {
  const std::string refusal = tensor_forward_refusal(config);
  if (!refusal.empty()) throw UsageError(refusal);
  return config;
}

inline int checked_batch(int max_batch) {
  if (max_batch < 1) throw UsageError("batch size must be at least 1");
  return max_batch;
}

// kernels.of<R, A, P>() for the products' precision R and the network's activation A and
// subsampling P: the one place that turns the settings into a kernel's template arguments.
template <class Kernels, Precision R, Activation A>
auto kernel_for_subsampling(const Kernels& kernels, Subsampling pooling) {
  if (pooling == Subsampling::average) return kernels.template of<R, A, Subsampling::average>();
  if (pooling != Subsampling::max)
    throw Error("internal: the tensor-core kernels have no trainable subsampling");
  return kernels.template of<R, A, Subsampling::max>();
}

// The kernel for the network's activation and subsampling, its products in R.
template <Precision R, class Kernels>
auto kernel_for_network(const NetConfig& config, const Kernels& kernels) {
  switch (config.activation) {
    case Activation::tanh:
      return kernel_for_subsampling<Kernels, R, Activation::tanh>(kernels, config.subsampling);
    case Activation::sigmoid:
      return kernel_for_subsampling<Kernels, R, Activation::sigmoid>(kernels, config.subsampling);
    case Activation::scaled_tanh:
      return kernel_for_subsampling<Kernels, R, Activation::scaled_tanh>(kernels,
                                                                         config.subsampling);
    case Activation::relu:
      return kernel_for_subsampling<Kernels, R, Activation::relu>(kernels, config.subsampling);
  }
  throw Error("internal: unknown activation");
}

// The training step's kernel: its products in the network's --precision (fp32, tf32 or bf16; the
// evaluation's are TF32 whatever it says, kernel_for_network<Precision::tf32>).
template <class Kernels>
auto kernel_for_training(const NetConfig& config, const Kernels& kernels) {
  switch (config.precision) {
    case Precision::fp32:
      return kernel_for_network<Precision::fp32>(config, kernels);
    case Precision::tf32:
      return kernel_for_network<Precision::tf32>(config, kernels);
    case Precision::bf16:
      return kernel_for_network<Precision::bf16>(config, kernels);
  }
  throw Error("internal: unknown precision");
}

}  // namespace
}  // namespace lenet5::cuda
