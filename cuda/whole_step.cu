// The whole-step kernels (see whole_step.cuh for the contract and the plan).
//
// Shapes (net/topology.hpp): input 32x32 -> C1 6@28x28 -> S2 6@14x14 -> C3 16@10x10 -> S4 16@5x5
// -> C5 120 -> F6 84 -> output 10. One block of kThreads threads per sample; every stage below is
// a short function that all threads of the block call, separated by __syncthreads().
//
// The convolution stages are register-blocked: a thread keeps a strip of outputs in registers and
// reuses every shared-memory value it loads for several multiply-adds, because shared-memory
// loads, not multiply-adds, bound a block that works alone on one sample.
#include <algorithm>
#include <string>

#include "core/error.hpp"
#include "cuda/check.hpp"
#include "cuda/pixel.cuh"
#include "cuda/sgd_element.cuh"
#include "cuda/whole_step.cuh"
#include "data/batch.hpp"
#include "data/mnist.hpp"
#include "layers/activation_math.hpp"
#include "net/topology.hpp"

namespace lenet5::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kUpdateThreads = 256;

constexpr int kField = 32, kImage = 28, kK = 5;
constexpr int kMaps1 = 6, kSide1 = 28, kSide2 = 14;   // C1 output, S2 output
constexpr int kMaps3 = 16, kSide3 = 10, kSide4 = 5;  // C3 output, S4 output
constexpr int kFlat4 = kMaps3 * kSide4 * kSide4;     // 400, C5's input
constexpr int kC5 = 120, kF6 = 84, kOut = 10;
constexpr int kW1 = kMaps1 * kK * kK;           // 150
constexpr int kW3 = kMaps3 * kMaps1 * kK * kK;  // 2,400
static_assert(kField == kInputSide && kImage == kImageSide, "the topology's input");

// dL/dC3 is kept with kPadRows zero rows above and below each map, so that the input-gradient
// correlation (C3's transposed convolution) reads zeros instead of testing row bounds.
constexpr int kPadRows = kK - 1;
constexpr int kPaddedRows3 = kSide3 + 2 * kPadRows;  // 18

// The per-sample record in global memory, read by the update kernel. Offsets in floats.
namespace record {
constexpr int a4 = 0;               // S4's activation, C5's input (400)
constexpr int d5 = a4 + kFlat4;     // dL/d(C5 pre-activation) (120)
constexpr int a5 = d5 + kC5;        // C5's activation (120)
constexpr int d6 = a5 + kC5;        // dL/d(F6 pre-activation) (84)
constexpr int a6 = d6 + kF6;        // F6's activation (84)
constexpr int d7 = a6 + kF6;        // dL/dlogits (10)
constexpr int g1 = d7 + kOut;       // this sample's part of dL/dc1.weight (150)
constexpr int gb2 = g1 + kW1;       // ... of dL/ds2.bias (6)
constexpr int g3 = gb2 + kMaps1;    // ... of dL/dc3.weight (2,400)
constexpr int gb4 = g3 + kW3;       // ... of dL/ds4.bias (16)
constexpr int floats = (gb4 + kMaps3 + 31) / 32 * 32;  // each record starts 128-byte aligned
}  // namespace record

// One sample's working set (about 82 KB, so the kernel opts in to more than 48 KB).
struct SampleShared {
  float x[kField * kField];                 // the normalised, padded input
  float w1[kW1];                            // c1.weight
  float w3[kW3];                            // c3.weight
  float c1[kMaps1 * kSide1 * kSide1];       // C1's output; later dL/dC1
  float a2[kMaps1 * kSide2 * kSide2];       // S2's activation
  float d2[kMaps1 * kSide2 * kSide2];       // dL/d(S2 pre-activation)
  float c3[kMaps3 * kSide3 * kSide3];       // C3's output
  float d3[kMaps3 * kPaddedRows3 * kSide3];  // dL/dC3, rows padded with zeros
  alignas(16) float a4[kFlat4];
  float d4[kFlat4];                         // dL/d(S4 pre-activation)
  alignas(16) float a5[kC5];
  float d5[kC5];
  alignas(16) float a6[kF6];
  float d6[kF6];
  float z[kOut];                            // logits
  float d7[kOut];                           // dL/dlogits
  float w1_partial[kW1 * kSide1];           // dL/dc1.weight per output column, before the sum
};

