// The augmentation preview: six training images, each as stored and as augmented in seven epochs.
#include "train/augment_preview.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "data/augment.hpp"
#include "pictures/image.hpp"

namespace lenet5 {
namespace {

constexpr int kCell = kImageSide * kPreviewZoom;  // one image's side on the sheet
constexpr int kGap = 4;                           // grey lines between the images
constexpr std::uint8_t kGapGrey = 96;

// Draws a 28 x 28 grey image (0..255, not rounded) zoomed into cell (row, column) of the sheet.
void draw_cell(const double* grey, int row, int column, int width,
               std::vector<std::uint8_t>& sheet) {
  const int left = kGap + column * (kCell + kGap), top = kGap + row * (kCell + kGap);
  for (int y = 0; y < kCell; ++y)
    for (int x = 0; x < kCell; ++x) {
      const double value = grey[(y / kPreviewZoom) * kImageSide + x / kPreviewZoom];
      sheet[std::size_t(top + y) * width + left + x] =
          std::uint8_t(std::lround(std::clamp(value, 0.0, 255.0)));
    }
}

}  // namespace

void write_augment_preview(const TrainSettings& settings, const Dataset& train,
                           const std::filesystem::path& file) {
  const Augmentation augmentation = settings.augmentation();
  if (train.count < kPreviewRows)
    throw UsageError("--augment-preview needs at least " + std::to_string(kPreviewRows) +
                     " training images, the data set has " + std::to_string(train.count));
  const int columns = 1 + kPreviewEpochs, rows = kPreviewRows;
  const int width = kGap + columns * (kCell + kGap), height = kGap + rows * (kCell + kGap);
  std::vector<std::uint8_t> sheet(std::size_t(width) * height, kGapGrey);
  const std::vector<std::int32_t> order = epoch_permutation(settings.seed, 0, train.count);
  double grey[kImageBytes];
  for (int row = 0; row < rows; ++row) {
    const std::uint32_t sample = std::uint32_t(order[std::size_t(row)]);
    const std::uint8_t* image = train.images.data() + std::size_t(sample) * kImageBytes;
    std::copy(image, image + kImageBytes, grey);
    draw_cell(grey, row, 0, width, sheet);
    for (int epoch = 0; epoch < kPreviewEpochs; ++epoch) {
      augment_image_cpu(image, augmentation.settings, augmentation.seed, std::uint32_t(epoch),
                        sample, grey);
      draw_cell(grey, row, 1 + epoch, width, sheet);
    }
  }
  pictures::write_gray_png(file, width, height, sheet);
}

}  // namespace lenet5
