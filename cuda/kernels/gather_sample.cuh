// One sample of a training batch as the network's input field, by one team of threads (a block):
// the code path of gather_augmented_batch's kernel (cuda/kernels/batch.cu), which gathers every
// training batch that the layer-by-layer and tensor-core kernel sets read. gather_batch's kernel,
// which never augments and so has no scratch, calls fill_input_field alone, as this does without an
// augmentation. Whole-step's load_image (cuda/engine/whole_step_forward.cuh) spells the same two
// calls out: calling this from it made its sample kernels, whose registers are capped at 64, spill
// more (nvcc for sm_90, -Xptxas -v).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/shapes.hpp"
#include "cuda/kernels/augment.cuh"
#include "cuda/kernels/batch.cuh"
#include "cuda/kernels/pixel.cuh"

namespace lenet5::cuda {

// images[source] (28 x 28 bytes) normalised under `scaling` and padded by 2 (fill_input_field),
// augmented first where `augmentation` is enabled (augment_sample, keyed by `source`, its scratch
// in shared memory): store(i, value) for each of the field's 32 x 32 values, by `team` (the whole
// block: cuda/kernels/block_team.cuh).
template <class Store>
__device__ void gather_sample(const std::uint8_t* images, std::uint32_t source,
                              const DeviceAugmentation& augmentation, PixelScaling scaling,
                              AugmentScratch& scratch, const BlockTeam& team, Store store) {
  const std::uint8_t* image = images + std::size_t(source) * kImageBytes;
  const bool augmented = augmentation.enabled();
  fill_input_field(image, /*border_only=*/augmented, scaling, team, store);
  if (augmented)
    augment_sample(image, augmentation, source, scratch, team,
                   [&store, scaling](int p, float grey) {
                     store(field_index(p), normalise_intensity_device(grey, scaling));
                   });
}

// batch's sample `sample` (BatchGather) by `team`: its field through gather_sample into its row of
// batch.field, and its label into batch.labels_out where both label pointers are set.
__device__ inline void gather_batch_sample(const BatchGather& batch, int sample,
                                           AugmentScratch& scratch, const BlockTeam& team) {
  const std::uint32_t source = std::uint32_t(batch.indices[sample]);
  float* row = batch.field + std::size_t(sample) * kInputFloats;
  gather_sample(batch.images, source, batch.augmentation, batch.scaling, scratch, team,
                [row](int i, float value) { row[i] = value; });
  if (team.thread() == 0 && batch.labels && batch.labels_out)
    batch.labels_out[sample] = batch.labels[source];
}

}  // namespace lenet5::cuda
