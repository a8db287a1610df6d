// The convolutions' backward pass on the tensor cores, from dL/dS4 down to C1's weight gradient
// (tensor_backward.cuh has the plan): a block per tile of 8 samples, a sample per warp.
//
// Each warp recomputes its sample's C1, S2, C3 and S4 with the forward pass's own code
// (tensor_tile.cuh's c1_s2 and c3_s4: the same bits as the forward pass of the dense part), keeping
// each max window's first maximum, and then, in its own working set:
//   dL/dz4 = dL/dS4 f'(S4), S4's bias gradient the sum of each map's dL/dz4;
//   dL/dC3 = dL/dz4 sent back through each 2x2 window (pool_window.cuh's window_gradient);
//   dL/dz2 (196 x 6) = D3 (196 x 16 maps x 32 taps) W3 (C3's input gradient, a transposed
//     convolution as an implicit GEMM: D3[pos][(m, 5 p + q)] = dL/dC3[m][u - p][v - q], zero
//     outside the map, and W3 the C3 table's masked weights as the forward pass stages them),
//     times f'(S2); S2's bias gradient the sum of each map's dL/dz2;
//   C1's weight gradient G1 (25 taps x 6 maps) = X (25 x 784 positions) dL/dC1 (784 x 6), where
//     dL/dC1 is read straight from dL/dz2 through the window's average or first maximum (no C1
//     gradient map is stored) and X from the input field;
// then the block together: C3's weight gradient G3 (16 maps x 6 x 32 taps) = dL/dC3 (16 x 800)
// X2 (800 x 192), k running over the tile's 8 samples and each one's 100 positions in order, X2
// gathered from S2 (X2[(s, y, x)][(c, 5 p + q)] = S2_s[c][y + p][x + q]); and the warps' C1 and
// bias gradients added in warp order. Every product goes through gemm_tiles (tensor_tile.cuh).
#include <string>

#include "core/error.hpp"
#include "cuda/engine/tensor_backward.cuh"
#include "cuda/engine/tensor_tile.cuh"
#include "cuda/runtime/check.hpp"

