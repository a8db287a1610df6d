// C3's three stages on the tensor cores (--precision tf32): the forward pass, the input gradient
// and this sample's weight gradient as matrix products, each split into the m16n8k8 TF32 tiles of
// mma.sync (compute capability 8.0 and newer). A warp owns a tile of the product; its lanes gather
// the tile's operands straight from the shared working set (an implicit im2col: no matrix is
// built), round them to TensorFloat-32 (10-bit mantissa, round to nearest) and the tensor core adds
// the products in float. The stages read and write what their fp32 versions in
// whole_step_forward.cuh and whole_step_backward.cuh do, so the rest of the step is the same.
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

#include <cstdint>

#include "core/activation_math.hpp"
#include "cuda/engine/whole_step_backward.cuh"
#include "cuda/engine/whole_step_device.cuh"

namespace lenet5::cuda {
namespace {

// Whether this build of the kernels has the tensor-core instructions. The host asks the loaded
// kernel's PTX version (whole_step.cu's has_tensor_float32) and refuses --precision tf32 without
// them, so the trap below is never reached.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
constexpr bool kTensorFloat32 = true;
#else
constexpr bool kTensorFloat32 = false;
#endif

__device__ inline std::uint32_t to_tf32(float value) {
  std::uint32_t rounded = 0;
  if constexpr (kTensorFloat32)
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(rounded) : "f"(value));
  return rounded;
}

// d += a b for one m16n8k8 tile, the warp's 32 lanes together.
__device__ inline void mma_tf32(float (&d)[4], const std::uint32_t (&a)[4],
                                const std::uint32_t (&b)[2]) {
  if constexpr (kTensorFloat32) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    __trap();
  }
}

constexpr int kMmaRows = 16, kMmaColumns = 8, kMmaDepth = 8;  // m16n8k8

// Runs step(i, acc) for i in 0 .. steps - 1, the even steps into acc[0] and the odd ones into
// acc[1], so that each mma waits less for the one before; the caller adds acc[0] + acc[1], always
// in that order. Two steps a round and no more: unrolled further, the loads of many steps are
// hoisted and the two-samples-per-SM build (64 registers a thread) spills.
template <int Steps, class Step>
__device__ __forceinline__ void alternating_steps(float (&acc)[2][4], Step step) {
#pragma unroll 1
  for (int i = 0; i + 1 < Steps; i += 2) {
    step(i, acc[0]);
    step(i + 1, acc[1]);
  }
  if constexpr (Steps % 2 == 1) step(Steps - 1, acc[0]);
}
constexpr int kC3Positions = kSide3 * kSide3;                    // 100 outputs per C3 map
constexpr int kC3Taps = kMaps1 * kK * kK;                        // 150 weights per C3 map
constexpr int kS2Positions = kSide2 * kSide2;                    // 196 values per S2 map

// A tap k = (c, p, q) of a C3 filter, as an offset in S2's maps (relative to the window's corner).
__device__ inline int s2_tap_offset(int k) {
  const int c = k / (kK * kK), p = k / kK % kK, q = k % kK;
  return c * kS2Positions + p * kSide2 + q;
}

// C3 forward: c3[m][pos] = sum_k A[pos][k] B[k][m], pos = 10 y + x (100 rows, 7 tiles of 16), k =
// (c, p, q) (150, 19 steps of 8), A[pos][k] = a2[c][y + p][x + q], B[k][m] = c3.weight[m][c][p][q].
// Warp w < 14 computes row tile w / 2 and maps 8 (w % 2) .. + 7.
__device__ void c3_forward_tf32(SampleShared& s) {
  constexpr int kRowTiles = (kC3Positions + kMmaRows - 1) / kMmaRows;  // 7
  constexpr int kSteps = (kC3Taps + kMmaDepth - 1) / kMmaDepth;       // 19
  static_assert(2 * kRowTiles <= kWarps, "a warp per tile");
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp >= 2 * kRowTiles) return;
  const int tile = warp / 2, maps = warp % 2, g = lane / 4, t = lane % 4;
  // The two rows this lane reads; rows past the last position read the last (their sums are not
  // written).
  const auto corner = [](int pos) {
    pos = pos < kC3Positions ? pos : kC3Positions - 1;
    return pos / kSide3 * kSide2 + pos % kSide3;
  };
  const int top = corner(tile * kMmaRows + g), bottom = corner(tile * kMmaRows + g + 8);
  const int m = maps * kMmaColumns + g;
  float acc[2][4] = {};
  alternating_steps<kSteps>(acc, [&](int step, float(&d)[4]) {
    std::uint32_t a[4], b[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {  // taps t and t + 4 of the step
      const int k = step * kMmaDepth + t + 4 * half;
      const bool inside = k < kC3Taps;  // the last step's taps 150 and 151 are zeros
      const int tap = inside ? k : 0, c = tap / (kK * kK), p = tap / kK % kK, q = tap % kK;
      const int offset = s2_tap_offset(tap);
      a[2 * half] = to_tf32(inside ? s.a2[top + offset] : 0.0f);
      a[2 * half + 1] = to_tf32(inside ? s.a2[bottom + offset] : 0.0f);
      b[half] = to_tf32(inside ? s.w3[w3_index(m, c, q) + p] : 0.0f);
    }
    mma_tf32(d, a, b);
  });
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int pos = tile * kMmaRows + g + 8 * (r / 2);
    const int map = maps * kMmaColumns + 2 * t + r % 2;
    if (pos < kC3Positions) s.c3[map * kC3Positions + pos] = acc[0][r] + acc[1][r];
  }
}

