// C3's three stages on the tensor cores (--precision tf32): the forward pass, the input gradient
// and this sample's weight gradient as matrix products, each split into the m16n8k8 TF32 tiles of
// mma.sync (compute capability 8.0 and newer). A warp owns a tile of the product; its lanes gather
// the tile's operands straight from the shared working set (an implicit im2col: no matrix is
// built), round them to TensorFloat-32 (10-bit mantissa, round to nearest; c3.weight once, when
// loaded) and the tensor core adds the products in float. The stages read and write what their
// fp32 versions in whole_step_forward.cuh and whole_step_backward.cuh do, but c3.weight, which
// they keep in a layout of their own (w3_tf32_index).
//
// Cheap gathers are what make this pay: a block works on one sample, so each product is small
// (16 x 100 x 150 for the forward pass) and a step's loads, not its mma, cost the time. Every
// step's offsets are constants of the unrolled loops plus a per-lane value (taps in steps of 8
// per map, kTapSteps), and c3.weight's fragment loads hit 32 different banks (the weight
// gradient's dC3 loads share banks two by two: its maps are 296 = 8 mod 32 floats apart).
//
// Deterministic as the fp32 stages are: a tile's sums run in the same order every time, and every
// output is written by one lane. Not the same bits as fp32 (the operands are rounded), which is
// why --precision is a choice the user makes (core/net_config.hpp's Precision).
//
// The fragments (PTX ISA, "Matrix Fragments for mma.m16n8k8" with .tf32), for lane = 4 g + t:
//   A (16 x 8, row-major): a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4);
//   B (8 x 8, column-major): b0 (t, g), b1 (t + 4, g);
//   C, D (16 x 8): c_r at row g + 8 (r / 2), column 2 t + r % 2.
//
// Included by whole_step.cu alone, the one translation unit that compiles the kernels (device
// code is not linked across files here): the unnamed namespace gives every definition internal
// linkage, as when all of it sat in that one file.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/activation_math.hpp"
#include "cuda/engine/whole_step_backward.cuh"
#include "cuda/engine/whole_step_device.cuh"

namespace lenet5::cuda {
namespace {

constexpr int kC3Positions = kSide3 * kSide3;  // 100 outputs per C3 map
constexpr int kS2Positions = kSide2 * kSide2;  // 196 values per S2 map
constexpr int kTaps = kK * kK;                 // 25 taps k = 5 p + q per filter
// The K dimension of every product here runs over the taps of one map at a time in four steps of
// 8 (taps 0-31, of which 25-31 are zeros), as tensor_mma.cuh's tap_offsets lays them out.
using mma::kTapSteps;
using mma::tap_offsets;

// c3.weight as these stages keep it in SampleShared::w3 (instead of w3_index's layout):
// [m][c][k] (k = 5 p + q), rows of kTapRow floats and maps kTapMap apart, rounded to TF32 once
// when loaded (load_weights with RoundedW3). Both stages read it as an mma operand, the forward
// pass with lanes (m = g, k = t) and the input gradient with lanes (c = g, k = t): 172 = 12 and
// 28 = -4 (mod 32) put each load's 32 lanes in 32 different banks.
constexpr int kTapRow = 28, kTapMap = kMaps1 * kTapRow + 4;
constexpr int w3_tf32_index(int m, int c, int k) {
  return m * kTapMap + c * kTapRow + k;
}
// The farthest address a lane forms (map 15, row 7 of the input gradient's lanes, tap 31) stays
// inside w3; the stages select zero instead of loading taps 25-31 (and rows 6 and 7).
static_assert(w3_tf32_index(kMaps3 - 1, 7, 8 * kTapSteps - 1) < kMaps3 * kMaps1 * kK * kW3Q,
              "the layout fits SampleShared::w3");

// load_weights' store for --precision tf32: c3.weight rounded, in w3_tf32_index's layout.
struct RoundedW3 {
  __device__ void operator()(SampleShared& s, int flat, float value) const {
    const int m = flat / (kMaps1 * kTaps), c = flat / kTaps % kMaps1, tap = flat % kTaps;
    s.w3[w3_tf32_index(m, c, tap)] = rounded_to_tf32(value);
  }
};

// C3 forward, transposed: c3[m][pos] = sum_k W[m][k] X[k][pos], the 16 maps one row tile, pos =
// 10 y + x (100 columns, 13 tiles of 8), k = (c, p, q) in 6 x 4 steps, X[k][pos] = a2[c][y + p][x +
// q]. Warp w < 13 computes column tile w: per step one W fragment (4 loads) and one X fragment (2).
__device__ void c3_forward_tf32(SampleShared& s) {
  constexpr int kColumnTiles = (kC3Positions + 7) / 8;  // 13
  static_assert(kColumnTiles <= kWarps && kMaps3 == 16, "a warp per tile; the maps one row tile");
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp >= kColumnTiles) return;
  const int g = lane / 4, t = lane % 4;
  // X's column g of the tile: a position past the last reads the last (its sums are not written).
  const int pos = min(warp * 8 + g, kC3Positions - 1);
  const float* window = s.a2 + pos / kSide3 * kSide2 + pos % kSide3;
  int tap[kTapSteps][2];
  tap_offsets(t, kSide2, tap);
  const float* w = s.w3 + w3_tf32_index(g, 0, t);  // W's rows g and g + 8, column t
  constexpr int kRowsApart = 8 * kTapMap;
  float acc[2][4] = {};
#pragma unroll
  for (int c = 0; c < kMaps1; ++c)
#pragma unroll
    for (int j = 0; j < kTapSteps; ++j) {
      const int at = c * kTapRow + 8 * j;
      const float* x = window + c * kS2Positions;
      std::uint32_t a[4], b[2];
      if (j < kTapSteps - 1) {
        a[0] = __float_as_uint(w[at]);
        a[1] = __float_as_uint(w[kRowsApart + at]);
        a[2] = __float_as_uint(w[at + 4]);
        a[3] = __float_as_uint(w[kRowsApart + at + 4]);
        b[0] = to_tf32(x[tap[j][0]]);
        b[1] = to_tf32(x[tap[j][1]]);
      } else {  // taps 24-31: only tap 24 (t = 0, h = 0) is one
        const bool real = t == 0;
        a[0] = real ? __float_as_uint(w[at]) : 0u;
        a[1] = real ? __float_as_uint(w[kRowsApart + at]) : 0u;
        a[2] = a[3] = 0u;
        b[0] = real ? to_tf32(x[tap[j][0]]) : 0u;
        b[1] = 0u;
      }
      mma_tf32(acc[j % 2], a, b);
    }
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int m = g + 8 * (r / 2), out = warp * 8 + 2 * t + r % 2;
    if (out < kC3Positions) s.c3[m * kC3Positions + out] = acc[0][r] + acc[1][r];
  }
}

