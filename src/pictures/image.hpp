// Pictures for people: 8-bit RGB images drawn on the host and written as PNG (through
// stb_image_write, compiled in image/stb_write_impl.cpp). Both the run folder's pictures and
// `evaluate --report` draw here, and anything that serves pictures can take png_bytes() without a
// file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace lenet5::pictures {

struct Rgb {
  std::uint8_t r = 0, g = 0, b = 0;
  bool operator==(const Rgb& o) const { return r == o.r && g == o.g && b == o.b; }
  bool operator!=(const Rgb& o) const { return !(*this == o); }
};

inline constexpr Rgb kWhite{255, 255, 255};
inline constexpr Rgb kBlack{0, 0, 0};

// (height, width, 3) row-major, top row first, as PNG stores it.
class RgbImage {
 public:
  RgbImage(int width, int height, Rgb background = kWhite);
  int width() const { return m_width; }
  int height() const { return m_height; }
  Rgb at(int x, int y) const;
  void set(int x, int y, Rgb colour);  // outside the image: ignored, so shapes may overhang
  // The rectangle [x, x + w) x [y, y + h), clipped to the image.
  void fill_rect(int x, int y, int w, int h, Rgb colour);
  // A one-pixel outline of the same rectangle.
  void outline_rect(int x, int y, int w, int h, Rgb colour);
  const std::vector<std::uint8_t>& bytes() const { return m_bytes; }

 private:
  int m_width, m_height;
  std::vector<std::uint8_t> m_bytes;
};

// The PNG file's bytes.
std::string png_bytes(const RgbImage& image);
// A baseline JPEG file's bytes at `quality` (1 = smallest file, 100 = best), as a camera or an
// image editor saves a photograph. UsageError outside 1..100.
std::string jpeg_bytes(const RgbImage& image, int quality);
// Written atomically (io/atomic_file.hpp): a reader never sees half a picture. Throws
// lenet5::Error naming the file.
void write_png(const std::filesystem::path& file, const RgbImage& image);
// An 8-bit grey PNG; pixels are (height, width), row-major. Throws lenet5::Error naming the file.
void write_gray_png(const std::filesystem::path& file, int width, int height,
                    const std::vector<std::uint8_t>& pixels);

}  // namespace lenet5::pictures
