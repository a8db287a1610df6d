// What the code's comments hold, checked over every source file of src/ and cuda/: each .cpp and
// .cu opens with a comment saying what it holds (every header already does), and no comment dates
// a measurement or cites the README or a notes file for one: the reasoning stays in the code, the
// dated figures live in docs/results.md, where they are kept up to date.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "test_util.hpp"

namespace lenet5 {
namespace {

namespace fs = std::filesystem;

// Repository-relative paths of the files under src/ and cuda/ whose extension is one of
// `extensions`.
std::vector<std::string> sources(const std::vector<std::string>& extensions) {
  const fs::path root = testing::source_dir();
  std::vector<std::string> files;
  for (const char* top : {"src", "cuda"})
    for (const auto& entry : fs::recursive_directory_iterator(root / top)) {
      const std::string extension = entry.path().extension().string();
      if (!entry.is_regular_file()) continue;
      for (const std::string& wanted : extensions)
        if (extension == wanted) files.push_back(fs::relative(entry.path(), root).generic_string());
    }
  return files;
}

TEST(SourceComments, EverySourceFileOpensWithWhatItHolds) {
  const std::vector<std::string> files = sources({".cpp", ".cu"});
  ASSERT_GT(files.size(), 100u) << "the walk found too few sources under " << testing::source_dir();
  for (const std::string& file : files) {
    std::ifstream in(fs::path(testing::source_dir()) / file);
    std::string first;
    std::getline(in, first);
    EXPECT_EQ(first.rfind("// ", 0), 0u)
        << file << " opens with \"" << first << "\": begin it with a comment line or two saying "
        << "what the file holds";
  }
}

// A date (2026-11-28), or a pointer to where a measurement was written down: both age, and a
// comment should carry the reason, not the log entry.
TEST(SourceComments, NoCommentCitesADatedMeasurement) {
  const std::regex comment(R"re(//(.*)$)re");
  const std::regex dated(R"re(\b(19|20)[0-9]{2}-[01][0-9](-[0-3][0-9])?\b|README|perf-notes)re");
  int lines = 0;
  for (const std::string& file : sources({".cpp", ".hpp", ".cu", ".cuh"})) {
    std::ifstream in(fs::path(testing::source_dir()) / file);
    std::string line;
    std::smatch match;
    for (int number = 1; std::getline(in, line); ++number) {
      ++lines;
      if (!std::regex_search(line, match, comment)) continue;
      const std::string text = match[1];
      EXPECT_FALSE(std::regex_search(text, dated))
          << file << ":" << number << " \"" << text << "\": say what was measured and why it "
          << "decides, without the date or the log it came from (the figure belongs in docs/)";
    }
  }
  EXPECT_GT(lines, 10000) << "the walk read too few lines to mean anything";
}

}  // namespace
}  // namespace lenet5
