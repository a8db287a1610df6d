// MNIST's preparation (LeCun et al.): the NIST digits were size-normalised to fit a 20x20 box
// keeping their aspect ratio, anti-aliased by the resampling, then placed in a 28x28 field so
// that the centre of mass of the pixels sat at the field's centre. Measured on t10k, the mean
// centre of mass in 0-based pixel indices is (13.99, 14.01), so the target here is (14, 14).
//
// NIST's digits were clean scans; a photograph is not. Before cropping, the paper's brightness is
// estimated across the picture (ink.hpp: uneven lighting), every pixel is measured against the
// paper under it, Otsu's threshold separates ink from paper, and only the largest piece of ink
// and the pieces near it are the digit (specks and scratches elsewhere are not). Strokes much
// thinner than MNIST's are widened before scaling down.
//
// Layout: every buffer is row-major (rows, cols). Intensities are floats in [0, 1] until the last
// step; "contrast" is a pixel's departure from the paper in the ink's direction (ink is positive,
// light as in MNIST).
#include "image/preprocess.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "core/error.hpp"
#include "image/ink.hpp"

namespace lenet5 {
namespace {

constexpr int kField = 28;
constexpr int kBox = 20;
constexpr float kFieldCentre = 14.0f;
// Below this difference between the strongest ink and the paper (a tenth of the full range,
// about 25 grey levels) the "ink" is indistinguishable from sensor and JPEG noise on blank paper.
constexpr float kMinContrast = 0.1f;
// Contrast is divided by the light falling on the paper, relative to the best-lit paper, taken as
// at least this much: paper darker still is dark paper or a board, not paper in a shadow.
constexpr float kDimmestLight = 0.25f;
constexpr int kContrastBins = 256;
// The ink threshold stays above the paper's noise by 4 sigma: 3 in 100,000 noise pixels pass.
constexpr float kNoiseSigmas = 4.0f;
// Pieces of ink within this fraction of the largest piece's longer side (from its box, or from
// a piece already joined) are the digit's: a 5's bar floats about a tenth of the height away.
constexpr double kReach = 0.25;
constexpr double kSmallPiece = 0.1;
// Ink joined to certain ink counts down to this fraction of the threshold; at least 2 sigma of
// the paper's noise, since the threshold is at least 4.
constexpr float kFaintFraction = 0.5f;
// Stroke widths in px at the 20 px scale, measured as mean_stroke_width at Otsu's threshold: on
// t10k the median is 1.84 and the 5th percentile 1.22; measured at each digit's own Otsu
// threshold on the first 3000, the 95th percentile is 2.93. Thinner than kThinStroke is widened,
// thicker than kThickStroke thinned, to about kTargetStroke.
constexpr double kThinStroke = 1.2;
constexpr double kTargetStroke = 1.8;
constexpr double kThickStroke = 2.9;
// The 20th and 80th percentiles of MNIST's slant (see limit_slant).
constexpr double kMinSlant = -0.358;
constexpr double kMaxSlant = 0.108;

using Rect = PixelBox;

struct Contrast {
  bool inverted;
  // How far each pixel stands out from the paper under it, in the ink's direction; the paper is
  // about 0. Light multiplies paper and ink alike, so the departure is divided by the light
  // (the paper's brightness relative to the brightest paper): a stroke in a shadow stands out as
  // much as one in the light.
  std::vector<float> values;  // (height, width)
  float peak;                 // the largest value
};

// The direction whose strong departures from the paper carry more ink: ink is whatever lies
// beyond half of the largest departure either way, and its summed departure decides.
bool ink_is_dark(const GrayImage& image, const std::vector<float>& paper) {
  float lightest = 0.0f, darkest = 0.0f;
  for (std::size_t i = 0; i < paper.size(); ++i) {
    lightest = std::max(lightest, image.pixels[i] - paper[i]);
    darkest = std::max(darkest, paper[i] - image.pixels[i]);
  }
  const float half = 0.5f * std::max(lightest, darkest);
  double light_ink = 0.0, dark_ink = 0.0;
  for (std::size_t i = 0; i < paper.size(); ++i) {
    const float d = image.pixels[i] - paper[i];
    if (d > half) light_ink += d;
    if (-d > half) dark_ink -= d;
  }
  return dark_ink > light_ink;
}

Contrast measure_contrast(const GrayImage& image, InvertMode mode, const std::string& name) {
  const PaperSurface surface(image);
  const std::vector<float> paper = surface.levels();
  const bool inverted =
      mode == InvertMode::automatic ? ink_is_dark(image, paper) : mode == InvertMode::yes;
  Contrast contrast{inverted, std::vector<float>(image.pixels.size()), 0.0f};
  float strongest = -1.0f;  // in grey levels, for the blank test
  const float brightest = surface.brightest();
  for (std::size_t i = 0; i < paper.size(); ++i) {
    const float p = paper[i], v = image.pixels[i];
    const float departure = inverted ? p - v : v - p;
    strongest = std::max(strongest, departure);
    const float light = brightest > 0.0f ? std::max(p / brightest, kDimmestLight) : 1.0f;
    contrast.values[i] = departure / light;
    contrast.peak = std::max(contrast.peak, contrast.values[i]);
  }
  if (strongest < kMinContrast) {
    char detail[160];
    std::snprintf(detail, sizeof detail,
                  "the strongest ink differs from the background by %.3f, below %.3f",
                  static_cast<double>(strongest), static_cast<double>(kMinContrast));
    const std::string hint = mode == InvertMode::automatic
                                 ? ""
                                 : "; the polarity was forced by --invert, try --invert auto";
    throw Error(name + " is blank: no digit found (" + detail + hint + ")");
  }
  return contrast;
}

// The ink threshold: Otsu's split of the contrast histogram, but never inside the paper's noise.
// Otsu alone puts it there when the digit is a few hundred pixels of a large photograph: splitting
// the noise then separates more variance than splitting off the digit.
float ink_threshold(const Contrast& contrast) {
  std::vector<double> histogram(kContrastBins, 0.0), spread(kContrastBins, 0.0);
  const auto bin = [&](float value) {
    return static_cast<std::size_t>(
        std::clamp(static_cast<int>(value / contrast.peak * kContrastBins), 0, kContrastBins - 1));
  };
  for (float v : contrast.values) {
    histogram[bin(v)] += 1.0;
    spread[bin(std::abs(v))] += 1.0;
  }
  // The paper's noise from the median absolute contrast (0.674 sigma for normal noise): most
  // pixels are paper, whose contrast is noise around 0.
  double seen = 0.0;
  int median_bin = 0;
  while (2.0 * (seen + spread[static_cast<std::size_t>(median_bin)]) < contrast.values.size()) {
    seen += spread[static_cast<std::size_t>(median_bin++)];
  }
  const float sigma = 1.4826f * (median_bin + 0.5f) / kContrastBins * contrast.peak;
  const float otsu = static_cast<float>(otsu_threshold(histogram)) / kContrastBins * contrast.peak;
  return std::max(otsu, kNoiseSigmas * sigma);
}

struct Ink {
  Rect box;                        // of the digit's pieces
  std::vector<std::uint8_t> keep;  // (box height, box width): 1 = the digit's ink or next to it
  float threshold;                 // contrast above which a pixel is certainly ink
  float faint;                     // contrast above which a pixel joined to ink is ink too
  float level;                     // the contrast of full-strength ink
};

long long box_gap(const Rect& a, const PixelBox& b) {
  const long long dx = std::max({0, a.x0 - b.x1, b.x0 - a.x1});
  const long long dy = std::max({0, a.y0 - b.y1, b.y0 - a.y1});
  return std::max(dx, dy);
}

// Pieces are the connected parts of the faint mask that hold some certain ink (hysteresis, as in
// Canny's edge detector): a stroke that fades in a shadow or thins out stays one piece, while
// faint noise on its own is no piece. Their size is their count of certain ink.
// The digit is the largest piece and every piece near it: a 5's detached bar, a stroke broken by
// a fine pen. A piece smaller than kSmallPiece of the largest (a speck, a scratch) must come
// much closer than a large one to count: a fourth of the reach.
std::vector<bool> digit_pieces(const InkLabels& ink, const std::vector<long long>& certain,
                               Rect& box) {
  const auto& parts = ink.components;
  std::size_t largest = 0;
  for (std::size_t i = 1; i < parts.size(); ++i) {
    if (certain[i] > certain[largest]) largest = i;
  }
  const PixelBox& core = parts[largest].box;
  const double reach = kReach * std::max(core.width(), core.height());
  std::vector<bool> kept(parts.size(), false);
  kept[largest] = true;
  box = {core.x0, core.y0, core.x1, core.y1};
  for (bool grew = true; grew;) {  // until no piece joins: a joined piece extends the box
    grew = false;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      if (kept[i] || certain[i] == 0) continue;
      const bool small = certain[i] < kSmallPiece * certain[largest];
      if (box_gap(box, parts[i].box) > (small ? 0.25 * reach : reach)) continue;
      kept[i] = grew = true;
      box = {std::min(box.x0, parts[i].box.x0), std::min(box.y0, parts[i].box.y0),
             std::max(box.x1, parts[i].box.x1), std::max(box.y1, parts[i].box.y1)};
    }
  }
  return kept;
}

// The anti-aliased rim just outside the faint threshold belongs to the strokes too: the mask
// grown by one pixel.
std::vector<std::uint8_t> with_rim(const std::vector<std::uint8_t>& mask, int w, int h) {
  std::vector<std::uint8_t> grown(mask.size(), 0);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      if (!mask[static_cast<std::size_t>(y) * w + static_cast<std::size_t>(x)]) continue;
      for (int yy = std::max(0, y - 1); yy <= std::min(h - 1, y + 1); ++yy) {
        for (int xx = std::max(0, x - 1); xx <= std::min(w - 1, x + 1); ++xx) {
          grown[static_cast<std::size_t>(yy) * w + static_cast<std::size_t>(xx)] = 1;
        }
      }
    }
  }
  return grown;
}