namespace lenet5::cuda {
namespace {

using pool::window_gradient;

constexpr int kTile = TensorConvBackward::kTile;
static_assert(kTile == kWarps, "a sample per warp");

constexpr int kSide1 = 2 * kSide2, kC1Positions = kSide1 * kSide1;  // C1: 28 x 28
constexpr int kSide3 = 2 * kSide4, kC3Positions = kSide3 * kSide3;  // C3: 10 x 10
constexpr int kW1 = kMaps1 * kTaps, kW3 = kMaps3 * kMaps1 * kTaps;
constexpr int kTapColumns = 8 * kTapSteps;  // 32: a map's taps in the products' k or n

// A warp's working set for one sample, in floats from its start.
namespace warp_set {
constexpr int x = 0;                            // the input field (32 x 32), TF32
constexpr int a2 = x + kWarpX;                  // S2's activation (6, 14, 14), TF32
constexpr int d3 = a2 + kWarpS2;                // dL/dC3 (16, 10, 10)
constexpr int d2 = d3 + kMaps3 * kC3Positions;  // dL/dz2 (6, 14, 14)
constexpr int a4 = d2;  // S4's activation, then dL/dz4 (400): done with before d2 is written
constexpr int which2 = d2 + kWarpS2;          // S2's first maxima, bytes (6 x 196)
constexpr int which4 = which2 + kWarpS2 / 4;  // S4's first maxima, bytes (400)
constexpr int bias2 = which4 + kFlat4 / 4;    // this sample's s2.bias gradient (6)
constexpr int bias4 = bias2 + 8;              // ... s4.bias (16)
constexpr int g1 = bias4 + kMaps3;            // ... c1.weight (6, 25)
constexpr int floats = (g1 + kW1 + 3) / 4 * 4;
static_assert(kFlat4 <= kWarpS2 && kWarpS2 % 4 == 0, "S4's row fits dL/dz2's room");
}  // namespace warp_set

// The block's shared memory, in floats from its start.
namespace conv_layout {
constexpr int w1 = 0;                // C1's B layout, as the forward pass stages it
constexpr int w3 = w1 + 8 * kW1Row;  // C3's B layout
constexpr int s2_bias = w3 + kMaps3 * kW3Row;
constexpr int s4_bias = s2_bias + 8;
constexpr int warps = s4_bias + kMaps3;  // kTile working sets
constexpr int floats = warps + kTile * warp_set::floats;
}  // namespace conv_layout

// Where each gradient sits in a tile's slot of partial sums, in floats.
namespace partial {
constexpr int c1_weight = 0;                 // (6, 1, 5, 5)
constexpr int s2_bias = c1_weight + kW1;     // (6)
constexpr int c3_weight = s2_bias + kMaps1;  // (16, 6, 5, 5)
constexpr int s4_bias = c3_weight + kW3;     // (16)
constexpr int floats = s4_bias + kMaps3;
}  // namespace partial

struct ConvBackwardArgs {
  TileInputs in;
  const float* d4;  // (n, 400): dL/d(S4's activation)
  float* partials;  // (tiles, partial::floats)
};

// Each map's values summed in order, a lane per map: a bias gradient.
__device__ void map_sums(const float* values, int maps, int per_map, float* sums, int lane) {
  for (int m = lane; m < maps; m += 32) {
    float sum = 0.0f;
    for (int i = 0; i < per_map; ++i) sum += values[m * per_map + i];
    sums[m] = sum;
  }
}

// dL/dz4 = dL/dS4 f'(S4), in place over S4's activation, and dL/dC3 of each window.
template <Activation A, Subsampling P>
__device__ void s4_backward(const float* d4, float* set, int lane) {
  float* a4 = set + warp_set::a4;
  const std::uint8_t* which = reinterpret_cast<const std::uint8_t*>(set + warp_set::which4);
  for (int i = lane; i < kFlat4; i += 32) {
    const float dz = d4[i] * activation_slope(A, a4[i]);
    a4[i] = dz;
    const int m = i / kWindows4, window = i % kWindows4;
    float* corner = set + warp_set::d3 + m * kC3Positions + 2 * (window / kSide4) * kSide3 +
                    2 * (window % kSide4);
    const int best = P == Subsampling::max ? which[i] : 0;
    corner[0] = window_gradient<P>(dz, best, 0);
    corner[1] = window_gradient<P>(dz, best, 1);
    corner[kSide3] = window_gradient<P>(dz, best, 2);
    corner[kSide3 + 1] = window_gradient<P>(dz, best, 3);
  }
}

// dL/dz2 = (D3 W3) f'(S2), one warp: 13 m16 tiles of positions, one n-tile of maps (6 of 8), 64
// k-steps over (output map m, tap).
template <Activation A>
__device__ void c3_input_gradient(const float* w3, float* set, int lane) {
  const float* d3 = set + warp_set::d3;
  const float* a2 = set + warp_set::a2;
  float* d2 = set + warp_set::d2;
  gemm_tiles<kWindows2, kMaps1, kMaps3 * kTapColumns, 1>(
      [d3](int pos, int k) {
        const int m = k / kTapColumns, tap = k % kTapColumns;
        const int y = pos / kSide2 - tap / kK, x = pos % kSide2 - tap % kK;
        const bool inside = tap < kTaps && y >= 0 && y < kSide3 && x >= 0 && x < kSide3;
        return inside ? d3[m * kC3Positions + y * kSide3 + x] : 0.0f;
      },
      [w3](int k, int c) {  // taps 25-31 are zeros in the staged weights
        return c < kMaps1 ? w3[k / kTapColumns * kW3Row + c * kTapColumns + k % kTapColumns] : 0.0f;
      },
      [d2, a2](int pos, int c, float value) {
        const int at = c * kWindows2 + pos;
        d2[at] = value * activation_slope(A, a2[at]);
      },
      0, lane);
}

// C1's weight gradient of the warp's sample: G1 (25 taps x 6 maps) = X (25 x 784) dL/dC1
// (784 x 6), 2 m16 tiles of taps (rows 25-31 dropped), 98 k-steps over the positions.
template <Subsampling P>
__device__ void c1_weight_gradient(float* set, int lane) {
  const float* x = set + warp_set::x;
  const float* d2 = set + warp_set::d2;
  const std::uint8_t* which = reinterpret_cast<const std::uint8_t*>(set + warp_set::which2);
  float* g1 = set + warp_set::g1;
  gemm_tiles<kTaps, kMaps1, kC1Positions, 1>(
      [x](int tap, int pos) {
        if (tap >= kTaps) return 0.0f;
        return x[(pos / kSide1 + tap / kK) * kField + pos % kSide1 + tap % kK];
      },
      [d2, which](int pos, int map) {
        if (map >= kMaps1) return 0.0f;
        const int y = pos / kSide1, col = pos % kSide1;
        const int window = map * kWindows2 + y / 2 * kSide2 + col / 2;
        const int best = P == Subsampling::max ? which[window] : 0;
        return window_gradient<P>(d2[window], best, 2 * (y % 2) + col % 2);
      },
      [g1](int tap, int map, float value) { g1[map * kTaps + tap] = value; }, 0, lane);
}

// One warp's sample, from its image and dL/dS4 to its bias and C1 weight gradients, with dL/dC3
// and S2 left in its working set for C3's weight gradient.
template <Activation A, Subsampling P>
__device__ void sample_backward(const float* shared, const ConvBackwardArgs& args, int sample,
                                float* set, int lane) {
  namespace C = conv_layout;
  std::uint8_t* which2 = reinterpret_cast<std::uint8_t*>(set + warp_set::which2);
  std::uint8_t* which4 = reinterpret_cast<std::uint8_t*>(set + warp_set::which4);
  load_sample(args.in, sample, set + warp_set::x, lane);
  __syncwarp();
  c1_s2<A, P>(set + warp_set::x, shared + C::w1, shared + C::s2_bias, set + warp_set::a2, lane,
              which2);
  __syncwarp();
  c3_s4<A, P>(set + warp_set::a2, shared + C::w3, shared + C::s4_bias, set + warp_set::a4, lane,
              which4);
  __syncwarp();
  s4_backward<A, P>(args.d4 + std::size_t(sample) * kFlat4, set, lane);
  __syncwarp();
  map_sums(set + warp_set::a4, kMaps3, kWindows4, set + warp_set::bias4, lane);
  __syncwarp();  // before dL/dz2 overwrites dL/dz4
  c3_input_gradient<A>(shared + C::w3, set, lane);
  __syncwarp();
  map_sums(set + warp_set::d2, kMaps1, kWindows2, set + warp_set::bias2, lane);
  c1_weight_gradient<P>(set, lane);
}

// A short last tile's missing sample: zeros wherever the block's sums read it.
__device__ void nothing_to_add(float* set, int lane) {
  for (int i = lane; i < kWarpS2; i += 32) set[warp_set::a2 + i] = 0.0f;
  for (int i = lane; i < kMaps3 * kC3Positions; i += 32) set[warp_set::d3 + i] = 0.0f;
  for (int i = lane; i < warp_set::floats - warp_set::bias2; i += 32)
    set[warp_set::bias2 + i] = 0.0f;
}

// The tile's part of C3's weight gradient, the block's 8 warps 3 n-tiles each, into the slot.
__device__ void c3_weight_gradient(const float* shared, float* slot, int warp, int lane) {
  const float* sets = shared + conv_layout::warps;
  gemm_tiles<kMaps3, kMaps1 * kTapColumns, kTile * kC3Positions>(
      [sets](int m, int k) {
        const float* d3 = sets + k / kC3Positions * warp_set::floats + warp_set::d3;
        return d3[m * kC3Positions + k % kC3Positions];
      },
      [sets](int k, int n) {
        const int pos = k % kC3Positions, c = n / kTapColumns, tap = n % kTapColumns;
        const float* a2 = sets + k / kC3Positions * warp_set::floats + warp_set::a2;
        const int offset = tap < kTaps ? tap / kK * kSide2 + tap % kK : 0;  // 25-31: dropped
        return a2[c * kWindows2 + pos / kSide3 * kSide2 + pos % kSide3 + offset];
      },
      [slot](int m, int n, float value) {
        const int c = n / kTapColumns, tap = n % kTapColumns;
        if (tap < kTaps) slot[partial::c3_weight + (m * kMaps1 + c) * kTaps + tap] = value;
      },
      warp, lane);
}

// The warps' C1 weight and bias gradients, added in warp order, into the slot.
__device__ void sum_warps(const float* shared, float* slot) {
  const float* sets = shared + conv_layout::warps;
  for (int i = int(threadIdx.x); i < kW1 + kMaps1 + kMaps3; i += kThreads) {
    const int from = i < kW1            ? warp_set::g1 + i
                     : i < kW1 + kMaps1 ? warp_set::bias2 + i - kW1
                                        : warp_set::bias4 + i - kW1 - kMaps1;
    float sum = 0.0f;
    for (int w = 0; w < kWarps; ++w) sum += sets[w * warp_set::floats + from];
    slot[i < kW1 + kMaps1 ? i : partial::s4_bias + i - kW1 - kMaps1] = sum;
  }
}

template <Activation A, Subsampling P>
__global__ void __launch_bounds__(kThreads, 1) tensor_conv_backward_kernel1(ConvBackwardArgs args) {
  extern __shared__ float4 shared_storage[];
  float* shared = reinterpret_cast<float*>(shared_storage);
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  stage_conv_weights(shared, args.in, conv_layout::w1, conv_layout::w3, conv_layout::s2_bias,
                     conv_layout::s4_bias);
  __syncthreads();
  float* set = shared + conv_layout::warps + warp * warp_set::floats;
  const int sample = int(blockIdx.x) * kTile + warp;
  if (sample < args.in.n)
    sample_backward<A, P>(shared, args, sample, set, lane);
  else
    nothing_to_add(set, lane);
  __syncthreads();
  float* slot = args.partials + std::size_t(blockIdx.x) * partial::floats;
  c3_weight_gradient(shared, slot, warp, lane);
  sum_warps(shared, slot);
}

// The convolutions' slot: each tensor where partial:: keeps it and where the layout does.
SlotTensors conv_slot(const WholeStepOffsets& at) {
  return slot_of({{partial::c1_weight, at.c1_weight, kW1, false},
                  {partial::s2_bias, at.s2_bias, kMaps1, false},
                  {partial::c3_weight, at.c3_weight, kW3, true},
                  {partial::s4_bias, at.s4_bias, kMaps3, false}},
                 partial::floats);
}

using ConvKernel = void (*)(ConvBackwardArgs);

// kernel_for_network's kernels: the convolutions' backward kernel.
struct ConvKernels {
  template <Activation A, Subsampling P>
  ConvKernel of() const {
    return tensor_conv_backward_kernel1<A, P>;
  }
};

constexpr std::size_t kSharedBytes = sizeof(float) * std::size_t(conv_layout::floats);

}  // namespace

TensorConvBackward::TensorConvBackward(const NetConfig& config, const ParamLayout& layout,
                                       int max_batch)
    : m_config(supported(config)),
      m_offsets(offsets_of(layout)),
      m_max_batch(checked_batch(max_batch)),
      m_c3_mask(c3_mask_on_device(config)),
      m_partials(Device::gpu, std::size_t(tiles_of(max_batch, kTile)) * partial::floats) {
  prepare_tile_kernel(kernel_for_network(config, ConvKernels{}), kSharedBytes, kTile);
}

void TensorConvBackward::conv_gradients(const std::uint8_t* images, int n, const float* params,
                                        const float* d4, float* gradients, cudaStream_t stream,
                                        const float* field) {
  check_fits(n, m_max_batch);
  const TileInputs in{
      images, n, pixel_scaling(m_config.input_scaling), params, m_offsets, m_c3_mask.data(), field};
  const ConvBackwardArgs args{in, d4, m_partials.data()};
  kernel_for_network(m_config,
                     ConvKernels{})<<<tiles_of(n, kTile), kThreads, kSharedBytes, stream>>>(args);
  CUDA_CHECK_LAUNCH();
  sum_slots(m_partials.data(), tiles_of(n, kTile), conv_slot(m_offsets), m_c3_mask.data(),
            gradients, stream);
}

}  // namespace lenet5::cuda
