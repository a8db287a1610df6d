// The fixed prototypes of the output layer of Euclidean radial basis function units (--output rbf;
// LeCun, Bottou, Bengio, Haffner 1998, section II.B and Fig. 3), and the constant of the paper's
// MAP criterion (its equation (9)). Data, not parameters: no optimizer ever sees them.
#pragma once

#include <array>
#include <string_view>

#include "core/shapes.hpp"

namespace lenet5 {

// Each prototype is a 7-wide, 12-high bitmap, one value per F6 unit: 84 = 7 x 12, row-major
// (unit r * 7 + c is row r, column c). +1 where the bitmap has ink, -1 for background.
constexpr int kRbfBitmapWidth = 7;
constexpr int kRbfBitmapHeight = 12;
constexpr int kRbfUnits = kRbfBitmapWidth * kRbfBitmapHeight;  // F6's outputs

// The ten prototypes, (10, 84) row-major: prototype i is rbf_prototypes()[i * 84 .. i * 84 + 83].
const std::array<float, kClasses * kRbfUnits>& rbf_prototypes();
// Row `row` (0..11) of digit `digit`'s bitmap as entered: '#' ink, '.' background.
std::string_view rbf_bitmap_row(int digit, int row);

// The paper's j in E = y_D + log(e^-j + sum_i e^-y_i), equation (9). The paper calls it a
// positive constant and gives no value. It is the squared distance of a "none of these" class
// that always competes: a wrong class i is pushed away only while e^-y_i is not small next to
// e^-j, so j sets how far the criterion keeps pushing wrong prototypes away, and an image at a
// distance above j from every prototype is more "none of these" than any digit. With scaled-tanh
// units at +-1 a good match is at a few units of squared distance (84 units, a small error
// each), while two prototypes differ in tens of pixels, each mismatch costing (1 - -1)^2 = 4: so
// 10 lies between a match and a confusion (two mismatched pixels and a little noise).
constexpr double kMapRejectionConstant = 10.0;

}  // namespace lenet5
