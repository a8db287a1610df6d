// The whole-step kernels (see whole_step.cuh for the contract and the plan).
//
// Shapes (core/topology.hpp): input 32x32 -> C1 6@28x28 -> S2 6@14x14 -> C3 16@10x10 -> S4 16@5x5
// -> C5 120 -> F6 84 -> output 10. One block of kThreads threads per sample; every stage below is
// a short function that all threads of the block call, separated by __syncthreads().
//
// The convolution stages are register-blocked: a thread keeps a strip of outputs in registers and
// reuses every shared-memory value it loads for several multiply-adds, because shared-memory
// loads, not multiply-adds, bound a block that works alone on one sample.
#include <algorithm>
#include <string>

#include "core/activation_math.hpp"
#include "core/error.hpp"
#include "core/shapes.hpp"
#include "core/topology.hpp"
#include "cuda/engine/whole_step.cuh"
#include "cuda/kernels/pixel.cuh"
#include "cuda/kernels/sgd_element.cuh"
#include "cuda/runtime/check.hpp"

namespace lenet5::cuda {
namespace {

// 16 warps: the stages below give different warps different work (C3's weight and input
// gradients run side by side), and 4 warps per scheduler hide shared-memory and L2 latency.
constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kUpdateThreads = 256;

constexpr int kField = 32, kImage = 28, kK = 5;
constexpr int kMaps1 = 6, kSide1 = 28, kSide2 = 14;  // C1 output, S2 output
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
// Its rows are 16 floats apart and its maps 8 floats more than 18 rows: the input-gradient stage
// reads a column in two groups of 14 lanes 7 rows apart, which then fall in disjoint banks
// (7 x 16 = 112 = 16 mod 32), and the weight-gradient stage's two maps per warp do too.
constexpr int kD3Row = 16, kD3Map = kPaddedRows3 * kD3Row + 8;
// c3.weight is kept transposed and padded as [m][c][q][8] with p in 0..4, so that a stage that
// needs the five p values of one (m, c, q) reads them as one float4 and one float.
constexpr int kW3Q = 8;
__device__ inline int w3_index(int m, int c, int q) {
  return ((m * 6 + c) * 5 + q) * kW3Q;
}

// The per-sample record in global memory, read by the update kernel. Offsets in floats.
namespace record {
constexpr int a4 = 0;                                  // S4's activation, C5's input (400)
constexpr int d5 = a4 + kFlat4;                        // dL/d(C5 pre-activation) (120)
constexpr int a5 = d5 + kC5;                           // C5's activation (120)
constexpr int d6 = a5 + kC5;                           // dL/d(F6 pre-activation) (84)
constexpr int a6 = d6 + kF6;                           // F6's activation (84)
constexpr int d7 = a6 + kF6;                           // dL/dlogits (10)
constexpr int g1 = d7 + kOut;                          // this sample's part of dL/dc1.weight (150)
constexpr int gb2 = g1 + kW1;                          // ... of dL/ds2.bias (6)
constexpr int g3 = gb2 + kMaps1;                       // ... of dL/dc3.weight (2,400)
constexpr int gb4 = g3 + kW3;                          // ... of dL/ds4.bias (16)
constexpr int floats = (gb4 + kMaps3 + 31) / 32 * 32;  // each record starts 128-byte aligned
}  // namespace record

// One sample's working set (about 104 KB, so the kernel opts in to more than 48 KB).
struct SampleShared {
  float x[kField * kField];                           // the normalised, padded input
  float w1[kW1];                                      // c1.weight
  alignas(16) float w3[kMaps3 * kMaps1 * kK * kW3Q];  // c3.weight, transposed: w3_index
  float c1[kMaps1 * kSide1 * kSide1];                 // C1's output; later dL/dC1
  float a2[kMaps1 * kSide2 * kSide2];                 // S2's activation
  float d2[kMaps1 * kSide2 * kSide2];                 // dL/d(S2 pre-activation)
  float c3[kMaps3 * kSide3 * kSide3];                 // C3's output
  float d3[kMaps3 * kD3Map];  // dL/dC3, rows padded with zeros (kD3Row, kD3Map)
  alignas(16) float a4[kFlat4];
  float d4[kFlat4];  // dL/d(S4 pre-activation)
  alignas(16) float a5[kC5];
  float d5[kC5];
  alignas(16) float a6[kF6];
  float d6[kF6];
  float z[kOut];   // logits
  float d7[kOut];  // dL/dlogits
  int label;       // the sample's label, read with its image
  // Partial sums that one stage combines in a fixed order: C3's two halves of input maps, the
  // dense layers' input gradients per warp, C1's weight gradient per output column.
  alignas(16) float scratch[kWarps * kFlat4];
};
static_assert(kW1 * kSide1 <= kWarps * kFlat4, "C1's column partials fit the scratch");

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

// Programmatic dependent launch (sm_90): each whole-step kernel lets the next one in the stream be
// scheduled while it runs (allow_next_grid), and the next one reads nothing the previous one
// writes, and writes nothing it reads, before wait_for_previous_grid(), which returns once the
// previous grid has finished and its writes are visible. The launch latency between the two
// kernels of a step, and between steps, then overlaps with work. The parameters are read with
// plain loads, not __ldg: the read-only path is only defined for data that no grid running at
// the same time writes, and with programmatic launch the previous step's update may still be
// running when this grid starts. Where the instructions are not available (a build's PTX for
// an older architecture), the launches do not ask for programmatic serialization either.
__device__ inline void allow_next_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}
__device__ inline void wait_for_previous_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// The sample's image, normalised and padded exactly as gather_batch does, into shared memory, and
// the zero rows of the padded dL/dC3: nothing that a previous step writes.
__device__ void load_image(SampleShared& s, const SampleArgs& args, int sample) {
  const std::size_t source = args.indices ? std::size_t(args.indices[sample]) : std::size_t(sample);
  const std::uint8_t* image = args.images + source * (kImage * kImage);
  const float background = normalise_pixel_device(0);
  for (int i = threadIdx.x; i < kField * kField; i += kThreads) {
    const int y = i / kField - kPad, x = i % kField - kPad;
    const bool inside = y >= 0 && y < kImage && x >= 0 && x < kImage;
    s.x[i] = inside ? normalise_pixel_device(image[y * kImage + x]) : background;
  }
  for (int i = threadIdx.x; i < kMaps3 * kD3Map; i += kThreads) s.d3[i] = 0.0f;
  if (threadIdx.x == 0) s.label = args.labels[source];
}

// C1's and C3's weights into shared memory (after the previous step's update).
__device__ void load_weights(SampleShared& s, const SampleArgs& args) {
  for (int i = threadIdx.x; i < kW1; i += kThreads) s.w1[i] = args.params[args.at.c1_weight + i];
  // c3.weight read as float4 (its tensor starts 128-byte aligned), all of a thread's loads in
  // flight, and stored transposed (w3_index).
  const float4* w3 = reinterpret_cast<const float4*>(args.params + args.at.c3_weight);
#pragma unroll
  for (int k = 0; k < (kW3 / 4 + kThreads - 1) / kThreads; ++k) {
    const int i = threadIdx.x + k * kThreads;
    if (i >= kW3 / 4) continue;
    const float4 v = w3[i];
    const float values[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int flat = 4 * i + j;  // ((m * 6 + c) * 5 + p) * 5 + q
      const int q = flat % kK, p = flat / kK % kK, mc = flat / (kK * kK);
      s.w3[mc * kK * kW3Q + q * kW3Q + p] = values[j];
    }
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

// A 2x2 window's pooled value as the CPU reference computes it (subsample_cpu.cpp): the sum in
// row-major order divided by 4, or the first maximum in row-major order.
template <Subsampling P>
__device__ float pool2x2(const float* window, int row_stride) {
  const float v00 = window[0], v01 = window[1], v10 = window[row_stride],
              v11 = window[row_stride + 1];
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

__device__ float warp_sum(float value) {
  // A butterfly: every lane ends with the same sum, combined in the same order every run.
  for (int offset = 16; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

// y[o] = f(W[o,:] . x + b[o]) (f the identity when !Activate) for a dense layer whose weights are
// read from global memory (L2): a warp per group of Group rows, lanes striding the rows in float4
// (rows of 400, 120 and 84 floats, at 128-byte aligned tensor offsets). The loads of a whole
// group are issued before any is used, so each lane has up to Group x 4 loads in flight: the
// layer is bound by L2 latency otherwise. Each block starts at its own row (row_shift): 64 blocks
// reading the same lines at the same moment queue up in the same L2 slices.
template <Activation A, bool Activate, int In, int Out, int Group>
__device__ void dense_forward(const float* weight, const float* bias, const float* x, float* y,
                              float* record_y, int row_shift) {
  static_assert(In % 4 == 0, "rows are read as float4");
  constexpr int kIn4 = In / 4, kChunks = (kIn4 + 31) / 32;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  for (int o0 = warp * Group; o0 < Out; o0 += kWarps * Group) {
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
#pragma unroll
    for (int k = 0; k < Group; ++k) {
      const float sum = warp_sum(acc[k]);
      const int o = (o0 + k + row_shift) % Out;
      if (lane == 0 && o0 + k < Out) {
        const float z = sum + bias[o];
        const float value = Activate ? activate(A, z) : z;
        y[o] = value;
        if (record_y) record_y[o] = value;
      }
    }
  }
}

// The softmax cross-entropy of softmax_cross_entropy_kernel1 (cuda/kernels/loss.cu) for one sample, one
// lane per class, the first maximum as the prediction, dL/dz = (p - onehot) / n; in float, not in
// double as there: this stage is on the step's critical path (about 1,800 cycles with the double
// exp, log and divide), and float's relative error (~1e-7) is far below what training notices.
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
    record_d7[lane] = d;
  }
  if (lane == 0) {
    args.sample_loss[sample] = double(log_sum - s.z[label]);
    args.sample_correct[sample] = best == label;
  }
}

// ---- backward stages -------------------------------------------------------------------------

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

// dL/d(S2 pre-activation)[c][u][v] = f'(a2) * sum_{m,p,q} c3.weight[m][c][p][q] dC3[m][u-p][v-q].
// Thread (quarter of the maps m, input map c, half of the rows, pair of columns v0, v0 + 1)
// computes 2 x 7 outputs over 4 maps (336 threads). Output column v0 + 1 needs at filter column q
// the dC3 column that v0 needed at q - 1, so each loaded column serves both outputs: 6 column
// loads per map instead of 10. Rows outside dC3 read the zero padding, columns outside it read as
// zeros. The quarters' sums go through the scratch and are added in quarter order. The thread that
// forms an output also does S2's backward for its window (s2_backward_window). All threads call it
// (it has a barrier).
template <Activation A, Subsampling P>
__device__ void c3_input_gradient(SampleShared& s) {
  constexpr int kRows = kSide2 / 2, kQuarterMaps = kMaps3 / 4, kColumn = kRows + kK - 1;
  constexpr int kPerQuarter = kMaps1 * 2 * (kSide2 / 2);  // 84
  constexpr int kOutputs = kMaps1 * kSide2 * kSide2;      // 1,176
  static_assert(3 * kOutputs <= kWarps * kFlat4, "three quarters' partials fit the scratch");
  const int t = threadIdx.x;
  const bool active = t < 4 * kPerQuarter;
  const int quarter = t / kPerQuarter, r = t % kPerQuarter;
  const int c = r / kSide2, u0 = (r / (kSide2 / 2) % 2) * kRows, v0 = 2 * (r % (kSide2 / 2));
  float acc[2][kRows] = {};  // columns v0 and v0 + 1
  if (active)
    for (int m = quarter * kQuarterMaps; m < (quarter + 1) * kQuarterMaps; ++m) {
      // Padded rows u0 .. u0 + 10 hold dC3 rows u0 - 4 .. u0 + 6.
      const float* rows = s.d3 + m * kD3Map + u0 * kD3Row;
      float right[kColumn], left[kColumn];
      const bool right_inside = v0 + 1 < kSide3;
#pragma unroll
      for (int k = 0; k < kColumn; ++k) right[k] = right_inside ? rows[k * kD3Row + v0 + 1] : 0.0f;
#pragma unroll
      for (int q = 0; q < kK; ++q) {
        const int column = v0 - q;
        const bool inside = column >= 0 && column < kSide3;
#pragma unroll
        for (int k = 0; k < kColumn; ++k) left[k] = inside ? rows[k * kD3Row + column] : 0.0f;
        const float4 w03 = *reinterpret_cast<const float4*>(s.w3 + w3_index(m, c, q));
        const float weights[kK] = {w03.x, w03.y, w03.z, w03.w, s.w3[w3_index(m, c, q) + 4]};
#pragma unroll
        for (int p = 0; p < kK; ++p)
#pragma unroll
          for (int i = 0; i < kRows; ++i) {
            acc[0][i] += weights[p] * left[i - p + kPadRows];
            acc[1][i] += weights[p] * right[i - p + kPadRows];
          }
#pragma unroll
        for (int k = 0; k < kColumn; ++k) right[k] = left[k];
      }
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

// ---- the kernels -----------------------------------------------------------------------------

template <Activation A, Subsampling P>
__global__ void __launch_bounds__(kThreads) whole_step_sample_kernel(SampleArgs args) {
  extern __shared__ float4 shared_storage[];
  SampleShared& s = *reinterpret_cast<SampleShared*>(shared_storage);
  const int sample = blockIdx.x;
  const WholeStepOffsets& at = args.at;
  const float* params = args.params;
  float* record = args.records + std::size_t(sample) * record::floats;
  // Where this block starts in a dense layer's rows (see dense_forward): spread over the rows.
  const auto row_shift = [sample](int rows) { return sample * 13 % rows; };

  allow_next_grid();
  load_image(s, args, sample);
  wait_for_previous_grid();
  load_weights(s, args);
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
  dense_forward<A, true, kFlat4, kC5, 4>(params + at.c5_weight, params + at.c5_bias, s.a4, s.a5,
                                         record + record::a5, row_shift(kC5));
  __syncthreads();
  dense_forward<A, true, kC5, kF6, 6>(params + at.f6_weight, params + at.f6_bias, s.a5, s.a6,
                                      record + record::a6, row_shift(kF6));
  __syncthreads();
  dense_forward<A, false, kF6, kOut, 1>(params + at.output_weight, params + at.output_bias, s.a6,
                                        s.z, nullptr, 0);
  __syncthreads();
  loss_and_gradient(s, args, sample, record + record::d7);
  __syncthreads();
  dense_backward_columns<A, kF6, kOut>(params + at.output_weight, s.d7, s.a6, s.d6,
                                       record + record::d6);
  __syncthreads();
  dense_backward_rows<A, kC5, kF6, 6>(params + at.f6_weight, s.d6, s.a5, s.d5, record + record::d5,
                                      s.scratch, row_shift(kF6), [](int, float) {});
  __syncthreads();
  dense_backward_rows<A, kFlat4, kC5, 4>(
      params + at.c5_weight, s.d5, s.a4, s.d4, nullptr, s.scratch, row_shift(kC5),
      [&s](int i, float dz) { s4_backward_window<P>(s, i, dz); });
  __syncthreads();
  bias_gradient(s.d4, kMaps3, kSide4 * kSide4, record + record::gb4);
  c3_input_gradient<A, P>(s);
  __syncthreads();
  bias_gradient(s.d2, kMaps1, kSide2 * kSide2, record + record::gb2);
  // Side by side: warps 0-5 C1's weight-gradient partials, warps 8-15 C3's weight gradient.
  static_assert(
      kC1WeightGradientThreads <= kThreads / 2 && kC3WeightGradientThreads <= kThreads / 2,
      "each half of the block has room");
  c1_weight_gradient_partials(s, int(threadIdx.x));
  c3_weight_gradient(s, record + record::g3, int(threadIdx.x) - kThreads / 2);
  __syncthreads();
  c1_weight_gradient_sum(s, record + record::g1);
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
#pragma unroll 16
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
#pragma unroll 16
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
    whole_step_update_kernel(WholeStepOffsets at, const float* records, int n, const float* c3_mask,
                             float mu, bool nesterov, float decay, const float* lr, float* params,
                             float* velocity, float* gradients_out, const double* sample_loss,
                             const std::int32_t* sample_correct, StepStats* stats) {
  allow_next_grid();
  wait_for_previous_grid();
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
    case Activation::tanh:
      return sample_kernel_for<Activation::tanh>(config.subsampling);
    case Activation::sigmoid:
      return sample_kernel_for<Activation::sigmoid>(config.subsampling);
    case Activation::scaled_tanh:
      return sample_kernel_for<Activation::scaled_tanh>(config.subsampling);
    case Activation::relu:
      return sample_kernel_for<Activation::relu>(config.subsampling);
  }
  throw Error("internal: unknown activation");
}

// Launches `kernel` so that it may start while the stream's previous kernel finishes (the kernels
// here wait for it themselves: wait_for_previous_grid). Inside a captured graph this becomes a
// programmatic dependency edge.
template <class... Params, class... Args>
void launch_after_previous(bool programmatic, void (*kernel)(Params...), int blocks, int threads,
                           std::size_t shared_bytes, cudaStream_t stream, Args... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(unsigned(blocks));
  config.blockDim = dim3(unsigned(threads));
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = programmatic ? 1 : 0;
  CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, args...));
}

// Whether `kernel` as loaded on this device contains the griddepcontrol instructions (it was
// compiled for sm_90 or newer), which programmatic serialization relies on.
template <class Kernel>
bool has_programmatic_launch(Kernel kernel) {
  cudaFuncAttributes attributes{};
  CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel));
  return attributes.ptxVersion >= 90;
}

// The batch size, checked before anything is sized by it.
int checked_batch(int max_batch) {
  if (max_batch < 1) throw UsageError("batch size must be at least 1");
  return max_batch;
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
  // c3.weight and the dense rows are read as float4: those tensors must start 16-byte aligned.
  for (int offset : {at.c3_weight, at.c5_weight, at.f6_weight, at.output_weight})
    if (offset % 4 != 0) throw Error("internal: a dense weight tensor is not 16-byte aligned");
  return at;
}

}  // namespace

WholeStep::WholeStep(const NetConfig& config, const ParamLayout& layout, int max_batch)
    : m_config(config),
      m_offsets(offsets_of(layout)),
      m_max_batch(checked_batch(max_batch)),
      m_records(Device::gpu, std::size_t(max_batch) * record::floats),
      m_sample_loss(Device::gpu, std::size_t(max_batch)),
      m_sample_correct(Device::gpu, std::size_t(max_batch)),
      m_c3_mask(Device::gpu, kW3) {
  const std::vector<float> mask = c3_weight_mask(config);
  m_c3_mask.copy_from_host(mask.data());
  int device = 0, shared_limit = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(
      cudaDeviceGetAttribute(&shared_limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (std::size_t(shared_limit) < sizeof(SampleShared))
    throw UsageError("--kernels whole-step keeps a sample in " +
                     std::to_string(sizeof(SampleShared) / 1024) +
                     " KB of shared memory per block; this GPU allows " +
                     std::to_string(shared_limit / 1024) + " KB: use --kernels fast");
  m_programmatic = has_programmatic_launch(sample_kernel_for(config)) &&
                   has_programmatic_launch(whole_step_update_kernel);
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
  SampleArgs args{images,
                  labels,
                  indices,
                  n,
                  params,
                  m_offsets,
                  m_records.data(),
                  m_sample_loss.data(),
                  m_sample_correct.data()};
  launch_after_previous(m_programmatic, sample_kernel_for(m_config), n, kThreads,
                        sizeof(SampleShared), stream, args);
}

void WholeStep::train_step(const std::uint8_t* images, const std::uint8_t* labels,
                           const std::int32_t* indices, int n, const SgdSettings& sgd,
                           const float* lr, float* params, float* velocity, StepStats* stats,
                           cudaStream_t stream) {
  if (sgd.momentum != 0 && !velocity)
    throw Error("internal: a whole-step update with momentum needs a velocity buffer");
  run_samples(images, labels, indices, n, params, stream);
  const int blocks = (m_offsets.buffer_floats + kUpdateThreads - 1) / kUpdateThreads;
  // The same float conversions as sgd_step_cpu, done once on the host.
  launch_after_previous(
      m_programmatic, whole_step_update_kernel, blocks, kUpdateThreads, 0, stream, m_offsets,
      static_cast<const float*>(m_records.data()), n, static_cast<const float*>(m_c3_mask.data()),
      float(sgd.momentum), sgd.nesterov, float(sgd.weight_decay), lr, params, velocity,
      static_cast<float*>(nullptr), static_cast<const double*>(m_sample_loss.data()),
      static_cast<const std::int32_t*>(m_sample_correct.data()), stats);
}

void WholeStep::gradients(const std::uint8_t* images, const std::uint8_t* labels,
                          const std::int32_t* indices, int n, const float* params, float* gradients,
                          StepStats* stats, cudaStream_t stream) {
  run_samples(images, labels, indices, n, params, stream);
  const int blocks = (m_offsets.buffer_floats + kUpdateThreads - 1) / kUpdateThreads;
  launch_after_previous(
      m_programmatic, whole_step_update_kernel, blocks, kUpdateThreads, 0, stream, m_offsets,
      static_cast<const float*>(m_records.data()), n, static_cast<const float*>(m_c3_mask.data()),
      0.0f, false, 0.0f, static_cast<const float*>(nullptr), static_cast<float*>(nullptr),
      static_cast<float*>(nullptr), gradients, static_cast<const double*>(m_sample_loss.data()),
      static_cast<const std::int32_t*>(m_sample_correct.data()), stats);
}

}  // namespace lenet5::cuda
