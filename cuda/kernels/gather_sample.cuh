// One sample of a training batch as the network's input field, by one block: the code path of the
// kernels that gather an augmented batch (gather_augmented_batch's kernel, cuda/kernels/batch.cu;
// the tensor-core convolutions' forward kernel, cuda/engine/tensor_conv_backward.cu, which gathers
// its step's batch itself), so that they give the same bits (tested). gather_batch's kernel, which
// never augments and so has no scratch, calls fill_input_field alone, as this does without an
// augmentation. Whole-step's load_image (cuda/engine/whole_step_forward.cuh) spells the same two
// calls out: calling this from it made its sample kernels, whose registers are capped at 64, spill
// more (nvcc for sm_90, -Xptxas -v).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/shapes.hpp"
#include "cuda/kernels/augment.cuh"
#include "cuda/kernels/pixel.cuh"

namespace lenet5::cuda {

// images[source] (28 x 28 bytes) normalised under `scaling` and padded by 2 (fill_input_field),
// augmented first where `augmentation` is enabled (augment_sample, keyed by `source`, its scratch
// in shared memory): store(i, value) for each of the field's 32 x 32 values, by the block's
// `threads` threads.
template <class Store>
__device__ void gather_sample(const std::uint8_t* images, std::uint32_t source,
                              const DeviceAugmentation& augmentation, PixelScaling scaling,
                              AugmentScratch& scratch, int threads, Store store) {
  const std::uint8_t* image = images + std::size_t(source) * kImageBytes;
  const bool augmented = augmentation.enabled();
  fill_input_field(image, /*border_only=*/augmented, scaling, threads, store);
  if (augmented)
    augment_sample(image, augmentation, source, scratch, [&store, scaling](int p, float grey) {
      store(field_index(p), normalise_intensity_device(grey, scaling));
    });
}

}  // namespace lenet5::cuda
