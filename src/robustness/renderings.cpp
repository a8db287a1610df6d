// The variants of renderings.hpp: ink geometry on a Canvas, printing onto paper, encoding.
//
// Layout: every buffer is row-major (height, width). Sizes in comments are at MNIST's 28x28 scale
// unless they say "at x4" (the enlargement most variants are rendered at, a 112 px field: a
// phone's crop of a digit on a page is about that size).
#include "robustness/renderings.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "core/xxh64.hpp"
#include "image/ink.hpp"
#include "image/resample.hpp"
#include "pictures/image.hpp"

namespace lenet5::robustness {
namespace {

constexpr int kMnistSide = 28;
constexpr double kPi = 3.14159265358979323846;

// The ink's coverage of each pixel, 0 (paper) to 1 (full ink).
struct Canvas {
  int width = 0, height = 0;
  std::vector<float> ink;
  float& at(int x, int y) { return ink[static_cast<std::size_t>(y) * width + x]; }
  float at(int x, int y) const { return ink[static_cast<std::size_t>(y) * width + x]; }
};

Canvas blank_canvas(int width, int height) {
  return {width, height, std::vector<float>(static_cast<std::size_t>(width) * height, 0.0f)};
}

Canvas from_mnist(const std::uint8_t* digit) {
  Canvas c = blank_canvas(kMnistSide, kMnistSide);
  for (std::size_t i = 0; i < c.ink.size(); ++i) c.ink[i] = digit[i] / 255.0f;
  return c;
}

// The smallest rectangle holding every pixel with any ink.
Canvas cropped_to_ink(const Canvas& c) {
  int x0 = c.width, y0 = c.height, x1 = 0, y1 = 0;
  for (int y = 0; y < c.height; ++y) {
    for (int x = 0; x < c.width; ++x) {
      if (c.at(x, y) <= 0.0f) continue;
      x0 = std::min(x0, x), y0 = std::min(y0, y), x1 = std::max(x1, x + 1),
      y1 = std::max(y1, y + 1);
    }
  }
  if (x1 <= x0) return c;  // no ink: nothing to crop to
  Canvas out = blank_canvas(x1 - x0, y1 - y0);
  for (int y = y0; y < y1; ++y) {
    for (int x = x0; x < x1; ++x) out.at(x - x0, y - y0) = c.at(x, y);
  }
  return out;
}

Canvas padded(const Canvas& c, int margin) {
  Canvas out = blank_canvas(c.width + 2 * margin, c.height + 2 * margin);
  for (int y = 0; y < c.height; ++y) {
    for (int x = 0; x < c.width; ++x) out.at(x + margin, y + margin) = c.at(x, y);
  }
  return out;
}

enum class Resize { area, bilinear, nearest };

Canvas resized(const Canvas& c, int width, int height, Resize how) {
  width = std::max(width, 1), height = std::max(height, 1);
  switch (how) {
    case Resize::area:
      return {width, height, resample_area(c.ink, c.width, c.height, width, height)};
    case Resize::bilinear:
      return {width, height, resample_bilinear(c.ink, c.width, c.height, width, height)};
    case Resize::nearest:
      return {width, height, resample_nearest(c.ink, c.width, c.height, width, height)};
  }
  return c;
}

Canvas scaled(const Canvas& c, double factor, Resize how) {
  return resized(c, static_cast<int>(std::lround(c.width * factor)),
                 static_cast<int>(std::lround(c.height * factor)), how);
}

// Scaled so that its longer side is `side` pixels, keeping the aspect ratio.
Canvas longer_side_to(const Canvas& c, int side, Resize how) {
  return scaled(c, static_cast<double>(side) / std::max(c.width, c.height), how);
}

// Grey dilation (a bolder pen) and erosion (a finer one) with a (2r+1)^2 square.
Canvas dilated(const Canvas& c, int r) {
  return {c.width, c.height, dilate_square(c.ink, c.width, c.height, r)};
}

Canvas eroded(const Canvas& c, int r) {
  std::vector<float> paper(c.ink.size());
  for (std::size_t i = 0; i < paper.size(); ++i) paper[i] = 1.0f - c.ink[i];
  // The canvas's outside counts as ink-free here: dilate_square treats it as 0, the paper's
  // complement of 1, so strokes touching the edge are not eroded from outside.
  std::vector<float> grown = dilate_square(paper, c.width, c.height, r);
  Canvas out{c.width, c.height, std::vector<float>(paper.size())};
  for (std::size_t i = 0; i < paper.size(); ++i) out.ink[i] = 1.0f - grown[i];
  return out;
}

// Separable Gaussian blur, taps to 3 sigma, the canvas's outside as paper.
Canvas blurred(const Canvas& c, double sigma) {
  const int radius = static_cast<int>(std::ceil(3.0 * sigma));
  std::vector<float> taps(static_cast<std::size_t>(2 * radius + 1));
  double sum = 0.0;
  for (int i = -radius; i <= radius; ++i) sum += std::exp(-0.5 * i * i / (sigma * sigma));
  for (int i = -radius; i <= radius; ++i) {
    taps[static_cast<std::size_t>(i + radius)] =
        static_cast<float>(std::exp(-0.5 * i * i / (sigma * sigma)) / sum);
  }
  Canvas rows = blank_canvas(c.width, c.height), out = blank_canvas(c.width, c.height);
  for (int y = 0; y < c.height; ++y) {
    for (int x = 0; x < c.width; ++x) {
      float v = 0.0f;
      for (int i = -radius; i <= radius; ++i) {
        if (x + i >= 0 && x + i < c.width)
          v += taps[static_cast<std::size_t>(i + radius)] * c.at(x + i, y);
      }
      rows.at(x, y) = v;
    }
  }
  for (int y = 0; y < c.height; ++y) {
    for (int x = 0; x < c.width; ++x) {
      float v = 0.0f;
      for (int i = -radius; i <= radius; ++i) {
        if (y + i >= 0 && y + i < c.height)
          v += taps[static_cast<std::size_t>(i + radius)] * rows.at(x, y + i);
      }
      out.at(x, y) = v;
    }
  }
  return out;
}

// Rotated about its centre by `degrees` (counter-clockwise as seen), on a canvas large enough to
// hold every corner; bilinear, paper outside.
Canvas rotated(const Canvas& c, double degrees) {
  const double a = degrees * kPi / 180.0, cs = std::cos(a), sn = std::sin(a);
  const int width = static_cast<int>(std::ceil(std::abs(c.width * cs) + std::abs(c.height * sn)));
  const int height = static_cast<int>(std::ceil(std::abs(c.width * sn) + std::abs(c.height * cs)));
  Canvas out = blank_canvas(width, height);
  const double cx = c.width / 2.0, cy = c.height / 2.0, ox = width / 2.0, oy = height / 2.0;
  const auto ink = [&](int x, int y) {
    return x >= 0 && y >= 0 && x < c.width && y < c.height ? c.at(x, y) : 0.0f;
  };
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      // The inverse rotation of this pixel's centre, in the source's pixel-index coordinates.
      const double dx = x + 0.5 - ox, dy = y + 0.5 - oy;
      const double u = cs * dx - sn * dy + cx - 0.5, v = sn * dx + cs * dy + cy - 0.5;
      const int i = static_cast<int>(std::floor(u)), j = static_cast<int>(std::floor(v));
      const float fu = static_cast<float>(u - i), fv = static_cast<float>(v - j);
      out.at(x, y) = (1 - fv) * ((1 - fu) * ink(i, j) + fu * ink(i + 1, j)) +
                     fv * ((1 - fu) * ink(i, j + 1) + fu * ink(i + 1, j + 1));
    }
  }
  return out;
}