// C3's input gradient: dS2[c][pos] = sum_k A[pos][k] B[k][c], pos = 14 u + v (196 rows, 13
// tiles), k = (m, p, q) (400, 50 steps), A[pos][k] = dC3[m][u - p][v - q] (zero outside the map),
// B[k][c] = c3.weight[m][c][p][q] (c < 6; columns 6 and 7 of the tile are zeros). Then, as in
// c3_input_gradient, dL/d(S2 pre-activation) = sum * f'(a2) and S2's backward for its window, by
// the lane that forms it. Warp w < 13 computes row tile w. Reading dC3 outside the map needs no
// test: the padded buffer's zero rows cover rows -4 .. 13; columns 10 .. 15 of every row, and the
// 8 floats after every map, are zeros, so a column -4 .. -1 reads the row above's last four; the
// one read before the buffer (map 0, padded row 0, a column below 0) is moved to its first float,
// a zero too.
template <Activation A, Subsampling P>
__device__ void c3_input_gradient_tf32(SampleShared& s) {
  constexpr int kRowTiles = (kS2Positions + kMmaRows - 1) / kMmaRows;  // 13
  constexpr int kSteps = kMaps3 * kK * kK / kMmaDepth;                 // 50
  static_assert(kMaps3 * kK * kK % kMmaDepth == 0, "whole steps");
  static_assert(kRowTiles <= kWarps && kMaps1 <= kMmaColumns, "a warp per tile");
  static_assert(kD3Row >= kSide3 + kK - 1, "columns past the map are zero padding");
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp >= kRowTiles) return;
  const int g = lane / 4, t = lane % 4;
  // Where output row pos's dC3 window starts (tap p = q = 0) in the padded buffer.
  const auto corner = [](int pos) {
    pos = pos < kS2Positions ? pos : kS2Positions - 1;
    return (pos / kSide2 + kPadRows) * kD3Row + pos % kSide2;
  };
  const int top = corner(warp * kMmaRows + g), bottom = corner(warp * kMmaRows + g + 8);
  const bool column_inside = g < kMaps1;
  float acc[2][4] = {};
  alternating_steps<kSteps>(acc, [&](int step, float(&d)[4]) {
    std::uint32_t a[4], b[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int k = step * kMmaDepth + t + 4 * half;
      const int m = k / (kK * kK), p = k / kK % kK, q = k % kK;
      const int offset = m * kD3Map - p * kD3Row - q;
      a[2 * half] = to_tf32(s.d3[max(top + offset, 0)]);
      a[2 * half + 1] = to_tf32(s.d3[max(bottom + offset, 0)]);
      b[half] = to_tf32(column_inside ? s.w3[w3_index(m, g, q) + p] : 0.0f);
    }
    mma_tf32(d, a, b);
  });
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int pos = warp * kMmaRows + g + 8 * (r / 2), c = 2 * t + r % 2;
    if (pos >= kS2Positions || c >= kMaps1) continue;
    const int at = c * kS2Positions + pos;
    const float dz = (acc[0][r] + acc[1][r]) * activation_slope(A, s.a2[at]);
    s.d2[at] = dz;
    s2_backward_window<P>(s, at, dz);
  }
}

// This sample's dL/dc3.weight: G[m][k] = sum_pos A[m][pos] B[pos][k], m (16, one row tile), k =
// (c, p, q) (150, 19 column tiles), pos = 10 y + x (100, 13 steps, the last half empty),
// A[m][pos] = dC3[m][y][x], B[pos][k] = a2[c][y + p][x + q]. Thread t of kC3WeightGradientThreads
// as c3_weight_gradient's (the caller's half of the block): its warp w takes column tiles w,
// w + 8, w + 16.
constexpr int kC3WeightGradientTf32Threads = 8 * 32;
__device__ void c3_weight_gradient_tf32(const SampleShared& s, float* record_g3, int thread) {
  constexpr int kColumnTiles = (kC3Taps + kMmaColumns - 1) / kMmaColumns;  // 19
  constexpr int kWarpsHere = kC3WeightGradientTf32Threads / 32;
  constexpr int kSteps = (kC3Positions + kMmaDepth - 1) / kMmaDepth;  // 13
  static_assert(kMaps3 == kMmaRows, "C3's maps are one row tile");
  if (thread < 0 || thread >= kC3WeightGradientTf32Threads) return;
  const int warp = thread / 32, lane = thread % 32, g = lane / 4, t = lane % 4;
  for (int tile = warp; tile < kColumnTiles; tile += kWarpsHere) {
    const int k = tile * kMmaColumns + g;  // the filter tap this lane reads B for
    const bool tap_inside = k < kC3Taps;
    const int tap = s2_tap_offset(tap_inside ? k : 0);
    float acc[2][4] = {};
    alternating_steps<kSteps>(acc, [&](int step, float(&d)[4]) {
      std::uint32_t a[4], b[2];
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int pos = step * kMmaDepth + t + 4 * half;
        const bool inside = pos < kC3Positions;  // the last step's positions 100-103 are zeros
        const int y = inside ? pos / kSide3 : 0, x = inside ? pos % kSide3 : 0;
        const float* dy = s.d3 + (kPadRows + y) * kD3Row + x;
        a[2 * half] = to_tf32(inside ? dy[g * kD3Map] : 0.0f);
        a[2 * half + 1] = to_tf32(inside ? dy[(g + 8) * kD3Map] : 0.0f);
        b[half] = to_tf32(inside && tap_inside ? s.a2[y * kSide2 + x + tap] : 0.0f);
      }
      mma_tf32(d, a, b);
    });
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int m = g + 8 * (r / 2), column = tile * kMmaColumns + 2 * t + r % 2;
      if (column < kC3Taps) record_g3[m * kC3Taps + column] = acc[0][r] + acc[1][r];
    }
  }
}

}  // namespace
}  // namespace lenet5::cuda