Ink find_digit(const Contrast& contrast, int width, int height, const std::string& name) {
  Ink ink{};
  ink.threshold = ink_threshold(contrast);
  ink.faint = kFaintFraction * ink.threshold;
  std::vector<std::uint8_t> above(contrast.values.size());
  for (std::size_t i = 0; i < above.size(); ++i) above[i] = contrast.values[i] > ink.faint;
  const InkLabels labels = label_ink(above, width, height);
  std::vector<long long> certain(labels.components.size(), 0);
  for (std::size_t i = 0; i < above.size(); ++i) {
    if (contrast.values[i] > ink.threshold) ++certain[static_cast<std::size_t>(labels.labels[i])];
  }
  if (std::find_if(certain.begin(), certain.end(), [](long long n) { return n > 0; }) ==
      certain.end()) {
    throw Error(name + " is blank: no digit found (nothing stands out from the paper's noise)");
  }
  const std::vector<bool> kept = digit_pieces(labels, certain, ink.box);

  const int w = ink.box.width(), h = ink.box.height();
  std::vector<std::uint8_t> pieces(static_cast<std::size_t>(w) * static_cast<std::size_t>(h), 0);
  std::vector<float> levels;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const std::size_t source = static_cast<std::size_t>(y + ink.box.y0) * width +
                                 static_cast<std::size_t>(x + ink.box.x0);
      const int label = labels.labels[source];
      if (label < 0 || !kept[static_cast<std::size_t>(label)]) continue;
      const std::size_t i = static_cast<std::size_t>(y) * w + static_cast<std::size_t>(x);
      pieces[i] = 1;
      if (contrast.values[source] <= ink.threshold) continue;
      levels.push_back(contrast.values[source]);
    }
  }
  // Full-strength ink is the 90th percentile of the digit's certain ink, not its maximum, so
  // that a noise spike or a JPEG overshoot does not dim the whole digit.
  const auto rank = levels.begin() + static_cast<std::ptrdiff_t>(0.9 * (levels.size() - 1));
  std::nth_element(levels.begin(), rank, levels.end());
  ink.level = *rank;
  ink.keep = with_rim(pieces, w, h);
  return ink;
}

