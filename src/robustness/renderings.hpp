// MNIST digits rendered as the image files people bring to `lenet5 classify`: cropped tight or
// with a wide margin, scanned small and enlarged, light on dark, bold or fine strokes, blurred,
// JPEG-compressed, under uneven light on textured paper, coloured ink on coloured paper, rotated,
// or small in a large photograph. Each rendering is seeded: the same (seed, digit index) gives the
// same file's bytes.
//
// A digit is MNIST's 28x28 bytes (0 = background, 255 = full ink). Geometry (cropping, scaling,
// strokes, blur, rotation) acts on the ink's coverage in [0, 1]; printing then lays ink of one
// colour on paper of another, under the variant's light, texture and sensor noise; the last step
// encodes the picture as PNG or JPEG.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lenet5::robustness {

struct RenderedImage {
  std::string bytes;      // the encoded file
  std::string extension;  // "png" or "jpg"
};

struct Variant {
  std::string name;         // "tight", "low8-nearest", ...
  std::string description;  // one line, for the report
  bool dark_ink;  // whether the ink is darker than the paper: what --invert auto should find
  RenderedImage (*render)(const std::uint8_t* digit, std::uint64_t seed);
};

// Every variant, in the report's order.
const std::vector<Variant>& variants();
// The variant called `name`; UsageError listing the names when there is none.
const Variant& find_variant(const std::string& name);

// The seed of one digit's rendering under one variant: distinct for every (seed, variant, digit).
std::uint64_t rendering_seed(std::uint64_t seed, const std::string& variant, int digit_index);

}  // namespace lenet5::robustness
