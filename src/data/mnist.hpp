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
  // The training images held out to choose the best epoch on (hold_out_validation), once a
  // trainer has held them out of `train`; empty otherwise.
  Dataset validation;
};

// The --data flag if given, else $LENET5_DATA, else the data set's folder ("data/mnist",
// relative to the working folder).
std::filesystem::path resolve_data_dir(const std::string& flag_value,
                                       const DatasetDescription& dataset = mnist_dataset());

enum class Split { train, test };

// The table's data set whose `split` files have the CRC-32s of `data`, or nullptr when they are
// none of the table's (a subset, or another set in the same layout): which data set a folder holds.
const DatasetDescription* recognise_dataset(const Dataset& data, Split split);
// Throws Error when `data`, read from `dir` for `expected`, is recognisably another data set's
// (--dataset fashion-mnist with $LENET5_DATA at MNIST's folder, say), saying how to fix it.
void require_dataset_files(const DatasetDescription& expected, const Dataset& data, Split split,
                           const std::filesystem::path& dir);

// The test set that `lenet5 evaluate` and the runs view score a `requested` checkpoint on: read
// from resolve_data_dir(data_flag, requested), and named by its checksums, since a folder (or
// $LENET5_DATA) may hold another data set's files than the one asked for.
struct FoundTestSet {
  Dataset test;
  std::filesystem::path dir;  // where it was read from
  // The table's data set whose test files these are (recognise_dataset), else `requested`: a
  // subset, or a set of one's own, carries none of the table's checksums.
  const DatasetDescription* dataset = nullptr;
};
FoundTestSet find_test_set(const DatasetDescription& requested, const std::string& data_flag);

// Reads one split's two files from dir, each plain or with .gz (the plain file wins when both
// exist; a gzipped one is read through its cache, data/idx_cache.hpp). Throws lenet5::Error if a
// file is missing or invalid, if images are not 28x28, or if image and label counts disagree.
Dataset load_split(const DatasetDescription& dataset, const std::filesystem::path& dir,
                   Split split);
// Both splits, read at the same time; the training split's error first if both fail.
Mnist load_dataset(const DatasetDescription& dataset, const std::filesystem::path& dir);
// load_dataset of MNIST: train-{images-idx3,labels-idx1}-ubyte and t10k-{...}.
Mnist load_mnist(const std::filesystem::path& dir);

// The training images held out to choose the best epoch on (--validation), so that nothing is
// chosen on the test set: the last `count` images of the training split. The rule is fixed per
// data set, not drawn from the seed, so every run and every model of a sweep holds out the same
// images and their validation accuracies compare. Both parts keep the files' checksums, which
// name the data a checkpoint was trained from.
inline constexpr int kDefaultValidationImages = 5000;
struct HeldOut {
  Dataset train;       // the first train.count - count images
  Dataset validation;  // the last count (empty for 0)
};
// UsageError when count is negative or leaves fewer than one training image.
HeldOut hold_out_validation(Dataset train, int count);

}  // namespace lenet5