// The digit's crop, the paper mapped to 0 and full-strength ink to 1 with the grey levels between
// kept, so a clean digit keeps its anti-aliased edges (mapping the faint threshold to 0 instead
// thinned the edges, and cost 1 point on the handwriting set). Contrast below the faint threshold
// is the paper's noise and becomes 0, as does everything that is not the digit (specks).
std::vector<float> crop_normalised(const Contrast& contrast, int width, const Ink& ink) {
  const int w = ink.box.width(), h = ink.box.height();
  std::vector<float> out(static_cast<std::size_t>(w) * static_cast<std::size_t>(h), 0.0f);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const std::size_t i = static_cast<std::size_t>(y) * w + static_cast<std::size_t>(x);
      if (!ink.keep[i]) continue;
      const float v = contrast.values[static_cast<std::size_t>(y + ink.box.y0) * width +
                                      static_cast<std::size_t>(x + ink.box.x0)];
      out[i] = v <= ink.faint ? 0.0f : std::clamp(v / ink.level, 0.0f, 1.0f);
    }
  }
  return out;
}

// The certain ink of a crop of crop_normalised: its pixels above the ink threshold, as found
// before the crop was normalised by full-strength ink (or sheared).
std::vector<std::uint8_t> certain_ink(const std::vector<float>& crop, const Ink& ink) {
  const float certain = ink.threshold / ink.level;
  std::vector<std::uint8_t> mask(crop.size());
  for (std::size_t i = 0; i < crop.size(); ++i) mask[i] = crop[i] > certain;
  return mask;
}

