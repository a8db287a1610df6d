// safetensors (https://github.com/huggingface/safetensors), F32 only: the checkpoint format, so
// that PyTorch, JAX and numpy users can open our weights with their own tools.
//
// Layout: an 8-byte little-endian u64 N, then N bytes of UTF-8 JSON mapping each tensor name to
// {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]} plus an optional
// "__metadata__" string->string map, then the data area. Offsets are relative to the start of
// the data area; tensors tile it exactly (no gaps, no overlaps, nothing left over).
//
// The reader is strict: anything the format forbids, or that this program cannot represent
// (any dtype but F32), is refused with lenet5::Error naming the file and the problem.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace lenet5 {

// A tensor to be written; `data` holds product(shape) floats (1 for the scalar shape []).
struct TensorView {
  std::string name;
  std::vector<std::int64_t> shape;
  const float* data;
};

using Metadata = std::map<std::string, std::string>;

struct Tensor32 {
  std::vector<std::int64_t> shape;
  std::vector<float> values;
};

struct SafetensorsFile {
  Metadata metadata;
  std::map<std::string, Tensor32> tensors;
};

// Headers larger than this are refused before anything is allocated (the reference
// implementation uses the same limit).
inline constexpr std::uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

// The whole file as bytes. Tensors are laid out in name order with contiguous offsets from 0;
// the header is padded with spaces to a multiple of 8 bytes; empty metadata is left out.
std::string encode_safetensors(const std::vector<TensorView>& tensors, const Metadata& metadata);

// Parses and validates a complete file image; `name_for_errors` starts every error message.
SafetensorsFile decode_safetensors(std::string_view bytes, const std::string& name_for_errors);

// encode_safetensors + write_file_atomically.
void write_safetensors(const std::filesystem::path& file, const std::vector<TensorView>& tensors,
                       const Metadata& metadata);

// Files larger than this are refused before they are read whole: lenet5 reads only its own
// checkpoints, which hold under 1 MB (LeNet-5's 61,706 parameters and their optimizer state).
// With this bound, no header or data such a file can hold makes decoding it need more than a few
// hundred MB (a 16 MB JSON array of numbers is the worst case).
inline constexpr std::uint64_t kSafetensorsMaxFileBytes = std::uint64_t{16} << 20;

// Reads the file (refusing one over kSafetensorsMaxFileBytes, a device or pipe without end
// included) and calls decode_safetensors with the path as the name for errors.
SafetensorsFile read_safetensors(const std::filesystem::path& file);

}  // namespace lenet5
