// The data sets lenet5 knows, each a named description in one table (data/datasets.cpp): its
// four IDX files with their SHA-256 checksums, and the names of its classes. The loader
// (data/mnist.hpp) reads the files a description names; `evaluate` and `classify` print its class
// names. Adding a data set in the same four-file layout is one entry there, plus its test.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lenet5 {

struct DataFile {
  std::string name;    // in the data folder, plain or with .gz appended
  std::string sha256;  // of the uncompressed file, as scripts/fetch_mnist.sh checks it
  // Of the uncompressed file too: the loader computes it anyway (Dataset::images_crc32), so it
  // tells which data set a folder holds without hashing the files again.
  std::uint32_t crc32;
};

struct DatasetDescription {
  std::string name;        // how the code asks for it: "mnist"
  std::string title;       // how messages name it: "MNIST"
  std::string class_noun;  // what the tables call one class: "digit"
  std::string folder;      // its default folder, relative to the working folder
  std::string fetch_hint;  // how to get the files, for the error when they are missing
  DataFile train_images, train_labels, test_images, test_labels;
  std::vector<std::string> class_names;  // label k is class_names[k]
  // The input scaling (core/net_config.hpp's names) that --input-scaling dataset chooses: the
  // data set's own training-set statistics.
  std::string input_scaling;
  // The augmentation (data/augment.hpp's names) that --augment dataset chooses. MNIST's is
  // elastic: Simard's distortions model how hands vary a stroke. Fashion-MNIST's is none: its
  // photographs are centred and upright, and the digits' distortions cost accuracy there
  // (measured over 5 seeds of the default training: the mean test accuracy is highest without
  // augmentation, lower with affine, lowest with elastic).
  std::string augment;
};

// Every data set, in table order.
const std::vector<DatasetDescription>& datasets();
// The description called `name`; throws UsageError naming the known ones otherwise.
const DatasetDescription& find_dataset(const std::string& name);
// Every entry's name, in table order: the values --dataset accepts.
std::vector<std::string> dataset_names();
// MNIST: the default data set, and that of checkpoints that do not record one.
const DatasetDescription& mnist_dataset();

}  // namespace lenet5