// A pen's ink is as dark in a thin stroke as in a thick one; a stroke narrower than a pixel
// (a broad nib's hairline, a fine pen in a small picture) only looks faint because it covers part
// of each pixel, and MNIST's strokes, drawn at full strength, never do. Each pixel is divided by
// the strongest ink within a stroke's width of it: a hairline comes up to full strength and stays
// joined to the strokes it connects, while the anti-aliased edge of a full stroke, which has that
// stroke beside it, keeps its grey. The divisor is at least kHairlineFloor, so the faintest ink
// kept is raised at most fourfold (a hairline of a quarter strength to full), not noise to ink.
constexpr float kHairlineFloor = 0.25f;
void strengthen_hairlines(std::vector<float>& crop, int w, int h,
                          const std::vector<std::uint8_t>& mask) {
  const int r = std::max(1, static_cast<int>(std::ceil(mean_stroke_width(mask, w, h))));
  const std::vector<float> strongest = dilate_square(crop, w, h, r);
  for (std::size_t i = 0; i < crop.size(); ++i) {
    crop[i] /= std::max(strongest[i], kHairlineFloor);
  }
}

// Strokes much thinner than MNIST's (a fine pen in a large picture) would shrink to faint
// hairlines at 20 px; dilating them in the source brings them to about MNIST's width. The crop
// grows by the dilation's radius on every side.
void thicken_thin_strokes(std::vector<float>& crop, int& w, int& h,
                          const std::vector<std::uint8_t>& mask) {
  const double scale = static_cast<double>(kBox) / std::max(w, h);
  const double stroke = mean_stroke_width(mask, w, h);
  if (stroke * scale >= kThinStroke) return;
  const int r = static_cast<int>(std::lround((kTargetStroke / scale - stroke) / 2.0));
  if (r < 1) return;
  const int padded_w = w + 2 * r, padded_h = h + 2 * r;
  std::vector<float> padded(static_cast<std::size_t>(padded_w) * padded_h, 0.0f);
  for (int y = 0; y < h; ++y) {
    std::copy_n(&crop[static_cast<std::size_t>(y) * w], w,
                &padded[static_cast<std::size_t>(y + r) * padded_w + static_cast<std::size_t>(r)]);
  }
  crop = dilate_square(padded, padded_w, padded_h, r);
  w = padded_w, h = padded_h;
}

