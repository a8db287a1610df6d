// MNIST loading (small synthetic data sets, and the real one when present), the data folder's
// precedence rules, and scripts/fetch_mnist.sh's failure path.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "data/mnist.hpp"
#include "error_assertions.hpp"
#include "test_util.hpp"

namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;
using lenet5::testing::DataEnv;
using lenet5::testing_support::crc_of;
using lenet5::testing_support::throws_error_mentioning;

constexpr int kPixels = lenet5::kImageSide * lenet5::kImageSide;

Bytes idx(std::uint32_t magic, const std::vector<std::uint32_t>& dims, const Bytes& data) {
  Bytes bytes;
  auto append = [&](std::uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8)
      bytes.push_back(static_cast<std::uint8_t>(v >> shift));
  };
  append(magic);
  for (std::uint32_t dim : dims) append(dim);
  bytes.insert(bytes.end(), data.begin(), data.end());
  return bytes;
}

Bytes image_file(int count, int side = lenet5::kImageSide) {
  Bytes pixels(static_cast<std::size_t>(count) * side * side);
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<std::uint8_t>(i % 251);
  const auto n = static_cast<std::uint32_t>(count), s = static_cast<std::uint32_t>(side);
  return idx(0x00000803, {n, s, s}, pixels);
}

Bytes label_file(const Bytes& labels) {
  return idx(0x00000801, {static_cast<std::uint32_t>(labels.size())}, labels);
}



class MnistTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    m_dir = fs::temp_directory_path() /
            ("lenet5_mnist_" + std::to_string(getpid()) + "_" + info->name());
    fs::remove_all(m_dir);
    fs::create_directories(m_dir);
  }
  void TearDown() override { fs::remove_all(m_dir); }

  void write(const std::string& name, const Bytes& bytes) const {
    std::ofstream out(m_dir / name, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
  }

  void write_gz(const std::string& name, const Bytes& bytes) const {
    gzFile gz = gzopen((m_dir / name).c_str(), "wb");
    ASSERT_NE(gz, nullptr);
    gzwrite(gz, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(gz);
  }

  // Three training and two test images; the training files gzipped, the test files plain.
  void write_small_mnist() const {
    write_gz("train-images-idx3-ubyte.gz", image_file(3));
    write_gz("train-labels-idx1-ubyte.gz", label_file({5, 0, 4}));
    write("t10k-images-idx3-ubyte", image_file(2));
    write("t10k-labels-idx1-ubyte", label_file({7, 2}));
  }

  fs::path m_dir;
};

TEST_F(MnistTest, LoadsPlainAndGzippedFiles) {
  write_small_mnist();
  const lenet5::Mnist mnist = lenet5::load_mnist(m_dir);
  EXPECT_EQ(mnist.train.count, 3);
  EXPECT_EQ(mnist.test.count, 2);
  EXPECT_EQ(mnist.train.labels, (Bytes{5, 0, 4}));
  EXPECT_EQ(mnist.test.labels, (Bytes{7, 2}));
  ASSERT_EQ(mnist.train.images.size(), 3u * kPixels);
  ASSERT_EQ(mnist.test.images.size(), 2u * kPixels);
  EXPECT_EQ(mnist.train.images[kPixels + 1], (kPixels + 1) % 251);
  EXPECT_EQ(mnist.train.images_crc32, crc_of(image_file(3)));
  EXPECT_EQ(mnist.train.labels_crc32, crc_of(label_file({5, 0, 4})));
  EXPECT_EQ(mnist.test.images_crc32, crc_of(image_file(2)));
  EXPECT_EQ(mnist.test.labels_crc32, crc_of(label_file({7, 2})));
}

// A second load reads the gzipped training files through their cache (data/idx_cache.hpp) and
// must give exactly what decoding gave, checksums included; plain files get no cache.
TEST_F(MnistTest, SecondLoadFromTheCacheIsTheSame) {
  write_small_mnist();
  const lenet5::Mnist first = lenet5::load_mnist(m_dir);
  EXPECT_TRUE(fs::is_regular_file(m_dir / ".cache" / "train-images-idx3-ubyte.bin"));
  EXPECT_TRUE(fs::is_regular_file(m_dir / ".cache" / "train-labels-idx1-ubyte.bin"));
  EXPECT_FALSE(fs::exists(m_dir / ".cache" / "t10k-images-idx3-ubyte.bin"));
  const lenet5::Mnist second = lenet5::load_mnist(m_dir);
  for (const auto& [a, b] : {std::pair{&first.train, &second.train}, {&first.test, &second.test}}) {
    EXPECT_EQ(a->count, b->count);
    EXPECT_EQ(a->images, b->images);
    EXPECT_EQ(a->labels, b->labels);
    EXPECT_EQ(a->images_crc32, b->images_crc32);
    EXPECT_EQ(a->labels_crc32, b->labels_crc32);
  }
}

// The labels' range is checked on cached data too, so a bad file fails the same way every time.
TEST_F(MnistTest, InvalidGzippedLabelsFailEveryLoad) {
  write_small_mnist();
  write_gz("train-labels-idx1-ubyte.gz", label_file({5, 10, 4}));
  for (int attempt = 0; attempt < 2; ++attempt) {
    EXPECT_TRUE(throws_error_mentioning(
        [&] { lenet5::load_mnist(m_dir); },
        {(m_dir / "train-labels-idx1-ubyte.gz").string(), "label 10 at index 1"}));
  }
}

TEST_F(MnistTest, TestSplitAloneNeedsNoTrainingFiles) {
  write("t10k-images-idx3-ubyte", image_file(2));
  write("t10k-labels-idx1-ubyte", label_file({7, 2}));
  const lenet5::Dataset test =
      lenet5::load_split(lenet5::mnist_dataset(), m_dir, lenet5::Split::test);
  EXPECT_EQ(test.count, 2);
  EXPECT_EQ(test.labels, (Bytes{7, 2}));
  EXPECT_EQ(test.images_crc32, crc_of(image_file(2)));
  EXPECT_TRUE(throws_error_mentioning([&] { lenet5::load_mnist(m_dir); },
                                      {"missing train-images-idx3-ubyte[.gz]"}));
}

TEST_F(MnistTest, PrefersPlainFileOverGzipped) {
  write_small_mnist();
  write_gz("t10k-labels-idx1-ubyte.gz", label_file({1, 1}));
  EXPECT_EQ(lenet5::load_mnist(m_dir).test.labels, (Bytes{7, 2}));
}

TEST_F(MnistTest, RejectsCountMismatchNamingBothFiles) {
  write_small_mnist();
  write("t10k-labels-idx1-ubyte", label_file({7, 2, 1}));
  EXPECT_TRUE(throws_error_mentioning([&] { lenet5::load_mnist(m_dir); },
                                      {(m_dir / "t10k-images-idx3-ubyte").string(), "2 images",
                                       (m_dir / "t10k-labels-idx1-ubyte").string(), "3 labels"}));
}

TEST_F(MnistTest, RejectsImagesThatAreNot28x28) {
  write_small_mnist();
  write("t10k-images-idx3-ubyte", image_file(2, 32));
  EXPECT_TRUE(throws_error_mentioning(
      [&] { lenet5::load_mnist(m_dir); },
      {(m_dir / "t10k-images-idx3-ubyte").string(), "32x32, expected 28x28"}));
}

TEST_F(MnistTest, RejectsEmptyDataSet) {
  write_small_mnist();
  write("t10k-images-idx3-ubyte", image_file(0));
  write("t10k-labels-idx1-ubyte", label_file({}));
  EXPECT_TRUE(throws_error_mentioning([&] { lenet5::load_mnist(m_dir); },
                                      {(m_dir / "t10k-images-idx3-ubyte").string(), "no images"}));
}

TEST_F(MnistTest, ReportsInvalidLabelWithItsFile) {
  write_small_mnist();
  write("t10k-labels-idx1-ubyte", label_file({7, 10}));
  EXPECT_TRUE(throws_error_mentioning([&] { lenet5::load_mnist(m_dir); },
                                      {(m_dir / "t10k-labels-idx1-ubyte").string(), "label 10"}));
}

TEST_F(MnistTest, MissingFileNamesItAndTheFix) {
  write_small_mnist();
  fs::remove(m_dir / "t10k-labels-idx1-ubyte");
  EXPECT_TRUE(throws_error_mentioning(
      [&] { lenet5::load_mnist(m_dir); },
      {"MNIST not found in " + m_dir.string(), "missing t10k-labels-idx1-ubyte[.gz]",
       "scripts/fetch_mnist.sh", "--data DIR"}));
}

TEST_F(MnistTest, MissingDirectoryNamesTheFix) {
  const fs::path absent = m_dir / "absent";
  EXPECT_TRUE(throws_error_mentioning(
      [&] { lenet5::load_mnist(absent); },
      {"MNIST not found in " + absent.string(), "scripts/fetch_mnist.sh", "--data DIR"}));
}

TEST(ResolveDataDir, FlagBeatsEnvironmentBeatsDefault) {
  {
    DataEnv env("/from/env");
    EXPECT_EQ(lenet5::resolve_data_dir("/from/flag"), fs::path("/from/flag"));
    EXPECT_EQ(lenet5::resolve_data_dir(""), fs::path("/from/env"));
  }
  {
    DataEnv env(nullptr);
    EXPECT_EQ(lenet5::resolve_data_dir(""), fs::path("data/mnist"));
  }
  {
    DataEnv env("");
    EXPECT_EQ(lenet5::resolve_data_dir(""), fs::path("data/mnist"));
  }
}

const fs::path kRealMnist = fs::path(LENET5_SOURCE_DIR) / "data" / "mnist";

bool real_mnist_present() {
  return fs::exists(kRealMnist / "train-images-idx3-ubyte") ||
         fs::exists(kRealMnist / "train-images-idx3-ubyte.gz");
}

TEST(RealMnist, LoadsTheOriginalFiles) {
  if (!real_mnist_present()) GTEST_SKIP() << "MNIST not in data/mnist: run scripts/fetch_mnist.sh";
  const lenet5::Mnist mnist = lenet5::load_mnist(kRealMnist);
  EXPECT_EQ(mnist.train.count, 60000);
  EXPECT_EQ(mnist.test.count, 10000);
  EXPECT_EQ(mnist.train.labels.front(), 5);
  EXPECT_EQ(mnist.test.labels.front(), 7);
  // CRC-32 of the uncompressed originals, the files whose SHA-256 fetch_mnist.sh checks.
  EXPECT_EQ(mnist.train.images_crc32, 0xE9F4D8B3u);
  EXPECT_EQ(mnist.train.labels_crc32, 0xE0CB4AD2u);
  EXPECT_EQ(mnist.test.images_crc32, 0x91373BDFu);
  EXPECT_EQ(mnist.test.labels_crc32, 0x4AB9EFF9u);
}

// Runs scripts/fetch_mnist.sh offline with the given mirror and target; returns its exit status
// and leaves its stderr in `log`.
int run_fetch(const fs::path& mirror, const fs::path& target, const fs::path& log) {
  const std::string command = "LENET5_FETCH_OFFLINE=1 LENET5_MNIST_MIRROR='" + mirror.string() +
                              "' bash '" LENET5_SOURCE_DIR "/scripts/fetch_mnist.sh' '" +
                              target.string() + "' 2>'" + log.string() + "'";
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string read_text(const fs::path& file) {
  std::ifstream in(file);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST_F(MnistTest, FetchScriptFailsCleanlyWhenNoSourceHasTheFiles) {
  const fs::path mirror = m_dir / "mirror", target = m_dir / "target", log = m_dir / "log";
  fs::create_directories(mirror);
  std::ofstream(mirror / "train-images-idx3-ubyte") << "not MNIST";
  write_gz("mirror/t10k-labels-idx1-ubyte.gz", label_file({7, 2}));
  EXPECT_EQ(run_fetch(mirror, target, log), 1);
  ASSERT_TRUE(fs::is_directory(target));
  EXPECT_TRUE(fs::is_empty(target)) << "left a file behind in " << target;
  const std::string messages = read_text(log);
  EXPECT_NE(messages.find("fetch_mnist: "), std::string::npos) << messages;
  EXPECT_NE(messages.find("SHA-256 does not match"), std::string::npos) << messages;
  EXPECT_NE(messages.find("LENET5_MNIST_MIRROR"), std::string::npos) << messages;
}

TEST_F(MnistTest, FetchScriptInstallsFromMirrorAndIsIdempotent) {
  if (!real_mnist_present()) GTEST_SKIP() << "MNIST not in data/mnist: run scripts/fetch_mnist.sh";
  const fs::path target = m_dir / "target", log = m_dir / "log";
  ASSERT_EQ(run_fetch(kRealMnist, target, log), 0) << read_text(log);
  EXPECT_EQ(lenet5::load_mnist(target).test.labels_crc32, 0x4AB9EFF9u);
  EXPECT_EQ(std::distance(fs::directory_iterator(target), fs::directory_iterator()), 4);
  ASSERT_EQ(run_fetch(m_dir / "no-mirror", target, log), 0) << read_text(log);
  EXPECT_NE(read_text(log).find("present and verified"), std::string::npos) << read_text(log);
}

}  // namespace
