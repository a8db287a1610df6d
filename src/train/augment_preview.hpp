// `lenet5 train --augment-preview FILE`: a PNG of what the network is shown. Six training images,
// each in a row: the image as stored, then as augmented in epochs 1 to 7 under the run's settings
// (the CPU reference of data/augment.hpp, the transform every engine applies).
#pragma once

#include <filesystem>

#include "data/mnist.hpp"
#include "train/settings.hpp"

namespace lenet5 {

constexpr int kPreviewRows = 6;
constexpr int kPreviewEpochs = 7;  // augmented copies per row, after the original
constexpr int kPreviewZoom = 3;    // each image pixel drawn as a 3 x 3 block

// Writes the sheet of the first kPreviewRows images of epoch 1's order. UsageError for settings
// out of range; Error when the file cannot be written.
void write_augment_preview(const TrainSettings& settings, const Dataset& train,
                           const std::filesystem::path& file);

}  // namespace lenet5