// Strokes much wider than MNIST's (a bold pen, a marker) fill a digit's small loops at 20 px: a
// bold 8's upper loop closes and it reads as a 0. Grey erosion in the source brings them back
// towards MNIST's median width; the crop is then cut to the ink that is left.
bool thin_thick_strokes(std::vector<float>& crop, int& w, int& h,
                        const std::vector<std::uint8_t>& mask) {
  const double scale = static_cast<double>(kBox) / std::max(w, h);
  const double stroke = mean_stroke_width(mask, w, h);
  if (stroke * scale <= kThickStroke) return false;
  // Rounded down: rounding to nearest eroded MNIST's own bolder digits to hairlines (5 of the
  // first 1000 t10k digits lost), rounding down lost none.
  const int r = static_cast<int>(std::floor((stroke - kTargetStroke / scale) / 2.0));
  if (r < 1) return false;
  // Erosion is dilation of the paper: 1 - dilate(1 - ink). The crop is padded with paper first,
  // so that ink touching the crop's edge erodes from that side too.
  const int padded_w = w + 2 * r, padded_h = h + 2 * r;
  std::vector<float> paper(static_cast<std::size_t>(padded_w) * padded_h, 1.0f);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      paper[static_cast<std::size_t>(y + r) * padded_w + static_cast<std::size_t>(x + r)] =
          1.0f - crop[static_cast<std::size_t>(y) * w + static_cast<std::size_t>(x)];
    }
  }
  const std::vector<float> grown = dilate_square(paper, padded_w, padded_h, r);
  PixelBox box{padded_w, padded_h, 0, 0};
  for (int y = 0; y < padded_h; ++y) {
    for (int x = 0; x < padded_w; ++x) {
      if (grown[static_cast<std::size_t>(y) * padded_w + static_cast<std::size_t>(x)] >= 1.0f)
        continue;
      box = {std::min(box.x0, x), std::min(box.y0, y), std::max(box.x1, x + 1),
             std::max(box.y1, y + 1)};
    }
  }
  if (box.empty()) return false;  // nothing would be left: keep the strokes as they are
  crop.assign(static_cast<std::size_t>(box.width()) * box.height(), 0.0f);
  for (int y = 0; y < box.height(); ++y) {
    for (int x = 0; x < box.width(); ++x) {
      crop[static_cast<std::size_t>(y) * box.width() + static_cast<std::size_t>(x)] =
          1.0f - grown[static_cast<std::size_t>(y + box.y0) * padded_w +
                       static_cast<std::size_t>(x + box.x0)];
    }
  }
  w = box.width(), h = box.height();
  return true;
}

