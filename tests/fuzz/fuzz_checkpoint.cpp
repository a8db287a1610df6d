// The safetensors checkpoint loader: the header's JSON, the tensors' offsets, dtypes and shapes,
// and the settings in the metadata (`evaluate`, `classify`, `serve` and `train --resume` read it).
#include "fuzz_util.hpp"
#include "train/checkpoint.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace lenet5;
  const auto file = fuzz::as_file(data, size, "checkpoint.safetensors");
  fuzz::refusals_allowed([&] { load_checkpoint(file); });
  return 0;
}