struct SampleArgs {
  const std::uint8_t* images;
  const std::uint8_t* labels;
  const std::int32_t* indices;
  int n;
  const float* params;
  WholeStepOffsets at;
  float* records;
  double* sample_loss;
  std::int32_t* sample_correct;
};

// ---- forward stages --------------------------------------------------------------------------

// The sample's image, normalised and padded exactly as gather_batch does, and C1's and C3's
// weights, into shared memory; the zero rows of the padded dL/dC3.
__device__ void load_sample(SampleShared& s, const SampleArgs& args, int sample) {
  const std::size_t source = args.indices ? std::size_t(args.indices[sample]) : std::size_t(sample);
  const std::uint8_t* image = args.images + source * (kImage * kImage);
  const float background = normalise_pixel_device(0);
  for (int i = threadIdx.x; i < kField * kField; i += kThreads) {
    const int y = i / kField - kPad, x = i % kField - kPad;
    const bool inside = y >= 0 && y < kImage && x >= 0 && x < kImage;
    s.x[i] = inside ? normalise_pixel_device(image[y * kImage + x]) : background;
  }
  for (int i = threadIdx.x; i < kW1; i += kThreads) s.w1[i] = args.params[args.at.c1_weight + i];
  for (int i = threadIdx.x; i < kW3; i += kThreads) s.w3[i] = args.params[args.at.c3_weight + i];
  for (int i = threadIdx.x; i < kMaps3 * kPaddedRows3 * kSide3; i += kThreads) s.d3[i] = 0.0f;
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

// A 2x2 window's pooled value as the CPU reference computes it (subsample_cpu.cpp): the sum in
// row-major order divided by 4, or the first maximum in row-major order.
template <Subsampling P>
__device__ float pool2x2(const float* window, int row_stride) {
  const float v00 = window[0], v01 = window[1], v10 = window[row_stride], v11 = window[row_stride + 1];
  if constexpr (P == Subsampling::max) {
    float best = v00;
    best = v01 > best ? v01 : best;
    best = v10 > best ? v10 : best;
    return v11 > best ? v11 : best;
  } else {
    return (((v00 + v01) + v10) + v11) / 4.0f;
  }
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

// C3: thread (map m, column w) computes the column's 10 outputs (160 threads); per input map and
// filter column it loads the 14 input values once and reuses each for up to 5 multiply-adds.
__device__ void c3_forward(SampleShared& s) {
  const int t = threadIdx.x;
  if (t >= kMaps3 * kSide3) return;
  const int m = t / kSide3, w = t % kSide3;
  float acc[kSide3] = {};
  for (int c = 0; c < kMaps1; ++c)
    for (int q = 0; q < kK; ++q) {
      float column[kSide2];
#pragma unroll
      for (int r = 0; r < kSide2; ++r) column[r] = s.a2[(c * kSide2 + r) * kSide2 + w + q];
#pragma unroll
      for (int p = 0; p < kK; ++p) {
        const float weight = s.w3[((m * kMaps1 + c) * kK + p) * kK + q];
#pragma unroll
        for (int h = 0; h < kSide3; ++h) acc[h] += weight * column[h + p];
      }
    }
#pragma unroll
  for (int h = 0; h < kSide3; ++h) s.c3[(m * kSide3 + h) * kSide3 + w] = acc[h];
}

__device__ float warp_sum(float value) {
  // A butterfly: every lane ends with the same sum, combined in the same order every run.
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

// y[o] = f(W[o,:] . x + b[o]) (f the identity when !Activate) for a dense layer whose weights are
// read from global memory: a warp per group of 4 rows, lanes striding the row in float4 (rows of
// 400, 120 and 84 floats, at 128-byte aligned tensor offsets), so each lane has 4 independent
// loads in flight.
template <Activation A, bool Activate, int In, int Out>
__device__ void dense_forward(const float* weight, const float* bias, const float* x, float* y,
                              float* record_y) {
  static_assert(In % 4 == 0, "rows are read as float4");
  constexpr int kIn4 = In / 4, kGroup = 4;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  for (int o0 = warp * kGroup; o0 < Out; o0 += kWarps * kGroup) {
    float acc[kGroup] = {};
    for (int i = lane; i < kIn4; i += 32) {
      const float4 xv = x4[i];
#pragma unroll
      for (int k = 0; k < kGroup; ++k)
        if (o0 + k < Out) {
          const float4 wv = __ldg(reinterpret_cast<const float4*>(weight + (o0 + k) * In) + i);
          acc[k] += wv.x * xv.x + wv.y * xv.y + wv.z * xv.z + wv.w * xv.w;
        }
    }
#pragma unroll
    for (int k = 0; k < kGroup; ++k) {
      const float sum = warp_sum(acc[k]);
      if (lane == 0 && o0 + k < Out) {
        const float z = sum + bias[o0 + k];
        const float value = Activate ? activate(A, z) : z;
        y[o0 + k] = value;
        if (record_y) record_y[o0 + k] = value;
      }
    }
  }
}

// Softmax cross-entropy of softmax_cross_entropy_kernel1 (cuda/loss.cu) for one sample, one lane
// per class: in double, the first maximum as the prediction, dL/dz = (p - onehot) / n.
__device__ void loss_and_gradient(SampleShared& s, const SampleArgs& args, int sample,
                                  float* record_d7) {
  if (threadIdx.x >= 32) return;
  const int lane = threadIdx.x;
  const std::size_t source = args.indices ? std::size_t(args.indices[sample]) : std::size_t(sample);
  const int label = args.labels[source];
  int best = 0;
  for (int k = 1; k < kOut; ++k)
    if (s.z[k] > s.z[best]) best = k;
  const double top = double(s.z[best]);
  double term = lane < kOut ? exp(double(s.z[lane]) - top) : 0.0;
  for (int offset = 16; offset > 0; offset /= 2) term += __shfl_xor_sync(0xffffffffu, term, offset);
  const double log_sum = log(term) + top;
  if (lane < kOut) {
    const double p = exp(double(s.z[lane]) - log_sum);
    const float d = float((p - (lane == label)) / args.n);
    s.d7[lane] = d;
    record_d7[lane] = d;
  }
  if (lane == 0) {
    args.sample_loss[sample] = log_sum - double(s.z[label]);
    args.sample_correct[sample] = best == label;
  }
}

// ---- backward stages -------------------------------------------------------------------------

// dx[i] = (W[:, i] . dy) * f'(a[i]): a thread per input, reading a column of W (coalesced across
// the threads of a warp).
template <Activation A, int In, int Out>
__device__ void dense_backward(const float* weight, const float* dy, const float* a, float* dx,
                               float* record_dx) {
  for (int i = threadIdx.x; i < In; i += kThreads) {
    float acc = 0.0f;
#pragma unroll 8
    for (int o = 0; o < Out; ++o) acc += __ldg(weight + o * In + i) * dy[o];
    const float value = acc * activation_slope(A, a[i]);
    dx[i] = value;
    if (record_dx) record_dx[i] = value;
  }
}

// The bias gradient of a subsampling layer for this sample: the sum of each map's dL/dz.
__device__ void bias_gradient(const float* dz, int maps, int per_map, float* record_gb) {
  const int m = threadIdx.x;
  if (m >= maps) return;
  float acc = 0.0f;
  for (int i = 0; i < per_map; ++i) acc += dz[m * per_map + i];
  record_gb[m] = acc;
}

// The subsampling layer's input gradient (subsample_backward_input_cpu): average spreads dy/4 over
// the window; max gives dy to the window's first maximum and 0 to the rest. A thread per window,
// so writing in place over the forward values it has just read is safe.
template <Subsampling P>
__device__ void pool_backward_window(float* window, int row_stride, float dy) {
  if constexpr (P == Subsampling::max) {
    const float v[4] = {window[0], window[1], window[row_stride], window[row_stride + 1]};
    int best = 0;
    for (int k = 1; k < 4; ++k)
      if (v[k] > v[best]) best = k;
    window[0] = best == 0 ? dy : 0.0f;
    window[1] = best == 1 ? dy : 0.0f;
    window[row_stride] = best == 2 ? dy : 0.0f;
    window[row_stride + 1] = best == 3 ? dy : 0.0f;
  } else {
    const float share = dy / 4.0f;
    window[0] = window[1] = window[row_stride] = window[row_stride + 1] = share;
  }
}

// S4 backward: dL/dC3 into the row-padded buffer (max pooling reads C3's outputs to find the
// maximum, so it first copies the window there).
template <Subsampling P>
__device__ void s4_backward(SampleShared& s) {
  constexpr int kPerMap = kSide4 * kSide4;
  for (int i = threadIdx.x; i < kMaps3 * kPerMap; i += kThreads) {
    const int m = i / kPerMap, h = i % kPerMap / kSide4, w = i % kSide4;
    const float* forward = s.c3 + (m * kSide3 + 2 * h) * kSide3 + 2 * w;
    float* window = s.d3 + (m * kPaddedRows3 + kPadRows + 2 * h) * kSide3 + 2 * w;
    window[0] = forward[0];
    window[1] = forward[1];
    window[kSide3] = forward[kSide3];
    window[kSide3 + 1] = forward[kSide3 + 1];
    pool_backward_window<P>(window, kSide3, s.d4[i]);
  }
}

// This sample's dL/dc3.weight[m][c][p][q] = sum_{h,w} dC3[m][h][w] * a2[c][h+p][w+q]. Thread
// (pair of maps, input map c, filter row p) accumulates both maps' 5 values of q (240 threads):
// per output row it loads one input row (14 values) and two gradient rows (10 each) for 100
// multiply-adds.
__device__ void c3_weight_gradient(const SampleShared& s, float* record_g3) {
  constexpr int kPairs = kMaps3 / 2;
  const int t = threadIdx.x;
  if (t >= kPairs * kMaps1 * kK) return;
  const int pair = t / (kMaps1 * kK), c = t / kK % kMaps1, p = t % kK;
  float acc[2][kK] = {};
  for (int h = 0; h < kSide3; ++h) {
    float row[kSide2];
#pragma unroll
    for (int i = 0; i < kSide2; ++i) row[i] = s.a2[(c * kSide2 + h + p) * kSide2 + i];
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      const float* dy = s.d3 + ((2 * pair + k) * kPaddedRows3 + kPadRows + h) * kSide3;
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

// dL/d(S2 pre-activation)[c][u][v] = f'(a2) * sum_{m,p,q} c3.weight[m][c][p][q] dC3[m][u-p][v-q].
// Thread (input map c, column v, half of the rows) computes 7 outputs (168 threads); rows outside
// dC3 read the zero padding, and filter columns q that fall outside it are skipped.
template <Activation A>
__device__ void c3_input_gradient(SampleShared& s) {
  constexpr int kRows = kSide2 / 2;  // 7
  const int t = threadIdx.x;
  if (t >= kMaps1 * kSide2 * 2) return;
  const int c = t / (2 * kSide2), u0 = (t / kSide2 % 2) * kRows, v = t % kSide2;
  float acc[kRows] = {};
  for (int m = 0; m < kMaps3; ++m)
    for (int q = 0; q < kK; ++q) {
      const int column = v - q;
      if (column < 0 || column >= kSide3) continue;
      // Padded rows u0 .. u0 + 10 hold dC3 rows u0 - 4 .. u0 + 6.
      float dy[kRows + kK - 1];
#pragma unroll
      for (int k = 0; k < kRows + kK - 1; ++k)
        dy[k] = s.d3[(m * kPaddedRows3 + u0 + k) * kSide3 + column];
#pragma unroll
      for (int p = 0; p < kK; ++p) {
        const float weight = s.w3[((m * kMaps1 + c) * kK + p) * kK + q];
#pragma unroll
        for (int r = 0; r < kRows; ++r) acc[r] += weight * dy[r - p + kPadRows];
      }
    }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int i = (c * kSide2 + u0 + r) * kSide2 + v;
    s.d2[i] = acc[r] * activation_slope(A, s.a2[i]);
  }
}

// S2 backward: dL/dC1, in place over C1's outputs (a thread per window).
template <Subsampling P>
__device__ void s2_backward(SampleShared& s) {
  constexpr int kPerMap = kSide2 * kSide2;
  for (int i = threadIdx.x; i < kMaps1 * kPerMap; i += kThreads) {
    const int m = i / kPerMap, h = i % kPerMap / kSide2, w = i % kSide2;
    pool_backward_window<P>(s.c1 + (m * kSide1 + 2 * h) * kSide1 + 2 * w, kSide1, s.d2[i]);
  }
}

// This sample's dL/dc1.weight[m][p][q] = sum_{h,w} dC1[m][h][w] * x[h+p][w+q]. Thread (map m,
// column w) walks down the column keeping the 5x5 input window in registers (5 new loads per row
// for 25 multiply-adds) and leaves 25 partial sums; then 150 threads add the 28 columns in order.
__device__ void c1_weight_gradient(SampleShared& s, float* record_g1) {
  const int t = threadIdx.x;
  if (t < kMaps1 * kSide1) {
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
    for (int k = 0; k < kK * kK; ++k) s.w1_partial[(m * kK * kK + k) * kSide1 + w] = acc[k];
  }
  __syncthreads();
  if (t < kW1) {
    float sum = 0.0f;
    for (int w = 0; w < kSide1; ++w) sum += s.w1_partial[t * kSide1 + w];
    record_g1[t] = sum;
  }
}

}  // namespace

// ---- the kernels -----------------------------------------------------------------------------

template <Activation A, Subsampling P>
__global__ void __launch_bounds__(kThreads)
    whole_step_sample_kernel(SampleArgs args) {
  extern __shared__ float4 shared_storage[];
  SampleShared& s = *reinterpret_cast<SampleShared*>(shared_storage);
  const int sample = blockIdx.x;
  const WholeStepOffsets& at = args.at;
  const float* params = args.params;
  float* record = args.records + std::size_t(sample) * record::floats;

  load_sample(s, args, sample);
  __syncthreads();
  c1_forward(s);
  __syncthreads();
  pool_forward<A, P>(s.c1, kMaps1, kSide2, params + at.s2_bias, s.a2);
  __syncthreads();
  c3_forward(s);
  __syncthreads();
  pool_forward<A, P>(s.c3, kMaps3, kSide4, params + at.s4_bias, s.a4);
  __syncthreads();
  for (int i = threadIdx.x; i < kFlat4; i += kThreads) record[record::a4 + i] = s.a4[i];
  dense_forward<A, true, kFlat4, kC5>(params + at.c5_weight, params + at.c5_bias, s.a4, s.a5,
                                      record + record::a5);
  __syncthreads();
  dense_forward<A, true, kC5, kF6>(params + at.f6_weight, params + at.f6_bias, s.a5, s.a6,
                                   record + record::a6);
  __syncthreads();
  dense_forward<A, false, kF6, kOut>(params + at.output_weight, params + at.output_bias, s.a6, s.z,
                                     nullptr);
  __syncthreads();
  loss_and_gradient(s, args, sample, record + record::d7);
  __syncthreads();
  dense_backward<A, kF6, kOut>(params + at.output_weight, s.d7, s.a6, s.d6, record + record::d6);
  __syncthreads();
  dense_backward<A, kC5, kF6>(params + at.f6_weight, s.d6, s.a5, s.d5, record + record::d5);
  __syncthreads();
  dense_backward<A, kFlat4, kC5>(params + at.c5_weight, s.d5, s.a4, s.d4, nullptr);
  __syncthreads();
  bias_gradient(s.d4, kMaps3, kSide4 * kSide4, record + record::gb4);
  s4_backward<P>(s);
  __syncthreads();
  c3_weight_gradient(s, record + record::g3);
  c3_input_gradient<A>(s);
  __syncthreads();
  bias_gradient(s.d2, kMaps1, kSide2 * kSide2, record + record::gb2);
  s2_backward<P>(s);
  __syncthreads();
  c1_weight_gradient(s, record + record::g1);
}

namespace {

// Which tensor flat index p belongs to, and p's gradient summed over the batch in sample order.
// Returns false for the alignment padding between tensors (never read, never updated).
__device__ bool batch_gradient(const WholeStepOffsets& at, int p, const float* records, int n,
                               const float* c3_mask, float* gradient) {
  // A dense weight (o, i) of a layer with `in` inputs: sum_s dy[s][o] * x[s][i].
  const auto dense_weight = [&](int offset, int in, int out, int dy_at, int x_at) {
    const int k = p - offset;
    if (k < 0 || k >= in * out) return false;
    const int o = k / in, i = k % in;
    float acc = 0.0f;
    for (int s = 0; s < n; ++s) {
      const float* r = records + std::size_t(s) * record::floats;
      acc += r[dy_at + o] * r[x_at + i];
    }
    *gradient = acc;
    return true;
  };
  // A per-sample part kept in the records (C1, C3, the subsampling biases) or a dense bias:
  // sum_s record[s][at + k].
  const auto summed = [&](int offset, int count, int at_in_record) {
    const int k = p - offset;
    if (k < 0 || k >= count) return false;
    float acc = 0.0f;
    for (int s = 0; s < n; ++s) acc += records[std::size_t(s) * record::floats + at_in_record + k];
    *gradient = acc;
    return true;
  };
  if (summed(at.c1_weight, kW1, record::g1)) return true;
  if (summed(at.s2_bias, kMaps1, record::gb2)) return true;
  if (summed(at.c3_weight, kW3, record::g3)) {
    *gradient *= c3_mask[p - at.c3_weight];  // disconnected weights get no gradient
    return true;
  }
  if (summed(at.s4_bias, kMaps3, record::gb4)) return true;
  if (dense_weight(at.c5_weight, kFlat4, kC5, record::d5, record::a4)) return true;
  if (summed(at.c5_bias, kC5, record::d5)) return true;
  if (dense_weight(at.f6_weight, kC5, kF6, record::d6, record::a5)) return true;
  if (summed(at.f6_bias, kF6, record::d6)) return true;
  if (dense_weight(at.output_weight, kF6, kOut, record::d7, record::a6)) return true;
  return summed(at.output_bias, kOut, record::d7);
}

}  // namespace

// One thread per flat parameter: the batch gradient, then (lr not null) the SGD update, or
// (gradients_out not null) the gradient itself. Thread 0 also adds the step's statistics.
__global__ void __launch_bounds__(kUpdateThreads)
    whole_step_update_kernel(WholeStepOffsets at, const float* records, int n,
                             const float* c3_mask, float mu, bool nesterov, float decay,
                             const float* lr, float* params, float* velocity,
                             float* gradients_out, const double* sample_loss,
                             const std::int32_t* sample_correct, StepStats* stats) {
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p == 0 && stats) {
    double loss = 0;
    int correct = 0;
    for (int s = 0; s < n; ++s) {
      loss += sample_loss[s];
      correct += sample_correct[s];
    }
    // Stream order makes this read-modify-write safe, as in softmax_cross_entropy_kernel1.
    stats->loss_sum += loss;
    stats->correct += correct;
  }
  if (p >= at.buffer_floats) return;
  float gradient = 0.0f;
  if (!batch_gradient(at, p, records, n, c3_mask, &gradient)) return;
  if (gradients_out) gradients_out[p] = gradient;
  if (lr)
    sgd_update_element(mu, nesterov, decay, *lr, gradient, params + p,
                       velocity ? velocity + p : nullptr);
}

namespace {

using SampleKernel = void (*)(SampleArgs);

template <Activation A>
SampleKernel sample_kernel_for(Subsampling pooling) {
  return pooling == Subsampling::max ? whole_step_sample_kernel<A, Subsampling::max>
                                     : whole_step_sample_kernel<A, Subsampling::average>;
}

SampleKernel sample_kernel_for(const NetConfig& config) {
  switch (config.activation) {
    case Activation::tanh: return sample_kernel_for<Activation::tanh>(config.subsampling);
    case Activation::sigmoid: return sample_kernel_for<Activation::sigmoid>(config.subsampling);
    case Activation::scaled_tanh:
      return sample_kernel_for<Activation::scaled_tanh>(config.subsampling);
    case Activation::relu: return sample_kernel_for<Activation::relu>(config.subsampling);
  }
  throw Error("internal: unknown activation");
}

int offset_of(const ParamLayout& layout, const char* name) {
  return int(layout.find(name).offset);
}

WholeStepOffsets offsets_of(const ParamLayout& layout) {
  WholeStepOffsets at{};
  at.c1_weight = offset_of(layout, "c1.weight");
  at.s2_bias = offset_of(layout, "s2.bias");
  at.c3_weight = offset_of(layout, "c3.weight");
  at.s4_bias = offset_of(layout, "s4.bias");
  at.c5_weight = offset_of(layout, "c5.weight");
  at.c5_bias = offset_of(layout, "c5.bias");
  at.f6_weight = offset_of(layout, "f6.weight");
  at.f6_bias = offset_of(layout, "f6.bias");
  at.output_weight = offset_of(layout, "output.weight");
  at.output_bias = offset_of(layout, "output.bias");
  at.buffer_floats = int(layout.buffer_floats);
  // The dense rows are read as float4: each weight tensor must start 16-byte aligned.
  for (int offset : {at.c5_weight, at.f6_weight, at.output_weight})
    if (offset % 4 != 0) throw Error("internal: a dense weight tensor is not 16-byte aligned");
  return at;
}

}  // namespace

WholeStep::WholeStep(const NetConfig& config, const ParamLayout& layout, int max_batch)
    : m_config(config),
      m_offsets(offsets_of(layout)),
      m_max_batch(max_batch),
      m_records(Device::gpu, std::size_t(max_batch) * record::floats),
      m_sample_loss(Device::gpu, std::size_t(max_batch)),
      m_sample_correct(Device::gpu, std::size_t(max_batch)),
      m_c3_mask(Device::gpu, kW3) {
  if (max_batch < 1) throw UsageError("batch size must be at least 1");
  const std::vector<float> mask = c3_weight_mask(config);
  m_c3_mask.copy_from_host(mask.data());
  // Opt in to the working set's shared memory (above the default 48 KB), once per kernel used.
  CUDA_CHECK(cudaFuncSetAttribute(sample_kernel_for(config),
                                  cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  int(sizeof(SampleShared))));
}

void WholeStep::run_samples(const std::uint8_t* images, const std::uint8_t* labels,
                            const std::int32_t* indices, int n, const float* params,
                            cudaStream_t stream) {
  if (n < 1 || n > m_max_batch)
    throw Error("internal: whole-step batch of " + std::to_string(n) + " samples, room for " +
                std::to_string(m_max_batch));
  SampleArgs args{images, labels, indices, n, params, m_offsets, m_records.data(),
                  m_sample_loss.data(), m_sample_correct.data()};
  sample_kernel_for(m_config)<<<n, kThreads, sizeof(SampleShared), stream>>>(args);
  CUDA_CHECK_LAUNCH();
}

void WholeStep::train_step(const std::uint8_t* images, const std::uint8_t* labels,
                           const std::int32_t* indices, int n, const SgdSettings& sgd,
                           const float* lr, float* params, float* velocity, StepStats* stats,
                           cudaStream_t stream) {
  run_samples(images, labels, indices, n, params, stream);
  const int blocks = (m_offsets.buffer_floats + kUpdateThreads - 1) / kUpdateThreads;
  // The same float conversions as sgd_step_cpu, done once on the host.
  whole_step_update_kernel<<<blocks, kUpdateThreads, 0, stream>>>(
      m_offsets, m_records.data(), n, m_c3_mask.data(), float(sgd.momentum), sgd.nesterov,
      float(sgd.weight_decay), lr, params, velocity, nullptr, m_sample_loss.data(),
      m_sample_correct.data(), stats);
  CUDA_CHECK_LAUNCH();
}

void WholeStep::gradients(const std::uint8_t* images, const std::uint8_t* labels,
                          const std::int32_t* indices, int n, const float* params,
                          float* gradients, StepStats* stats, cudaStream_t stream) {
  run_samples(images, labels, indices, n, params, stream);
  const int blocks = (m_offsets.buffer_floats + kUpdateThreads - 1) / kUpdateThreads;
  whole_step_update_kernel<<<blocks, kUpdateThreads, 0, stream>>>(
      m_offsets, m_records.data(), n, m_c3_mask.data(), 0.0f, false, 0.0f, nullptr, nullptr,
      nullptr, gradients, m_sample_loss.data(), m_sample_correct.data(), stats);
  CUDA_CHECK_LAUNCH();
}

}  // namespace lenet5::cuda
