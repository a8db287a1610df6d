// Telling a digit's ink from its paper in a scan or a photograph: the paper's brightness under
// uneven lighting, Otsu's threshold, the connected pieces of ink, and the width of a stroke.
// preprocess.cpp combines them; each is small enough to test on its own.
//
// Layout: images are row-major (height, width) as in image_io.hpp; coordinates are 0-based.
#pragma once

#include <cstdint>
#include <vector>

#include "image/image_io.hpp"

namespace lenet5 {

// What a cell of the grid says about the paper under it.
// - median: its middle grey, paper wherever most of the cell is paper, whatever the ink's
//   polarity;
// - lightest, darkest: its grey at the 90th (10th) percentile, less the median gap between that
//   and the median over the cells kept as paper (the paper's own noise at that percentile). Paper
//   wherever a tenth of the cell is paper, when the ink is darker (lighter) than the paper: bold
//   strokes in a shadow fill cells that their paper's brighter tenth still reveals.
enum class PaperEstimate { median, lightest, darkest };

// The paper's brightness as a smooth surface: a quadratic in x and y fitted to what a grid of
// cells says of it (PaperEstimate), the cells that say ink (far from the fit) left out. It
// follows a shadow across the sheet or a vignette, not the strokes, as long as most cells say
// paper.
class PaperSurface {
 public:
  explicit PaperSurface(const GrayImage& image, PaperEstimate estimate = PaperEstimate::median);
  float at(int x, int y) const;  // clamped near the range of the paper cells' medians
  // Every pixel's at(), (height, width), computed row by row: the same values, a fraction of
  // the cost per pixel.
  std::vector<float> levels() const;
  float brightest() const { return brightest_; }  // the brightest paper cell's median
  // Of the cells, the fraction whose median the fit kept as paper.
  double paper_fraction() const { return paper_fraction_; }

 private:
  double coefficients_[6] = {};  // 1, u, v, u^2, uv, v^2 with u, v in [-1, 1] across the image
  double half_width_ = 1, half_height_ = 1;
  float low_ = 0, high_ = 1, brightest_ = 1;
  double paper_fraction_ = 1;
};

// Otsu's threshold for a histogram: the bin t that maximises the between-class variance of the
// classes [0, t) and [t, n). Where several t tie (empty bins between two populations), the middle
// of the tied run, so the threshold sits halfway across the gap. Returns 0 when no split separates
// anything (fewer than two occupied bins).
int otsu_threshold(const std::vector<double>& histogram);

// A rectangle of pixels, half-open: [x0, x1) x [y0, y1).
struct PixelBox {
  int x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  int width() const { return x1 - x0; }
  int height() const { return y1 - y0; }
  bool empty() const { return x1 <= x0 || y1 <= y0; }
};

// An 8-connected piece of ink found by label_ink.
struct InkComponent {
  long long pixels = 0;
  PixelBox box;
};

// Connected pieces of a mask (non-zero = ink), 8-connected as a pen's diagonal stroke is.
// labels[i] is the component's index in the returned list, or -1 for background.
struct InkLabels {
  std::vector<InkComponent> components;
  std::vector<int> labels;  // (height, width)
};
InkLabels label_ink(const std::vector<std::uint8_t>& mask, int width, int height);

// The mean stroke width of the ink in a mask, in pixels: twice the area over the length of the
// outline (edges between an ink pixel and a paper pixel or the image's border). Exact for a long
// straight bar; 0 for an empty mask.
double mean_stroke_width(const std::vector<std::uint8_t>& mask, int width, int height);

// Grey dilation with a (2r+1) x (2r+1) square: each pixel becomes the maximum of its
// neighbourhood (the image's outside counts as 0). Cost does not grow with r (van Herk and
// Gil-Werman).
std::vector<float> dilate_square(const std::vector<float>& image, int width, int height, int r);

}  // namespace lenet5
