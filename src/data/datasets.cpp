#include "data/datasets.hpp"

#include "core/error.hpp"

namespace lenet5 {

const std::vector<DatasetDescription>& datasets() {
  static const std::vector<DatasetDescription> table{
      {"mnist",
       "MNIST",
       "data/mnist",
       "run scripts/fetch_mnist.sh or pass --data DIR",
       {"train-images-idx3-ubyte",
        "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db"},
       {"train-labels-idx1-ubyte",
        "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5"},
       {"t10k-images-idx3-ubyte",
        "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7"},
       {"t10k-labels-idx1-ubyte",
        "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2"},
       {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}},
  };
  return table;
}

const DatasetDescription& find_dataset(const std::string& name) {
  std::string known;
  for (const DatasetDescription& dataset : datasets()) {
    if (dataset.name == name) return dataset;
    known += (known.empty() ? "" : ", ") + dataset.name;
  }
  throw UsageError("unknown data set '" + name + "' (known: " + known + ")");
}

const DatasetDescription& mnist_dataset() { return find_dataset("mnist"); }

}  // namespace lenet5