// MNIST's writers slanted their digits, but within limits: the moment slant mu11/mu02 (x moved
// per px down, so a digit leaning right has a negative slant) of the first 20,000 training
// digits has percentiles 2.5: -0.667, 20: -0.358, 50: -0.118, 80: 0.108, 97.5: 0.435. A digit
// slanted beyond the middle 60% (kMinSlant, kMaxSlant) is sheared back to the nearest limit:
// shearing only back to the 95% range left oblique digits at its edge, where the network has
// seen few (limits at the 20th and 80th percentiles read 6 more of the handwriting set's 1800
// and one more of the first 1000 t10k digits; the 10th/90th or the median read fewer).
// Digits within the limits are left as they are.
void limit_slant(std::vector<float>& crop, int& w, int& h) {
  double mass = 0.0, my = 0.0, mx = 0.0;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const double v = crop[static_cast<std::size_t>(y) * w + static_cast<std::size_t>(x)];
      mass += v, mx += v * x, my += v * y;
    }
  }
  if (mass <= 0.0) return;
  const double cx = mx / mass, cy = my / mass;
  double mu11 = 0.0, mu02 = 0.0;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const double v = crop[static_cast<std::size_t>(y) * w + static_cast<std::size_t>(x)];
      mu11 += v * (x - cx) * (y - cy), mu02 += v * (y - cy) * (y - cy);
    }
  }
  if (mu02 <= 0.0) return;
  const double slant = mu11 / mu02;
  // x' = x + shear (y - cy) adds shear * mu02 to mu11: the new slant is slant + shear.
  const double shear = std::clamp(slant, kMinSlant, kMaxSlant) - slant;
  if (shear == 0.0) return;
  const auto offset = [&](int y) { return shear * (y + 0.5 - cy); };
  const double base = -std::min(offset(0), offset(h - 1));
  const int sheared_w = w + static_cast<int>(std::ceil(std::abs(shear) * h)) + 1;
  std::vector<float> out(static_cast<std::size_t>(sheared_w) * static_cast<std::size_t>(h), 0.0f);
  int x_min = sheared_w, x_max = -1;
  for (int y = 0; y < h; ++y) {
    const float* row = &crop[static_cast<std::size_t>(y) * w];
    for (int x = 0; x < sheared_w; ++x) {
      // Linear interpolation between the two source pixels whose centres bracket this one's.
      const double u = x - base - offset(y);
      const int i = static_cast<int>(std::floor(u));
      const float f = static_cast<float>(u - i);
      const float a = i >= 0 && i < w ? row[i] : 0.0f;
      const float b = i + 1 >= 0 && i + 1 < w ? row[i + 1] : 0.0f;
      const float v = (1.0f - f) * a + f * b;
      out[static_cast<std::size_t>(y) * sheared_w + static_cast<std::size_t>(x)] = v;
      if (v > 0.0f) x_min = std::min(x_min, x), x_max = std::max(x_max, x);
    }
  }
  // Crop the columns the shear left empty, so the digit's box is its ink again.
  const int new_w = x_max - x_min + 1;
  crop.assign(static_cast<std::size_t>(new_w) * static_cast<std::size_t>(h), 0.0f);
  for (int y = 0; y < h; ++y) {
    std::copy_n(&out[static_cast<std::size_t>(y) * sheared_w + static_cast<std::size_t>(x_min)],
                new_w, &crop[static_cast<std::size_t>(y) * new_w]);
  }
  w = new_w;
}

struct Tap {
  int index;
  float weight;
};

// Output pixel o covers the source interval [o*step, (o+1)*step) with step = n_in / n_out; its
// value is the mean over that footprint, so each source pixel weighs by the length it shares.
// The same rule downscales (many taps) and upscales (one or two taps) without special cases.
std::vector<std::vector<Tap>> area_taps(int n_in, int n_out) {
  const double step = static_cast<double>(n_in) / n_out;
  std::vector<std::vector<Tap>> taps(static_cast<std::size_t>(n_out));
  for (int o = 0; o < n_out; ++o) {
    const double a = o * step, b = (o + 1) * step;
    for (int i = static_cast<int>(std::floor(a)); i < n_in && i < b; ++i) {
      const double overlap = std::min(b, i + 1.0) - std::max(a, static_cast<double>(i));
      if (overlap > 0.0) {
        taps[static_cast<std::size_t>(o)].push_back({i, static_cast<float>(overlap / step)});
      }
    }
  }
  return taps;
}