// C3's input gradient: dS2[c][pos] = sum_k D[pos][k] W[k][c], pos = 14 u + v (196 rows, 13 tiles
// of 16), k = (m, p, q) in 16 x 4 steps, D[pos][k] = dC3[m][u - p][v - q] (zero outside the map),
// W[k][c] = c3.weight[m][c][p][q] (columns 6 and 7 of the tile are zeros). Then, as in
// c3_input_gradient, dL/d(S2 pre-activation) = sum * f'(a2) and S2's backward for its window, by
// the lane that forms it. Warp w < 13 computes row tile w. Reading dC3 outside the map needs no
// test: the padded buffer's zero rows cover rows -4 .. 13; columns 10 .. 15 of every row, and the
// 8 floats after every map, are zeros, so a column -4 .. -1 reads the row above's last four; the
// one read before the buffer (map 0, padded row 0, a column below 0) is moved to its first float,
// a zero too. (Taps 25-31 read finite values the zero weights cancel.)
template <Activation A, Subsampling P>
__device__ void c3_input_gradient_tf32(SampleShared& s) {
  constexpr int kRowTiles = (kS2Positions + 15) / 16;  // 13
  static_assert(kRowTiles <= kWarps && kMaps1 <= 8, "a warp per tile; the maps one column tile");
  static_assert(kD3Row >= kSide3 + kK - 1, "columns past the map are zero padding");
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp >= kRowTiles) return;
  const int g = lane / 4, t = lane % 4;
  // Where output row pos's dC3 window starts (tap p = q = 0) in the padded buffer; a position
  // past the last reads the last (its sums are not written).
  const auto corner = [](int pos) {
    pos = min(pos, kS2Positions - 1);
    return (pos / kSide2 + kPadRows) * kD3Row + pos % kSide2;
  };
  const int top = corner(warp * 16 + g), bottom = corner(warp * 16 + g + 8);
  int tap[kTapSteps][2];
  tap_offsets(t, kD3Row, tap);
  const float* w = s.w3 + w3_tf32_index(0, g, t);  // W's column c = g, row t
  const bool column_real = g < kMaps1;
  float acc[2][4] = {};
#pragma unroll
  for (int m = 0; m < kMaps3; ++m)