// A canvas of width x height with `digit` placed at (x, y).
Canvas placed(const Canvas& digit, int width, int height, int x, int y) {
  Canvas out = blank_canvas(width, height);
  for (int j = 0; j < digit.height; ++j) {
    for (int i = 0; i < digit.width; ++i) out.at(x + i, y + j) = digit.at(i, j);
  }
  return out;
}

// ---- printing -----------------------------------------------------------------------------

// sRGB-ish colours as floats in [0, 1].
using Colour = std::array<float, 3>;

struct Paper {
  Colour paper{0.96f, 0.96f, 0.95f};
  Colour ink{0.08f, 0.08f, 0.10f};
  double noise = 0.01;   // sensor noise, a standard deviation (2.5 grey levels)
  double shadow = 0.0;   // light falls off by this fraction across the picture
  double texture = 0.0;  // the paper's blotches, a standard deviation of its brightness
};

// Normal deviates by Box-Muller from the rendering's generator.
double gaussian(SplitMix64& rng) {
  const double u = 1.0 - rng.uniform(), v = rng.uniform();
  return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * kPi * v);
}

double uniform(SplitMix64& rng, double lo, double hi) {
  return lo + (hi - lo) * rng.uniform();
}

// The light on each pixel: 1 at the brightest corner, falling linearly by `shadow` along a random
// direction, times blotches (a coarse grid of random brightness, enlarged smoothly).
std::vector<float> lighting(int width, int height, const Paper& p, SplitMix64& rng) {
  std::vector<float> light(static_cast<std::size_t>(width) * height, 1.0f);
  if (p.shadow > 0.0) {
    const double angle = uniform(rng, 0.0, 2.0 * kPi), ux = std::cos(angle), uy = std::sin(angle);
    const double reach = std::abs(ux) * width + std::abs(uy) * height;
    const double start = std::min(0.0, ux * width) + std::min(0.0, uy * height);
    for (int y = 0; y < height; ++y) {
      for (int x = 0; x < width; ++x) {
        const double t = (ux * x + uy * y - start) / reach;  // 0 at the lit corner, 1 at the dark
        light[static_cast<std::size_t>(y) * width + x] = static_cast<float>(1.0 - p.shadow * t);
      }
    }
  }
  if (p.texture > 0.0) {
    constexpr int kBlotches = 6;  // per side: blotches a sixth of the picture across
    std::vector<float> grid(kBlotches * kBlotches);
    for (float& g : grid) g = static_cast<float>(1.0 + p.texture * gaussian(rng));
    const std::vector<float> smooth = resample_bilinear(grid, kBlotches, kBlotches, width, height);
    for (std::size_t i = 0; i < light.size(); ++i) light[i] *= smooth[i];
  }
  return light;
}

