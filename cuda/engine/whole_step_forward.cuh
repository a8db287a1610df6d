// The forward stages of whole_step_sample_kernel (whole_step.cu says how a block works): the
// image and weights into shared memory, C1, S2, C3, S4, the dense layers, and the loss with its
// gradient.
//
// Included by whole_step.cu alone, the one translation unit that compiles the kernels (device
// code is not linked across files here): the unnamed namespace gives every definition internal
// linkage, as when all of it sat in that one file.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/activation_math.hpp"
#include "cuda/engine/pool_window.cuh"
#include "cuda/engine/whole_step_device.cuh"
#include "cuda/kernels/pixel.cuh"

namespace lenet5::cuda {
namespace {

// The sample's image, augmented when the run asks for it, normalised and padded exactly as
// gather_batch and gather_augmented_batch do, into shared memory, and the zero rows of the padded
// dL/dC3: nothing that a previous step writes. The image's two calls are gather_sample's
// (cuda/kernels/gather_sample.cuh), spelled out: that file says why.
__device__ void load_image(SampleShared& s, const SampleArgs& args, int sample) {
  const std::size_t source = args.indices ? std::size_t(args.indices[sample]) : std::size_t(sample);
  const std::uint8_t* image = args.images + source * (kImage * kImage);
  const bool augmented = args.augment.enabled();
  fill_input_field(image, /*border_only=*/augmented, args.scaling, BlockTeam{kThreads},
                   [&s](int i, float value) { s.x[i] = value; });
  if (augmented)
    augment_sample(image, args.augment, std::uint32_t(source),
                   *reinterpret_cast<AugmentScratch*>(s.scratch), BlockTeam{blockDim.x},
                   [&s, &args](int p, float grey) {
                     s.x[field_index(p)] = normalise_intensity_device(grey, args.scaling);
                   });
  for (int i = threadIdx.x; i < kMaps3 * kD3Map; i += kThreads) s.d3[i] = 0.0f;
  if (threadIdx.x == 0) s.label = args.labels[source];
}

// Where the fp32 C3 stages read c3.weight: transposed (w3_index).
struct TransposedW3 {
  __device__ void operator()(SampleShared& s, int flat, float value) const {
    const int q = flat % kK, p = flat / kK % kK, mc = flat / (kK * kK);
    s.w3[mc * kK * kW3Q + q * kW3Q + p] = value;
  }
};

// C1's and C3's weights into shared memory (after the previous step's update); store(s, flat,
// value) keeps c3.weight's value at flat index ((m * 6 + c) * 5 + p) * 5 + q where the C3 stages
// read it (TransposedW3, or whole_step_tf32.cuh's layout).
template <class StoreW3 = TransposedW3>
__device__ void load_weights(SampleShared& s, const SampleArgs& args, StoreW3 store = {}) {
  for (int i = threadIdx.x; i < kW1; i += kThreads) s.w1[i] = args.params[args.at.c1_weight + i];
  // c3.weight read as float4 (its tensor starts 128-byte aligned), all of a thread's loads in
  // flight.
  const float4* w3 = reinterpret_cast<const float4*>(args.params + args.at.c3_weight);
#pragma unroll
  for (int k = 0; k < (kW3 / 4 + kThreads - 1) / kThreads; ++k) {
    const int i = threadIdx.x + k * kThreads;
    if (i >= kW3 / 4) continue;
    const float4 v = w3[i];
    const float values[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) store(s, 4 * i + j, values[j]);
  }
}

// C1: thread (column w, strip of 4 rows) computes those 4 outputs of all 6 maps (196 threads).
// For each filter column q it loads the 8 input values the strip needs once and uses each for up
// to 5 x 6 multiply-adds.
__device__ void c1_forward(SampleShared& s) {
  constexpr int kRows = 4, kStrips = kSide1 / kRows;
  const int t = threadIdx.x;
  if (t >= kSide1 * kStrips) return;
  const int w = t % kSide1, h0 = (t / kSide1) * kRows;
  float acc[kMaps1][kRows] = {};
  for (int q = 0; q < kK; ++q) {
    float column[kRows + kK - 1];
#pragma unroll
    for (int r = 0; r < kRows + kK - 1; ++r) column[r] = s.x[(h0 + r) * kField + w + q];
#pragma unroll
    for (int p = 0; p < kK; ++p)
#pragma unroll
      for (int m = 0; m < kMaps1; ++m) {
        const float weight = s.w1[(m * kK + p) * kK + q];
#pragma unroll
        for (int r = 0; r < kRows; ++r) acc[m][r] += weight * column[r + p];
      }
  }
#pragma unroll
  for (int m = 0; m < kMaps1; ++m)
#pragma unroll
    for (int r = 0; r < kRows; ++r) s.c1[(m * kSide1 + h0 + r) * kSide1 + w] = acc[m][r];
}

// A 2x2 window's pooled value as the CPU reference computes it (pool_window.cuh).
template <Subsampling P>
__device__ float pool2x2(const float* window, int row_stride) {
  return pool::pool4<P>(window[0], window[1], window[row_stride], window[row_stride + 1]);
}

// S2 or S4: pooled value plus the map's bias, through the activation.
template <Activation A, Subsampling P>
__device__ void pool_forward(const float* in, int maps, int side_out, const float* bias,
                             float* out) {
  const int side_in = 2 * side_out, per_map = side_out * side_out;
  for (int i = threadIdx.x; i < maps * per_map; i += kThreads) {
    const int m = i / per_map, h = i % per_map / side_out, w = i % side_out;
    const float* window = in + (m * side_in + 2 * h) * side_in + 2 * w;
    out[i] = activate(A, pool2x2<P>(window, side_in) + bias[m]);
  }
}

// C3: thread (map m, column w, half of the input maps) computes the column's 10 outputs over 3
// input maps (320 threads); per input map and filter column it loads the 14 input values once
// and reuses each for up to 5 multiply-adds. The second half's sums go through the scratch and
// are added to the first's, always in that order.
__device__ void c3_forward(SampleShared& s) {
  constexpr int kHalfMaps = kMaps1 / 2;
  const int t = threadIdx.x;
  const bool active = t < 2 * kMaps3 * kSide3;
  const int half = t / (kMaps3 * kSide3), m = t / kSide3 % kMaps3, w = t % kSide3;
  float acc[kSide3] = {};
  if (active)
    for (int c = half * kHalfMaps; c < (half + 1) * kHalfMaps; ++c)
#pragma unroll
      for (int q = 0; q < kK; ++q) {
        float column[kSide2];
#pragma unroll
        for (int r = 0; r < kSide2; ++r) column[r] = s.a2[(c * kSide2 + r) * kSide2 + w + q];
        const float4 w03 = *reinterpret_cast<const float4*>(s.w3 + w3_index(m, c, q));
        const float weights[kK] = {w03.x, w03.y, w03.z, w03.w, s.w3[w3_index(m, c, q) + 4]};
#pragma unroll
        for (int p = 0; p < kK; ++p)
#pragma unroll
          for (int h = 0; h < kSide3; ++h) acc[h] += weights[p] * column[h + p];
      }
  if (active && half == 1)
#pragma unroll
    for (int h = 0; h < kSide3; ++h) s.scratch[(m * kSide3 + h) * kSide3 + w] = acc[h];
  __syncthreads();
  if (active && half == 0)
#pragma unroll
    for (int h = 0; h < kSide3; ++h) {
      const int i = (m * kSide3 + h) * kSide3 + w;
      s.c3[i] = acc[h] + s.scratch[i];
    }
}
// y[o] = f(W[o,:] . x + b[o]) (f the identity when !Activate) for a dense layer whose weights are
// read from global memory (L2): a warp per group of Group rows, lanes striding the rows in float4
// (rows of 400, 120 and 84 floats, at 128-byte aligned tensor offsets). The loads of a whole
// group are issued before any is used, so each lane has up to Group x 4 loads in flight: the
// layer is bound by L2 latency otherwise. Each block starts at its own row (row_shift): 64 blocks
// reading the same lines at the same moment queue up in the same L2 slices. After the butterfly
// every lane holds every sum, so lane k finishes row o0 + k, with its bias loaded beside the
// weights: no L2 round trip and no Group-long serial tail on lane 0 follow the sums.
template <Activation A, bool Activate, int In, int Out, int Group>
__device__ void dense_forward(const float* weight, const float* bias, const float* x, float* y,
                              float* record_y, int row_shift) {
  static_assert(In % 4 == 0, "rows are read as float4");
  static_assert(Group <= 32, "lane k finishes row o0 + k");
  constexpr int kIn4 = In / 4, kChunks = (kIn4 + 31) / 32;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  for (int o0 = warp * Group; o0 < Out; o0 += kWarps * Group) {
    const bool finishes = lane < Group && o0 + lane < Out;
    const int o_finished = (o0 + (lane < Group ? lane : 0) + row_shift) % Out;
    const float b = finishes ? bias[o_finished] : 0.0f;
    float4 w[Group][kChunks];
#pragma unroll
    for (int k = 0; k < Group; ++k)
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        const int i = lane + 32 * c;
        const int o = (o0 + k + row_shift) % Out;
        w[k][c] = o0 + k < Out && i < kIn4
                      ? *reinterpret_cast<const float4*>(weight + o * In + 4 * i)
                      : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
    float acc[Group] = {};
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int i = lane + 32 * c;
      const float4 xv = i < kIn4 ? x4[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
      for (int k = 0; k < Group; ++k)
        acc[k] += w[k][c].x * xv.x + w[k][c].y * xv.y + w[k][c].z * xv.z + w[k][c].w * xv.w;
    }
    float mine = 0.0f;
#pragma unroll
    for (int k = 0; k < Group; ++k) {
      const float sum = warp_sum(acc[k]);
      if (lane == k) mine = sum;
    }
    if (finishes) {
      const float z = mine + b;
      const float value = Activate ? activate(A, z) : z;
      y[o_finished] = value;
      if (record_y) record_y[o_finished] = value;
    }
  }
}

// The softmax cross-entropy of softmax_cross_entropy_kernel1 (cuda/kernels/loss.cu) for one
// sample, one lane per class, the first maximum as the prediction, dL/dz = (p - onehot) / n; in
// float, not in double as there: this stage is on the step's critical path (about 1,800 cycles
// with the double exp, log and divide), and float's relative error (~1e-7) is far below what
// training notices. record_d7 null: the gradient stays in shared memory (an evaluation).
__device__ void loss_and_gradient(SampleShared& s, const SampleArgs& args, int sample,
                                  float* record_d7) {
  if (threadIdx.x >= 32) return;
  const int lane = threadIdx.x;
  const int label = s.label;
  int best = 0;
  for (int k = 1; k < kOut; ++k)
    if (s.z[k] > s.z[best]) best = k;
  const float top = s.z[best];
  const float term = lane < kOut ? expf(s.z[lane] - top) : 0.0f;
  float sum = term;
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  const float log_sum = logf(sum) + top;
  if (lane < kOut) {
    const float p = term / sum;
    const float d = (p - float(lane == label)) / float(args.n);
    s.d7[lane] = d;
    if (record_d7) record_d7[lane] = d;
  }
  if (lane == 0) {
    args.sample_loss[sample] = double(log_sum - s.z[label]);
    if (args.sample_correct) args.sample_correct[sample] = best == label;
    if (args.predicted) args.predicted[sample] = best;
  }
}

}  // namespace
}  // namespace lenet5::cuda
