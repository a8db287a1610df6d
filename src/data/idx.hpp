// IDX files (the MNIST container format), plain or gzipped.
//
// Layout: a 4-byte magic (0x00, 0x00, element type 0x08 = unsigned byte, rank), then `rank`
// big-endian uint32 dimensions, then the elements row-major with no padding. Gzip is recognised
// by its 1f 8b magic, never by the file name.
//
// Every reader validates the whole file and throws lenet5::Error naming the file and the problem:
// wrong magic or rank, a header that promises more data than the file holds, bytes left over
// after the data, corrupt gzip. Memory grows only with data actually read, so a lying header
// cannot trigger a huge allocation.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace lenet5 {

struct IdxImages {
  int count = 0, rows = 0, cols = 0;
  std::vector<std::uint8_t> pixels;  // (count, rows, cols), row-major
};

// Magic 0x00000803. Any non-zero image size is accepted; callers check the size they need.
// If crc32 is given it receives the zlib CRC-32 of the uncompressed file contents, header
// included, so that a result can name the exact data it came from.
IdxImages read_idx_images(const std::filesystem::path& file, std::uint32_t* crc32 = nullptr);

// Magic 0x00000801; every label must be in 0..9. crc32 as for read_idx_images.
std::vector<std::uint8_t> read_idx_labels(const std::filesystem::path& file,
                                          std::uint32_t* crc32 = nullptr);

}  // namespace lenet5
