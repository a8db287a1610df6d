// Finding a data set's folder and files and loading its training and test splits.
#include "data/mnist.hpp"

#include <cstdlib>
#include <future>
#include <system_error>
#include <utility>

#include "core/error.hpp"
#include "data/idx.hpp"
#include "data/idx_cache.hpp"

namespace lenet5 {
namespace {

std::filesystem::path find_file(const DatasetDescription& dataset,
                                const std::filesystem::path& dir, const std::string& name) {
  std::error_code ec;
  for (const std::string& candidate : {name, name + ".gz"}) {
    if (std::filesystem::exists(dir / candidate, ec)) return dir / candidate;
  }
  throw Error(dataset.title + " not found in " + dir.string() + " (missing " + name +
              "[.gz]): " + dataset.fetch_hint);
}

Dataset read_split_files(const DatasetDescription& dataset, const std::filesystem::path& dir,
                         const DataFile& images_name, const DataFile& labels_name) {
  const std::filesystem::path images_file = find_file(dataset, dir, images_name.name);
  const std::filesystem::path labels_file = find_file(dataset, dir, labels_name.name);
  Dataset split;
  IdxArray image_array = read_idx_cached(images_file, IdxKind::images);
  split.images_crc32 = image_array.crc32;
  IdxImages images = idx_images(std::move(image_array));
  if (images.rows != kImageSide || images.cols != kImageSide) {
    throw Error(images_file.string() + ": images are " + std::to_string(images.rows) + "x" +
                std::to_string(images.cols) + ", expected 28x28 (" + dataset.title + ")");
  }
  if (images.count == 0) throw Error(images_file.string() + ": holds no images");
  IdxArray label_array = read_idx_cached(labels_file, IdxKind::labels);
  split.labels_crc32 = label_array.crc32;
  split.labels = idx_labels(std::move(label_array), labels_file);
  if (split.labels.size() != static_cast<std::size_t>(images.count)) {
    throw Error("image and label counts disagree: " + images_file.string() + " has " +
                std::to_string(images.count) + " images but " + labels_file.string() + " has " +
                std::to_string(split.labels.size()) + " labels");
  }
  split.count = images.count;
  split.images = std::move(images.pixels);
  return split;
}

void require_directory(const DatasetDescription& dataset, const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    throw Error(dataset.title + " not found in " + dir.string() +
                " (no such directory): " + dataset.fetch_hint);
  }
}

}  // namespace

std::filesystem::path resolve_data_dir(const std::string& flag_value,
                                       const DatasetDescription& dataset) {
  if (!flag_value.empty()) return flag_value;
  const char* env = std::getenv("LENET5_DATA");
  if (env != nullptr && *env != '\0') return env;
  return dataset.folder;
}

const DatasetDescription* recognise_dataset(const Dataset& data, Split split) {
  for (const DatasetDescription& dataset : datasets()) {
    const bool train = split == Split::train;
    const DataFile& images = train ? dataset.train_images : dataset.test_images;
    const DataFile& labels = train ? dataset.train_labels : dataset.test_labels;
    if (data.images_crc32 == images.crc32 && data.labels_crc32 == labels.crc32) return &dataset;
  }
  return nullptr;
}

void require_dataset_files(const DatasetDescription& expected, const Dataset& data, Split split,
                           const std::filesystem::path& dir) {
  const DatasetDescription* found = recognise_dataset(data, split);
  if (found == nullptr || found == &expected) return;
  throw Error(dir.string() + " holds " + found->title + "'s files, not " + expected.title +
              "'s: pass --data with the " + expected.title + " folder, or --dataset " +
              found->name + " to use " + found->title);
}

Dataset load_split(const DatasetDescription& dataset, const std::filesystem::path& dir,
                   Split split) {
  require_directory(dataset, dir);
  return split == Split::train
             ? read_split_files(dataset, dir, dataset.train_images, dataset.train_labels)
             : read_split_files(dataset, dir, dataset.test_images, dataset.test_labels);
}

FoundTestSet find_test_set(const DatasetDescription& requested, const std::string& data_flag) {
  FoundTestSet found;
  found.dir = resolve_data_dir(data_flag, requested);
  found.test = load_split(requested, found.dir, Split::test);
  const DatasetDescription* recognised = recognise_dataset(found.test, Split::test);
  found.dataset = recognised != nullptr ? recognised : &requested;
  return found;
}

Mnist load_dataset(const DatasetDescription& dataset, const std::filesystem::path& dir) {
  require_directory(dataset, dir);
  // The test split is read on a second thread while this one reads the training split, six
  // times larger: its time disappears from the run's start-up.
  std::future<Dataset> test =
      std::async(std::launch::async, [&] { return load_split(dataset, dir, Split::test); });
  Mnist data;
  data.train = load_split(dataset, dir, Split::train);
  data.test = test.get();
  return data;
}

Mnist load_mnist(const std::filesystem::path& dir) { return load_dataset(mnist_dataset(), dir); }

HeldOut hold_out_validation(Dataset train, int count) {
  if (count < 0 || count >= train.count) {
    throw UsageError("--validation " + std::to_string(count) + " must hold out between 0 and " +
                     std::to_string(train.count - 1) + " of the " + std::to_string(train.count) +
                     " training images (0: choose no best epoch, keep only the last)");
  }
  HeldOut parts;
  parts.validation.count = count;
  parts.validation.images_crc32 = train.images_crc32;
  parts.validation.labels_crc32 = train.labels_crc32;
  const int kept = train.count - count;
  const auto image_split = train.images.begin() + std::ptrdiff_t(kept) * kImageBytes;
  parts.validation.images.assign(image_split, train.images.end());
  parts.validation.labels.assign(train.labels.begin() + kept, train.labels.end());
  train.images.erase(image_split, train.images.end());
  train.labels.resize(std::size_t(kept));
  train.count = kept;
  parts.train = std::move(train);
  return parts;
}

}  // namespace lenet5
