// The table of known data sets (MNIST, Fashion-MNIST) and its look-ups.
#include "data/datasets.hpp"

#include "core/error.hpp"

namespace lenet5 {

const std::vector<DatasetDescription>& datasets() {
  static const std::vector<DatasetDescription> table{
      {"mnist",
       "MNIST",
       "digit",
       "data/mnist",
       "run scripts/fetch_mnist.sh (an installed lenet5: lenet5-fetch-mnist) or pass --data DIR",
       {"train-images-idx3-ubyte",
        "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db", 0xE9F4D8B3},
       {"train-labels-idx1-ubyte",
        "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5", 0xE0CB4AD2},
       {"t10k-images-idx3-ubyte",
        "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7", 0x91373BDF},
       {"t10k-labels-idx1-ubyte",
        "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2", 0x4AB9EFF9},
       {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"},
       "mnist",
       "elastic"},
      // Zalando's Fashion-MNIST: 28x28 grey photographs of clothing in MNIST's file layout and
      // names (github.com/zalandoresearch/fashion-mnist); Debian's dataset-fashion-mnist.
      {"fashion-mnist",
       "Fashion-MNIST",
       "class",
       "data/fashion-mnist",
       "run scripts/fetch_mnist.sh --dataset fashion-mnist (an installed lenet5: lenet5-fetch-mnist "
       "--dataset fashion-mnist) or pass --data DIR",
       {"train-images-idx3-ubyte",
        "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888", 0xB4F29F28},
       {"train-labels-idx1-ubyte",
        "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9", 0x741A4657},
       {"t10k-images-idx3-ubyte",
        "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b", 0x678FE0B1},
       {"t10k-labels-idx1-ubyte",
        "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34", 0x80142C1F},
       {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
        "Ankle boot"},
       "fashion-mnist",
       "none"},
  };
  return table;
}

std::vector<std::string> dataset_names() {
  std::vector<std::string> names;
  for (const DatasetDescription& dataset : datasets()) names.push_back(dataset.name);
  return names;
}

const DatasetDescription& find_dataset(const std::string& name) {
  for (const DatasetDescription& dataset : datasets())
    if (dataset.name == name) return dataset;
  std::string known;
  for (const std::string& known_name : dataset_names())
    known += (known.empty() ? "" : ", ") + known_name;
  throw UsageError("unknown data set '" + name + "' (known: " + known + ")");
}

const DatasetDescription& mnist_dataset() { return find_dataset("mnist"); }

}  // namespace lenet5
