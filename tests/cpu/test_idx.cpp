// IDX reader: valid files plain and gzipped, and every kind of malformed file, each of which must
// throw lenet5::Error naming the file and the problem.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "data/idx.hpp"
#include "error_assertions.hpp"

namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;
using lenet5::testing_support::crc_of;
using lenet5::testing_support::throws_error_mentioning;

constexpr std::uint32_t kImagesMagic = 0x00000803;
constexpr std::uint32_t kLabelsMagic = 0x00000801;

// A fresh folder per test, removed afterwards.
class IdxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    m_dir =
        fs::temp_directory_path() / ("lenet5_idx_" + std::to_string(getpid()) + "_" + info->name());
    fs::remove_all(m_dir);
    fs::create_directories(m_dir);
  }
  void TearDown() override { fs::remove_all(m_dir); }

  fs::path write(const std::string& name, const Bytes& bytes) const {
    std::ofstream out(m_dir / name, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    return m_dir / name;
  }

  fs::path write_gz(const std::string& name, const Bytes& bytes) const {
    const fs::path file = m_dir / name;
    gzFile gz = gzopen(file.c_str(), "wb");
    EXPECT_NE(gz, nullptr);
    if (!bytes.empty()) gzwrite(gz, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(gz);
    return file;
  }

  fs::path m_dir;
};

void append_big_endian(Bytes& bytes, std::uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8)
    bytes.push_back(static_cast<std::uint8_t>(value >> shift));
}

Bytes idx(std::uint32_t magic, std::initializer_list<std::uint32_t> dims, const Bytes& data) {
  Bytes bytes;
  append_big_endian(bytes, magic);
  for (std::uint32_t dim : dims) append_big_endian(bytes, dim);
  bytes.insert(bytes.end(), data.begin(), data.end());
  return bytes;
}

Bytes ramp(std::size_t n) {
  Bytes bytes(n);
  for (std::size_t i = 0; i < n; ++i) bytes[i] = static_cast<std::uint8_t>(i * 7 + 1);
  return bytes;
}



TEST_F(IdxTest, ReadsPlainImages) {
  const Bytes bytes = idx(kImagesMagic, {2, 3, 4}, ramp(24));
  std::uint32_t crc = 0;
  const lenet5::IdxImages images = lenet5::read_idx_images(write("images", bytes), &crc);
  EXPECT_EQ(images.count, 2);
  EXPECT_EQ(images.rows, 3);
  EXPECT_EQ(images.cols, 4);
  EXPECT_EQ(images.pixels, ramp(24));
  EXPECT_EQ(crc, crc_of(bytes));
}

TEST_F(IdxTest, ReadsGzippedImagesWithCrcOfUncompressedBytes) {
  const Bytes bytes = idx(kImagesMagic, {3, 28, 28}, ramp(3 * 28 * 28));
  std::uint32_t crc = 0;
  const lenet5::IdxImages images = lenet5::read_idx_images(write_gz("images.gz", bytes), &crc);
  EXPECT_EQ(images.count, 3);
  EXPECT_EQ(images.rows, 28);
  EXPECT_EQ(images.cols, 28);
  EXPECT_EQ(images.pixels, ramp(3 * 28 * 28));
  EXPECT_EQ(crc, crc_of(bytes));
}

TEST_F(IdxTest, ReadsPlainAndGzippedLabels) {
  const Bytes values = {5, 0, 4, 1, 9, 2};
  const Bytes bytes = idx(kLabelsMagic, {6}, values);
  std::uint32_t crc_plain = 0, crc_gz = 0;
  EXPECT_EQ(lenet5::read_idx_labels(write("labels", bytes), &crc_plain), values);
  EXPECT_EQ(lenet5::read_idx_labels(write_gz("labels.gz", bytes), &crc_gz), values);
  EXPECT_EQ(crc_plain, crc_of(bytes));
  EXPECT_EQ(crc_gz, crc_of(bytes));
}

TEST_F(IdxTest, DetectsGzipByContentNotByName) {
  const Bytes values = {3, 1, 4};
  const Bytes bytes = idx(kLabelsMagic, {3}, values);
  EXPECT_EQ(lenet5::read_idx_labels(write_gz("looks-plain", bytes)), values);
  EXPECT_EQ(lenet5::read_idx_labels(write("looks-gzipped.gz", bytes)), values);
}

