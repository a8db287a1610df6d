// The backward stages of whole_step_sample_kernel (whole_step.cu says how a block works): the
// dense layers' input gradients, the subsampling layers' bias and input gradients, and C3's and
// C1's weight gradients, each sample's part written to its record.
//
// Included by whole_step.cu alone, the one translation unit that compiles the kernels (device
// code is not linked across files here): the unnamed namespace gives every definition internal
// linkage, as when all of it sat in that one file.
#pragma once

#include "core/activation_math.hpp"
#include "cuda/engine/pool_window.cuh"
#include "cuda/engine/whole_step_device.cuh"

namespace lenet5::cuda {
namespace {

// dx[i] = (W[:, i] . dy) * f'(a[i]) for the output layer (10 rows): a thread per input, reading
// a column of W (coalesced across the threads of a warp).
template <Activation A, int In, int Out>
__device__ void dense_backward_columns(const float* weight, const float* dy, const float* a,
                                       float* dx, float* record_dx) {
  for (int i = threadIdx.x; i < In; i += kThreads) {
    float acc = 0.0f;
#pragma unroll
    for (int o = 0; o < Out; ++o) acc += weight[o * In + i] * dy[o];
    const float value = acc * activation_slope(A, a[i]);
    dx[i] = value;
    if (record_dx) record_dx[i] = value;
  }
}

// The same for the wide layers (C5: 120 rows of 400, F6: 84 rows of 120), read by rows as the
// forward pass reads them: warp w takes rows w, w + 16, ..., Rows of them in flight at a time,
// each lane accumulating dy[o] * W[o, i..i+3] for its float4 columns; then the 16 warps' partial
// sums are added in warp order through the scratch. Rows are taken from row_shift on, as in
// dense_forward. then(i, dx[i]) runs on the thread that forms dx[i], right after.
template <Activation A, int In, int Out, int Rows, class Then>
__device__ void dense_backward_rows(const float* weight, const float* dy, const float* a, float* dx,
                                    float* record_dx, float* scratch, int row_shift, Then then) {
  static_assert(In % 4 == 0 && In <= kFlat4, "rows are read as float4; partials fit the scratch");
  constexpr int kIn4 = In / 4, kChunks = (kIn4 + 31) / 32;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float4 acc[kChunks];
#pragma unroll
  for (int c = 0; c < kChunks; ++c) acc[c] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int o0 = warp; o0 < Out; o0 += kWarps * Rows) {
    float4 w[Rows][kChunks];
#pragma unroll
    for (int r = 0; r < Rows; ++r)
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        const int o = o0 + r * kWarps, i = lane + 32 * c;
        w[r][c] =
            o < Out && i < kIn4
                ? *reinterpret_cast<const float4*>(weight + (o + row_shift) % Out * In + 4 * i)
                : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
#pragma unroll
    for (int r = 0; r < Rows; ++r) {
      const int o = o0 + r * kWarps;
      const float d = o < Out ? dy[(o + row_shift) % Out] : 0.0f;
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        acc[c].x += d * w[r][c].x;
        acc[c].y += d * w[r][c].y;
        acc[c].z += d * w[r][c].z;
        acc[c].w += d * w[r][c].w;
      }
    }
  }
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int i = lane + 32 * c;
    if (i < kIn4) reinterpret_cast<float4*>(scratch + warp * In)[i] = acc[c];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < In; i += kThreads) {
    float sum = 0.0f;
    for (int k = 0; k < kWarps; ++k) sum += scratch[k * In + i];
    const float value = sum * activation_slope(A, a[i]);
    dx[i] = value;
    if (record_dx) record_dx[i] = value;
    then(i, value);
  }
}

// The bias gradient of a subsampling layer for this sample: the sum of each map's dL/dz, a warp
// per map (lanes stride the map, then a butterfly: the same order every run).
__device__ void bias_gradient(const float* dz, int maps, int per_map, float* record_gb) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int m = warp; m < maps; m += kWarps) {
    float acc = 0.0f;
    for (int i = lane; i < per_map; i += 32) acc += dz[m * per_map + i];
    acc = warp_sum(acc);
    if (lane == 0) record_gb[m] = acc;
  }
}

