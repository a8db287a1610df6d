// The dense layers' backward pass on the tensor cores (see tensor_backward.cuh for the plan).
//
// Every product is a set of m16n8 output tiles shared out over the block's warps (gemm_tiles),
// each tile's k running in steps of 8 in the same order every time. Its operands are read through
// two functions, a(m, k) and b(k, n), that return zero outside the matrices, so that the
// transposed reads of the weight gradients (A = dLᵀ: a(m, k) = dL[k][m]) and the padded shapes
// (10 classes, 84 F6 units) need no separate code.
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
  float* partials;  // (tiles, partial::floats)
  float* d4;        // (n, 400)
};

// For each m16n8 tile of an (M, N) product that warp `warp` owns (tiles warp, warp + 8, ...):
// acc = sum over k < K of a(m, k) b(k, n), operands rounded to TF32, then store(m, n, acc) for the
// tile's m < M, n < N.
template <int M, int N, int K, class AAt, class BAt, class Store>
__device__ void gemm_tiles(AAt a, BAt b, Store store, int warp, int lane) {
  constexpr int kMTiles = (M + 15) / 16, kNTiles = (N + 7) / 8;
  const int g = lane / 4, t = lane % 4;
  for (int tile = warp; tile < kMTiles * kNTiles; tile += kWarps) {
    const int m0 = tile / kNTiles * 16, n0 = tile % kNTiles * 8;
    float acc[4] = {};
#pragma unroll 4
    for (int k0 = 0; k0 < K; k0 += 8) {
      const int k1 = k0 + t, k2 = k1 + 4;
      const bool real1 = k1 < K, real2 = k2 < K;
      const std::uint32_t af[4] = {
          real1 ? to_tf32(a(m0 + g, k1)) : 0u, real1 ? to_tf32(a(m0 + g + 8, k1)) : 0u,
          real2 ? to_tf32(a(m0 + g, k2)) : 0u, real2 ? to_tf32(a(m0 + g + 8, k2)) : 0u};
      const std::uint32_t bf[2] = {real1 ? to_tf32(b(k1, n0 + g)) : 0u,
                                   real2 ? to_tf32(b(k2, n0 + g)) : 0u};
      mma_tf32(acc, af, bf);
    }
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int m = m0 + g + 8 * (r / 2), n = n0 + 2 * t + r % 2;
      if (m < M && n < N) store(m, n, acc[r]);
    }
  }
}

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
// of dL/db, each column of d summed in sample order.
template <int Out, int In, int LdD, int LdX>
__device__ void weight_gradient(const float* d, const float* x, float* weight_slot,
                                float* bias_slot, int warp, int lane) {
  gemm_tiles<Out, In, kTile>(
      [d](int m, int k) { return m < Out ? d[k * LdD + m] : 0.0f; },
      [x](int k, int n) { return n < In ? x[k * LdX + n] : 0.0f; },
      [weight_slot](int m, int n, float value) { weight_slot[m * In + n] = value; }, warp, lane);
  for (int o = int(threadIdx.x); o < Out; o += kThreads) {
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
  forward_tile<A, P, kTile>(shared, args.in, first);
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
  gemm_tiles<kTile, kFlat4, kC5>([d5](int m, int k) { return d5[m * kA5Row + k]; },
                                 [w5](int k, int j) { return w5[k * kFlat4 + j]; },
                                 [d4, first, n](int m, int j, float value) {
                                   if (first + m < n)
                                     d4[std::size_t(first + m) * kFlat4 + j] = value;
                                 },
                                 warp, lane);
  float* slot = args.partials + std::size_t(blockIdx.x) * partial::floats;
  weight_gradient<kOut, kF6, B::kD7Row, kA6Row>(shared + B::d7, shared + L::a6,
                                                slot + partial::output_weight,
                                                slot + partial::output_bias, warp, lane);
  weight_gradient<kF6, kC5, kA6Row, kA5Row>(shared + B::d6, shared + L::a5,
                                            slot + partial::f6_weight, slot + partial::f6_bias,
                                            warp, lane);
  weight_gradient<kC5, kFlat4, kA5Row, kA4Row>(shared + B::d5, shared + L::a4,
                                               slot + partial::c5_weight, slot + partial::c5_bias,
                                               warp, lane);
}

// Each dense parameter's gradient: its tiles' partial sums added in tile order, a thread per
// parameter, written where the layout keeps it.
__global__ void tensor_dense_gradient_sum_kernel1(const float* partials, int tiles,
                                                  WholeStepOffsets at, float* gradients) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= partial::floats) return;
  float sum = 0.0f;
  for (int tile = 0; tile < tiles; ++tile) sum += partials[std::size_t(tile) * partial::floats + i];
  int to = 0;
  if (i < partial::c5_bias)
    to = at.c5_weight + i;
  else if (i < partial::f6_weight)
    to = at.c5_bias + (i - partial::c5_bias);
  else if (i < partial::f6_bias)
    to = at.f6_weight + (i - partial::f6_weight);
  else if (i < partial::output_weight)
    to = at.f6_bias + (i - partial::f6_bias);
  else if (i < partial::output_bias)
    to = at.output_weight + (i - partial::output_weight);
  else
    to = at.output_bias + (i - partial::output_bias);
  gradients[to] = sum;
}

