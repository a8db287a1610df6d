// MNIST (or any data set in its four-file IDX layout, such as Fashion-MNIST) loaded into memory,
// from the files its description names (data/datasets.hpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/shapes.hpp"
#include "data/datasets.hpp"

namespace lenet5 {

struct Dataset {
  int count = 0;
  std::vector<std::uint8_t> images;  // (count, 28, 28), row-major, 0 = background
  std::vector<std::uint8_t> labels;  // (count), values 0..9
  // CRC-32 of the uncompressed IDX files, header included, so a checkpoint can name its data.
  std::uint32_t images_crc32 = 0, labels_crc32 = 0;
};

struct Mnist {
  Dataset train, test;
};

// The --data flag if given, else $LENET5_DATA, else MNIST's folder "data/mnist" (relative to the
// working folder).
std::filesystem::path resolve_data_dir(const std::string& flag_value);

enum class Split { train, test };

// Reads one split's two files from dir, each plain or with .gz (the plain file wins when both
// exist; a gzipped one is read through its cache, data/idx_cache.hpp). Throws lenet5::Error if a
// file is missing or invalid, if images are not 28x28, or if image and label counts disagree.
Dataset load_split(const DatasetDescription& dataset, const std::filesystem::path& dir,
                   Split split);
// Both splits, read at the same time; the training split's error first if both fail.
Mnist load_dataset(const DatasetDescription& dataset, const std::filesystem::path& dir);
// load_dataset of MNIST: train-{images-idx3,labels-idx1}-ubyte and t10k-{...}.
Mnist load_mnist(const std::filesystem::path& dir);

}  // namespace lenet5