// A box filter is separable (the overlap area is the product of the 1-D overlaps), so rows are
// resampled first, then columns.
std::vector<float> resample_area(const std::vector<float>& src, int w, int h, int out_w,
                                 int out_h) {
  const auto x_taps = area_taps(w, out_w);
  const auto y_taps = area_taps(h, out_h);
  std::vector<float> rows(static_cast<std::size_t>(h) * static_cast<std::size_t>(out_w), 0.0f);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < out_w; ++x) {
      float sum = 0.0f;
      for (const Tap& t : x_taps[static_cast<std::size_t>(x)]) {
        sum += t.weight * src[static_cast<std::size_t>(y) * w + static_cast<std::size_t>(t.index)];
      }
      rows[static_cast<std::size_t>(y) * out_w + static_cast<std::size_t>(x)] = sum;
    }
  }
  std::vector<float> out(static_cast<std::size_t>(out_h) * static_cast<std::size_t>(out_w), 0.0f);
  for (int y = 0; y < out_h; ++y) {
    for (const Tap& t : y_taps[static_cast<std::size_t>(y)]) {
      for (int x = 0; x < out_w; ++x) {
        out[static_cast<std::size_t>(y) * out_w + static_cast<std::size_t>(x)] +=
            t.weight *
            rows[static_cast<std::size_t>(t.index) * out_w + static_cast<std::size_t>(x)];
      }
    }
  }
  return out;
}

// Shifts by the rounded offset that brings the centre of mass to (14, 14), as MNIST did;
// whatever lands outside the field is dropped.
std::array<float, kField * kField> place_by_centre_of_mass(const std::vector<float>& digit, int w,
                                                           int h) {
  double mass = 0.0, mx = 0.0, my = 0.0;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const double v = digit[static_cast<std::size_t>(y) * w + static_cast<std::size_t>(x)];
      mass += v;
      mx += v * x;
      my += v * y;
    }
  }
  const long dx = std::lround(kFieldCentre - mx / mass);
  const long dy = std::lround(kFieldCentre - my / mass);
  std::array<float, kField * kField> field{};
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const long fx = x + dx, fy = y + dy;
      if (fx < 0 || fx >= kField || fy < 0 || fy >= kField) continue;
      field[static_cast<std::size_t>(fy * kField + fx)] =
          digit[static_cast<std::size_t>(y) * w + static_cast<std::size_t>(x)];
    }
  }
  return field;
}

// Area averaging dims thin strokes; stretching the maximum to 255 restores full-strength ink.
// `gamma` below 1 lifts the partly covered pixels of strokes that averaging thinned to less than
// a pixel, as MNIST's were not: its strokes are about 2 px wide at 20 px.
std::array<std::uint8_t, kField * kField> to_bytes(const std::array<float, kField * kField>& field,
                                                   float gamma) {
  const float peak = *std::max_element(field.begin(), field.end());
  std::array<std::uint8_t, kField * kField> bytes{};
  for (std::size_t i = 0; i < field.size(); ++i) {
    const float strength = std::pow(std::clamp(field[i] / peak, 0.0f, 1.0f), gamma);
    bytes[i] = static_cast<std::uint8_t>(std::lround(strength * 255.0f));
  }
  return bytes;
}

// Digits drawn thinner than MNIST's median (a fine pen, a broad nib's hairlines, only partly
// widened by thicken_thin_strokes) keep faint grey strokes at 20 px; a gamma of 0.7 brightens a
// pixel at a quarter strength to 0.38. Measured on the handwriting set with the default
// checkpoint: 7 more of 1800 read and 1 fewer (broad-nib hairlines mostly), none lost on the
// first 1000 t10k digits; 0.6 and 0.8 read within one of it.
constexpr float kThinStrokeGamma = 0.7f;
float output_gamma(const std::vector<std::uint8_t>& mask, int w, int h) {
  const double stroke = mean_stroke_width(mask, w, h) * kBox / std::max(w, h);
  return stroke < kTargetStroke ? kThinStrokeGamma : 1.0f;
}

