// A data folder of MNIST's first few training and test images, as plain IDX files, for tests
// that run the real program many times: an epoch and its evaluation take milliseconds.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "data/datasets.hpp"
#include "data/mnist.hpp"
#include "test_util.hpp"

namespace lenet5::testing {

inline void write_idx(const std::filesystem::path& file, std::vector<std::uint32_t> dims,
                      const std::uint8_t* data) {
  std::string bytes{0, 0, 8, char(dims.size())};
  std::size_t n = 1;
  for (std::uint32_t dim : dims) {
    for (int shift : {24, 16, 8, 0}) bytes.push_back(char((dim >> shift) & 0xFF));
    n *= dim;
  }
  bytes.append(reinterpret_cast<const char*>(data), n);
  std::ofstream(file, std::ios::binary) << bytes;
}

// Writes the first `train_images` and `test_images` of MNIST (testing::mnist_dir()) into `dir`
// under MNIST's file names, and returns them.
inline Mnist write_tiny_mnist(const std::filesystem::path& dir, int train_images, int test_images) {
  const Mnist full = load_mnist(mnist_dir());
  std::filesystem::create_directories(dir);
  const DatasetDescription& names = mnist_dataset();
  Mnist tiny;
  for (auto [split, from, count, images, labels] :
       {std::tuple{&tiny.train, &full.train, train_images, names.train_images.name,
                   names.train_labels.name},
        std::tuple{&tiny.test, &full.test, test_images, names.test_images.name,
                   names.test_labels.name}}) {
    split->count = count;
    split->images.assign(from->images.begin(), from->images.begin() + count * 28 * 28);
    split->labels.assign(from->labels.begin(), from->labels.begin() + count);
    write_idx(dir / images, {std::uint32_t(count), 28, 28}, split->images.data());
    write_idx(dir / labels, {std::uint32_t(count)}, split->labels.data());
  }
  return tiny;
}

// Writes a made-up data set in MNIST's layout and file names into `dir`, `train_images` and
// `test_images` large, for tests of a data set other than MNIST (--dataset fashion-mnist): class k
// is a bright bar across rows 2k+4 and 2k+5, shifted sideways from image to image. Its checksums
// are none of the data sets' table, so it passes for whichever data set a test names.
inline void write_tiny_striped_set(const std::filesystem::path& dir, int train_images,
                                   int test_images) {
  std::filesystem::create_directories(dir);
  const DatasetDescription& names = mnist_dataset();
  for (auto [count, images_name, labels_name] :
       {std::tuple{train_images, names.train_images.name, names.train_labels.name},
        std::tuple{test_images, names.test_images.name, names.test_labels.name}}) {
    std::vector<std::uint8_t> images(std::size_t(count) * 28 * 28, 0), labels;
    for (int i = 0; i < count; ++i) {
      const int k = i % 10, shift = i % 5;
      labels.push_back(std::uint8_t(k));
      for (int row = 2 * k + 4; row < 2 * k + 6; ++row)
        for (int col = 2 + shift; col < 22 + shift; ++col)
          images[std::size_t(i) * 28 * 28 + std::size_t(row) * 28 + std::size_t(col)] = 255;
    }
    write_idx(dir / images_name, {std::uint32_t(count), 28, 28}, images.data());
    write_idx(dir / labels_name, {std::uint32_t(count)}, labels.data());
  }
}

}  // namespace lenet5::testing