using BackwardKernel = void (*)(DenseBackwardArgs);

template <Activation A>
BackwardKernel backward_kernel_for(Subsampling pooling) {
  if (pooling == Subsampling::max) return tensor_dense_backward_kernel1<A, Subsampling::max>;
  if (pooling == Subsampling::average)
    return tensor_dense_backward_kernel1<A, Subsampling::average>;
  throw Error("internal: the tensor-core kernels have no trainable subsampling");
}

BackwardKernel backward_kernel_for(const NetConfig& config) {
  switch (config.activation) {
    case Activation::tanh:
      return backward_kernel_for<Activation::tanh>(config.subsampling);
    case Activation::sigmoid:
      return backward_kernel_for<Activation::sigmoid>(config.subsampling);
    case Activation::scaled_tanh:
      return backward_kernel_for<Activation::scaled_tanh>(config.subsampling);
    case Activation::relu:
      return backward_kernel_for<Activation::relu>(config.subsampling);
  }
  throw Error("internal: unknown activation");
}

constexpr std::size_t kSharedBytes = sizeof(float) * std::size_t(SharedLayout<kTile>::floats);

int tiles_of(int n) {
  return (n + kTile - 1) / kTile;
}

const NetConfig& supported(const NetConfig& config) {
  const std::string refusal = tensor_forward_refusal(config);
  if (!refusal.empty()) throw UsageError(refusal);
  return config;
}

int checked_batch(int max_batch) {
  if (max_batch < 1) throw UsageError("batch size must be at least 1");
  return max_batch;
}

}  // namespace

TensorDenseBackward::TensorDenseBackward(const NetConfig& config, const ParamLayout& layout,
                                         int max_batch)
    : m_config(supported(config)),
      m_offsets(offsets_of(layout)),
      m_max_batch(checked_batch(max_batch)),
      m_partials(Device::gpu, std::size_t(tiles_of(max_batch)) * partial::floats) {
  const BackwardKernel kernel = backward_kernel_for(config);
  check_device_runs(kernel, kSharedBytes, kTile);
  CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSharedBytes)));
  const std::vector<float> mask = c3_weight_mask(config);
  m_c3_mask = Buffer<float>(Device::gpu, mask.size());
  m_c3_mask.copy_from_host(mask.data());
}

void TensorDenseBackward::dense_gradients(const std::uint8_t* images, const std::uint8_t* labels,
                                          int n, const float* params, float* gradients, float* d4,
                                          cudaStream_t stream) {
  if (n < 1 || n > m_max_batch)
    throw Error("internal: a tensor-core backward pass of " + std::to_string(n) +
                " samples, room for " + std::to_string(m_max_batch));
  const TileInputs in{images, n,         pixel_scaling(m_config.input_scaling),
                      params, m_offsets, m_c3_mask.data()};
  float* partials = m_partials.data();
  const DenseBackwardArgs args{in, labels, partials, d4};
  backward_kernel_for(m_config)<<<tiles_of(n), kThreads, kSharedBytes, stream>>>(args);
  CUDA_CHECK_LAUNCH();
  constexpr int kSumThreads = 256;
  tensor_dense_gradient_sum_kernel1<<<(partial::floats + kSumThreads - 1) / kSumThreads,
                                      kSumThreads, 0, stream>>>(partials, tiles_of(n), m_offsets,
                                                                gradients);
  CUDA_CHECK_LAUNCH();
}

}  // namespace lenet5::cuda
