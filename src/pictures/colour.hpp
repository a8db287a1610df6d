// Colour maps: values to colours. Greyscale for intensities (images, activations after a
// squashing function); a diverging map for signed values such as filter weights, where white is
// zero and the colour's strength is the magnitude, so a filter's sign pattern reads at a glance.
#pragma once

#include <vector>

#include "pictures/image.hpp"

namespace lenet5::pictures {

// What a map's ends mean: `lo` maps to the map's first colour, `hi` to its last.
struct ValueRange {
  double lo = 0, hi = 1;
  // Where `value` lies, 0 at lo and 1 at hi, clamped to [0, 1]; 0.5 when the range is empty.
  double position(double value) const;
};

// [-m, m] for m the largest magnitude among `values` (1 when all are 0), so that zero is the
// diverging map's white middle whatever the values' spread.
ValueRange symmetric_range(const std::vector<float>& values);

// t in [0, 1]: black at 0, white at 1 (clamped).
Rgb greyscale(double t);
// t in [0, 1]: dark blue at 0, white (247, 247, 247) at 0.5, dark red at 1 (ColorBrewer's RdBu,
// reversed so that positive is red); piecewise linear between its five stops, clamped.
Rgb diverging(double t);
// t in [0, 1]: the diverging map's upper half, white to dark red, for counts.
Rgb sequential(double t);

using ColourMap = Rgb (*)(double);

}  // namespace lenet5::pictures
