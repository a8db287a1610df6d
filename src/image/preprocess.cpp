// MNIST's preparation (LeCun et al.): the NIST digits were size-normalised to fit a 20x20 box
// keeping their aspect ratio, anti-aliased by the resampling, then placed in a 28x28 field so
// that the centre of mass of the pixels sat at the field's centre. Measured on t10k, the mean
// centre of mass in 0-based pixel indices is (13.99, 14.01), so the target here is (14, 14).
//
// Layout: every buffer is row-major (rows, cols). Intensities are floats in [0, 1] until the last
// step. "Polar" values are the input after the polarity decision: ink is light, as in MNIST.
#include "image/preprocess.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "core/error.hpp"

namespace lenet5 {
namespace {

constexpr int kField = 28;
constexpr int kBox = 20;
constexpr float kFieldCentre = 14.0f;
// Below this difference between the brightest ink and the background (a tenth of the full range,
// about 25 grey levels) the "ink" is indistinguishable from sensor and JPEG noise on blank paper.
constexpr float kMinContrast = 0.1f;
// The frame median comes from a histogram so a 16k x 16k image needs no copy of its frame;
// 4096 bins resolve 8-bit levels exactly and 16-bit ones to 1/4096.
constexpr int kHistogramBins = 4096;

struct Rect {
  int x0, y0, x1, y1;  // half-open: [x0, x1) x [y0, y1)
  int width() const { return x1 - x0; }
  int height() const { return y1 - y0; }
};

float at(const GrayImage& image, int x, int y) {
  return image.pixels[static_cast<std::size_t>(y) * static_cast<std::size_t>(image.width) +
                      static_cast<std::size_t>(x)];
}

// The frame is the outer 5% of the shorter side, at least 1 px: wide enough to average over a
// scanner's edge and JPEG ringing, narrow enough to stay mostly clear of a tightly cropped digit.
template <typename Visit>
void for_each_frame_pixel(const GrayImage& image, Visit visit) {
  const int t = std::max(1, static_cast<int>(0.05 * std::min(image.width, image.height)));
  for (int y = 0; y < image.height; ++y) {
    const bool full_row = y < t || y >= image.height - t;
    const int left_end = full_row ? image.width : std::min(t, image.width);
    for (int x = 0; x < left_end; ++x) visit(at(image, x, y));
    if (full_row) continue;
    for (int x = std::max(left_end, image.width - t); x < image.width; ++x) visit(at(image, x, y));
  }
}

// A median rather than a mean, so that ink touching the border does not shift the background.
float frame_median(const GrayImage& image) {
  std::vector<long long> histogram(kHistogramBins, 0);
  long long n = 0;
  for_each_frame_pixel(image, [&](float v) {
    ++histogram[static_cast<std::size_t>(
        std::clamp(static_cast<int>(v * kHistogramBins), 0, kHistogramBins - 1))];
    ++n;
  });
  long long seen = 0;
  for (int bin = 0; bin < kHistogramBins; ++bin) {
    seen += histogram[static_cast<std::size_t>(bin)];
    if (2 * seen >= n) return (static_cast<float>(bin) + 0.5f) / kHistogramBins;
  }
  return 1.0f;
}

// Mean of the middle half in each direction, where a digit's strokes are.
float centre_mean(const GrayImage& image) {
  const Rect centre{image.width / 4, image.height / 4, image.width - image.width / 4,
                    image.height - image.height / 4};
  double sum = 0.0;
  for (int y = centre.y0; y < centre.y1; ++y) {
    for (int x = centre.x0; x < centre.x1; ++x) sum += at(image, x, y);
  }
  return static_cast<float>(sum / (static_cast<double>(centre.width()) * centre.height()));
}

bool decide_inversion(const GrayImage& image, InvertMode mode, float border) {
  if (mode != InvertMode::automatic) return mode == InvertMode::yes;
  return border > centre_mean(image);
}

struct InkLevels {
  bool inverted;
  float background;  // polar value of the paper
  float peak;        // polar value of the strongest ink
  float polar(float v) const { return inverted ? 1.0f - v : v; }
  // Ink is what is more than halfway from the paper to the strongest ink: for a continuous-tone
  // picture that is where a stroke's edge lies, and it ignores faint noise and shading.
  float threshold() const { return background + 0.5f * (peak - background); }
};

InkLevels measure_ink(const GrayImage& image, InvertMode mode, const std::string& name) {
  const float border = frame_median(image);
  InkLevels levels{decide_inversion(image, mode, border), 0.0f, 0.0f};
  levels.background = levels.polar(border);
  float peak = 0.0f;
  for (float v : image.pixels) peak = std::max(peak, levels.polar(v));
  levels.peak = peak;
  if (levels.peak - levels.background < kMinContrast) {
    char detail[160];
    std::snprintf(
        detail, sizeof detail, "the strongest ink differs from the background by %.3f, below %.3f",
        static_cast<double>(levels.peak - levels.background), static_cast<double>(kMinContrast));
    const std::string hint = mode == InvertMode::automatic
                                 ? ""
                                 : "; the polarity was forced by --invert, try --invert auto";
    throw Error(name + " is blank: no digit found (" + detail + hint + ")");
  }
  return levels;
}

Rect ink_bounding_box(const GrayImage& image, const InkLevels& levels) {
  Rect box{image.width, image.height, 0, 0};
  const float threshold = levels.threshold();
  for (int y = 0; y < image.height; ++y) {
    for (int x = 0; x < image.width; ++x) {
      if (levels.polar(at(image, x, y)) <= threshold) continue;
      box = {std::min(box.x0, x), std::min(box.y0, y), std::max(box.x1, x + 1),
             std::max(box.y1, y + 1)};
    }
  }
  return box;  // never empty: the peak pixel is above the threshold
}

// Crops and maps the paper to 0 and the strongest ink to 1, keeping the grey levels between.
std::vector<float> crop_normalised(const GrayImage& image, const InkLevels& levels, Rect box) {
  std::vector<float> out;
  out.reserve(static_cast<std::size_t>(box.width()) * static_cast<std::size_t>(box.height()));
  const float range = levels.peak - levels.background;
  for (int y = box.y0; y < box.y1; ++y) {
    for (int x = box.x0; x < box.x1; ++x) {
      out.push_back(
          std::clamp((levels.polar(at(image, x, y)) - levels.background) / range, 0.0f, 1.0f));
    }
  }
  return out;
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
std::array<std::uint8_t, kField * kField> to_bytes(
    const std::array<float, kField * kField>& field) {
  const float peak = *std::max_element(field.begin(), field.end());
  std::array<std::uint8_t, kField * kField> bytes{};
  for (std::size_t i = 0; i < field.size(); ++i) {
    bytes[i] =
        static_cast<std::uint8_t>(std::lround(std::clamp(field[i] / peak, 0.0f, 1.0f) * 255.0f));
  }
  return bytes;
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
  const InkLevels levels = measure_ink(image, invert, name_for_errors);
  const Rect box = ink_bounding_box(image, levels);
  const std::vector<float> crop = crop_normalised(image, levels, box);

  const int longer = std::max(box.width(), box.height());
  const auto scaled_side = [&](int side) {
    return std::max(1, static_cast<int>(std::lround(static_cast<double>(side) * kBox / longer)));
  };
  const int out_w = scaled_side(box.width()), out_h = scaled_side(box.height());
  const std::vector<float> digit = resample_area(crop, box.width(), box.height(), out_w, out_h);

  const auto field = place_by_centre_of_mass(digit, out_w, out_h);
  if (*std::max_element(field.begin(), field.end()) <= 0.0f) {
    throw Error(name_for_errors + " is blank: no digit found (no ink left after centring)");
  }
  return Digit28{to_bytes(field), levels.inverted};
}

}  // namespace lenet5
