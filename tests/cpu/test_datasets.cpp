// The data sets' table (data/datasets.hpp): every entry is well formed, and MNIST's entry agrees
// with scripts/fetch_mnist.sh and with the files the loader reads. A new entry adds its own test
// here (its checksums against its files when they are present).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/shapes.hpp"
#include "data/datasets.hpp"
#include "data/mnist.hpp"
#include "test_util.hpp"

namespace lenet5 {
namespace {

namespace fs = std::filesystem;

std::vector<const DataFile*> files_of(const DatasetDescription& d) {
  return {&d.train_images, &d.train_labels, &d.test_images, &d.test_labels};
}

TEST(Datasets, EveryEntryIsWellFormed) {
  std::set<std::string> names;
  for (const DatasetDescription& d : datasets()) {
    SCOPED_TRACE(d.name);
    EXPECT_TRUE(names.insert(d.name).second) << "two entries named " << d.name;
    EXPECT_FALSE(d.title.empty());
    EXPECT_FALSE(d.folder.empty());
    EXPECT_FALSE(d.fetch_hint.empty());
    // The network's output layer has kClasses units, one per class name.
    EXPECT_EQ(d.class_names.size(), std::size_t(kClasses));
    std::set<std::string> file_names;
    for (const DataFile* file : files_of(d)) {
      EXPECT_TRUE(file_names.insert(file->name).second) << file->name << " named twice";
      EXPECT_TRUE(std::regex_match(file->sha256, std::regex("[0-9a-f]{64}")))
          << file->name << ": '" << file->sha256 << "' is not a SHA-256 in hex";
    }
  }
}

TEST(Datasets, UnknownNameListsTheKnownOnes) {
  EXPECT_EQ(&find_dataset("mnist"), &mnist_dataset());
  try {
    find_dataset("cifar");
    ADD_FAILURE() << "no UsageError for an unknown data set";
  } catch (const UsageError& e) {
    EXPECT_PRED2(testing::mentions, e.what(), "unknown data set 'cifar' (known: mnist)");
  }
}

// fetch_mnist.sh checks the files against its own table, in bash: it must be the entry's.
TEST(Datasets, MnistEntryMatchesTheFetchScript) {
  const std::string script = testing::read_text(testing::source_dir() / "scripts/fetch_mnist.sh");
  for (const DataFile* file : files_of(mnist_dataset()))
    EXPECT_TRUE(testing::mentions(script, "[" + file->name + "]=" + file->sha256 + "\n"))
        << "scripts/fetch_mnist.sh lacks " << file->name << " with SHA-256 " << file->sha256;
  EXPECT_EQ(mnist_dataset().class_names,
            (std::vector<std::string>{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}));
}

// SHA-256 of a file's uncompressed contents, from the system's tool (fetch_mnist.sh uses the
// same); empty if the tool is missing.
std::string sha256_of(const fs::path& file) {
  const std::string reader = file.extension() == ".gz" ? "gzip -dc" : "cat";
  const std::string command = reader + " '" + file.string() + "' | sha256sum 2>/dev/null";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) return "";
  char hex[65] = {};
  return std::fscanf(pipe.get(), "%64s", hex) == 1 ? std::string(hex) : std::string();
}

// The loader reads the entry's four files (plain or .gz) from the data folder, and those files
// are the ones whose checksums the entry records.
TEST(Datasets, MnistEntryMatchesTheFilesTheLoaderReads) {
  LENET5_REQUIRE_MNIST();
  const fs::path dir = testing::mnist_dir();
  const Mnist loaded = load_dataset(mnist_dataset(), dir);
  EXPECT_EQ(loaded.train.count, 60000);
  EXPECT_EQ(loaded.test.count, 10000);
  for (const DataFile* file : files_of(mnist_dataset())) {
    const fs::path path = fs::exists(dir / file->name) ? dir / file->name
                                                         : dir / (file->name + ".gz");
    ASSERT_TRUE(fs::exists(path)) << path;
    const std::string sha = sha256_of(path);
    if (sha.empty()) GTEST_SKIP() << "no sha256sum on this machine to check " << path;
    EXPECT_EQ(sha, file->sha256) << path;
  }
}

}  // namespace
}  // namespace lenet5
