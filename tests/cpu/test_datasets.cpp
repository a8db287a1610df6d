// The data sets' table (data/datasets.hpp): every entry is well formed and agrees with
// scripts/fetch_mnist.sh, and with the files the loader reads where they are present (MNIST in
// data/mnist, Fashion-MNIST in data/fashion-mnist); folders are recognised by their files'
// checksums.
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
    EXPECT_FALSE(d.class_noun.empty());
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
    EXPECT_PRED2(testing::mentions, e.what(),
                 "unknown data set 'cifar' (known: mnist, fashion-mnist)");
  }
  EXPECT_EQ(dataset_names(), (std::vector<std::string>{"mnist", "fashion-mnist"}));
}

// fetch_mnist.sh checks the files against its own tables, in bash: they must be the entries'.
TEST(Datasets, EveryEntryMatchesTheFetchScript) {
  const std::string script = testing::read_text(testing::source_dir() / "scripts/fetch_mnist.sh");
  for (const DatasetDescription& d : datasets()) {
    EXPECT_TRUE(testing::mentions(script, d.name + ")")) << "no case for " << d.name;
    for (const DataFile* file : files_of(d))
      EXPECT_TRUE(testing::mentions(script, "[" + file->name + "]=" + file->sha256 + "\n"))
          << "scripts/fetch_mnist.sh lacks " << d.name << "'s " << file->name << " with SHA-256 "
          << file->sha256;
  }
  EXPECT_EQ(mnist_dataset().class_names,
            (std::vector<std::string>{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}));
}

// Zalando's labels, in their order (github.com/zalandoresearch/fashion-mnist, "Labels").
TEST(Datasets, FashionMnistNamesItsClassesAsZalandoDoes) {
  const DatasetDescription& fashion = find_dataset("fashion-mnist");
  EXPECT_EQ(fashion.class_names,
            (std::vector<std::string>{"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                      "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"}));
  EXPECT_EQ(fashion.folder, "data/fashion-mnist");
  EXPECT_EQ(resolve_data_dir("/from/flag", fashion), fs::path("/from/flag"));
}

// A folder's data set is recognised by the CRC-32s the loader computes; a set of one's own (or a
// subset) is no entry's.
TEST(Datasets, SplitsAreRecognisedByTheirChecksums) {
  for (const DatasetDescription& d : datasets()) {
    Dataset test;
    test.images_crc32 = d.test_images.crc32;
    test.labels_crc32 = d.test_labels.crc32;
    EXPECT_EQ(recognise_dataset(test, Split::test), &d) << d.name;
    EXPECT_EQ(recognise_dataset(test, Split::train), nullptr) << d.name;
    for (const DatasetDescription& other : datasets()) {
      if (&other == &d) {
        EXPECT_NO_THROW(require_dataset_files(other, test, Split::test, "here"));
        continue;
      }
      try {
        require_dataset_files(other, test, Split::test, "here");
        ADD_FAILURE() << d.name << "'s files passed for " << other.name << "'s";
      } catch (const Error& e) {
        EXPECT_PRED2(testing::mentions, e.what(),
                     "here holds " + d.title + "'s files, not " + other.title + "'s");
        EXPECT_PRED2(testing::mentions, e.what(), "--dataset " + d.name);
      }
    }
  }
  Dataset own;  // CRC-32s of zero: no entry's
  EXPECT_EQ(recognise_dataset(own, Split::test), nullptr);
  EXPECT_NO_THROW(require_dataset_files(mnist_dataset(), own, Split::test, "here"));
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

// The loader reads the entry's four files (plain or .gz) from `dir`, and those files are the
// ones whose checksums (SHA-256 and CRC-32) the entry records.
void expect_entry_matches_files(const DatasetDescription& dataset, const fs::path& dir) {
  const Mnist loaded = load_dataset(dataset, dir);
  EXPECT_EQ(loaded.train.count, 60000);
  EXPECT_EQ(loaded.test.count, 10000);
  EXPECT_EQ(recognise_dataset(loaded.train, Split::train), &dataset);
  EXPECT_EQ(recognise_dataset(loaded.test, Split::test), &dataset);
  for (const DataFile* file : files_of(dataset)) {
    const fs::path path = fs::exists(dir / file->name) ? dir / file->name
                                                         : dir / (file->name + ".gz");
    ASSERT_TRUE(fs::exists(path)) << path;
    const std::string sha = sha256_of(path);
    if (sha.empty()) GTEST_SKIP() << "no sha256sum on this machine to check " << path;
    EXPECT_EQ(sha, file->sha256) << path;
  }
}

TEST(Datasets, MnistEntryMatchesTheFilesTheLoaderReads) {
  LENET5_REQUIRE_MNIST();
  expect_entry_matches_files(mnist_dataset(), testing::mnist_dir());
}

TEST(Datasets, FashionMnistEntryMatchesTheFilesWherePresent) {
  const DatasetDescription& fashion = find_dataset("fashion-mnist");
  const fs::path dir = testing::source_dir() / fashion.folder;
  if (!fs::exists(dir / fashion.test_labels.name) &&
      !fs::exists(dir / (fashion.test_labels.name + ".gz")))
    GTEST_SKIP() << "Fashion-MNIST is not in " << dir
                 << " (scripts/setup.sh --fashion puts it there)";
  expect_entry_matches_files(fashion, dir);
}

}  // namespace
}  // namespace lenet5