// The subsampling layer's input gradient (subsample_backward_input_cpu): average spreads dy/4 over
// the window; max gives dy to the window's first maximum and 0 to the rest. A thread per window,
// so writing in place over the forward values it has just read is safe.
template <Subsampling P>
__device__ void pool_backward_window(float* window, int row_stride, float dy) {
  const int best =
      P == Subsampling::max
          ? pool::first_max4(window[0], window[1], window[row_stride], window[row_stride + 1])
          : 0;
  window[0] = pool::window_gradient<P>(dy, best, 0);
  window[1] = pool::window_gradient<P>(dy, best, 1);
  window[row_stride] = pool::window_gradient<P>(dy, best, 2);
  window[row_stride + 1] = pool::window_gradient<P>(dy, best, 3);
}

// S4 backward for S4 output i = (m, h, w), whose dL/dz is dy: dL/dC3 of its window into the
// row-padded buffer (max pooling reads C3's outputs to find the maximum, so it first copies the
// window there). Called by the thread that computes dy, as soon as it has it.
template <Subsampling P>
__device__ void s4_backward_window(SampleShared& s, int i, float dy) {
  constexpr int kPerMap = kSide4 * kSide4;
  const int m = i / kPerMap, h = i % kPerMap / kSide4, w = i % kSide4;
  const float* forward = s.c3 + (m * kSide3 + 2 * h) * kSide3 + 2 * w;
  float* window = s.d3 + m * kD3Map + (kPadRows + 2 * h) * kD3Row + 2 * w;
  window[0] = forward[0];
  window[1] = forward[1];
  window[kD3Row] = forward[kSide3];
  window[kD3Row + 1] = forward[kSide3 + 1];
  pool_backward_window<P>(window, kD3Row, dy);
}

// This sample's dL/dc3.weight[m][c][p][q] = sum_{h,w} dC3[m][h][w] * a2[c][h+p][w+q]. Thread
// (pair of maps, input map c, filter row p) accumulates both maps' 5 values of q (240 threads):
// per output row it loads one input row (14 values) and two gradient rows (10 each) for 100
// multiply-adds.
constexpr int kC3WeightGradientThreads = kMaps3 / 2 * kMaps1 * kK;  // 240
__device__ void c3_weight_gradient(const SampleShared& s, float* record_g3, int t) {
  if (t < 0 || t >= kC3WeightGradientThreads) return;
  const int pair = t / (kMaps1 * kK), c = t / kK % kMaps1, p = t % kK;
  float acc[2][kK] = {};
  for (int h = 0; h < kSide3; ++h) {
    float row[kSide2];
#pragma unroll
    for (int i = 0; i < kSide2; ++i) row[i] = s.a2[(c * kSide2 + h + p) * kSide2 + i];
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      const float* dy = s.d3 + (2 * pair + k) * kD3Map + (kPadRows + h) * kD3Row;
#pragma unroll
      for (int w = 0; w < kSide3; ++w) {
        const float d = dy[w];
#pragma unroll
        for (int q = 0; q < kK; ++q) acc[k][q] += d * row[w + q];
      }
    }
  }
#pragma unroll
  for (int k = 0; k < 2; ++k)
#pragma unroll
    for (int q = 0; q < kK; ++q)
      record_g3[(((2 * pair + k) * kMaps1 + c) * kK + p) * kK + q] = acc[k][q];
}

// S2 backward for S2 output i = (m, h, w), whose dL/dz is dy: dL/dC1 of its window, in place over
// C1's outputs (only this thread touches the window).
template <Subsampling P>
__device__ void s2_backward_window(SampleShared& s, int i, float dy) {
  constexpr int kPerMap = kSide2 * kSide2;
  const int m = i / kPerMap, h = i % kPerMap / kSide2, w = i % kSide2;
  pool_backward_window<P>(s.c1 + (m * kSide1 + 2 * h) * kSide1 + 2 * w, kSide1, dy);
}