#pragma unroll
    for (int j = 0; j < kTapSteps; ++j) {
      const auto d3 = [&](int corner_at, int h) {
        const int at = corner_at + m * kD3Map - tap[j][h];
        return to_tf32(s.d3[m == 0 ? max(at, 0) : at]);
      };
      const int at = w3_tf32_index(m, 0, 8 * j);
      const bool last = j == kTapSteps - 1;  // taps 24-31: only tap 24 (t = 0, h = 0) is one
      std::uint32_t a[4], b[2];
      a[0] = d3(top, 0);
      a[1] = d3(bottom, 0);
      a[2] = d3(top, 1);
      a[3] = d3(bottom, 1);
      b[0] = column_real && (!last || t == 0) ? __float_as_uint(w[at]) : 0u;
      b[1] = column_real && !last ? __float_as_uint(w[at + 4]) : 0u;
      mma_tf32(acc[j % 2], a, b);
    }
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int pos = warp * 16 + g + 8 * (r / 2), c = 2 * t + r % 2;
    if (pos >= kS2Positions || c >= kMaps1) continue;
    const int at = c * kS2Positions + pos;
    const float dz = (acc[0][r] + acc[1][r]) * activation_slope(A, s.a2[at]);
    s.d2[at] = dz;
    s2_backward_window<P>(s, at, dz);
  }
}

// This sample's dL/dc3.weight: G[m][k] = sum_pos D[m][pos] X[pos][k], the 16 maps one row tile,
// k = (c, p, q) in 6 x 4 column tiles of 8 (taps 25-31 computed and dropped), pos = (y, x) with x
// padded to 16, in 10 x 2 steps, D[m][pos] = dC3[m][y][x] (columns 10-15 of the padded buffer are
// zeros), X[pos][k] = a2[c][y + p][x + q]. The padding columns x = 10-15 read X past each row,
// and for map 5's last rows past S2's maps into dS2 (d2, which follows a2 in SampleShared and which
// the input-gradient stage has just written in full): finite values, multiplied by dC3's zero
// columns. Thread `thread` of kC3WeightGradientTf32Threads (the caller's half of the block): warp
// w computes column tiles 3 w .. 3 w + 2, loading each step's D fragment once for the three.
constexpr int kC3WeightGradientTf32Threads = 8 * 32;
__device__ void c3_weight_gradient_tf32(const SampleShared& s, float* record_g3, int thread) {
  constexpr int kTilesPerWarp = kMaps1 * kTapSteps / (kC3WeightGradientTf32Threads / 32);  // 3
  static_assert(kTilesPerWarp * kC3WeightGradientTf32Threads / 32 == kMaps1 * kTapSteps,
                "the column tiles share out evenly");
  static_assert(kD3Row == 16, "x runs over the padded row's 16 columns");
  static_assert(offsetof(SampleShared, d2) == offsetof(SampleShared, a2) + sizeof(SampleShared::a2),
                "X's reads past S2's last row land in dS2, which is finite here");
  if (thread < 0 || thread >= kC3WeightGradientTf32Threads) return;
  const int warp = thread / 32, lane = thread % 32, g = lane / 4, t = lane % 4;
  // X's column g of each of the warp's tiles: tap k = 8 j + g of input map c, as an offset in S2.
  int column[kTilesPerWarp];
#pragma unroll
  for (int i = 0; i < kTilesPerWarp; ++i) {
    const int tile = warp * kTilesPerWarp + i, c = tile / kTapSteps, k = 8 * (tile % kTapSteps) + g;
    // Taps 25-31 read S2 at the window's corner; their sums are dropped.
    column[i] = c * kS2Positions + (k < kTaps ? k / kK * kSide2 + k % kK : 0);
  }
  const float* d = s.d3 + g * kD3Map + kPadRows * kD3Row + t;  // D's rows g and g + 8, column t
  float acc[kTilesPerWarp][4] = {};
#pragma unroll
  for (int y = 0; y < kSide3; ++y)
#pragma unroll
    for (int half_row = 0; half_row < 2; ++half_row) {
      const int at = y * kD3Row + 8 * half_row, x = y * kSide2 + 8 * half_row + t;
      std::uint32_t a[4];
      a[0] = to_tf32(d[at]);
      a[1] = to_tf32(d[8 * kD3Map + at]);
      a[2] = to_tf32(d[at + 4]);
      a[3] = to_tf32(d[8 * kD3Map + at + 4]);
#pragma unroll
      for (int i = 0; i < kTilesPerWarp; ++i) {
        const std::uint32_t b[2] = {to_tf32(s.a2[column[i] + x]), to_tf32(s.a2[column[i] + x + 4])};
        mma_tf32(acc[i], a, b);
      }
    }
#pragma unroll
  for (int i = 0; i < kTilesPerWarp; ++i) {
    const int tile = warp * kTilesPerWarp + i, c = tile / kTapSteps;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int m = g + 8 * (r / 2), k = 8 * (tile % kTapSteps) + 2 * t + r % 2;
      if (k < kTaps) record_g3[(m * kMaps1 + c) * kTaps + k] = acc[i][r];
    }
  }
}

}  // namespace
}  // namespace lenet5::cuda
