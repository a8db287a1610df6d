// Batch gather kernel (see batch.cuh for the contract).
#include <cstddef>

#include "cuda/kernels/batch.cuh"

#include "core/error.hpp"
#include "core/shapes.hpp"
#include "cuda/kernels/gather_sample.cuh"
#include "cuda/kernels/pixel.cuh"
#include "cuda/runtime/check.hpp"

namespace lenet5::cuda {
namespace {

constexpr int kGatherThreads = 256;
constexpr int kFieldPixels = kInputSide * kInputSide;  // 1,024
static_assert(kInputSide == kImageSide + 2 * kPad, "the input field is the padded MNIST image");

}  // namespace

__global__ void gather_batch_kernel1(const std::uint8_t* images, const std::uint8_t* labels,
                                     const std::int32_t* indices, PixelScaling scaling, float* out,
                                     std::uint8_t* labels_out) {
  const int i = blockIdx.x;
  const std::size_t source = indices ? std::size_t(indices[i]) : std::size_t(i);
  const std::uint8_t* image = images + source * kImageBytes;
  float* field = out + std::size_t(i) * kFieldPixels;  // (1, 32, 32)
  fill_input_field(image, /*border_only=*/false, scaling, BlockTeam{blockDim.x},
                   [field](int p, float value) { field[p] = value; });
  if (threadIdx.x == 0 && labels && labels_out) labels_out[i] = labels[source];
}

void gather_batch(const std::uint8_t* images, const std::uint8_t* labels,
                  const std::int32_t* indices, int n, PixelScaling scaling, float* out,
                  std::uint8_t* labels_out, cudaStream_t stream) {
  if (n == 0) return;
  gather_batch_kernel1<<<n, kGatherThreads, 0, stream>>>(images, labels, indices, scaling, out,
                                                         labels_out);
  CUDA_CHECK_LAUNCH();
}

__global__ void gather_augmented_batch_kernel(BatchGather batch) {
  // Raw storage: the struct's default member initialisers cannot run for __shared__ memory.
  __shared__ alignas(16) unsigned char storage[sizeof(AugmentScratch)];
  gather_batch_sample(batch, int(blockIdx.x), *reinterpret_cast<AugmentScratch*>(storage),
                      BlockTeam{blockDim.x});
}

void gather_augmented_batch(const std::uint8_t* images, const std::uint8_t* labels,
                            const std::int32_t* indices, int n,
                            const DeviceAugmentation& augmentation, PixelScaling scaling,
                            float* out, std::uint8_t* labels_out, cudaStream_t stream) {
  if (!indices || !augmentation.enabled() || !augmentation.epoch)
    throw Error("internal: an augmented gather needs indices, an augmentation and its epoch");
  if (n == 0) return;
  gather_augmented_batch_kernel<<<n, kGatherThreads, 0, stream>>>(
      BatchGather{images, labels, indices, augmentation, scaling, out, labels_out});
  CUDA_CHECK_LAUNCH();
}

void gather_training_batch(const BatchGather& batch, int n, cudaStream_t stream) {
  if (batch.augmentation.enabled())
    gather_augmented_batch(batch.images, batch.labels, batch.indices, n, batch.augmentation,
                           batch.scaling, batch.field, batch.labels_out, stream);
  else
    gather_batch(batch.images, batch.labels, batch.indices, n, batch.scaling, batch.field,
                 batch.labels_out, stream);
}

}  // namespace lenet5::cuda
