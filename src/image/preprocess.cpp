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
#include <limits>
#include <optional>
#include <vector>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "image/frame.hpp"
#include "image/ink.hpp"
#include "image/resample.hpp"

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
// ... and above this fraction of the strongest ink: paper whose texture or shading the fitted
// surface does not follow departs from it by a few per cent, where a pen's stroke departs by tens.
constexpr float kPeakFraction = 0.25f;
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

// Thrown when no digit stands out from the noise estimated for the paper (no pixel, or too few):
// in a picture that is mostly ink, perhaps only because the estimate was made on the ink
// (preprocess_digit then looks again, with the paper's margin given back).
class NoDigitAboveNoise : public Error {
 public:
  using Error::Error;
};

// Thrown when nothing departs from the fitted paper by kMinContrast: a blank sheet, or a picture
// so small and so full of ink that the surface was fitted through the strokes (a digit scanned
// at 8 px and enlarged: each cell of the grid a fraction of one of its pixels). Pictures up to
// kSmallPicture on their longer side (a scan of 12 px enlarged x8 is 96) are looked at again.
constexpr int kSmallPicture = 128;
class NothingDeparts : public Error {
 public:
  using Error::Error;
};

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

// The polarity from the cells' medians, which say paper wherever most of a cell is paper; then
// the paper from the same medians, or with `envelope` from the envelope on the paper's side
// (ink.hpp, PaperEstimate), which also says paper where bold strokes fill most of a cell. The
// envelope is the last try (preprocess_digit): the blurred strokes of an enlarged scan pull it
// more than they pull the medians (at 8 px, bilinear, 2 to 3 points fewer of 1,000 held-out
// training digits read right when it came first).
Contrast measure_contrast(const GrayImage& image, InvertMode mode, const std::string& name,
                          bool envelope) {
  const bool inverted = mode == InvertMode::automatic
                            ? ink_is_dark(image, PaperSurface(image).levels())
                            : mode == InvertMode::yes;
  const PaperSurface surface(image, !envelope  ? PaperEstimate::median
                                    : inverted ? PaperEstimate::lightest
                                               : PaperEstimate::darkest);
  const std::vector<float> paper = surface.levels();
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
    throw NothingDeparts(name + " is blank: no digit found (" + detail + hint + ")");
  }
  return contrast;
}

// The ink threshold: Otsu's split of the contrast histogram, but never inside the paper's noise.
// Otsu alone puts it there when the digit is a few hundred pixels of a large photograph: splitting
// the noise then separates more variance than splitting off the digit.
float ink_threshold(const Contrast& contrast) {
  std::vector<double> histogram(kContrastBins, 0.0), spread(kContrastBins, 0.0),
      paper_side(kContrastBins, 0.0);
  const auto bin = [&](float value) {
    return static_cast<std::size_t>(
        std::clamp(static_cast<int>(value / contrast.peak * kContrastBins), 0, kContrastBins - 1));
  };
  double below_paper = 0.0;
  for (float v : contrast.values) {
    histogram[bin(v)] += 1.0;
    spread[bin(std::abs(v))] += 1.0;
    if (v < 0.0f) paper_side[bin(-v)] += 1.0, below_paper += 1.0;
  }
  // The paper's noise from a median departure (0.674 sigma for normal noise), of every pixel or
  // of those on the paper's far side, whichever is smaller. Each overstates it in its own case:
  // every pixel's where ink covers half the picture or more; the far side's where something
  // departs that way too (a dark bar beside a light digit). A picture with nothing below its paper
  // has no noise to measure there.
  const auto sigma_of = [&](const std::vector<double>& counts, double total) {
    double seen = 0.0;
    int median_bin = 0;
    while (median_bin < kContrastBins &&
           2.0 * (seen + counts[static_cast<std::size_t>(median_bin)]) < total) {
      seen += counts[static_cast<std::size_t>(median_bin++)];
    }
    return 1.4826f * (median_bin + 0.5f) / kContrastBins * contrast.peak;
  };
  const float sigma_all = sigma_of(spread, static_cast<double>(contrast.values.size()));
  const float sigma =
      below_paper > 0.0 ? std::min(sigma_all, sigma_of(paper_side, below_paper)) : sigma_all;
  const float otsu = static_cast<float>(otsu_threshold(histogram)) / kContrastBins * contrast.peak;
  return std::max({otsu, kNoiseSigmas * sigma, kPeakFraction * contrast.peak});
}

