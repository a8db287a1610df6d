// The documents: README.md, docs/*.md and tests/errata.md. Every relative Markdown link and
// picture among them must point at a file of the tree, and a link's #anchor at a heading of its
// target (or an <a id="...">), named as GitHub names headings: the heading's text lowercased, its
// punctuation dropped, its spaces turned into hyphens, a -1, -2, ... added to repeats. Links inside
// code (fenced blocks and `spans`) are not links. The README stays a short page for users that
// starts with the two set-up commands CI runs, and links every document of docs/.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "test_util.hpp"

namespace lenet5 {
namespace {

namespace fs = std::filesystem;

// The documents whose links are checked, as paths relative to the repository.
std::vector<fs::path> documents() {
  const fs::path root = testing::source_dir();
  std::vector<fs::path> result{"README.md", "tests/errata.md"};
  for (const auto& entry : fs::directory_iterator(root / "docs"))
    if (entry.path().extension() == ".md") result.push_back(fs::relative(entry.path(), root));
  return result;
}

// `text` without its fenced code blocks, each line of them left blank, so that nothing inside
// them reads as a heading or a link.
std::string without_code_blocks(const std::string& text) {
  std::string prose;
  bool fenced = false;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    const std::size_t indent = line.find_first_not_of(' ');
    const bool fence = indent != std::string::npos && line.compare(indent, 3, "```") == 0;
    if (fence) fenced = !fenced;
    prose += (fence || fenced) ? std::string() : line;
    prose += '\n';
    start = end + 1;
  }
  return prose;
}

// `text` without its fenced code blocks and code spans: what may hold links.
std::string without_code(const std::string& text) {
  static const std::regex span("`[^`]*`");
  return std::regex_replace(without_code_blocks(text), span, "``");
}

// The Unicode code point at text[i], advancing i past it (invalid bytes read as themselves).
char32_t next_code_point(const std::string& text, std::size_t& i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  const int length = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
  if (i + length > text.size() || length == 1) return char32_t(byte(i++));
  char32_t point = lead & (0x7F >> length);
  for (int k = 1; k < length; ++k) point = (point << 6) | (byte(i + k) & 0x3F);
  i += length;
  return point;
}

// Whether GitHub keeps a character outside ASCII in an anchor: letters, marks and digits stay,
// punctuation and symbols go. An approximation by blocks, enough for these documents' headings.
bool kept_in_anchor(char32_t point) {
  if (point >= 0x2000 && point <= 0x2BFF) return false;  // punctuation, symbols, arrows, maths
  if (point == 0xD7 || point == 0xF7) return false;      // × and ÷
  if (point >= 0xA0 && point <= 0xBF) {                  // Latin-1 punctuation and signs
    const std::set<char32_t> letters_and_numbers{0xAA, 0xB2, 0xB3, 0xB5, 0xB9,
                                                 0xBA, 0xBC, 0xBD, 0xBE};
    return letters_and_numbers.count(point) > 0;
  }
  return true;
}

// The anchor GitHub gives a heading whose Markdown text is `heading`.
std::string anchor_of(std::string heading) {
  // The text as rendered: a link shows its text, emphasis and code marks show nothing.
  static const std::regex link(R"(!?\[([^\]]*)\]\([^)]*\))");
  heading = std::regex_replace(heading, link, "$1");
  std::string anchor;
  for (std::size_t i = 0; i < heading.size();) {
    const std::size_t begin = i;
    const char32_t point = next_code_point(heading, i);
    if (point < 0x80) {
      const char c = char(point);
      if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')
        anchor += char(std::tolower(static_cast<unsigned char>(c)));
      else if (c == ' ')
        anchor += '-';
    } else if (kept_in_anchor(point)) {
      anchor += heading.substr(begin, i - begin);  // as written: no capitals outside ASCII here
    }
  }
  return anchor;
}

// Every anchor a document offers: its headings', repeats numbered, and its <a id=...>s.
std::set<std::string> anchors_in(const fs::path& file) {
  // A heading's code spans are part of its text (`lenet5 figures` gives lenet5-figures).
  const std::string prose = without_code_blocks(testing::read_text(file));
  static const std::regex heading(R"(^ {0,3}#{1,6}[ \t]+(.*?)[ \t]*#*[ \t]*$)");
  static const std::regex named(R"re(<a\s+(?:id|name)="([^"]+)")re");
  std::set<std::string> anchors;
  std::map<std::string, int> seen;
  std::size_t start = 0;
  while (start < prose.size()) {
    std::size_t end = prose.find('\n', start);
    if (end == std::string::npos) end = prose.size();
    const std::string line = prose.substr(start, end - start);
    std::smatch match;
    if (std::regex_match(line, match, heading)) {
      const std::string anchor = anchor_of(match[1]);
      const int repeat = seen[anchor]++;
      anchors.insert(repeat == 0 ? anchor : anchor + "-" + std::to_string(repeat));
    }
    start = end + 1;
  }
  for (std::sregex_iterator it(prose.begin(), prose.end(), named), stop; it != stop; ++it)
    anchors.insert((*it)[1]);
  return anchors;
}

struct Link {
  fs::path document;   // relative to the repository
  std::string target;  // as written
};

// Every inline link and picture of a document, outside code.
std::vector<Link> links_in(const fs::path& document) {
  const std::string prose = without_code(testing::read_text(testing::source_dir() / document));
  static const std::regex link(R"re(\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\))re");
  std::vector<Link> result;
  for (std::sregex_iterator it(prose.begin(), prose.end(), link), stop; it != stop; ++it)
    result.push_back({document, (*it)[1]});
  return result;
}

bool is_external(const std::string& target) {
  static const std::regex scheme(R"(^[a-zA-Z][a-zA-Z0-9+.-]*:)");
  return std::regex_search(target, scheme);
}

// Why a relative link is dead, or empty when it is not.
std::string dead_because(const Link& link) {
  const fs::path root = testing::source_dir();
  const std::size_t hash = link.target.find('#');
  const std::string path = link.target.substr(0, hash);
  const std::string anchor = hash == std::string::npos ? "" : link.target.substr(hash + 1);
  const fs::path target =
      path.empty() ? root / link.document : root / link.document.parent_path() / path;
  if (!fs::exists(target)) return "no file " + path;
  const fs::path inside = fs::weakly_canonical(target);
  const std::string tree = fs::weakly_canonical(root).string() + "/";
  if (inside.string().rfind(tree, 0) != 0) return path + " is outside the repository";
  if (anchor.empty()) return "";
  if (target.extension() != ".md") return "an anchor into " + path + ", which is not Markdown";
  if (!anchors_in(target).count(anchor)) return "no heading #" + anchor + " in " + path;
  return "";
}

TEST(Docs, GitHubsAnchorsAreMadeAsGitHubMakesThem) {
  EXPECT_EQ(anchor_of("The default configuration and the main command"),
            "the-default-configuration-and-the-main-command");
  EXPECT_EQ(anchor_of("Reading people's images"), "reading-peoples-images");
  EXPECT_EQ(anchor_of("Time to 99 %"), "time-to-99-");
  EXPECT_EQ(anchor_of("Two versions: one or two samples per SM"),
            "two-versions-one-or-two-samples-per-sm");
  EXPECT_EQ(anchor_of("The chapter's figures: `lenet5 figures`"),
            "the-chapters-figures-lenet5-figures");
  EXPECT_EQ(anchor_of("What \"deterministic\" covers"), "what-deterministic-covers");
  EXPECT_EQ(anchor_of("Errata E01–E26 [here](x.md)"), "errata-e01e26-here");
  EXPECT_EQ(anchor_of("snake_case and x-y"), "snake_case-and-x-y");
}

TEST(Docs, ADeadLinkOrAnchorIsFoundAndALiveOneIsNot) {
  EXPECT_EQ(dead_because({"README.md", "docs/results.md#ci"}), "");
  EXPECT_EQ(dead_because({"docs/usage.md", "../README.md"}), "");
  EXPECT_EQ(dead_because({"docs/usage.md", "#exit-codes"}), "");
  EXPECT_EQ(dead_because({"README.md", "docs/no-such-page.md"}), "no file docs/no-such-page.md");
  EXPECT_EQ(dead_because({"README.md", "docs/results.md#no-such-heading"}),
            "no heading #no-such-heading in docs/results.md");
  EXPECT_EQ(dead_because({"docs/usage.md", "../../outside.md"}), "no file ../../outside.md");
  // Links inside code are not links; a link's text may hold code.
  EXPECT_EQ(without_code("see `[a](b.md)` and\n```\n[c](d.md)\n```\n[`e`](f.md)\n"),
            "see `` and\n\n\n\n[``](f.md)\n");
}

TEST(Docs, NoRelativeLinkIsDead) {
  int checked = 0;
  for (const fs::path& document : documents()) {
    for (const Link& link : links_in(document)) {
      if (is_external(link.target)) continue;
      ++checked;
      const std::string why = dead_because(link);
      EXPECT_TRUE(why.empty()) << document.string() << ": the link to " << link.target
                               << " is dead: " << why;
    }
  }
  // The documents link each other in hundreds of places; a handful would mean the reading failed.
  EXPECT_GT(checked, 100);
}

TEST(Docs, TheReadmeLinksEveryDocument) {
  std::set<std::string> linked;
  for (const Link& link : links_in("README.md"))
    linked.insert(link.target.substr(0, link.target.find('#')));
  for (const fs::path& document : documents())
    if (document.parent_path() == "docs")
      EXPECT_TRUE(linked.count(document.generic_string()))
          << "README.md does not link " << document.string() << ": add it to where to read more";
}

// CI runs the second command word for word (.ci/run), and a newcomer reads the first one first.
TEST(Docs, TheReadmeIsShortAndStartsWithTheTwoCommands) {
  const std::string readme = testing::read_text(testing::source_dir() / "README.md");
  EXPECT_EQ(readme.rfind("# lenet5\n\n```sh\n"
                         "scripts/setup.sh && build/lenet5 train --config configs/lenet5.toml\n"
                         "scripts/setup.sh && ctest --test-dir build --output-on-failure -j2\n"
                         "```\n",
                         0),
            0u);
  const auto lines = std::count(readme.begin(), readme.end(), '\n');
  EXPECT_LE(lines, 300) << "README.md is for users; measurements go to docs/results.md";
}

}  // namespace
}  // namespace lenet5
