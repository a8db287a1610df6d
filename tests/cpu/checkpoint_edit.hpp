// The checkpoint tests' one way to test a refusal: a saved checkpoint rewritten with one change,
// and what load_checkpoint says of it.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "io/safetensors.hpp"
#include "test_util.hpp"
#include "train/checkpoint.hpp"

namespace lenet5::testing {

using Tensors = std::map<std::string, Tensor32>;

// The loader's complaint about `file` ("" when it loads).
inline std::string load_error(const fs::path& file) {
  try {
    load_checkpoint(file);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Writes `original` changed by `edit` to dir/bad.safetensors and returns the loader's complaint.
// Its metadata's tensors_xxh64 stays as it was unless `edit` removes it.
inline std::string complaint(const TempDir& dir, const SafetensorsFile& original,
                             const std::function<void(Tensors&, Metadata&)>& edit) {
  Tensors tensors = original.tensors;
  Metadata metadata = original.metadata;
  edit(tensors, metadata);
  std::vector<TensorView> views;
  for (const auto& [name, t] : tensors) views.push_back({name, t.shape, t.values.data()});
  write_safetensors(dir / "bad.safetensors", views, metadata);
  return load_error(dir / "bad.safetensors");
}

// The same with the checksum removed first, for edits of the tensors' data that should be refused
// for what they say rather than for no longer matching it.
inline std::string complaint_without_checksum(
    const TempDir& dir, const SafetensorsFile& original,
    const std::function<void(Tensors&, Metadata&)>& edit) {
  return complaint(dir, original, [&](Tensors& tensors, Metadata& metadata) {
    metadata.erase("tensors_xxh64");
    edit(tensors, metadata);
  });
}

}  // namespace lenet5::testing
