// The cache of decoded gzipped IDX files (data/idx_cache.hpp): made on the first load, used on the
// next, and never trusted when it is corrupt, truncated, of another format version or made from
// other source bytes; a folder where it cannot be written costs only the decoding.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/xxh64.hpp"
#include "data/idx_cache.hpp"
#include "error_assertions.hpp"
#include "test_util.hpp"

namespace lenet5 {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

// Two 3x4 images: the IDX file as bytes, header and all.
Bytes image_file(std::uint8_t first_pixel = 1) {
  Bytes bytes = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4};
  for (int i = 0; i < 2 * 3 * 4; ++i) bytes.push_back(static_cast<std::uint8_t>(first_pixel + i));
  return bytes;
}

void write_gz(const fs::path& file, const Bytes& bytes) {
  gzFile gz = gzopen(file.c_str(), "wb");
  ASSERT_NE(gz, nullptr) << file;
  gzwrite(gz, bytes.data(), static_cast<unsigned>(bytes.size()));
  ASSERT_EQ(gzclose(gz), Z_OK) << file;
}

std::string read_bytes(const fs::path& file) {
  return testing::read_text(file);
}

using testing::write_bytes;

void expect_same(const IdxArray& a, const IdxArray& b) {
  EXPECT_EQ(a.dims, b.dims);
  EXPECT_EQ(a.data, b.data);
  EXPECT_EQ(a.crc32, b.crc32);
}

class IdxCacheTest : public ::testing::Test {
 protected:
  void SetUp() override { write_gz(m_gz, image_file()); }

  IdxArray load(IdxSource& source) const { return read_idx_cached(m_gz, IdxKind::images, &source); }

  // Loads once more and checks that the data are the decoded file's and came from the cache.
  void expect_cache_used() const {
    IdxSource source;
    expect_same(load(source), read_idx(m_gz, IdxKind::images));
    EXPECT_TRUE(source.from_cache) << source.cache_miss;
  }

  // Loads a cache that `damage` spoilt: the data must be decoded again, for the reason named,
  // and the cache rebuilt so that the next load uses it.
  void expect_rebuilt_after(const std::string& why) const {
    IdxSource source;
    expect_same(load(source), read_idx(m_gz, IdxKind::images));
    EXPECT_FALSE(source.from_cache);
    EXPECT_TRUE(testing::mentions(source.cache_miss, why)) << source.cache_miss;
    expect_cache_used();
  }

  testing::TempDir m_dir;
  fs::path m_gz = m_dir / "images-idx3-ubyte.gz";
  fs::path m_cache = idx_cache_file(m_gz);
};

TEST_F(IdxCacheTest, FirstLoadDecodesAndWritesTheCacheBesideTheFile) {
  EXPECT_EQ(m_cache, m_dir / ".cache" / "images-idx3-ubyte.bin");
  IdxSource source;
  const IdxArray first = load(source);
  EXPECT_FALSE(source.from_cache);
  EXPECT_EQ(source.cache_miss, "no cache yet");
  EXPECT_EQ(first.dims, (std::vector<int>{2, 3, 4}));
  const Bytes file = image_file();
  EXPECT_EQ(first.data, Bytes(file.begin() + 16, file.end()));  // past the 16-byte IDX header
  EXPECT_EQ(first.crc32, testing_support::crc_of(file));
  EXPECT_TRUE(fs::is_regular_file(m_cache));
  expect_cache_used();
}

TEST_F(IdxCacheTest, CorruptPayloadByteIsDetected) {
  IdxSource source;
  load(source);
  std::string bytes = read_bytes(m_cache);
  bytes[bytes.size() - 5] ^= 0x01;
  write_bytes(m_cache, bytes);
  expect_rebuilt_after("corrupt data");
}

TEST_F(IdxCacheTest, TruncatedCacheIsDetected) {
  IdxSource source;
  load(source);
  const std::string bytes = read_bytes(m_cache);
  write_bytes(m_cache, bytes.substr(0, bytes.size() - 1));
  expect_rebuilt_after("its header promises");
  write_bytes(m_cache, bytes.substr(0, 40));
  expect_rebuilt_after("truncated header");
}

// The header's layout (data/idx_cache.cpp): the version is the uint32 at byte 16 and the header's
// own XXH64 the uint64 at byte 72, over the 72 bytes before it. Re-hashing the header after the
// change makes the version check, not the header checksum, the one that must refuse it.
TEST_F(IdxCacheTest, OtherFormatVersionIsNotTrusted) {
  IdxSource source;
  load(source);
  std::string bytes = read_bytes(m_cache);
  const std::uint32_t future_version = 2;
  bytes.replace(16, sizeof future_version, reinterpret_cast<const char*>(&future_version),
                sizeof future_version);
  const std::uint64_t header_hash = xxh64(bytes.data(), 72);
  bytes.replace(72, sizeof header_hash, reinterpret_cast<const char*>(&header_hash),
                sizeof header_hash);
  write_bytes(m_cache, bytes);
  expect_rebuilt_after("format version 2, expected 1");
}

// The cache names its source by content, not by time stamp: a changed file with the old
// modification time is still noticed.
TEST_F(IdxCacheTest, StaleCacheOfAChangedFileIsDetected) {
  IdxSource source;
  load(source);
  const fs::file_time_type modified = fs::last_write_time(m_gz);
  write_gz(m_gz, image_file(/*first_pixel=*/100));
  fs::last_write_time(m_gz, modified);
  expect_rebuilt_after("stale");
  IdxSource again;
  EXPECT_EQ(load(again).data.front(), 100);
}

TEST_F(IdxCacheTest, UnwritableCacheFolderFallsBackToDecoding) {
  std::ofstream(m_dir / ".cache") << "a file where the cache folder would go";
  for (int attempt = 0; attempt < 2; ++attempt) {
    IdxSource source;
    expect_same(load(source), read_idx(m_gz, IdxKind::images));
    EXPECT_FALSE(source.from_cache);
  }
  EXPECT_FALSE(fs::is_directory(m_dir / ".cache"));
}

TEST_F(IdxCacheTest, ReadOnlyFolderFallsBackToDecoding) {
  if (geteuid() == 0) GTEST_SKIP() << "root writes into read-only folders; see the test above";
  fs::permissions(m_dir.path(), fs::perms::owner_write, fs::perm_options::remove);
  IdxSource source;
  expect_same(load(source), read_idx(m_gz, IdxKind::images));
  EXPECT_FALSE(source.from_cache);
  EXPECT_FALSE(fs::exists(m_cache));
  fs::permissions(m_dir.path(), fs::perms::owner_write, fs::perm_options::add);
}

TEST_F(IdxCacheTest, PlainFilesAreReadDirectly) {
  const fs::path plain = m_dir / "plain-idx3-ubyte";
  const Bytes bytes = image_file();
  write_bytes(plain, std::string(bytes.begin(), bytes.end()));
  IdxSource source;
  expect_same(read_idx_cached(plain, IdxKind::images, &source), read_idx(plain, IdxKind::images));
  EXPECT_FALSE(source.from_cache);
  EXPECT_EQ(source.cache_miss, "");
  EXPECT_FALSE(fs::exists(m_dir / ".cache"));
}

}  // namespace
}  // namespace lenet5