// A digit's certain ink: at least this many pixels. The smallest digit drawn in a picture that
// the tests read (a "1" of 5 x 7 px) has 8; in flat noise, the pixels beyond the threshold's 4
// sigma are single ones scattered apart, so its largest mark holds one or two.
constexpr long long kMinDigitInk = 5;

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
    throw NoDigitAboveNoise(
        name + " is blank: no digit found (nothing stands out from the paper's noise)");
  }
  const std::vector<bool> kept = digit_pieces(labels, certain, ink.box);
  long long digit_ink = 0;
  for (std::size_t i = 0; i < kept.size(); ++i) digit_ink += kept[i] ? certain[i] : 0;
  if (digit_ink < kMinDigitInk) {
    throw NoDigitAboveNoise(name + " is blank: no digit found (the largest mark has " +
                            std::to_string(digit_ink) + " pixel" + (digit_ink == 1 ? "" : "s") +
                            " of ink, too few for a digit: noise or specks)");
  }

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

// The found digit cropped, its slant limited, its strokes brought to MNIST's width, scaled to
// 20 px and centred by its mass in the 28x28 field.
Digit28 prepared_digit(const Contrast& contrast, int width, const Ink& ink,
                       const std::string& name) {
  std::vector<float> crop = crop_normalised(contrast, width, ink);
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
    throw Error(name + " is blank: no digit found (no ink left after centring)");
  }
  return Digit28{to_bytes(field, gamma), contrast.inverted};
}

// ---- a digit cropped to its ink ---------------------------------------------------------------
// The paper's brightness and noise are measured on the assumption that most of the picture is
// paper. A digit cropped to its ink, or a small scan of one enlarged, breaks it: the ink may cover
// most of the frame, and the paper is then taken for ink (or the threshold lands above the
// strongest ink, and the digit is called blank). Such a picture is recognised by what it leads
// to, a digit that reaches the frame on kTightSides sides or none at all, and is read again with
// the margin it was cropped from given back: paper of the frame's brightness and grain, half the
// picture's longer side wide on every side, so that the paper is at least three quarters of it.
constexpr int kTightSides = 2;

int sides_reached(const Rect& box, int width, int height) {
  return (box.x0 <= 0) + (box.y0 <= 0) + (box.x1 >= width) + (box.y1 >= height);
}

// A polarity the frame gives with at least this certainty overrules the paper surface's (whose
// fit takes the ink for paper when the ink fills the frame). A vignette that darkens a
// photograph's border gives the frame 0.55-0.6 the other way, against a surface that is right:
// at 0.5, two of the handwriting set's 1,800 photos and drawings were read against dark paper;
// at 0.6 none, while 2,000 held-out training digits cropped tight or scanned small lost at most
// 0.15 points a variant (at 0.7, up to 0.5; without the rule, up to 0.85).
constexpr double kSureFrame = 0.6;

// A digit found against the paper surface is read again with a margin when it reaches the frame
// on kTightSides sides, or when the frame is sure of the other polarity (the surface took the ink
// for paper, and a 0's hole for its digit).
bool cropped_tight(const Rect& box, const GrayImage& image, bool inverted, InvertMode invert,
                   const FrameReading& frame) {
  if (sides_reached(box, image.width, image.height) >= kTightSides) return true;
  return invert == InvertMode::automatic && frame.certainty >= kSureFrame &&
         inverted != frame.paper_is_light;
}

// The digit of a picture cropped to its ink, read with the paper's margin given back: the ink
// that was cropped to must span the frame, within kSpanSlack of its longer side from each side
// (a stroke's faint anti-aliased edge may fall below the threshold, a "1" scanned small keeps a
// partly covered column of pixels on either side of its stroke, and a speck too far from the
// digit to be its own may have set the crop's edge). Ink that fills only part
// of the frame is not what the picture was cropped to (the dark half of a picture of two flat
// halves, say), and gives no digit. Nothing when no such digit is found.
constexpr double kSpanSlack = 1.0 / 3.0;