// One half of C3's input gradient (c3_input_gradient below) for the thread of (quarter, input map
// c, column pair v0): Half 0 the top rows u = 0..6 of S2, Half 1 the bottom rows 7..13. A tap p of
// output row i reads dC3 row Half * 7 + i - p, which falls above dC3 for the top half where p > i
// and below it for the bottom half where i - p > 2: those taps, known when the loops unroll, are
// left out instead of multiplying the padding's zeros (about 30 % of the multiply-adds), and each
// dC3 column is read over the 7 rows the remaining taps need instead of 11. Every output's sum
// keeps its order (maps, then q, then p) over the taps kept, and with finite weights a product with
// a zero factor adds +0 or -0, which leaves every sum but a zero as it is. So the bits are those of
// the sums that multiplied the padding, save the sign of a zero sum (one of negative sign, from a
// product at most half of float's smallest denormal, kept where the padding's +0 made it +0).
template <int Half>
__device__ void c3_input_gradient_half(const SampleShared& s, int quarter, int c, int v0,
                                       float (&acc)[2][kSide2 / 2]) {
  constexpr int kRows = kSide2 / 2, kQuarterMaps = kMaps3 / 4;
  // The first padded row of dL/dC3 that a kept tap reads, counted from row Half * kRows.
  constexpr int kFirst = Half == 0 ? kPadRows : 0;
  const auto kept = [](int i, int p) {
    const int row = Half * kRows + i - p;
    return row >= 0 && row < kSide3;
  };
  for (int m = quarter * kQuarterMaps; m < (quarter + 1) * kQuarterMaps; ++m) {
    // Loaded rows k = 0..6 hold dC3 rows Half * 7 + k + kFirst - kPadRows.
    const float* rows = s.d3 + m * kD3Map + (Half * kRows + kFirst) * kD3Row;
    float right[kRows], left[kRows];
    const bool right_inside = v0 + 1 < kSide3;
#pragma unroll
    for (int k = 0; k < kRows; ++k) right[k] = right_inside ? rows[k * kD3Row + v0 + 1] : 0.0f;
#pragma unroll
    for (int q = 0; q < kK; ++q) {
      const int column = v0 - q;
      const bool inside = column >= 0 && column < kSide3;
#pragma unroll
      for (int k = 0; k < kRows; ++k) left[k] = inside ? rows[k * kD3Row + column] : 0.0f;
      const float4 w03 = *reinterpret_cast<const float4*>(s.w3 + w3_index(m, c, q));
      const float weights[kK] = {w03.x, w03.y, w03.z, w03.w, s.w3[w3_index(m, c, q) + 4]};
#pragma unroll
      for (int p = 0; p < kK; ++p)
#pragma unroll
        for (int i = 0; i < kRows; ++i)
          if (kept(i, p)) {
            acc[0][i] += weights[p] * left[i - p + kPadRows - kFirst];
            acc[1][i] += weights[p] * right[i - p + kPadRows - kFirst];
          }
#pragma unroll
      for (int k = 0; k < kRows; ++k) right[k] = left[k];
    }
  }
}

