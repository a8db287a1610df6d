// RgbImage and its PNG encoding (stb_image_write), to a file or to bytes.
#include "pictures/image.hpp"

#include <stb_image_write.h>

#include <algorithm>

#include "core/error.hpp"
#include "io/atomic_file.hpp"

namespace lenet5::pictures {
namespace {

std::string quoted(const std::filesystem::path& file) {
  return "'" + file.string() + "'";
}

// stb_image_write hands the encoded file over in pieces; they are appended to a string.
void append_to_string(void* context, void* data, int size) {
  static_cast<std::string*>(context)->append(static_cast<const char*>(data), std::size_t(size));
}

std::string encode_png(int width, int height, int channels, const std::uint8_t* pixels) {
  std::string bytes;
  if (!stbi_write_png_to_func(&append_to_string, &bytes, width, height, channels, pixels,
                              width * channels))
    throw Error("internal: stb_image_write could not encode a " + std::to_string(width) + "x" +
                std::to_string(height) + " PNG");
  return bytes;
}

void write_bytes(const std::filesystem::path& file, const std::string& bytes) {
  try {
    write_file_atomically(file, bytes);
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " (check that its folder exists and is writable)");
  }
}

}  // namespace

RgbImage::RgbImage(int width, int height, Rgb background) : m_width(width), m_height(height) {
  if (width <= 0 || height <= 0)
    throw Error("internal: a picture of " + std::to_string(width) + "x" + std::to_string(height) +
                " pixels");
  m_bytes.resize(std::size_t(width) * std::size_t(height) * 3);
  fill_rect(0, 0, width, height, background);
}

Rgb RgbImage::at(int x, int y) const {
  const std::uint8_t* p = &m_bytes.at((std::size_t(y) * std::size_t(m_width) + std::size_t(x)) * 3);
  return {p[0], p[1], p[2]};
}

void RgbImage::set(int x, int y, Rgb colour) {
  if (x < 0 || y < 0 || x >= m_width || y >= m_height) return;
  std::uint8_t* p = &m_bytes[(std::size_t(y) * std::size_t(m_width) + std::size_t(x)) * 3];
  p[0] = colour.r;
  p[1] = colour.g;
  p[2] = colour.b;
}

void RgbImage::fill_rect(int x, int y, int w, int h, Rgb colour) {
  const int x0 = std::max(x, 0), x1 = std::min(x + w, m_width);
  const int y0 = std::max(y, 0), y1 = std::min(y + h, m_height);
  for (int row = y0; row < y1; ++row)
    for (int col = x0; col < x1; ++col) set(col, row, colour);
}

void RgbImage::outline_rect(int x, int y, int w, int h, Rgb colour) {
  fill_rect(x, y, w, 1, colour);
  fill_rect(x, y + h - 1, w, 1, colour);
  fill_rect(x, y, 1, h, colour);
  fill_rect(x + w - 1, y, 1, h, colour);
}

std::string png_bytes(const RgbImage& image) {
  return encode_png(image.width(), image.height(), 3, image.bytes().data());
}

std::string jpeg_bytes(const RgbImage& image, int quality) {
  if (quality < 1 || quality > 100)
    throw UsageError("JPEG quality " + std::to_string(quality) + " is outside 1..100");
  std::string bytes;
  if (!stbi_write_jpg_to_func(&append_to_string, &bytes, image.width(), image.height(), 3,
                              image.bytes().data(), quality))
    throw Error("internal: stb_image_write could not encode a " + std::to_string(image.width()) +
                "x" + std::to_string(image.height()) + " JPEG");
  return bytes;
}

void write_png(const std::filesystem::path& file, const RgbImage& image) {
  write_bytes(file, png_bytes(image));
}

void write_gray_png(const std::filesystem::path& file, int width, int height,
                    const std::vector<std::uint8_t>& pixels) {
  if (width <= 0 || height <= 0 ||
      pixels.size() != static_cast<std::size_t>(width) * static_cast<std::size_t>(height)) {
    throw Error("cannot write " + quoted(file) + ": " + std::to_string(pixels.size()) +
                " pixels do not make a " + std::to_string(width) + "x" + std::to_string(height) +
                " image");
  }
  write_bytes(file, encode_png(width, height, 1, pixels.data()));
}

}  // namespace lenet5::pictures
