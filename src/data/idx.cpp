// Reading IDX files, plain or gzipped, with every header field checked against the file's size.
#include "data/idx.hpp"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "core/error.hpp"

namespace lenet5 {
namespace {

constexpr std::uint8_t kUnsignedByte = 0x08;
// kMaxIdxDataBytes also keeps every dimension and their product inside `int`, so a corrupt
// header fails here instead of overflowing later.
static_assert(kMaxIdxDataBytes <= INT_MAX, "IDX dimensions are held as int");
constexpr std::size_t kChunkBytes = std::size_t{1} << 20;
// Bytes after the data are counted up to this many for the error message, not to the end: a
// gzip bomb behind a small header would otherwise be inflated in full just to be counted.
constexpr std::uint64_t kMaxTrailingCount = std::uint64_t{1} << 20;

[[noreturn]] void fail(const std::filesystem::path& file, const std::string& problem) {
  throw Error(file.string() + ": " + problem);
}

std::string hex(std::uint32_t value, int digits) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%0*X", digits, value);
  return text;
}

// Reads a file through zlib's gzFile API: gzopen recognises gzip by its 1f 8b magic and passes
// any other file through unchanged, so plain and gzipped files share one path. Keeps the CRC-32
// of every byte handed out.
class ByteReader {
 public:
  explicit ByteReader(const std::filesystem::path& file) : m_file(file) {
    std::error_code ec;
    if (!std::filesystem::exists(file, ec)) fail(file, "no such file");
    if (!std::filesystem::is_regular_file(file, ec)) fail(file, "not a regular file");
    m_file_size = std::filesystem::file_size(file, ec);
    m_gz = gzopen(file.c_str(), "rb");
    if (m_gz == nullptr) fail(file, std::string("cannot open: ") + std::strerror(errno));
    gzbuffer(m_gz, 1u << 17);
  }
  ~ByteReader() { gzclose(m_gz); }
  ByteReader(const ByteReader&) = delete;
  ByteReader& operator=(const ByteReader&) = delete;

  // Reads up to n bytes; fewer only where the data ends.
  std::size_t read(std::uint8_t* out, std::size_t n) {
    std::size_t total = 0;
    while (total < n) {
      const auto want = static_cast<unsigned>(std::min(n - total, kChunkBytes));
      const int got = gzread(m_gz, out + total, want);
      if (got <= 0) break;
      m_crc = crc32(m_crc, out + total, static_cast<uInt>(got));
      total += static_cast<std::size_t>(got);
    }
    // zlib reports a gzip stream cut short as a short read, not as -1; only gzerror tells.
    if (total < n) check_stream();
    return total;
  }

  // Reads on and returns how many bytes were left, counting up to `limit` (then more may follow).
  std::uint64_t count_remaining(std::uint64_t limit) {
    std::array<std::uint8_t, 1 << 16> sink;
    std::uint64_t count = 0;
    while (count < limit) {
      const std::size_t got =
          read(sink.data(), std::min<std::uint64_t>(sink.size(), limit - count));
      if (got == 0) break;
      count += got;
    }
    return count;
  }

  const std::filesystem::path& file() const { return m_file; }
  // Whether the file is passed through as it is (not gzip); known once something has been read.
  bool is_plain() const { return gzdirect(m_gz) == 1; }
  std::uint64_t file_size() const { return m_file_size; }
  std::uint32_t crc() const { return static_cast<std::uint32_t>(m_crc); }

 private:
  void check_stream() {
    int code = Z_OK;
    const char* message = gzerror(m_gz, &code);
    if (code == Z_OK) return;
    if (code == Z_ERRNO) fail(m_file, std::string("read error: ") + std::strerror(errno));
    if (code == Z_BUF_ERROR)
      fail(m_file, std::string("truncated gzip stream (zlib: ") + message + ")");
    fail(m_file, std::string("corrupt gzip stream (zlib: ") + message + ")");
  }

