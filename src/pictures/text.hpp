// Text in pictures: stb_easy_font's stroke font (Debian libstb-dev), drawn as filled rectangles.
// At scale 1 a capital is 7 pixels tall; every size is an integer multiple, so strokes stay crisp.
#pragma once

#include <string>

#include "pictures/image.hpp"

namespace lenet5::pictures {

// Printable ASCII and newlines (any other byte draws as '?'). (x, y) is the top left of the first
// line.
void draw_text(RgbImage& image, int x, int y, const std::string& text, Rgb colour, int scale = 1);
int text_width(const std::string& text, int scale = 1);
int text_height(const std::string& text, int scale = 1);

// Horizontally centred on centre_x.
void draw_text_centred(RgbImage& image, int centre_x, int y, const std::string& text, Rgb colour,
                       int scale = 1);

}  // namespace lenet5::pictures