std::uint8_t to_byte(double v) {
  return static_cast<std::uint8_t>(std::lround(std::clamp(v, 0.0, 1.0) * 255.0));
}

// Ink laid on paper (each colour weighted by the ink's coverage), under the light, with noise.
pictures::RgbImage printed(const Canvas& c, const Paper& p, SplitMix64& rng) {
  const std::vector<float> light = lighting(c.width, c.height, p, rng);
  pictures::RgbImage out(c.width, c.height);
  for (int y = 0; y < c.height; ++y) {
    for (int x = 0; x < c.width; ++x) {
      const std::size_t i = static_cast<std::size_t>(y) * c.width + x;
      const double a = std::clamp(c.ink[i], 0.0f, 1.0f), noise = p.noise * gaussian(rng);
      std::array<std::uint8_t, 3> rgb{};
      for (std::size_t k = 0; k < 3; ++k) {
        rgb[k] = to_byte(light[i] * ((1.0 - a) * p.paper[k] + a * p.ink[k]) + noise);
      }
      out.set(x, y, {rgb[0], rgb[1], rgb[2]});
    }
  }
  return out;
}

// A printed picture enlarged as an image editor would (nearest or bilinear), channel by channel.
pictures::RgbImage enlarged(const pictures::RgbImage& image, int factor, Resize how) {
  const int w = image.width(), h = image.height();
  pictures::RgbImage out(w * factor, h * factor);
  std::array<std::vector<float>, 3> planes;
  for (std::size_t k = 0; k < 3; ++k) {
    std::vector<float> plane(static_cast<std::size_t>(w) * h);
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) {
        const pictures::Rgb c = image.at(x, y);
        plane[static_cast<std::size_t>(y) * w + x] = (k == 0 ? c.r : k == 1 ? c.g : c.b) / 255.0f;
      }
    }
    planes[k] = resized({w, h, plane}, w * factor, h * factor, how).ink;
  }
  for (int y = 0; y < h * factor; ++y) {
    for (int x = 0; x < w * factor; ++x) {
      const std::size_t i = static_cast<std::size_t>(y) * w * factor + x;
      out.set(x, y, {to_byte(planes[0][i]), to_byte(planes[1][i]), to_byte(planes[2][i])});
    }
  }
  return out;
}

RenderedImage png(const pictures::RgbImage& image) {
  return {pictures::png_bytes(image), "png"};
}

RenderedImage jpeg(const pictures::RgbImage& image, int quality) {
  return {pictures::jpeg_bytes(image, quality), "jpg"};
}

// ---- the variants -------------------------------------------------------------------------

constexpr int kScale = 4;  // the enlargement of the variants that are not about resolution

// MNIST's own 28x28 frame (about 4 px of margin) at x4, bilinear: a scan with ordinary margins.
Canvas framed(const std::uint8_t* digit) {
  return scaled(from_mnist(digit), kScale, Resize::bilinear);
}

Canvas tight(const std::uint8_t* digit) {
  return scaled(cropped_to_ink(from_mnist(digit)), kScale, Resize::bilinear);
}

const Paper kLightOnDark{{0.12f, 0.13f, 0.14f}, {0.92f, 0.92f, 0.90f}};

