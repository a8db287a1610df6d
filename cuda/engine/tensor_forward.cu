// The tensor-core forward pass (see tensor_forward.cuh for the contract and the plan, and
// tensor_tile.cuh for how a tile's forward pass runs): the evaluation kernel, which adds the loss
// and the predicted class of each sample to the tile's forward pass, and its host side.
#include <algorithm>
#include <string>

#include "core/error.hpp"
#include "cuda/engine/tensor_forward.cuh"
#include "cuda/engine/tensor_tile.cuh"
#include "cuda/runtime/check.hpp"

namespace lenet5::cuda {
namespace {

struct TensorForwardArgs {
  TileInputs in;  // in.params: the first model's; model m's params_stride floats further
  const std::uint8_t* labels;
  std::size_t params_stride;
  double* loss;             // (models, n)
  std::int32_t* predicted;  // (models, n)
  float* logits;            // (models, n, 10), or null
};

// The softmax cross-entropy of whole_step_forward.cuh's loss_and_gradient, a thread per sample:
// the first largest logit is the prediction; the loss is log(sum exp(z - top)) + top - z[label].
__device__ void loss_of_sample(const float* z, const TensorForwardArgs& args, std::size_t at,
                               int label) {
  int best = 0;
  for (int k = 1; k < kOut; ++k)
    if (z[k] > z[best]) best = k;
  const float top = z[best];
  float sum = 0.0f;
  for (int k = 0; k < kOut; ++k) sum += expf(z[k] - top);
  args.loss[at] = double(logf(sum) + top - z[label]);
  args.predicted[at] = best;
  if (args.logits)
    for (int k = 0; k < kOut; ++k) args.logits[at * kOut + k] = z[k];
}

// One tile of samples of model blockIdx.y: samples [Tile blockIdx.x, Tile (blockIdx.x + 1)) of n.
template <Precision R, Activation A, Subsampling P, int Tile>
__global__ void __launch_bounds__(kThreads, Tile == 16 ? 2 : 1)
    tensor_forward_kernel1(TensorForwardArgs args) {
  float* const shared = dynamic_shared_floats();
  const int model = int(blockIdx.y), first = int(blockIdx.x) * Tile;
  TileInputs in = args.in;
  in.params += std::size_t(model) * args.params_stride;
  forward_tile<R, A, P, Tile>(shared, in, first);
  const int local = int(threadIdx.x), sample = first + local;
  if (local < Tile && sample < in.n)
    loss_of_sample(shared + SharedLayout<Tile>::z + local * kZRow, args,
                   std::size_t(model) * std::size_t(in.n) + std::size_t(sample),
                   args.labels[sample]);
}

template <int Tile>
constexpr std::size_t shared_bytes() {
  return sizeof(float) * std::size_t(SharedLayout<Tile>::floats);
}

using ForwardKernel = void (*)(TensorForwardArgs);

struct KernelChoice {
  ForwardKernel kernel;
  std::size_t shared_bytes;
};

template <Precision R, Activation A, Subsampling P>
KernelChoice kernel_for_tile(int tile) {
  switch (tile) {
    case 16:
      return {tensor_forward_kernel1<R, A, P, 16>, shared_bytes<16>()};
    case 32:
      return {tensor_forward_kernel1<R, A, P, 32>, shared_bytes<32>()};
    case 64:
      return {tensor_forward_kernel1<R, A, P, 64>, shared_bytes<64>()};
    default:
      break;
  }
  throw Error("internal: no tensor-core forward kernel for a tile of " + std::to_string(tile));
}

// kernel_for_network's kernels: the forward kernel of a tile.
struct ForwardKernels {
  int tile;
  template <Precision R, Activation A, Subsampling P>
  KernelChoice of() const {
    return kernel_for_tile<R, A, P>(tile);
  }
};

// The evaluation's products are TF32 whatever the network's --precision (a training precision).
KernelChoice kernel_for(const NetConfig& config, int tile) {
  return kernel_for_network<Precision::tf32>(config, ForwardKernels{tile});
}

}  // namespace

std::string tensor_forward_refusal(const NetConfig& config) {
  const char* missing = nullptr;
  if (config.subsampling == Subsampling::trainable) missing = "trainable subsampling";
  if (config.conv_units != ConvUnits::linear) missing = "squashed C1 and C3 units";
  if (config.output != OutputLayer::softmax) missing = "RBF output layer";
  if (!missing) return "";
  return std::string("the tensor-core kernels have no ") + missing +
         " (they compute linear C1 and C3, average or max subsampling and the softmax output): "
         "evaluate with the whole-step or fast kernels";
}

const std::vector<int>& TensorForward::tiles() {
  static const std::vector<int> sizes{16, 32, 64};
  return sizes;
}

namespace {

// The settings as they are, once they are known to be what the kernels compute (before the
// layout is read: the RBF output's has no output.weight).
const NetConfig& supported(const NetConfig& config, int tile) {
  supported(config);
  const std::vector<int>& sizes = TensorForward::tiles();
  if (std::find(sizes.begin(), sizes.end(), tile) == sizes.end())
    throw UsageError("no tensor-core kernel for a tile of " + std::to_string(tile) +
                     " samples: the tiles are 16, 32 and 64");
  return config;
}

}  // namespace

TensorForward::TensorForward(const NetConfig& config, const ParamLayout& layout, int tile)
    : m_config(supported(config, tile)), m_offsets(offsets_of(layout)), m_tile(tile) {
  const KernelChoice choice = kernel_for(config, tile);
  prepare_tile_kernel(choice.kernel, choice.shared_bytes, tile);
  m_c3_mask = c3_mask_on_device(config);
}

void TensorForward::evaluate(const std::uint8_t* images, const std::uint8_t* labels, int n,
                             const float* params, const ModelGroup& group, double* loss,
                             std::int32_t* predicted, cudaStream_t stream, float* logits) const {
  if (n < 1) throw Error("internal: a tensor-core evaluation of no images");
  if (group.models < 1 || group.models > 65535)
    throw Error("internal: a tensor-core evaluation of " + std::to_string(group.models) +
                " models");
  const TileInputs in{images, n,         pixel_scaling(m_config.input_scaling),
                      params, m_offsets, m_c3_mask.data()};
  const TensorForwardArgs args{in, labels, group.params_stride, loss, predicted, logits};
  const KernelChoice choice = kernel_for(m_config, m_tile);
  const dim3 blocks(unsigned((n + m_tile - 1) / m_tile), unsigned(group.models));
  choice.kernel<<<blocks, kThreads, choice.shared_bytes, stream>>>(args);
  CUDA_CHECK_LAUNCH();
}

}  // namespace lenet5::cuda