bool spans_frame(const Rect& box, int margin, int width, int height) {
  const int slack =
      std::max(1, static_cast<int>(std::lround(kSpanSlack * std::max(width, height))));
  return box.x0 <= margin + slack && box.x1 >= margin + width - slack && box.y0 <= margin + slack &&
         box.y1 >= margin + height - slack;
}

std::optional<Digit28> read_with_margin(const GrayImage& image, InvertMode invert,
                                        const FrameReading& frame, const std::string& name) {
  // Dark ink is light paper: the polarity asked for, or the frame's.
  const bool paper_is_light =
      invert == InvertMode::automatic ? frame.paper_is_light : invert == InvertMode::yes;
  const int margin = margin_for(image);
  FramePaper paper = frame_paper(image, paper_is_light);
  paper.sigma = std::min(paper.sigma, frame.local_noise);
  // The frame's paper first; then, for a stroke that fills its whole frame (a "1" scanned at a
  // few pixels, whose frame holds no paper to measure), paper at the far end of the grey range.
  std::vector<float> levels{paper.level};
  if (stroke_shaped(image)) levels.push_back(paper_is_light ? 1.0f : 0.0f);
  for (const float level : levels) {
    const GrayImage framed = with_paper_margin(image, {level, paper.sigma}, margin);
    try {
      const Contrast contrast = measure_contrast(
          framed, paper_is_light ? InvertMode::yes : InvertMode::no, name, /*envelope=*/false);
      const Ink ink = find_digit(contrast, framed.width, framed.height, name);
      if (spans_frame(ink.box, margin, image.width, image.height))
        return prepared_digit(contrast, framed.width, ink, name);
    } catch (const Error&) {
      // Not at this paper's level: the next, or no digit.
    }
  }
  return std::nullopt;
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
  const FrameReading frame = read_frame(image);
  std::optional<Digit28> against_surface;  // the first reading's digit, when it found one
  std::optional<Error> refusal;            // or why it found none
  try {
    const Contrast contrast = measure_contrast(image, invert, name_for_errors, false);
    const Ink ink = find_digit(contrast, image.width, image.height, name_for_errors);
    Digit28 digit = prepared_digit(contrast, image.width, ink, name_for_errors);
    if (!cropped_tight(ink.box, image, contrast.inverted, invert, frame)) return digit;
    against_surface = digit;
  } catch (const NoDigitAboveNoise& e) {
    // Perhaps only because the noise was measured on ink that fills the frame or the cells; but
    // a picture without two distinct levels (flat noise) has no ink to look for again.
    if (!frame.two_levels) throw;
    refusal = e;
  } catch (const NothingDeparts& e) {
    // Only in a small picture, whose cells may be smaller than its scan's pixels, and only where
    // the frame is sure of its paper or the picture has a stroke's shape: a photograph of a blank
    // sheet, shaded or vignetted, stays blank, and so does a picture of one flat grey.
    if (!frame.two_levels || std::max(image.width, image.height) > kSmallPicture ||
        (frame.certainty < kSureFrame && !stroke_shaped(image)))
      throw;
    refusal = e;
  }
  if (std::optional<Digit28> digit = read_with_margin(image, invert, frame, name_for_errors))
    return *digit;
  if (against_surface) return *against_surface;
  // Not cropped to its ink, then: bold strokes that fill most of the cells they cross, perhaps
  // in a shadow, whose paper the cells' envelope still shows.
  const Contrast contrast = measure_contrast(image, invert, name_for_errors, true);
  try {
    const Ink ink = find_digit(contrast, image.width, image.height, name_for_errors);
    return prepared_digit(contrast, image.width, ink, name_for_errors);
  } catch (const NoDigitAboveNoise&) {
    throw *refusal;
  }
}

}  // namespace lenet5