RenderedImage render_plain(const std::uint8_t* digit, std::uint64_t) {
  pictures::RgbImage out(kMnistSide, kMnistSide);
  for (int y = 0; y < kMnistSide; ++y) {
    for (int x = 0; x < kMnistSide; ++x) {
      const std::uint8_t v = digit[y * kMnistSide + x];
      out.set(x, y, {v, v, v});
    }
  }
  return png(out);
}

RenderedImage render_tight(const std::uint8_t* digit, std::uint64_t seed) {
  SplitMix64 rng(seed);
  return png(printed(tight(digit), Paper{}, rng));
}

RenderedImage render_tight_inverted(const std::uint8_t* digit, std::uint64_t seed) {
  SplitMix64 rng(seed);
  return png(printed(tight(digit), kLightOnDark, rng));
}

RenderedImage render_wide_margin(const std::uint8_t* digit, std::uint64_t seed) {
  SplitMix64 rng(seed);
  const Canvas ink = cropped_to_ink(from_mnist(digit));
  return png(printed(scaled(padded(ink, std::max(ink.width, ink.height)), kScale, Resize::bilinear),
                     Paper{}, rng));
}

// Scanned at `side` px on the digit's longer side (the ink cropped tight, area-averaged as a
// scanner's sensor does), then enlarged x4 to x8.
template <int side, Resize how>
RenderedImage render_low_resolution(const std::uint8_t* digit, std::uint64_t seed) {
  SplitMix64 rng(seed);
  const Canvas scan = longer_side_to(cropped_to_ink(from_mnist(digit)), side, Resize::area);
  const int factor = 4 + static_cast<int>(rng.below(5));
  return png(enlarged(printed(scan, Paper{}, rng), factor, how));
}

RenderedImage render_inverted(const std::uint8_t* digit, std::uint64_t seed) {
  SplitMix64 rng(seed);
  return png(printed(framed(digit), kLightOnDark, rng));
}

// MNIST's strokes are about 2.5 px wide; 3 px more on each side at x4 makes them about 4 px.
RenderedImage render_thick(const std::uint8_t* digit, std::uint64_t seed) {
  SplitMix64 rng(seed);
  return png(printed(dilated(framed(digit), 3), Paper{}, rng));
}

// 2 px less on each side at x4 leaves about 1.5 px of a 2.5 px stroke: a fine pen.
RenderedImage render_thin(const std::uint8_t* digit, std::uint64_t seed) {
  SplitMix64 rng(seed);
  return png(printed(eroded(framed(digit), 2), Paper{}, rng));
}

// A sigma of 1 px: an out-of-focus photo, the strokes' edges spread over about 4 px.
RenderedImage render_blur(const std::uint8_t* digit, std::uint64_t seed) {
  SplitMix64 rng(seed);
  return png(printed(blurred(framed(digit), 1.0 * kScale), Paper{}, rng));
}

RenderedImage render_jpeg20(const std::uint8_t* digit, std::uint64_t seed) {
  SplitMix64 rng(seed);
  return jpeg(printed(framed(digit), Paper{}, rng), 20);
}

// A shadow that dims the far side to half, and paper whose brightness varies by 4 %.
RenderedImage render_lighting(const std::uint8_t* digit, std::uint64_t seed) {
  SplitMix64 rng(seed);
  Paper paper;
  paper.shadow = uniform(rng, 0.3, 0.5);
  paper.texture = 0.04;
  paper.noise = 0.02;
  return png(printed(framed(digit), paper, rng));
}

RenderedImage render_colour(const std::uint8_t* digit, std::uint64_t seed) {
  SplitMix64 rng(seed);
  static const std::array<Colour, 5> inks{{{0.12f, 0.20f, 0.63f},  // blue ballpoint
                                           {0.67f, 0.12f, 0.16f},  // red
                                           {0.08f, 0.43f, 0.20f},  // green
                                           {0.35f, 0.16f, 0.51f},  // purple
                                           {0.08f, 0.08f, 0.10f}}};
  static const std::array<Colour, 5> papers{{{0.96f, 0.92f, 0.67f},    // yellow note
                                             {0.96f, 0.82f, 0.84f},    // pink
                                             {0.80f, 0.88f, 0.96f},    // light blue
                                             {0.84f, 0.94f, 0.80f},    // light green
                                             {0.93f, 0.90f, 0.84f}}};  // recycled grey
  Paper paper;
  paper.ink = inks[rng.below(inks.size())];
  paper.paper = papers[rng.below(papers.size())];
  return png(printed(framed(digit), paper, rng));
}