  std::filesystem::path m_file;
  gzFile m_gz = nullptr;
  std::uint64_t m_file_size = 0;
  uLong m_crc = crc32(0L, Z_NULL, 0);
};

std::uint32_t big_endian32(const std::uint8_t* bytes) {
  return std::uint32_t{bytes[0]} << 24 | std::uint32_t{bytes[1]} << 16 |
         std::uint32_t{bytes[2]} << 8 | std::uint32_t{bytes[3]};
}

void check_magic(const std::filesystem::path& file, const std::uint8_t* magic, int rank,
                 const char* kind) {
  const std::uint32_t found = big_endian32(magic);
  const std::uint32_t expected =
      std::uint32_t{kUnsignedByte} << 8 | static_cast<std::uint32_t>(rank);
  if (found == expected) return;
  std::string problem = "wrong magic number " + hex(found, 8) + ", expected " + hex(expected, 8) +
                        " (IDX " + kind + ")";
  if (magic[0] != 0 || magic[1] != 0) {
    problem += ": not an IDX file";
  } else if (magic[2] != kUnsignedByte) {
    problem += ": element type " + hex(magic[2], 2) + " is not unsigned byte (0x08)";
  } else {
    problem += ": rank " + std::to_string(magic[3]) + ", expected rank " + std::to_string(rank);
  }
  fail(file, problem);
}

// Refuses dimensions whose product exceeds kMaxIdxDataBytes, before anything is allocated. Each
// dimension is checked too, so that a zero elsewhere cannot let one past `int`.
void check_declared_size(const std::filesystem::path& file,
                         const std::vector<std::uint32_t>& dims) {
  std::uint64_t n_bytes = 1;
  bool too_large = false;
  for (const std::uint32_t dim : dims) {
    too_large = too_large || dim > kMaxIdxDataBytes;
    n_bytes *= std::min<std::uint64_t>(dim, kMaxIdxDataBytes + 1);  // at most 2^29 x 2^29 at once
    too_large = too_large || n_bytes > kMaxIdxDataBytes;
    n_bytes = std::min<std::uint64_t>(n_bytes, kMaxIdxDataBytes + 1);
  }
  if (!too_large) return;
  std::string declared;
  for (const std::uint32_t dim : dims)
    declared += (declared.empty() ? "" : " x ") + std::to_string(dim);
  fail(file, "too large: the header declares " + declared + " bytes of data, more than " +
                 std::to_string(kMaxIdxDataBytes) +
                 " (256 MiB), lenet5's limit for one IDX file (MNIST's largest holds 47 MB); "
                 "is the header corrupt?");
}

// Reads the magic and the dimensions of a rank-`rank` unsigned-byte IDX file.
std::vector<int> read_header(ByteReader& in, int rank, const char* kind) {
  const std::size_t header_bytes = 4 + 4 * static_cast<std::size_t>(rank);
  std::array<std::uint8_t, 4 + 4 * 3> header{};
  const std::size_t magic_got = in.read(header.data(), 4);
  if (magic_got < 4) {
    fail(in.file(), "truncated header: the file holds " + std::to_string(magic_got) +
                        " bytes, an IDX header needs " + std::to_string(header_bytes));
  }
  check_magic(in.file(), header.data(), rank, kind);
  const std::size_t got = 4 + in.read(header.data() + 4, header_bytes - 4);
  if (got < header_bytes) {
    fail(in.file(), "truncated header: the file holds " + std::to_string(got) + " bytes, a rank-" +
                        std::to_string(rank) + " IDX header needs " + std::to_string(header_bytes));
  }
  std::vector<std::uint32_t> declared;
  for (int d = 0; d < rank; ++d) declared.push_back(big_endian32(header.data() + 4 + 4 * d));
  check_declared_size(in.file(), declared);
  return std::vector<int>(declared.begin(), declared.end());
}

// Reads exactly n_bytes of data and insists that nothing follows. The buffer grows with the bytes
// actually read, so a header that lies about the size costs no more memory than the file holds.
// A plain file's size bounds its data, so there the buffer is reserved upfront, which spares the
// copies and page faults of growing it (a quarter of the CPU time of reading MNIST).
std::vector<std::uint8_t> read_data(ByteReader& in, std::size_t n_bytes, const std::string& what) {
  std::vector<std::uint8_t> data;
  if (in.is_plain()) data.reserve(std::min<std::uint64_t>(n_bytes, in.file_size()));
  while (data.size() < n_bytes) {
    const std::size_t old_size = data.size();
    const std::size_t step = std::min(n_bytes - old_size, kChunkBytes);
    data.resize(old_size + step);
    const std::size_t got = in.read(data.data() + old_size, step);
    if (got < step) {
      fail(in.file(), "truncated: the header promises " + what + " (" + std::to_string(n_bytes) +
                          " bytes) but only " + std::to_string(old_size + got) + " bytes follow");
    }
  }
  if (const std::uint64_t extra = in.count_remaining(kMaxTrailingCount)) {
    fail(in.file(),
         "trailing garbage: " + std::string(extra == kMaxTrailingCount ? "at least " : "") +
             std::to_string(extra) + " bytes after the " + what + " the header declares");
  }
  return data;
}

}  // namespace

IdxArray read_idx(const std::filesystem::path& file, IdxKind kind) {
  ByteReader in(file);
  const bool images = kind == IdxKind::images;
  IdxArray array;
  array.dims = read_header(in, static_cast<int>(kind), images ? "images" : "labels");
  std::string what = std::to_string(array.dims[0]) + " labels";
  if (images) {
    const std::string size = std::to_string(array.dims[1]) + "x" + std::to_string(array.dims[2]);
    if (array.dims[1] == 0 || array.dims[2] == 0) fail(file, "image size " + size + " is empty");
    what = std::to_string(array.dims[0]) + " images of " + size;
  }
  std::size_t n_bytes = 1;
  for (int dim : array.dims) n_bytes *= static_cast<std::size_t>(dim);
  array.data = read_data(in, n_bytes, what);
  array.crc32 = in.crc();
  return array;
}

IdxImages idx_images(IdxArray array) {
  IdxImages images;
  images.count = array.dims.at(0);
  images.rows = array.dims.at(1);
  images.cols = array.dims.at(2);
  images.pixels = std::move(array.data);
  return images;
}

std::vector<std::uint8_t> idx_labels(IdxArray array, const std::filesystem::path& file) {
  const std::vector<std::uint8_t>& labels = array.data;
  const auto bad = std::find_if(labels.begin(), labels.end(), [](std::uint8_t v) { return v > 9; });
  if (bad != labels.end()) {
    fail(file, "label " + std::to_string(*bad) + " at index " +
                   std::to_string(bad - labels.begin()) + " is outside 0..9");
  }
  return std::move(array.data);
}

IdxImages read_idx_images(const std::filesystem::path& file, std::uint32_t* crc32) {
  IdxArray array = read_idx(file, IdxKind::images);
  if (crc32 != nullptr) *crc32 = array.crc32;
  return idx_images(std::move(array));
}

std::vector<std::uint8_t> read_idx_labels(const std::filesystem::path& file, std::uint32_t* crc32) {
  IdxArray array = read_idx(file, IdxKind::labels);
  if (crc32 != nullptr) *crc32 = array.crc32;
  return idx_labels(std::move(array), file);
}

}  // namespace lenet5