// The digit ends 20 px tall, so a picture larger than this on its longer side carries no more of
// it. Reducing it first (area averaging, as the final scaling does) bounds the cost of the stroke
// filters, which grows with the crop's area and the dilation's radius together: a 2048x16384
// picture of one thin line took 13 s and 1.1 GiB in thicken_thin_strokes at full size. Hand
// photographs of a digit are far smaller (the handwriting set's largest is 782 px), so none
// changes; a digit must fill at least 1% of a picture's longer side to keep 20 px.
constexpr int kMaxWorkingSide = 2048;

GrayImage reduced_to_working_size(const GrayImage& image) {
  const int longer = std::max(image.width, image.height);
  const auto reduced_side = [&](int side) {
    return std::max(
        1, static_cast<int>(std::lround(static_cast<double>(side) * kMaxWorkingSide / longer)));
  };
  GrayImage reduced;
  reduced.width = reduced_side(image.width);
  reduced.height = reduced_side(image.height);
  reduced.pixels =
      resample_area(image.pixels, image.width, image.height, reduced.width, reduced.height);
  return reduced;
}

}  // namespace

InvertMode parse_invert_mode(const std::string& text) {
  if (text == "auto") return InvertMode::automatic;
  if (text == "yes") return InvertMode::yes;
  if (text == "no") return InvertMode::no;
  throw UsageError("invalid --invert value '" + text + "': expected auto, yes or no");
}

Digit28 preprocess_digit(const GrayImage& image, InvertMode invert,
                         const std::string& name_for_errors) {
  if (image.width <= 0 || image.height <= 0 ||
      image.pixels.size() != static_cast<std::size_t>(image.width) * image.height) {
    throw Error(name_for_errors + ": image of " + std::to_string(image.pixels.size()) +
                " pixels does not match its size " + std::to_string(image.width) + "x" +
                std::to_string(image.height));
  }
  if (std::max(image.width, image.height) > kMaxWorkingSide) {
    return preprocess_digit(reduced_to_working_size(image), invert, name_for_errors);
  }
  const Contrast contrast = measure_contrast(image, invert, name_for_errors);
  const Ink ink = find_digit(contrast, image.width, image.height, name_for_errors);
  std::vector<float> crop = crop_normalised(contrast, image.width, ink);
  int w = ink.box.width(), h = ink.box.height();
  // The strokes are measured after the shear, in the box that is scaled to 20 px: a digit
  // lying on its side stands up in a box much narrower than its first one, and measured there
  // its strokes were widened for a scale they did not get.
  limit_slant(crop, w, h);
  const std::vector<std::uint8_t> mask = certain_ink(crop, ink);
  const float gamma = output_gamma(mask, w, h);
  strengthen_hairlines(crop, w, h, mask);
  // Both measure the strokes on the mask, which has the sheared crop's size: one of them at most.
  if (!thin_thick_strokes(crop, w, h, mask)) thicken_thin_strokes(crop, w, h, mask);

  const int longer = std::max(w, h);
  const auto scaled_side = [&](int side) {
    return std::max(1, static_cast<int>(std::lround(static_cast<double>(side) * kBox / longer)));
  };
  const int out_w = scaled_side(w), out_h = scaled_side(h);
  const std::vector<float> digit = resample_area(crop, w, h, out_w, out_h);

  const auto field = place_by_centre_of_mass(digit, out_w, out_h);
  if (*std::max_element(field.begin(), field.end()) <= 0.0f) {
    throw Error(name_for_errors + " is blank: no digit found (no ink left after centring)");
  }
  return Digit28{to_bytes(field, gamma), contrast.inverted};
}

}  // namespace lenet5
