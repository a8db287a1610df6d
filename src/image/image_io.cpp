// Files and uploads are decoded from memory, one path: the bytes are checked for what stb_image
// mishandles (stb_input_check.hpp), the header is read with stbi_info_from_memory and its size
// checked, and only then are the pixels decoded.
//
// Binary PGM/PPM (P5/P6), from a file or an upload alike, are read here instead: stb_image 2.27,
// the version Debian ships, copies 16-bit PNM samples in file order without the big-endian
// conversion the format requires (nothings/stb#1710), ignores maxval, reads a truncated raster
// without noticing, and overflows an int on a header number of ten digits or more.
#include "image/image_io.hpp"

#include <stb_image.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "core/error.hpp"
#include "image/stb_input_check.hpp"

namespace lenet5 {
namespace {

using FilePtr = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

std::string quoted(const std::filesystem::path& file) {
  return "'" + file.string() + "'";
}

FilePtr open_for_reading(const std::filesystem::path& file) {
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) {
    throw Error("cannot read image " + quoted(file) + ": it is a directory, not a file");
  }
  FilePtr f(std::fopen(file.c_str(), "rb"), &std::fclose);
  if (!f) {
    throw Error("cannot open image " + quoted(file) + ": " + std::strerror(errno));
  }
  if (std::filesystem::file_size(file, ec) == 0 && !ec) {
    throw Error("cannot read image " + quoted(file) + ": the file is empty (0 bytes)");
  }
  return f;
}

[[noreturn]] void throw_undecodable(const std::filesystem::path& file, const std::string& why) {
  throw Error("cannot decode image " + quoted(file) + ": " + why +
              " (supported: PNG, JPEG, BMP, GIF, TGA, PSD, HDR, PNM; 8 or 16 bit)");
}

// Called with the header's size before any pixel is decoded, so a huge or crafted file costs
// nothing.
void check_size(int width, int height, const std::filesystem::path& file,
                int max_side = kMaxImageSide) {
  if (width <= 0 || height <= 0) {
    throw Error("cannot read image " + quoted(file) + ": it has zero size (" +
                std::to_string(width) + "x" + std::to_string(height) + ")");
  }
  const std::int64_t n_pixels = std::int64_t{width} * height;
  if (width > max_side || height > max_side || n_pixels > kMaxImagePixels) {
    throw Error("cannot read image " + quoted(file) + ": image is " + std::to_string(width) + "x" +
                std::to_string(height) + " (" + std::to_string(n_pixels) +
                " pixels); the largest accepted is " + std::to_string(max_side) + "x" +
                std::to_string(max_side) + " and " + std::to_string(kMaxImagePixels) +
                " pixels (32 megapixels) in all (scale it down first)");
  }
}

// Rec.601 luma on the stored (gamma-encoded) values, as every image tool computes "grey".
// Alpha is composited on white: c' = a*c + (1 - a)*1.
template <typename Sample>
GrayImage to_gray(const Sample* data, int width, int height, int channels, float max_value) {
  GrayImage image{width, height, {}};
  const std::size_t n_pixels = static_cast<std::size_t>(width) * static_cast<std::size_t>(height);
  image.pixels.resize(n_pixels);
  const bool has_alpha = channels == 2 || channels == 4;
  const bool has_colour = channels >= 3;
  for (std::size_t i = 0; i < n_pixels; ++i) {
    const Sample* p = data + i * static_cast<std::size_t>(channels);
    float grey = p[0] / max_value;
    if (has_colour) grey = (0.299f * p[0] + 0.587f * p[1] + 0.114f * p[2]) / max_value;
    if (has_alpha) {
      const float alpha = p[channels - 1] / max_value;
      grey = alpha * grey + (1.0f - alpha);
    }
    image.pixels[i] = grey < 0.0f ? 0.0f : (grey > 1.0f ? 1.0f : grey);
  }
  return image;
}

// ---- binary PGM / PPM
// ----------------------------------------------------------------------------

bool starts_with_binary_pnm(const std::string& bytes) {
  return bytes.size() >= 2 && bytes[0] == 'P' && (bytes[1] == '5' || bytes[1] == '6');
}

// Header fields are decimal numbers separated by whitespace, with '#' comments to end of line.
int read_pnm_number(std::FILE* f, const std::filesystem::path& file) {
  int c = std::fgetc(f);
  while (c == '#' || std::isspace(c)) {
    if (c == '#') {
      while (c != '\n' && c != EOF) c = std::fgetc(f);
    }
    c = std::fgetc(f);
  }
  if (!std::isdigit(c)) throw_undecodable(file, "malformed PNM header");
  long value = 0;
  for (; std::isdigit(c); c = std::fgetc(f)) {
    value = value * 10 + (c - '0');
    if (value > 1000000) throw_undecodable(file, "PNM header number out of range");
  }
  // Exactly one whitespace byte ends each field; after maxval the raster starts right after it.
  if (!std::isspace(c)) throw_undecodable(file, "malformed PNM header");
  return static_cast<int>(value);
}

template <typename Sample>
GrayImage read_pnm_raster(std::FILE* f, const std::filesystem::path& file, int width, int height,
                          int channels, int maxval) {
  const std::size_t n_samples = static_cast<std::size_t>(width) * static_cast<std::size_t>(height) *
                                static_cast<std::size_t>(channels);
  std::vector<Sample> samples(n_samples);
  if (std::fread(samples.data(), sizeof(Sample), n_samples, f) != n_samples) {
    throw_undecodable(file, "PNM pixel data is truncated");
  }
  if (sizeof(Sample) == 2) {
    // Samples are big-endian in the file; reading the bytes as they lie in memory makes this
    // independent of the host's byte order.
    for (Sample& s : samples) {
      const auto* b = reinterpret_cast<const unsigned char*>(&s);
      s = static_cast<Sample>((b[0] << 8) | b[1]);
    }
  }
  return to_gray(samples.data(), width, height, channels, static_cast<float>(maxval));
}

GrayImage read_binary_pnm(std::FILE* f, const std::filesystem::path& file, int max_side) {
  std::fgetc(f);
  const int channels = std::fgetc(f) == '5' ? 1 : 3;
  const int width = read_pnm_number(f, file);
  const int height = read_pnm_number(f, file);
  const int maxval = read_pnm_number(f, file);
  check_size(width, height, file, max_side);
  if (maxval < 1 || maxval > 65535) {
    throw_undecodable(file, "PNM maxval " + std::to_string(maxval) + " is outside 1..65535");
  }
  if (maxval < 256) {
    return read_pnm_raster<std::uint8_t>(f, file, width, height, channels, maxval);
  }
  return read_pnm_raster<std::uint16_t>(f, file, width, height, channels, maxval);
}

// The bytes read as a stream (fmemopen: no copy), so that the reader above serves files and
// uploads alike.
GrayImage decode_binary_pnm(const std::string& bytes, const std::filesystem::path& name,
                            int max_side) {
  FilePtr f(fmemopen(const_cast<char*>(bytes.data()), bytes.size(), "rb"), &std::fclose);
  if (!f) throw Error("cannot read image " + quoted(name) + ": " + std::strerror(errno));
  return read_binary_pnm(f.get(), name, max_side);
}

// ---- everything else, through stb_image
// ----------------------------------------------------------

// The whole file, for stb_image to decode from memory like an upload (one path, with the checks
// of stb_input_check.hpp). No digit picture comes near the limit; it keeps a planted huge file
// from being read whole.
constexpr std::uintmax_t kMaxImageFileBytes = std::uintmax_t(64) << 20;

std::string file_bytes(std::FILE* f, const std::filesystem::path& file) {
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(file, ec);
  if (ec || size > kMaxImageFileBytes)
    throw Error("cannot read image " + quoted(file) + ": " +
                (ec ? "not a regular file (" + ec.message() + ")"
                    : "the file is larger than 64 MiB, far more than a digit needs (scale it "
                      "down first)"));
  std::string bytes(size, '\0');
  if (std::fread(bytes.data(), 1, size, f) != size)
    throw Error("cannot read image " + quoted(file) + ": " + std::strerror(errno));
  return bytes;
}

GrayImage decode_with_stb(const std::string& bytes, const std::filesystem::path& name,
                          int max_side) {
  check_stb_input(bytes, name.string());
  const auto* data = reinterpret_cast<const stbi_uc*>(bytes.data());
  const int length = int(bytes.size());
  int width = 0, height = 0, channels = 0;
  if (!stbi_info_from_memory(data, length, &width, &height, &channels)) {
    throw_undecodable(name, stbi_failure_reason());
  }
  // A BMP stored top-down: stb's info gives its height as the header has it, negative.
  if (height < 0 && height != std::numeric_limits<int>::min()) height = -height;
  check_size(width, height, name, max_side);
  // 16-bit PNG goes through the 16-bit loader so that precision is kept; everything else (HDR
  // included, which stb tone-maps with its default gamma) through the 8-bit one.
  int channels_in_file = 0;
  if (stbi_is_16_bit_from_memory(data, length)) {
    std::unique_ptr<stbi_us, void (*)(void*)> pixels(
        stbi_load_16_from_memory(data, length, &width, &height, &channels_in_file, channels),
        &stbi_image_free);
    if (!pixels) throw_undecodable(name, stbi_failure_reason());
    return to_gray(pixels.get(), width, height, channels, 65535.0f);
  }
  std::unique_ptr<stbi_uc, void (*)(void*)> pixels(
      stbi_load_from_memory(data, length, &width, &height, &channels_in_file, channels),
      &stbi_image_free);
  if (!pixels) throw_undecodable(name, stbi_failure_reason());
  return to_gray(pixels.get(), width, height, channels, 255.0f);
}

}  // namespace

GrayImage decode_gray_image(const std::string& bytes, int max_side,
                            const std::string& name_for_errors) {
  const std::filesystem::path name(name_for_errors);
  if (bytes.empty()) throw Error("cannot read image " + quoted(name) + ": it is empty (0 bytes)");
  if (bytes.size() > std::size_t(std::numeric_limits<int>::max()))
    throw Error("cannot read image " + quoted(name) + ": larger than 2 GiB");
  const int side = std::min(max_side, kMaxImageSide);
  if (starts_with_binary_pnm(bytes)) return decode_binary_pnm(bytes, name, side);
  return decode_with_stb(bytes, name, side);
}

GrayImage load_gray_image(const std::filesystem::path& file) {
  FilePtr f = open_for_reading(file);
  return decode_gray_image(file_bytes(f.get(), file), kMaxImageSide, file.string());
}

}  // namespace lenet5
