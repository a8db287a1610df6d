// IDX files (the MNIST container format), plain or gzipped.
//
// Layout: a 4-byte magic (0x00, 0x00, element type 0x08 = unsigned byte, rank), then `rank`
// big-endian uint32 dimensions, then the elements row-major with no padding. Gzip is recognised
// by its 1f 8b magic, never by the file name.
//
// Every reader validates the whole file and throws lenet5::Error naming the file and the problem:
// wrong magic or rank, a header that promises more data than the file holds or more than
// kMaxIdxDataBytes, bytes left over after the data, corrupt gzip. Memory grows only with data
// actually read, so a lying header cannot trigger a huge allocation, and inflating stops soon
// after the size the header declares, so a gzip bomb costs no more than the declared data.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace lenet5 {

// The most data one IDX file may declare: 256 MiB, 5.7 times MNIST's largest file (47 MB), 342k
// images of 28x28. It bounds what a header can make lenet5 read into memory, so that loading
// both splits of a data set (read at the same time) stays well under 1 GiB.
inline constexpr std::uint64_t kMaxIdxDataBytes = std::uint64_t{256} << 20;

// The two kinds of IDX file a data set uses; the value is the file's rank.
enum class IdxKind { labels = 1, images = 3 };

// An unsigned-byte IDX file decoded: its dimensions (as many as the kind's rank), its elements
// row-major, and the zlib CRC-32 of the uncompressed file contents, header included, so that a
// result can name the exact data it came from.
struct IdxArray {
  std::vector<int> dims;
  std::vector<std::uint8_t> data;
  std::uint32_t crc32 = 0;
};

// Reads and validates a whole file of the given kind. Images of any non-zero size are accepted;
// callers check the size they need.
IdxArray read_idx(const std::filesystem::path& file, IdxKind kind);

struct IdxImages {
  int count = 0, rows = 0, cols = 0;
  std::vector<std::uint8_t> pixels;  // (count, rows, cols), row-major
};

// An array of IdxKind::images as images.
IdxImages idx_images(IdxArray array);
// An array of IdxKind::labels as labels, after checking that each is in 0..9; `file` names the
// array's source in the error.
std::vector<std::uint8_t> idx_labels(IdxArray array, const std::filesystem::path& file);

// read_idx of magic 0x00000803 as images. If crc32 is given it receives the array's CRC-32.
IdxImages read_idx_images(const std::filesystem::path& file, std::uint32_t* crc32 = nullptr);

// read_idx of magic 0x00000801 as labels, each checked to be in 0..9. crc32 as above.
std::vector<std::uint8_t> read_idx_labels(const std::filesystem::path& file,
                                          std::uint32_t* crc32 = nullptr);

}  // namespace lenet5
