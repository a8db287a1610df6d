// The IDX readers, plain and gzipped (gzip is told by its magic, not the name), as images and as
// labels: the files `lenet5 train` and `evaluate` read from the data folder.
#include "data/idx.hpp"
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace lenet5;
  const auto file = fuzz::as_file(data, size, "data-ubyte");
  fuzz::refusals_allowed([&] { read_idx_images(file); });
  fuzz::refusals_allowed([&] { read_idx_labels(file); });
  return 0;
}
