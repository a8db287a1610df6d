// Reading any image stb_image understands as one grey channel (pictures/image.hpp writes PNGs).
// Pixels are row-major floats in [0, 1] (0 = black, 1 = white), the photographic convention;
// preprocess.hpp turns them into MNIST's convention (0 = background, 255 = ink).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace lenet5 {

// Images larger than this on either side, or with more pixels than kMaxImagePixels, are refused
// from their header, before any pixel is decoded, and no digit needs more.
inline constexpr int kMaxImageSide = 16384;
// 32 megapixels (8192x4096, a 40 MP photo's 7296x5472 is beyond it): decoding the worst such
// image (16-bit RGBA PNG: the inflated rows, the decoded samples and the grey floats, about 20
// bytes a pixel) stays near 640 MB, under lenet5's 1 GiB, where 16384x16384 would need 5 GiB.
inline constexpr std::int64_t kMaxImagePixels = std::int64_t{32} << 20;

struct GrayImage {
  int width = 0, height = 0;
  std::vector<float> pixels;  // (height, width), row-major, 0 = black, 1 = white
};

// PNG, JPEG, BMP, GIF (first frame), TGA, PSD, HDR or PNM; 8 or 16 bit (16-bit PNG and PNM
// keep their precision); 1 to 4 channels. Colour becomes Rec.601 luma; alpha is composited on
// white, so a transparent background reads as white paper. A file that ends before its pixels do
// is refused, whatever its format. Throws lenet5::Error naming the file.
GrayImage load_gray_image(const std::filesystem::path& file);
// The same from an image file's bytes in memory, through stb_image only (binary PNM with 16-bit
// samples is read correctly from files alone). The header is read first: an image wider or taller
// than max_side (at most kMaxImageSide), or of more than kMaxImagePixels, is refused before any
// pixel is decoded, so a small file claiming a huge size costs nothing. Throws lenet5::Error naming
// `name_for_errors`.
GrayImage decode_gray_image(const std::string& bytes, int max_side,
                            const std::string& name_for_errors);

}  // namespace lenet5
