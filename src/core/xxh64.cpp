// XXH64 as its specification writes it: four lanes over 32-byte stripes, then the tail and the
// avalanche.
#include "core/xxh64.hpp"

namespace lenet5 {
namespace {

constexpr std::uint64_t kPrime1 = 0x9E3779B185EBCA87ull;
constexpr std::uint64_t kPrime2 = 0xC2B2AE3D27D4EB4Full;
constexpr std::uint64_t kPrime3 = 0x165667B19E3779F9ull;
constexpr std::uint64_t kPrime4 = 0x85EBCA77C2B2AE63ull;
constexpr std::uint64_t kPrime5 = 0x27D4EB2F165667C5ull;

std::uint64_t rotate_left(std::uint64_t x, int bits) {
  return (x << bits) | (x >> (64 - bits));
}

// Little-endian loads, spelled out so the result is the same on any machine; compilers turn each
// into one load on little-endian ones (at -O2 too, which a loop over the bytes would not get).
std::uint64_t load32(const std::uint8_t* p) {
  return std::uint64_t{p[0]} | std::uint64_t{p[1]} << 8 | std::uint64_t{p[2]} << 16 |
         std::uint64_t{p[3]} << 24;
}
std::uint64_t load64(const std::uint8_t* p) {
  return load32(p) | load32(p + 4) << 32;
}

std::uint64_t round(std::uint64_t lane, std::uint64_t input) {
  return rotate_left(lane + input * kPrime2, 31) * kPrime1;
}

std::uint64_t merge_lane(std::uint64_t hash, std::uint64_t lane) {
  return (hash ^ round(0, lane)) * kPrime1 + kPrime4;
}

// The four lanes over every whole 32-byte stripe, folded into one value; advances p past them.
std::uint64_t hash_stripes(const std::uint8_t*& p, const std::uint8_t* end, std::uint64_t seed) {
  std::uint64_t lanes[4] = {seed + kPrime1 + kPrime2, seed + kPrime2, seed, seed - kPrime1};
  for (; end - p >= 32; p += 32)
    for (int i = 0; i < 4; ++i) lanes[i] = round(lanes[i], load64(p + 8 * i));
  std::uint64_t hash = rotate_left(lanes[0], 1) + rotate_left(lanes[1], 7) +
                       rotate_left(lanes[2], 12) + rotate_left(lanes[3], 18);
  for (std::uint64_t lane : lanes) hash = merge_lane(hash, lane);
  return hash;
}

}  // namespace

std::uint64_t xxh64(const void* data, std::size_t size, std::uint64_t seed) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  const std::uint8_t* const end = p + size;
  std::uint64_t hash = size >= 32 ? hash_stripes(p, end, seed) : seed + kPrime5;
  hash += size;
  // The tail of fewer than 32 bytes: 8, then 4, then 1 byte at a time.
  for (; end - p >= 8; p += 8)
    hash = rotate_left(hash ^ round(0, load64(p)), 27) * kPrime1 + kPrime4;
  if (end - p >= 4) {
    hash = rotate_left(hash ^ load32(p) * kPrime1, 23) * kPrime2 + kPrime3;
    p += 4;
  }
  for (; p < end; ++p) hash = rotate_left(hash ^ *p * kPrime5, 11) * kPrime1;
  // The final avalanche, so every input bit reaches every output bit.
  hash = (hash ^ (hash >> 33)) * kPrime2;
  hash = (hash ^ (hash >> 29)) * kPrime3;
  return hash ^ (hash >> 32);
}

}  // namespace lenet5
