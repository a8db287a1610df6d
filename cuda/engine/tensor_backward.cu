// The dense layers' backward pass on the tensor cores, and TensorBackward, which runs it and the
// convolutions' part (tensor_conv_backward.cu); tensor_backward.cuh has the plan.
//
// Every product is a set of m16n8 output tiles shared out over the block's warps
// (tensor_tile.cuh's gemm_tiles), each tile's k running in steps of 8 in the same order every
// time. Its operands are read through two functions, a(m, k) and b(k, n), that return zero outside
// the matrices, so that the transposed reads of the weight gradients (A = dLᵀ: a(m, k) = dL[k][m])
// and the padded shapes (10 classes, 84 F6 units) need no separate code.
#include <string>
#include <vector>

#include "core/error.hpp"
#include "cuda/engine/tensor_backward.cuh"
#include "cuda/engine/tensor_forward.cuh"
#include "cuda/engine/tensor_tile.cuh"
#include "cuda/runtime/check.hpp"

namespace lenet5::cuda {
namespace {

constexpr int kTile = TensorDenseBackward::kTile;
// Blocks a tile (blockIdx.y): each runs the tile's forward pass and the small layers' input
// gradients, and then takes a quarter of the large products' tiles (dL/dS4's and the weight
// gradients'), so that a batch of 128 has 32 blocks where it had 8. A warp's place among the tile's
// kParts * 8 warps ("share") picks its product tiles; each product tile is the same sum in the same
// order whichever warp computes it.
constexpr int kParts = 4;

// Where each dense tensor's gradient sits in a tile's slot of partial sums, in floats.
namespace partial {
constexpr int c5_weight = 0;                             // (120, 400)
constexpr int c5_bias = c5_weight + kC5 * kFlat4;        // (120)
constexpr int f6_weight = c5_bias + kC5;                 // (84, 120)
constexpr int f6_bias = f6_weight + kF6 * kC5;           // (84)
constexpr int output_weight = f6_bias + kF6;             // (10, 84)
constexpr int output_bias = output_weight + kOut * kF6;  // (10)
constexpr int floats = output_bias + kOut;
}  // namespace partial

// The backward pass's shared memory after the forward pass's (SharedLayout<kTile>): the output
// gradients of the output layer, F6 and C5, a row per sample, beside the dense activations in the
// warps' working sets.
struct BackwardLayout {
  using L = SharedLayout<kTile>;
  static constexpr int kD7Row = 12;
  static constexpr int d7 = L::z + kTile * kZRow;  // dL/dlogits
  static constexpr int d6 = d7 + kTile * kD7Row;   // dL/d(F6 pre-activation)
  static constexpr int d5 = d6 + kTile * kA6Row;   // dL/d(C5 pre-activation)
  static_assert(d5 + kTile * kA5Row <= L::a4, "the gradients fit the warps' working sets");
};

struct DenseBackwardArgs {
  TileInputs in;
  const std::uint8_t* labels;
  float* partials;       // (tiles, partial::floats)
  float* d4;             // (n, 400)
  float* logits;         // (n, 10), or null
  const float* s4_rows;  // (n, 400): the samples' S4 activations, or null to compute them
};

// dL/dlogits = (softmax(z) - onehot(label)) / n for the tile's samples (whole_step_forward.cuh's
// loss_and_gradient in a thread per sample), and zero rows for a short last tile's missing ones,
// which then add nothing to any weight gradient.
__device__ void logits_gradient(float* shared, const DenseBackwardArgs& args, int first) {
  const int local = int(threadIdx.x), sample = first + local;
  if (local >= kTile) return;
  const float* z = shared + SharedLayout<kTile>::z + local * kZRow;
  float* d7 = shared + BackwardLayout::d7 + local * BackwardLayout::kD7Row;
  if (sample >= args.in.n) {
    for (int k = 0; k < kOut; ++k) d7[k] = 0.0f;
    return;
  }
  if (args.logits && blockIdx.y == 0)
    for (int k = 0; k < kOut; ++k) args.logits[std::size_t(sample) * kOut + k] = z[k];
  const int label = args.labels[sample];
  int best = 0;
  for (int k = 1; k < kOut; ++k)
    if (z[k] > z[best]) best = k;
  float sum = 0.0f;
  for (int k = 0; k < kOut; ++k) sum += expf(z[k] - z[best]);
  for (int k = 0; k < kOut; ++k)
    d7[k] = (expf(z[k] - z[best]) / sum - float(k == label)) / float(args.in.n);
}

// dL/d(pre-activation) (rows of `Ld`) = (dL/dy W) f'(y) for a dense layer y = f(W x + b) whose
// output gradient d_out (a row of LdOut per sample, Out wide) it reads, W (Out, In) row-major in
// global memory, y (rows of LdY) the activation of the layer below, stored by the forward pass.
template <Activation A, int Out, int In, int LdOut, int Ld, int LdY>
__device__ void input_gradient(const float* d_out, const float* weight, const float* y, float* d,
                               int warp, int lane) {
  gemm_tiles<kTile, In, Out>([d_out](int m, int k) { return d_out[m * LdOut + k]; },
                             [weight](int k, int n) { return n < In ? weight[k * In + n] : 0.0f; },
                             [d, y](int m, int n, float value) {
                               d[m * Ld + n] = value * activation_slope(A, y[m * LdY + n]);
                             },
                             warp, lane);
}

// A tile's part of dL/dW = dᵀ x (Out, In), k the tile's samples, into its slot of partial sums; and
// of dL/db, each column of d summed in sample order: the product tiles and columns of the warp's
// share (of the tile's kParts * 8 warps).
template <int Out, int In, int LdD, int LdX>
__device__ void weight_gradient(const float* d, const float* x, float* weight_slot,
                                float* bias_slot, int share, int lane) {
  gemm_tiles<Out, In, kTile, kWarps * kParts>(
      [d](int m, int k) { return m < Out ? d[k * LdD + m] : 0.0f; },
      [x](int k, int n) { return n < In ? x[k * LdX + n] : 0.0f; },
      [weight_slot](int m, int n, float value) { weight_slot[m * In + n] = value; }, share, lane);
  for (int o = share * 32 + lane; o < Out; o += kThreads * kParts) {
    float sum = 0.0f;
    for (int k = 0; k < kTile; ++k) sum += d[k * LdD + o];
    bias_slot[o] = sum;
  }
}

template <Activation A, Subsampling P>
__global__ void __launch_bounds__(kThreads, 2)
    tensor_dense_backward_kernel1(DenseBackwardArgs args) {
  using L = SharedLayout<kTile>;
  using B = BackwardLayout;
  extern __shared__ float4 shared_storage[];
  float* shared = reinterpret_cast<float*>(shared_storage);
  const int first = int(blockIdx.x) * kTile;
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int share = int(blockIdx.y) * kWarps + warp;
  forward_tile<A, P, kTile>(shared, args.in, first, args.s4_rows);
  logits_gradient(shared, args, first);
  __syncthreads();
  const float* params = args.in.params;
  const WholeStepOffsets& at = args.in.at;
  input_gradient<A, kOut, kF6, B::kD7Row, kA6Row, kA6Row>(
      shared + B::d7, params + at.output_weight, shared + L::a6, shared + B::d6, warp, lane);
  __syncthreads();
  input_gradient<A, kF6, kC5, kA6Row, kA5Row, kA5Row>(shared + B::d6, params + at.f6_weight,
                                                      shared + L::a5, shared + B::d5, warp, lane);
  __syncthreads();
  // dL/dS4 = dL/dC5 W5: C5's input gradient, no activation of its own to pass through here (S4's
  // slope belongs to the convolutions' backward pass).
  const float* w5 = params + at.c5_weight;
  const float* d5 = shared + B::d5;
  float* d4 = args.d4;
  const int n = args.in.n;
  gemm_tiles<kTile, kFlat4, kC5, kWarps * kParts>([d5](int m, int k) { return d5[m * kA5Row + k]; },
                                                  [w5](int k, int j) { return w5[k * kFlat4 + j]; },
                                                  [d4, first, n](int m, int j, float value) {
                                                    if (first + m < n)
                                                      d4[std::size_t(first + m) * kFlat4 + j] =
                                                          value;
                                                  },
                                                  share, lane);
  float* slot = args.partials + std::size_t(blockIdx.x) * partial::floats;
  weight_gradient<kOut, kF6, B::kD7Row, kA6Row>(shared + B::d7, shared + L::a6,
                                                slot + partial::output_weight,
                                                slot + partial::output_bias, share, lane);
  weight_gradient<kF6, kC5, kA6Row, kA5Row>(shared + B::d6, shared + L::a5,
                                            slot + partial::f6_weight, slot + partial::f6_bias,
                                            share, lane);
  weight_gradient<kC5, kFlat4, kA5Row, kA4Row>(shared + B::d5, shared + L::a4,
                                               slot + partial::c5_weight, slot + partial::c5_bias,
                                               share, lane);
}

// The dense gradients' slot: each tensor where partial:: keeps it and where the layout does.
SlotTensors dense_slot(const WholeStepOffsets& at) {
  return slot_of({{partial::c5_weight, at.c5_weight, kC5 * kFlat4, false},
                  {partial::c5_bias, at.c5_bias, kC5, false},
                  {partial::f6_weight, at.f6_weight, kF6 * kC5, false},
                  {partial::f6_bias, at.f6_bias, kF6, false},
                  {partial::output_weight, at.output_weight, kOut * kF6, false},
                  {partial::output_bias, at.output_bias, kOut, false}},
                 partial::floats);
}

using BackwardKernel = void (*)(DenseBackwardArgs);

// kernel_for_network's kernels: the dense backward kernel.
struct DenseKernels {
  template <Activation A, Subsampling P>
  BackwardKernel of() const {
    return tensor_dense_backward_kernel1<A, P>;
  }
};

BackwardKernel backward_kernel_for(const NetConfig& config) {
  return kernel_for_network(config, DenseKernels{});
}

constexpr std::size_t kSharedBytes = sizeof(float) * std::size_t(SharedLayout<kTile>::floats);

}  // namespace

TensorDenseBackward::TensorDenseBackward(const NetConfig& config, const ParamLayout& layout,
                                         int max_batch)
    : m_config(supported(config)),
      m_offsets(offsets_of(layout)),
      m_max_batch(checked_batch(max_batch)),
      m_partials(Device::gpu, std::size_t(tiles_of(max_batch, kTile)) * partial::floats) {
  prepare_tile_kernel(backward_kernel_for(config), kSharedBytes, kTile);
  m_c3_mask = c3_mask_on_device(config);
}

void TensorDenseBackward::dense_gradients(const std::uint8_t* images, const std::uint8_t* labels,
                                          int n, const float* params, float* gradients, float* d4,
                                          cudaStream_t stream, const float* field, float* logits,
                                          const float* s4_rows) {
  check_fits(n, m_max_batch);
  const TileInputs in{
      images, n, pixel_scaling(m_config.input_scaling), params, m_offsets, m_c3_mask.data(), field};
  float* partials = m_partials.data();
  const DenseBackwardArgs args{in, labels, partials, d4, logits, s4_rows};
  backward_kernel_for(
      m_config)<<<dim3(tiles_of(n, kTile), kParts), kThreads, kSharedBytes, stream>>>(args);
  CUDA_CHECK_LAUNCH();
  sum_slots(partials, tiles_of(n, kTile), dense_slot(m_offsets), m_c3_mask.data(), gradients,
            stream);
}

TensorBackward::TensorBackward(const NetConfig& config, const ParamLayout& layout, int max_batch)
    : m_dense(config, layout, max_batch),
      m_conv(config, layout, max_batch),
      m_d4(Device::gpu, std::size_t(max_batch) * kFlat4) {}

void TensorBackward::gradients(const std::uint8_t* images, const std::uint8_t* labels, int n,
                               const float* params, float* gradients, cudaStream_t stream,
                               const float* field, float* logits) {
  m_conv.conv_forward(images, n, params, stream, field);
  m_dense.dense_gradients(images, labels, n, params, gradients, m_d4.data(), stream, field, logits,
                          m_conv.s4_rows());
  m_conv.conv_gradients(images, n, params, m_d4.data(), gradients, stream, field);
}

}  // namespace lenet5::cuda