// dL/d(S2 pre-activation)[c][u][v] = f'(a2) * sum_{m,p,q} c3.weight[m][c][p][q] dC3[m][u-p][v-q].
// Thread (half of the rows, quarter of the maps m, input map c, pair of columns v0, v0 + 1)
// computes 2 x 7 outputs over 4 maps (336 threads): each half of the rows on its own half of the
// block (warps 0-5 and 8-13), so that a warp's rows, and with them the taps it leaves out
// (c3_input_gradient_half), are the same for all its lanes. Output column v0 + 1 needs at filter
// column q the dC3 column that v0 needed at q - 1, so each loaded column serves both outputs: 6
// column loads per map instead of 10. Columns outside dC3 read as zeros. The quarters' sums go
// through the scratch and are added in quarter order. The thread that forms an output also does
// S2's backward for its window (s2_backward_window). All threads call it (it has a barrier).
// The stage leaves warps 6, 7, 14 and 15 idle; before the barrier they run beside(spare) for spare
// = 0..127: work with no barrier that touches nothing this stage writes before its barrier (the
// scratch) and writes no shared memory this stage reads.
constexpr int kSpareThreads = 128;
static_assert(kSpareThreads / 2 % 32 == 0, "the spare threads are whole warps");
template <Activation A, Subsampling P, class Beside>
__device__ void c3_input_gradient(SampleShared& s, Beside beside) {
  constexpr int kRows = kSide2 / 2;
  constexpr int kPerQuarter = kMaps1 * (kSide2 / 2);  // 42: (c, column pair)
  constexpr int kHalfThreads = kThreads / 2;
  constexpr int kOutputs = kMaps1 * kSide2 * kSide2;  // 1,176
  static_assert(4 * kPerQuarter <= kHalfThreads - kSpareThreads / 2,
                "a half of the rows fits a half of the block, its last two warps spare");
  static_assert(3 * kOutputs <= kWarps * kFlat4, "three quarters' partials fit the scratch");
  const int half = int(threadIdx.x) / kHalfThreads, t = int(threadIdx.x) % kHalfThreads;
  const bool active = t < 4 * kPerQuarter;
  const int quarter = t / kPerQuarter, r = t % kPerQuarter;
  const int c = r / (kSide2 / 2), u0 = half * kRows, v0 = 2 * (r % (kSide2 / 2));
  float acc[2][kRows] = {};  // columns v0 and v0 + 1
  if (active) {
    if (half == 0)
      c3_input_gradient_half<0>(s, quarter, c, v0, acc);
    else
      c3_input_gradient_half<1>(s, quarter, c, v0, acc);
  } else if (t >= kHalfThreads - kSpareThreads / 2) {
    beside(half * (kSpareThreads / 2) + t - (kHalfThreads - kSpareThreads / 2));
  }
  const auto output = [&](int j, int i) { return (c * kSide2 + u0 + i) * kSide2 + v0 + j; };
  if (active && quarter > 0)
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int i = 0; i < kRows; ++i)
        s.scratch[(quarter - 1) * kOutputs + output(j, i)] = acc[j][i];
  __syncthreads();
  if (active && quarter == 0)
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        const int at = output(j, i);
        float sum = acc[j][i];
        for (int k = 0; k < 3; ++k) sum += s.scratch[k * kOutputs + at];
        const float dz = sum * activation_slope(A, s.a2[at]);
        s.d2[at] = dz;
        s2_backward_window<P>(s, at, dz);
      }
}

// This sample's dL/dc1.weight[m][p][q] = sum_{h,w} dC1[m][h][w] * x[h+p][w+q]. Thread t = (map m,
// column w) < 168 walks down the column keeping the 5x5 input window in registers (5 new loads
// per row for 25 multiply-adds) and leaves 25 partial sums in the scratch; after a barrier,
// c1_weight_gradient_sum adds the 28 columns in order.
constexpr int kC1WeightGradientThreads = kMaps1 * kSide1;  // 168
__device__ void c1_weight_gradient_partials(SampleShared& s, int t) {
  if (t < 0 || t >= kC1WeightGradientThreads) return;
  const int m = t / kSide1, w = t % kSide1;
  float acc[kK * kK] = {};
  float window[kK][kK];
#pragma unroll
  for (int p = 0; p < kK - 1; ++p)
#pragma unroll
    for (int q = 0; q < kK; ++q) window[p + 1][q] = s.x[p * kField + w + q];
#pragma unroll
  for (int h = 0; h < kSide1; ++h) {
#pragma unroll
    for (int p = 0; p < kK - 1; ++p)
#pragma unroll
      for (int q = 0; q < kK; ++q) window[p][q] = window[p + 1][q];
#pragma unroll
    for (int q = 0; q < kK; ++q) window[kK - 1][q] = s.x[(h + kK - 1) * kField + w + q];
    const float d = s.c1[(m * kSide1 + h) * kSide1 + w];
#pragma unroll
    for (int p = 0; p < kK; ++p)
#pragma unroll
      for (int q = 0; q < kK; ++q) acc[p * kK + q] += d * window[p][q];
  }
#pragma unroll
  for (int k = 0; k < kK * kK; ++k) s.scratch[(m * kK * kK + k) * kSide1 + w] = acc[k];
}

__device__ void c1_weight_gradient_sum(const SampleShared& s, float* record_g1) {
  const int t = threadIdx.x;
  if (t >= kW1) return;
  float sum = 0.0f;
  for (int w = 0; w < kSide1; ++w) sum += s.scratch[t * kSide1 + w];
  record_g1[t] = sum;
}

}  // namespace
}  // namespace lenet5::cuda
