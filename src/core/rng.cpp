// The seeded epoch permutation (a Fisher-Yates shuffle driven by SplitMix64).
#include "core/rng.hpp"

#include <numeric>
#include <utility>

namespace lenet5 {

std::vector<std::int32_t> epoch_permutation(std::uint64_t seed, int epoch, int count) {
  std::vector<std::int32_t> order(count);
  std::iota(order.begin(), order.end(), 0);
  SplitMix64 rng(stream_seed(seed, RngStream::shuffle, std::uint64_t(epoch)));
  for (int i = count - 1; i > 0; --i) std::swap(order[i], order[rng.below(std::uint32_t(i + 1))]);
  return order;
}

}  // namespace lenet5
