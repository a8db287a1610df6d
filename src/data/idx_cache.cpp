// The decoded-IDX cache: its header, checked against the gzip source on every load, and its
// atomic write.
#include "data/idx_cache.hpp"

#include <spdlog/spdlog.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <optional>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/xxh64.hpp"
#include "io/atomic_file.hpp"

namespace lenet5 {
namespace fs = std::filesystem;
namespace {

// Raised whenever the layout below or the meaning of a field changes, so older caches are rebuilt.
constexpr std::uint32_t kFormatVersion = 1;
constexpr char kMagic[16] = {'l', 'e', 'n', 'e', 't', '5', ' ', 'i',
                             'd', 'x', ' ', 'c', 'a', 'c', 'h', 'e'};

// The cache file's header, in the byte order of the machine that wrote it (on a machine of the
// other order the checks fail and the cache is rebuilt). The fields are laid out without padding.
struct Header {
  char magic[16];
  std::uint32_t version;
  std::uint32_t rank;           // 1 (labels) or 3 (images)
  std::uint32_t dims[3];        // the IDX dimensions; those past the rank are 0
  std::uint32_t data_crc32;     // of the uncompressed IDX file, as read_idx gives it
  std::uint64_t source_size;    // bytes of the gzipped source
  std::uint64_t source_xxh64;   // of those bytes
  std::uint64_t payload_size;   // bytes of elements after the header
  std::uint64_t payload_xxh64;  // of those bytes
  std::uint64_t header_xxh64;   // of every field above
};
static_assert(sizeof(Header) == 80 && offsetof(Header, header_xxh64) == 72, "Header has padding");

std::uint64_t header_hash(const Header& header) {
  return xxh64(&header, offsetof(Header, header_xxh64));
}

// A gzipped file as its cache names it.
struct SourceIdentity {
  std::uint64_t size = 0, xxh64 = 0;
  bool operator==(const SourceIdentity& other) const {
    return size == other.size && xxh64 == other.xxh64;
  }
};

// No gzip of at most kMaxIdxDataBytes of data is larger than this: deflate's worst case, stored
// blocks, adds 5 bytes per 65535, and gzip's header and trailer a few dozen more.
constexpr std::uintmax_t kMaxGzipBytes = kMaxIdxDataBytes + kMaxIdxDataBytes / 8192 + 4096;

// The identity of a gzipped file (recognised by its 1f 8b magic, as zlib does); nullopt for any
// other file, for one that cannot be read whole and for one too large to hold data read_idx
// accepts (read_idx then reports the problem, without this reading it all into memory first).
std::optional<SourceIdentity> identify_gzip(const fs::path& file) {
  std::error_code error;
  if (!fs::is_regular_file(file, error)) return std::nullopt;
  std::ifstream in(file, std::ios::binary);
  char magic[2] = {};
  if (!in.read(magic, 2) || magic[0] != '\x1f' || magic[1] != '\x8b') return std::nullopt;
  const std::uintmax_t size = fs::file_size(file, error);
  if (error || size > kMaxGzipBytes) return std::nullopt;
  std::vector<char> bytes(size);
  in.seekg(0);
  if (!in.read(bytes.data(), static_cast<std::streamsize>(size)) ||
      in.peek() != std::ifstream::traits_type::eof())
    return std::nullopt;  // the file changed size while it was being read
  return SourceIdentity{size, xxh64(bytes.data(), bytes.size())};
}

// Why a header cannot describe the cache of `source` as an array of `kind`; empty if it can.
std::string header_problem(const Header& header, const SourceIdentity& source, IdxKind kind) {
  if (std::memcmp(header.magic, kMagic, sizeof kMagic) != 0) return "not a lenet5 cache file";
  if (header.version != kFormatVersion)
    return "format version " + std::to_string(header.version) + ", expected " +
           std::to_string(kFormatVersion);
  if (header.header_xxh64 != header_hash(header)) return "corrupt header (checksum mismatch)";
  if (!(SourceIdentity{header.source_size, header.source_xxh64} == source))
    return "stale: made from other bytes than the gzip file now holds";
  std::uint64_t elements = 1;
  for (std::uint32_t d = 0; d < header.rank && d < 3; ++d) elements *= header.dims[d];
  if (header.rank != static_cast<std::uint32_t>(kind) || header.payload_size != elements)
    return "its dimensions do not match its kind or its size";
  if (header.payload_size > kMaxIdxDataBytes) return "holds more data than an IDX file may";
  return "";
}

// The cached array of `source`, or nullopt with the reason in `why_not`.
std::optional<IdxArray> read_cache(const fs::path& cache, const SourceIdentity& source,
                                   IdxKind kind, std::string& why_not) {
  std::ifstream in(cache, std::ios::binary);
  if (!in) {
    why_not = "no cache yet";
    return std::nullopt;
  }
  Header header;
  if (!in.read(reinterpret_cast<char*>(&header), sizeof header)) {
    why_not = "truncated header";
    return std::nullopt;
  }
  why_not = header_problem(header, source, kind);
  if (!why_not.empty()) return std::nullopt;
  std::error_code error;
  const std::uintmax_t size = fs::file_size(cache, error);
  if (error || size != sizeof header + header.payload_size) {
    why_not = "holds " + std::to_string(size) + " bytes, its header promises " +
              std::to_string(sizeof header + header.payload_size);
    return std::nullopt;
  }
  IdxArray array;
  array.dims.assign(header.dims, header.dims + header.rank);
  array.crc32 = header.data_crc32;
  array.data.resize(header.payload_size);
  if (!in.read(reinterpret_cast<char*>(array.data.data()),
               static_cast<std::streamsize>(array.data.size()))) {
    why_not = "truncated data";
    return std::nullopt;
  }
  if (xxh64(array.data.data(), array.data.size()) != header.payload_xxh64) {
    why_not = "corrupt data (checksum mismatch)";
    return std::nullopt;
  }
  return array;
}

Header make_header(const SourceIdentity& source, const IdxArray& array) {
  Header header{};
  std::memcpy(header.magic, kMagic, sizeof kMagic);
  header.version = kFormatVersion;
  header.rank = static_cast<std::uint32_t>(array.dims.size());
  for (std::size_t d = 0; d < array.dims.size(); ++d)
    header.dims[d] = static_cast<std::uint32_t>(array.dims[d]);
  header.data_crc32 = array.crc32;
  header.source_size = source.size;
  header.source_xxh64 = source.xxh64;
  header.payload_size = array.data.size();
  header.payload_xxh64 = xxh64(array.data.data(), array.data.size());
  header.header_xxh64 = header_hash(header);
  return header;
}

// Writes the cache atomically. A failure (a read-only folder, a full disk) only leaves no cache:
// the data are already in hand.
void write_cache(const fs::path& cache, const SourceIdentity& source, const IdxArray& array) {
  const Header header = make_header(source, array);
  const std::string_view header_bytes(reinterpret_cast<const char*>(&header), sizeof header);
  const std::string_view payload(reinterpret_cast<const char*>(array.data.data()),
                                 array.data.size());
  std::error_code error;
  fs::create_directories(cache.parent_path(), error);
  if (error) {
    spdlog::debug("no cache {}: cannot create its folder: {}", cache.string(), error.message());
    return;
  }
  try {
    write_file_atomically(cache, {header_bytes, payload});
  } catch (const Error& e) {
    spdlog::debug("no cache: {}", e.what());
  }
}

}  // namespace

fs::path idx_cache_file(const fs::path& file) {
  fs::path name = file.filename();
  if (name.extension() == ".gz") name.replace_extension();
  return file.parent_path() / ".cache" / (name.string() + ".bin");
}

IdxArray read_idx_cached(const fs::path& file, IdxKind kind, IdxSource* source) {
  IdxSource unused;
  IdxSource& report = source != nullptr ? *source : unused;
  report = {};
  const std::optional<SourceIdentity> identity = identify_gzip(file);
  if (!identity) return read_idx(file, kind);
  const fs::path cache = idx_cache_file(file);
  if (std::optional<IdxArray> cached = read_cache(cache, *identity, kind, report.cache_miss)) {
    report.from_cache = true;
    return std::move(*cached);
  }
  spdlog::debug("{}: {}; decoding {}", cache.string(), report.cache_miss, file.string());
  IdxArray array = read_idx(file, kind);
  // A file replaced while it was being decoded must not leave a cache naming the other bytes.
  if (identify_gzip(file) == identity) write_cache(cache, *identity, array);
  return array;
}

}  // namespace lenet5
