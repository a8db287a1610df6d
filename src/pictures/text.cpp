// Text drawn into pictures with stb_easy_font's strokes, and its measured size.
#include "pictures/text.hpp"

#include <cmath>
#include <vector>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wconversion"
#pragma GCC diagnostic ignored "-Wshadow"
#include <stb_easy_font.h>
#pragma GCC diagnostic pop

namespace lenet5::pictures {
namespace {

// stb_easy_font's vertex: x, y, z as floats and an RGBA colour; four vertices make one quad.
struct Vertex {
  float x, y, z;
  unsigned char rgba[4];
};
static_assert(sizeof(Vertex) == 16, "stb_easy_font writes 16-byte vertices");

// Its functions take char*, though they only read the text, and index their glyph table by
// (byte - 32) unchecked: anything but printable ASCII and newlines becomes '?'.
std::vector<char> writable(const std::string& text) {
  std::vector<char> copy;
  for (char c : text) copy.push_back(c == '\n' || (c >= 32 && c <= 126) ? c : '?');
  copy.push_back('\0');
  return copy;
}

}  // namespace

void draw_text(RgbImage& image, int x, int y, const std::string& text, Rgb colour, int scale) {
  // Its own limit is about 270 characters per 64 KiB; the buffer is sized for the text.
  std::vector<Vertex> vertices(text.size() * 64 + 64);
  std::vector<char> chars = writable(text);
  unsigned char rgba[4] = {colour.r, colour.g, colour.b, 255};
  const int quads = stb_easy_font_print(0, 0, chars.data(), rgba, vertices.data(),
                                        int(vertices.size() * sizeof(Vertex)));
  for (int q = 0; q < quads; ++q) {
    // Vertices 0 and 2 are opposite corners of an axis-aligned rectangle in font units.
    const Vertex& a = vertices[std::size_t(q) * 4];
    const Vertex& c = vertices[std::size_t(q) * 4 + 2];
    const int x0 = int(std::lround(a.x)) * scale, y0 = int(std::lround(a.y)) * scale;
    const int x1 = int(std::lround(c.x)) * scale, y1 = int(std::lround(c.y)) * scale;
    image.fill_rect(x + x0, y + y0, x1 - x0, y1 - y0, colour);
  }
}

int text_width(const std::string& text, int scale) {
  std::vector<char> chars = writable(text);
  return stb_easy_font_width(chars.data()) * scale;
}

int text_height(const std::string& text, int scale) {
  std::vector<char> chars = writable(text);
  return stb_easy_font_height(chars.data()) * scale;
}

void draw_text_centred(RgbImage& image, int centre_x, int y, const std::string& text, Rgb colour,
                       int scale) {
  draw_text(image, centre_x - text_width(text, scale) / 2, y, text, colour, scale);
}

}  // namespace lenet5::pictures
