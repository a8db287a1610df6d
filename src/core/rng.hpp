// Seeded randomness with a fixed, documented algorithm (SplitMix64), so that the same seed gives
// the same initial weights and the same epoch permutations with any compiler or standard library
// (std:: distributions are implementation-defined).
#pragma once

#include <cstdint>
#include <vector>

#include "core/host_device.hpp"

namespace lenet5 {

// SplitMix64's increment, and its output function of the incremented state. Generic, so that a
// vector of states (GCC's vector extension: the CPU's float augmentation draws four at once)
// mixes with exactly the operations one state does.
constexpr std::uint64_t kSplitMix64Increment = 0x9E3779B97F4A7C15ull;
template <class Words>
LENET5_HD inline Words splitmix64_mix(Words z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

class SplitMix64 {
 public:
  LENET5_HD explicit SplitMix64(std::uint64_t seed) : m_state(seed) {}
  LENET5_HD std::uint64_t next() { return splitmix64_mix(m_state += kSplitMix64Increment); }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }
  // Uniform integer in [0, bound), by Lemire's multiply-shift on 32 random bits (bias below
  // bound / 2^32, under 1.4e-5 for MNIST's 60,000: negligible for shuffling).
  std::uint32_t below(std::uint32_t bound) {
    return std::uint32_t(((next() >> 32) * std::uint64_t(bound)) >> 32);
  }
  std::uint64_t state() const { return m_state; }

 private:
  std::uint64_t m_state;
};

// Independent streams per purpose: the permutation of epoch e depends only on (seed, e), so a run
// resumed at any epoch sees exactly the order an uninterrupted run would have seen.
// Defined here so that the augmentation's kernels key their draws exactly as the host does.
enum class RngStream : std::uint64_t { init = 1, shuffle = 2, augment = 3, robustness = 4 };
LENET5_HD inline std::uint64_t stream_seed(std::uint64_t seed, RngStream stream,
                                           std::uint64_t index) {
  // Three rounds of mixing so that neighbouring (seed, stream, index) triples are unrelated.
  SplitMix64 mix(seed);
  std::uint64_t value = mix.next() ^ (std::uint64_t(stream) * 0xD1B54A32D192ED03ull);
  SplitMix64 mix2(value);
  value = mix2.next() ^ (index * 0x8CB92BA72F3D8DD7ull);
  return SplitMix64(value).next();
}

// Fisher-Yates permutation of 0..count-1 for the given epoch.
std::vector<std::int32_t> epoch_permutation(std::uint64_t seed, int epoch, int count);

}  // namespace lenet5