TEST_F(IdxTest, ReadsEmptyLabelFile) {
  EXPECT_TRUE(lenet5::read_idx_labels(write("labels", idx(kLabelsMagic, {0}, {}))).empty());
}

TEST_F(IdxTest, RejectsMissingFile) {
  const fs::path file = m_dir / "absent";
  EXPECT_TRUE(throws_error_mentioning([&] { lenet5::read_idx_labels(file); },
                                      {file.string(), "no such file"}));
}

TEST_F(IdxTest, RejectsLabelsFileReadAsImages) {
  const fs::path file = write("labels", idx(kLabelsMagic, {3}, {1, 2, 3}));
  EXPECT_TRUE(throws_error_mentioning(
      [&] { lenet5::read_idx_images(file); },
      {file.string(), "wrong magic number 0x00000801, expected 0x00000803", "rank 1"}));
}

TEST_F(IdxTest, RejectsImagesFileReadAsLabels) {
  const fs::path file = write("images", idx(kImagesMagic, {1, 1, 1}, {0}));
  EXPECT_TRUE(throws_error_mentioning(
      [&] { lenet5::read_idx_labels(file); },
      {file.string(), "wrong magic number 0x00000803, expected 0x00000801", "rank 3"}));
}

TEST_F(IdxTest, RejectsFileThatIsNotIdx) {
  const fs::path file = write("archive", {'P', 'K', 3, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  EXPECT_TRUE(throws_error_mentioning([&] { lenet5::read_idx_images(file); },
                                      {file.string(), "wrong magic number", "not an IDX file"}));
}

TEST_F(IdxTest, RejectsNonByteElementType) {
  const fs::path file = write("floats", idx(0x00000D03, {1, 1, 1}, {0, 0, 0, 0}));
  EXPECT_TRUE(throws_error_mentioning([&] { lenet5::read_idx_images(file); },
                                      {file.string(), "element type 0x0D"}));
}

TEST_F(IdxTest, RejectsEmptyFile) {
  const fs::path file = write("empty", {});
  EXPECT_TRUE(throws_error_mentioning([&] { lenet5::read_idx_labels(file); },
                                      {file.string(), "truncated header", "holds 0 bytes"}));
}

TEST_F(IdxTest, RejectsTruncatedHeader) {
  Bytes bytes = idx(kImagesMagic, {2, 28, 28}, {});
  bytes.resize(12);
  const fs::path file = write("images", bytes);
  EXPECT_TRUE(throws_error_mentioning([&] { lenet5::read_idx_images(file); },
                                      {file.string(), "truncated header", "holds 12 bytes", "16"}));
}

TEST_F(IdxTest, RejectsEmptyImageSize) {
  const fs::path file = write("images", idx(kImagesMagic, {2, 0, 28}, {}));
  EXPECT_TRUE(throws_error_mentioning([&] { lenet5::read_idx_images(file); },
                                      {file.string(), "image size 0x28"}));
}

TEST_F(IdxTest, RejectsTruncatedImages) {
  const fs::path file = write("images", idx(kImagesMagic, {2, 2, 2}, ramp(7)));
  EXPECT_TRUE(throws_error_mentioning(
      [&] { lenet5::read_idx_images(file); },
      {file.string(), "truncated", "2 images of 2x2 (8 bytes)", "only 7 bytes follow"}));
}

TEST_F(IdxTest, RejectsTruncatedLabelsInsideGzip) {
  const fs::path file = write_gz("labels.gz", idx(kLabelsMagic, {5}, {1, 2}));
  EXPECT_TRUE(throws_error_mentioning([&] { lenet5::read_idx_labels(file); },
                                      {file.string(), "5 labels", "only 2 bytes follow"}));
}

TEST_F(IdxTest, RejectsTrailingGarbage) {
  const fs::path plain = write("images", idx(kImagesMagic, {1, 2, 2}, ramp(7)));
  EXPECT_TRUE(throws_error_mentioning([&] { lenet5::read_idx_images(plain); },
                                      {plain.string(), "trailing garbage: 3 bytes"}));
  const fs::path gz = write_gz("labels.gz", idx(kLabelsMagic, {2}, {1, 2, 3}));
  EXPECT_TRUE(throws_error_mentioning([&] { lenet5::read_idx_labels(gz); },
                                      {gz.string(), "trailing garbage: 1 bytes"}));
}

TEST_F(IdxTest, RejectsLabelOutsideZeroToNine) {
  const fs::path file = write("labels", idx(kLabelsMagic, {4}, {9, 0, 10, 3}));
  EXPECT_TRUE(throws_error_mentioning([&] { lenet5::read_idx_labels(file); },
                                      {file.string(), "label 10 at index 2 is outside 0..9"}));
}

TEST_F(IdxTest, RejectsHeaderBeyondAnySaneSize) {
  const fs::path file = write("images", idx(kImagesMagic, {1u << 31, 28, 28}, ramp(10)));
  EXPECT_TRUE(throws_error_mentioning(
      [&] { lenet5::read_idx_images(file); },
      {file.string(), "too large", "2147483648 x 28 x 28", "268435456", "256 MiB"}));
  // The limit itself is declared data one byte too many away: 16385 x 128 x 128 is 2^28 + 2^14.
  const fs::path over = write("over", idx(kImagesMagic, {16385, 128, 128}, ramp(10)));
  EXPECT_TRUE(throws_error_mentioning([&] { lenet5::read_idx_images(over); },
                                      {over.string(), "16385 x 128 x 128"}));
}

// A header promising the most data allowed (256 MiB) over a few bytes must fail as truncated
// without first allocating what it promises. The child caps its address space 128 MiB above its
// current size, so an allocation of the promised size would end in bad_alloc instead of the
// expected error.
void read_with_capped_memory(const fs::path& file, bool images) {
  long pages = 0;
  std::ifstream("/proc/self/statm") >> pages;
  const rlim_t cap =
      static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) + (rlim_t{128} << 20);
  const rlimit limit{cap, cap};
  if (pages == 0 || setrlimit(RLIMIT_AS, &limit) != 0) _exit(2);
  try {
    if (images)
      lenet5::read_idx_images(file);
    else
      lenet5::read_idx_labels(file);
  } catch (const lenet5::Error& e) {
    _exit(std::string(e.what()).find("truncated") != std::string::npos ? 0 : 3);
  } catch (...) {
    _exit(4);
  }
  _exit(5);
}

TEST_F(IdxTest, LyingHeaderFailsWithoutAllocatingItsClaim) {
  const auto huge = static_cast<std::uint32_t>(lenet5::kMaxIdxDataBytes);
  const fs::path plain = write("labels", idx(kLabelsMagic, {huge}, {1, 2, 3}));
  const fs::path gz = write_gz("images.gz", idx(kImagesMagic, {huge, 1, 1}, {1, 2, 3}));
  EXPECT_EXIT(read_with_capped_memory(plain, false), ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(read_with_capped_memory(gz, true), ::testing::ExitedWithCode(0), "");
  EXPECT_TRUE(throws_error_mentioning([&] { lenet5::read_idx_labels(plain); },
                                      {plain.string(), "268435456 labels", "only 3 bytes follow"}));
}

TEST_F(IdxTest, RejectsTruncatedGzipStream) {
  const fs::path full = write_gz("full.gz", idx(kImagesMagic, {4, 28, 28}, ramp(4 * 28 * 28)));
  std::ifstream in(full, std::ios::binary);
  Bytes bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  bytes.resize(bytes.size() / 2);
  const fs::path file = write("cut.gz", bytes);
  EXPECT_TRUE(throws_error_mentioning([&] { lenet5::read_idx_images(file); },
                                      {file.string(), "truncated gzip stream"}));
}

TEST_F(IdxTest, RejectsGzipWithBadChecksum) {
  const fs::path full = write_gz("full.gz", idx(kLabelsMagic, {3}, {1, 2, 3}));
  std::ifstream in(full, std::ios::binary);
  Bytes bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  bytes[bytes.size() - 8] ^= 0xFF;  // first byte of the gzip trailer's CRC-32
  const fs::path file = write("bad.gz", bytes);
  EXPECT_TRUE(
      throws_error_mentioning([&] { lenet5::read_idx_labels(file); },
                              {file.string(), "corrupt gzip stream", "incorrect data check"}));
}

}  // namespace
