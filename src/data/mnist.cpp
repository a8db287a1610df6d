#include "data/mnist.hpp"

#include <cstdlib>
#include <system_error>
#include <utility>

#include "core/error.hpp"
#include "data/idx.hpp"

namespace lenet5 {
namespace {

constexpr const char* kFetchHint = "run scripts/fetch_mnist.sh or pass --data DIR";

std::filesystem::path find_file(const std::filesystem::path& dir, const std::string& name) {
  std::error_code ec;
  for (const std::string& candidate : {name, name + ".gz"}) {
    if (std::filesystem::exists(dir / candidate, ec)) return dir / candidate;
  }
  throw Error("MNIST not found in " + dir.string() + " (missing " + name + "[.gz]): " + kFetchHint);
}

Dataset load_split(const std::filesystem::path& dir, const std::string& prefix) {
  const std::filesystem::path images_file = find_file(dir, prefix + "-images-idx3-ubyte");
  const std::filesystem::path labels_file = find_file(dir, prefix + "-labels-idx1-ubyte");
  Dataset split;
  IdxImages images = read_idx_images(images_file, &split.images_crc32);
  if (images.rows != kImageSide || images.cols != kImageSide) {
    throw Error(images_file.string() + ": images are " + std::to_string(images.rows) + "x" +
                std::to_string(images.cols) + ", expected 28x28 (MNIST)");
  }
  if (images.count == 0) throw Error(images_file.string() + ": holds no images");
  split.labels = read_idx_labels(labels_file, &split.labels_crc32);
  if (split.labels.size() != static_cast<std::size_t>(images.count)) {
    throw Error("image and label counts disagree: " + images_file.string() + " has " +
                std::to_string(images.count) + " images but " + labels_file.string() + " has " +
                std::to_string(split.labels.size()) + " labels");
  }
  split.count = images.count;
  split.images = std::move(images.pixels);
  return split;
}

}  // namespace

std::filesystem::path resolve_data_dir(const std::string& flag_value) {
  if (!flag_value.empty()) return flag_value;
  const char* env = std::getenv("LENET5_DATA");
  if (env != nullptr && *env != '\0') return env;
  return "data/mnist";
}

Mnist load_mnist(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    throw Error("MNIST not found in " + dir.string() + " (no such directory): " + kFetchHint);
  }
  Mnist mnist;
  mnist.train = load_split(dir, "train");
  mnist.test = load_split(dir, "t10k");
  return mnist;
}

}  // namespace lenet5
