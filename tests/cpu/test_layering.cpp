// The layering of the tree (design.md §9), checked on every #include of src/ and cuda/, as
// Chromium's include rules are: a folder may include only the folders its row below names, and
// the rows form an order from the ground up, so no include runs from a lower folder up and no two
// folders include each other. A new folder needs a row here, placed where it belongs.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "test_util.hpp"

namespace lenet5 {
namespace {

namespace fs = std::filesystem;

struct Rule {
  std::string folder;
  std::set<std::string> may_include;  // besides itself
};

// From the ground up; each row may name only rows above it (checked below).
const std::vector<Rule>& layering() {
  static const std::vector<Rule> rules{
      // errors, random numbers, the network's shapes, constants, settings and parameter layout
      {"src/core", {}},
      // CUDA checks, streams, device memory (Buffer) and device information
      {"cuda/runtime", {"src/core"}},
      // readers of outside data
      {"src/io", {"src/core"}},
      {"src/data", {"src/core", "src/io"}},  // io: the decoded-data cache is written atomically
      {"src/image", {"src/core"}},
      // pictures for people: PNG and SVG writers, colour maps, tiles, text (io: atomic writes)
      {"src/pictures", {"src/core", "src/io"}},
      // the layers' arithmetic: sequential CPU references and the CUDA kernels
      {"src/layers", {"src/core", "cuda/runtime"}},
      {"cuda/kernels", {"src/core", "cuda/runtime"}},
      // the engine interface and the network both engines own
      {"src/engine", {"src/core", "cuda/runtime", "src/data", "src/layers", "cuda/kernels"}},
      // the two engines
      {"src/cpu", {"src/core", "cuda/runtime", "src/data", "src/layers", "src/engine"}},
      {"cuda/engine", {"src/core", "cuda/runtime", "src/data", "cuda/kernels", "src/engine"}},
      // device code that only the textbook figures use
      {"cuda/figures", {"src/core", "cuda/runtime", "cuda/kernels"}},
      // the choice of device and engine
      {"src/backend", {"src/core", "cuda/runtime", "src/engine", "src/cpu", "cuda/engine"}},
      // what drives an engine
      {"src/train",
       {"src/core", "cuda/runtime", "src/io", "src/data", "src/image", "src/pictures", "src/engine",
        "src/backend"}},
      // MNIST's digits rendered as people's images and read through classify's preprocessing
      {"src/robustness",
       {"src/core", "cuda/runtime", "src/io", "src/data", "src/image", "src/pictures", "src/engine"}},
      // many models of one sweep, each trained as `train` trains one
      {"src/sweep",
       {"src/core", "cuda/runtime", "src/io", "src/data", "src/image", "src/pictures", "src/engine",
        "src/backend", "src/train"}},
      // the server of the page and its API (Boost.Beast); sweep: a sweep folder read as the
      // summary reads it
      {"src/serve",
       {"src/core", "cuda/runtime", "src/io", "src/data", "src/image", "src/pictures", "src/engine",
        "src/backend", "src/train", "src/sweep"}},
      {"src/figures",
       {"src/core", "cuda/runtime", "src/io", "src/data", "src/image", "src/pictures", "src/layers",
        "cuda/kernels", "src/engine", "cuda/engine", "cuda/figures", "src/backend", "src/train"}},
      // the command line and the program
      {"src/cli",
       {"src/core", "cuda/runtime", "src/io", "src/data", "src/image", "src/pictures", "src/engine",
        "src/backend", "src/train", "src/robustness", "src/sweep", "src/serve", "src/figures"}},
      {"src/main.cpp", {"src/core", "src/cli"}},
  };
  return rules;
}

// "src/train/trainer.cpp" -> "src/train"; src/main.cpp is a row of its own.
std::string folder_of(const std::string& path) {
  if (path == "src/main.cpp") return path;
  const std::size_t first = path.find('/');
  const std::size_t second = path.find('/', first + 1);
  return second == std::string::npos ? path : path.substr(0, second);
}

struct Include {
  std::string from, to;  // repository-relative files
};

// Every quoted include of every source file under src/ and cuda/, resolved as the build resolves
// it: "cuda/..." from the repository root, anything else from src/.
std::vector<Include> project_includes(std::vector<std::string>& unresolved) {
  const fs::path root = testing::source_dir();
  const std::regex include_line(R"re(^\s*#\s*include\s*"([^"]+)")re");
  std::vector<Include> result;
  for (const char* top : {"src", "cuda"}) {
    for (const auto& entry : fs::recursive_directory_iterator(root / top)) {
      if (!entry.is_regular_file()) continue;
      const std::string ext = entry.path().extension().string();
      if (ext != ".hpp" && ext != ".cpp" && ext != ".cu" && ext != ".cuh") continue;
      const std::string from = fs::relative(entry.path(), root).generic_string();
      std::ifstream in(entry.path());
      std::string line;
      std::smatch match;
      while (std::getline(in, line)) {
        if (!std::regex_search(line, match, include_line)) continue;
        const std::string written = match[1];
        const std::string to = written.rfind("cuda/", 0) == 0 ? written : "src/" + written;
        if (!fs::exists(root / to)) {
          unresolved.push_back(from + " includes \"" + written + "\"");
          continue;
        }
        result.push_back({from, to});
      }
    }
  }
  return result;
}

TEST(Layering, TheRulesOrderTheFoldersFromTheGroundUp) {
  std::set<std::string> below;
  for (const Rule& rule : layering()) {
    for (const std::string& lower : rule.may_include)
      EXPECT_TRUE(below.count(lower))
          << rule.folder << " may include " << lower << ", which is not a row above it";
    below.insert(rule.folder);
  }
}

// Whether a folder holds a source file at any depth: a folder left empty (or holding only ignored
// files) after its sources moved is not part of the tree git checks out, so it needs no row.
bool holds_source(const fs::path& folder) {
  for (const auto& entry : fs::recursive_directory_iterator(folder)) {
    const std::string extension = entry.path().extension().string();
    if (entry.is_regular_file() && (extension == ".cpp" || extension == ".hpp" ||
                                    extension == ".cu" || extension == ".cuh"))
      return true;
  }
  return false;
}

TEST(Layering, EveryFolderOfTheTreeHasARule) {
  std::set<std::string> ruled;
  for (const Rule& rule : layering()) ruled.insert(rule.folder);
  const fs::path root = testing::source_dir();
  int folders = 0;
  for (const char* top : {"src", "cuda"})
    for (const auto& entry : fs::directory_iterator(root / top)) {
      const std::string name = fs::relative(entry.path(), root).generic_string();
      if (entry.is_directory() ? !holds_source(entry.path()) : name != "src/main.cpp") continue;
      ++folders;
      EXPECT_TRUE(ruled.count(name)) << name << " has no row in layering(): give it one";
    }
  EXPECT_EQ(folders, int(ruled.size())) << "a row names a folder the tree does not have";
}

TEST(Layering, NoIncludeRunsUpOrSideways) {
  std::map<std::string, const Rule*> rules;
  for (const Rule& rule : layering()) rules[rule.folder] = &rule;
  std::vector<std::string> unresolved;
  const std::vector<Include> includes = project_includes(unresolved);
  // The tree has hundreds of includes; a handful would mean the reading went wrong.
  EXPECT_GT(includes.size(), 300u);
  for (const std::string& problem : unresolved) ADD_FAILURE() << "unresolved: " << problem;
  for (const Include& include : includes) {
    const std::string from = folder_of(include.from), to = folder_of(include.to);
    if (from == to) continue;
    const auto rule = rules.find(from);
    ASSERT_NE(rule, rules.end()) << include.from << " lies in a folder without a rule";
    EXPECT_TRUE(rule->second->may_include.count(to))
        << include.from << " includes " << include.to << ": " << from << " may not include "
        << to << " (tests/cpu/test_layering.cpp has the rules)";
  }
}

}  // namespace
}  // namespace lenet5
