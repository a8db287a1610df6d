#include "core/rng.hpp"

#include <numeric>
#include <utility>

namespace lenet5 {

std::uint64_t stream_seed(std::uint64_t seed, RngStream stream, std::uint64_t index) {
  // Three rounds of mixing so that neighbouring (seed, stream, index) triples are unrelated.
  SplitMix64 mix(seed);
  std::uint64_t value = mix.next() ^ (std::uint64_t(stream) * 0xD1B54A32D192ED03ull);
  SplitMix64 mix2(value);
  value = mix2.next() ^ (index * 0x8CB92BA72F3D8DD7ull);
  return SplitMix64(value).next();
}

std::vector<std::int32_t> epoch_permutation(std::uint64_t seed, int epoch, int count) {
  std::vector<std::int32_t> order(count);
  std::iota(order.begin(), order.end(), 0);
  SplitMix64 rng(stream_seed(seed, RngStream::shuffle, std::uint64_t(epoch)));
  for (int i = count - 1; i > 0; --i) std::swap(order[i], order[rng.below(std::uint32_t(i + 1))]);
  return order;
}

}  // namespace lenet5
