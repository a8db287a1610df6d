// `train --augment-preview` (train/augment_preview.hpp): the sheet's size, the stored images in its
// first column, and augmented ones beside them that differ from epoch to epoch.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <vector>

#include "core/error.hpp"
#include "data/mnist.hpp"
#include "image/image_io.hpp"
#include "test_util.hpp"
#include "train/augment_preview.hpp"

namespace lenet5 {
namespace {

namespace fs = std::filesystem;

constexpr int kCell = kImageSide * kPreviewZoom, kGap = 4;

// Ten images, each a bar at its own place, so every row of the sheet is told apart.
Dataset bars() {
  Dataset data;
  data.count = 10;
  data.images.assign(std::size_t(data.count) * kImageBytes, 0);
  data.labels.assign(std::size_t(data.count), 0);
  for (int i = 0; i < data.count; ++i)
    for (int y = 6; y < 22; ++y)
      for (int x = 4 + 2 * i; x < 7 + 2 * i; ++x)
        data.images[std::size_t(i) * kImageBytes + std::size_t(y * kImageSide + x)] = 255;
  return data;
}

// The 28 x 28 image drawn in cell (row, column), read back at the centre of each zoomed pixel.
std::vector<std::uint8_t> cell(const GrayImage& sheet, int row, int column) {
  std::vector<std::uint8_t> out(kImageBytes);
  const int left = kGap + column * (kCell + kGap), top = kGap + row * (kCell + kGap);
  for (int y = 0; y < kImageSide; ++y)
    for (int x = 0; x < kImageSide; ++x)
      out[std::size_t(y * kImageSide + x)] = std::uint8_t(std::lround(
          255 * sheet.pixels[std::size_t(top + y * kPreviewZoom + 1) * sheet.width + left +
                             x * kPreviewZoom + 1]));
  return out;
}

TEST(AugmentPreview, FirstColumnIsTheStoredImageAndTheOthersItsAugmentations) {
  const testing::TempDir dir;
  const fs::path file = dir.path() / "preview.png";
  TrainSettings settings;
  settings.augment = "elastic";
  const Dataset data = bars();
  write_augment_preview(settings, data, file);

  const GrayImage sheet = load_gray_image(file);
  EXPECT_EQ(sheet.width, kGap + (1 + kPreviewEpochs) * (kCell + kGap));
  EXPECT_EQ(sheet.height, kGap + kPreviewRows * (kCell + kGap));
  const std::vector<std::int32_t> order = epoch_permutation(settings.seed, 0, data.count);
  for (int row = 0; row < kPreviewRows; ++row) {
    const auto* stored = data.images.data() + std::size_t(order[std::size_t(row)]) * kImageBytes;
    EXPECT_EQ(cell(sheet, row, 0), std::vector<std::uint8_t>(stored, stored + kImageBytes))
        << "row " << row;
    EXPECT_NE(cell(sheet, row, 1), cell(sheet, row, 0)) << "row " << row << ": not augmented";
    EXPECT_NE(cell(sheet, row, 2), cell(sheet, row, 1)) << "row " << row << ": same each epoch";
  }
}

TEST(AugmentPreview, WithoutAugmentationEveryColumnIsTheStoredImage) {
  const testing::TempDir dir;
  const fs::path file = dir.path() / "preview.png";
  TrainSettings settings;
  settings.augment = "none";
  write_augment_preview(settings, bars(), file);
  const GrayImage sheet = load_gray_image(file);
  for (int column = 1; column <= kPreviewEpochs; ++column)
    EXPECT_EQ(cell(sheet, 0, column), cell(sheet, 0, 0)) << "column " << column;
}

TEST(AugmentPreview, OutOfRangeSettingsAndTinyDataSetsAreUsageErrors) {
  const testing::TempDir dir;
  TrainSettings settings;
  settings.augment = "elastic";
  settings.elastic_sigma = -1;
  EXPECT_THROW(write_augment_preview(settings, bars(), dir.path() / "a.png"), UsageError);
  Dataset tiny = bars();
  tiny.count = 3;
  EXPECT_THROW(write_augment_preview(TrainSettings(), tiny, dir.path() / "b.png"), UsageError);
}

}  // namespace
}  // namespace lenet5
