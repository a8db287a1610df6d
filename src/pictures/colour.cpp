// Colour maps (greyscale, diverging, sequential) and the value ranges they read.
#include "pictures/colour.hpp"

#include <algorithm>
#include <array>
#include <cmath>

namespace lenet5::pictures {
namespace {

double clamp01(double t) {
  return std::isnan(t) ? 0.5 : std::clamp(t, 0.0, 1.0);
}

std::uint8_t channel(double value) {
  return std::uint8_t(std::lround(std::clamp(value, 0.0, 255.0)));
}

Rgb mix(Rgb a, Rgb b, double t) {
  return {channel(a.r + (b.r - a.r) * t), channel(a.g + (b.g - a.g) * t),
          channel(a.b + (b.b - a.b) * t)};
}

// RdBu's five-class stops, blue end first.
constexpr std::array<Rgb, 5> kDivergingStops{Rgb{5, 48, 97}, Rgb{67, 147, 195}, Rgb{247, 247, 247},
                                             Rgb{214, 96, 77}, Rgb{103, 0, 31}};

}  // namespace

double ValueRange::position(double value) const {
  if (!(hi > lo)) return 0.5;
  return clamp01((value - lo) / (hi - lo));
}

ValueRange symmetric_range(const std::vector<float>& values) {
  double largest = 0;
  for (float v : values) largest = std::max(largest, std::fabs(double(v)));
  if (largest == 0) largest = 1;
  return {-largest, largest};
}

Rgb greyscale(double t) {
  const std::uint8_t v = channel(255.0 * clamp01(t));
  return {v, v, v};
}

Rgb diverging(double t) {
  const double scaled = clamp01(t) * double(kDivergingStops.size() - 1);
  const std::size_t stop = std::min(std::size_t(scaled), kDivergingStops.size() - 2);
  return mix(kDivergingStops[stop], kDivergingStops[stop + 1], scaled - double(stop));
}

Rgb sequential(double t) {
  return diverging(0.5 + 0.5 * clamp01(t));
}

}  // namespace lenet5::pictures