RenderedImage render_rotated(const std::uint8_t* digit, std::uint64_t seed) {
  SplitMix64 rng(seed);
  const double degrees = rng.below(2) ? 15.0 : -15.0;
  return png(printed(rotated(framed(digit), degrees), Paper{}, rng));
}

// A phone's photograph of a sheet: 1000x800, the digit 40 px on its longer side somewhere away
// from the edges, a shadow, textured paper, JPEG at a camera's quality.
RenderedImage render_photo(const std::uint8_t* digit, std::uint64_t seed) {
  SplitMix64 rng(seed);
  constexpr int kWidth = 1000, kHeight = 800, kDigitSide = 40, kEdge = 100;
  const Canvas ink =
      longer_side_to(cropped_to_ink(from_mnist(digit)), kDigitSide, Resize::bilinear);
  const int x = kEdge + static_cast<int>(rng.below(std::uint32_t(kWidth - 2 * kEdge - ink.width)));
  const int y =
      kEdge + static_cast<int>(rng.below(std::uint32_t(kHeight - 2 * kEdge - ink.height)));
  Paper paper;
  paper.shadow = uniform(rng, 0.2, 0.4);
  paper.texture = 0.03;
  paper.noise = 0.02;
  return jpeg(printed(placed(ink, kWidth, kHeight, x, y), paper, rng), 85);
}

}  // namespace

const std::vector<Variant>& variants() {
  static const std::vector<Variant> table{
      {"plain", "the 28x28 test image as a PNG, light on dark as MNIST stores it", false,
       render_plain},
      {"tight", "cropped to the ink (no margin), x4, dark on light", true, render_tight},
      {"tight-inverted", "cropped to the ink (no margin), x4, light on dark", false,
       render_tight_inverted},
      {"wide-margin", "a margin as wide as the digit on every side, x4", true, render_wide_margin},
      {"low8-nearest", "cropped, scanned at 8 px on its longer side, enlarged x4-x8 (nearest)",
       true, render_low_resolution<8, Resize::nearest>},
      {"low8-bilinear", "cropped, scanned at 8 px on its longer side, enlarged x4-x8 (bilinear)",
       true, render_low_resolution<8, Resize::bilinear>},
      {"low12-nearest", "cropped, scanned at 12 px on its longer side, enlarged x4-x8 (nearest)",
       true, render_low_resolution<12, Resize::nearest>},
      {"low12-bilinear", "cropped, scanned at 12 px on its longer side, enlarged x4-x8 (bilinear)",
       true, render_low_resolution<12, Resize::bilinear>},
      {"low16-nearest", "cropped, scanned at 16 px on its longer side, enlarged x4-x8 (nearest)",
       true, render_low_resolution<16, Resize::nearest>},
      {"low16-bilinear", "cropped, scanned at 16 px on its longer side, enlarged x4-x8 (bilinear)",
       true, render_low_resolution<16, Resize::bilinear>},
      {"inverted", "light ink on dark paper (a blackboard), MNIST's margin, x4", false,
       render_inverted},
      {"thick", "strokes dilated 3 px at x4 (a marker), MNIST's margin", true, render_thick},
      {"thin", "strokes eroded 2 px at x4 (a fine pen), MNIST's margin", true, render_thin},
      {"blur", "Gaussian blur of 1 px (4 px at x4), MNIST's margin", true, render_blur},
      {"jpeg20", "JPEG at quality 20, MNIST's margin, x4", true, render_jpeg20},
      {"lighting", "a shadow dimming the paper by 30-50 % across, textured paper, x4", true,
       render_lighting},
      {"colour", "coloured ink on coloured paper, MNIST's margin, x4", true, render_colour},
      {"rotated", "rotated 15 degrees either way, MNIST's margin, x4", true, render_rotated},
      {"photo", "40 px tall in a 1000x800 photo of paper with a shadow, JPEG quality 85", true,
       render_photo},
  };
  return table;
}

const Variant& find_variant(const std::string& name) {
  std::string names;
  for (const Variant& v : variants()) {
    if (v.name == name) return v;
    names += (names.empty() ? "" : ", ") + v.name;
  }
  throw UsageError("unknown robustness variant '" + name + "': expected one of " + names);
}

std::uint64_t rendering_seed(std::uint64_t seed, const std::string& variant, int digit_index) {
  return stream_seed(seed ^ xxh64(variant.data(), variant.size()), RngStream::robustness,
                     static_cast<std::uint64_t>(digit_index));
}

}  // namespace lenet5::robustness
