// XXH64 (core/xxh64.hpp) against the reference implementation's values (libxxhash 0.8.1,
// XXH64(data, size, seed)), at every length that takes a different path through the algorithm:
// empty, the 1-byte and 4-byte tails, whole 8-byte words, and one or more 32-byte stripes.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/xxh64.hpp"

namespace lenet5 {
namespace {

std::uint64_t hash_of(const std::string& text, std::uint64_t seed = 0) {
  return xxh64(text.data(), text.size(), seed);
}

TEST(Xxh64, MatchesTheReferenceOnText) {
  EXPECT_EQ(hash_of(""), 0xEF46DB3751D8E999ull);
  EXPECT_EQ(hash_of("a"), 0xD24EC4F1A98C6E5Bull);
  EXPECT_EQ(hash_of("abc"), 0x44BC2CF5AD770999ull);
  EXPECT_EQ(hash_of("abc", 1), 0xBEA9CA8199328908ull);
  EXPECT_EQ(hash_of("The quick brown fox jumps over the lazy dog"), 0x0B242D361FDA71BCull);
}

TEST(Xxh64, MatchesTheReferenceAtEveryLengthClass) {
  std::vector<std::uint8_t> bytes(256);
  for (int i = 0; i < 256; ++i) bytes[i] = static_cast<std::uint8_t>(i);  // 0, 1, ..., 255
  const struct {
    std::size_t size;
    std::uint64_t expected;
  } cases[] = {
      {3, 0xE5C7BB4533BC65DDull},   {4, 0xFFCED8604453CC1Eull},  {7, 0x14CC643F630C72D2ull},
      {8, 0x884A173614B81B8Dull},   {12, 0x424AF23F1F08DCA5ull}, {31, 0xC346D2B59B4D8EE1ull},
      {32, 0xCBF59C5116FF32B4ull},  {33, 0x0C535D1ACAFB8EADull}, {63, 0xE26AA9E2A95F8E4Full},
      {100, 0x6AC1E58032166597ull}, {256, 0x1FACBE8406CD904Bull}};
  for (const auto& c : cases) EXPECT_EQ(xxh64(bytes.data(), c.size), c.expected) << c.size;
}

TEST(Xxh64, ChangesWithAnyOneBitOfALongInput) {
  std::vector<std::uint8_t> bytes(4096, 0x5A);
  const std::uint64_t original = xxh64(bytes.data(), bytes.size());
  for (std::size_t i : {std::size_t{0}, std::size_t{1000}, bytes.size() - 1}) {
    bytes[i] ^= 1;
    EXPECT_NE(xxh64(bytes.data(), bytes.size()), original) << "byte " << i;
    bytes[i] ^= 1;
  }
}

}  // namespace
}  // namespace lenet5
