// Turning an arbitrary digit image into a 28x28 digit prepared the way MNIST's were:
// the paper's brightness under uneven light -> polarity -> the ink (Otsu's threshold; the largest
// piece and the pieces near it, not specks) -> crop -> limit the slant to the middle of MNIST's
// range -> hairlines to full strength -> widen thin strokes, thin very bold ones -> scale the
// longer side to 20 px (area averaging) -> place in a 28x28 field with the centre of mass at
// (14, 14) -> lift the faint grey of a digit drawn thinner than MNIST's median. Normalising and
// padding to 32x32 happen in the network's input code, exactly as for the training set. A picture
// over 2048 px on its longer side is first reduced to that size (area averaging).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "image/image_io.hpp"

namespace lenet5 {

enum class InvertMode { automatic, yes, no };

// "auto" | "yes" | "no" (the --invert values); anything else throws lenet5::UsageError.
InvertMode parse_invert_mode(const std::string& text);

struct Digit28 {
  std::array<std::uint8_t, 28 * 28> pixels;  // (28, 28), row-major, 0 = background, 255 = ink
  bool inverted;                             // whether the input was dark ink on light paper
};

// In automatic mode the image is inverted when its ink is darker than its paper: when the pixels
// that depart most from the fitted paper brightness (beyond half the largest departure) carry
// more darkness than lightness.
// Throws lenet5::Error "<name> is blank: no digit found" when nothing stands out from the
// background; name_for_errors is used only in messages.
Digit28 preprocess_digit(const GrayImage& image, InvertMode invert,
                         const std::string& name_for_errors);

}  // namespace lenet5
