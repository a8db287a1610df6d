// The frame's reading and the margin given back (frame.hpp).
#include "image/frame.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/rng.hpp"

namespace lenet5 {
namespace {

constexpr int kStrokeAspect = 5;  // in halves: 2.5
constexpr float kTwoLevels = 8.0f;
constexpr int kGreyBins = 256;
constexpr int kPaperPeakBins = 2;
constexpr double kMarginOfLongerSide = 0.5;

float median_of(std::vector<float> values) {
  if (values.empty()) return 0.0f;
  const auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), middle, values.end());
  return *middle;
}

float quantile_of(std::vector<float> values, double q) {
  const auto at = values.begin() + static_cast<std::ptrdiff_t>(q * (values.size() - 1));
  std::nth_element(values.begin(), at, values.end());
  return *at;
}

std::vector<float> outer_ring(const GrayImage& image) {
  const int w = image.width, h = image.height;
  std::vector<float> ring;
  for (int x = 0; x < w; ++x) {
    ring.push_back(image.pixels[static_cast<std::size_t>(x)]);
    if (h > 1) ring.push_back(image.pixels[static_cast<std::size_t>(h - 1) * w + x]);
  }
  for (int y = 1; y + 1 < h; ++y) {
    ring.push_back(image.pixels[static_cast<std::size_t>(y) * w]);
    if (w > 1) ring.push_back(image.pixels[static_cast<std::size_t>(y) * w + (w - 1)]);
  }
  return ring;
}

// The mean of the four corner patches, each a sixteenth of the shorter side square (at least a
// pixel).
float corners_mean(const GrayImage& image) {
  const int side = std::max(1, std::min(image.width, image.height) / 16);
  double sum = 0.0;
  for (const int x0 : {0, image.width - side}) {
    for (const int y0 : {0, image.height - side}) {
      for (int y = y0; y < y0 + side; ++y) {
        for (int x = x0; x < x0 + side; ++x)
          sum += image.pixels[static_cast<std::size_t>(y) * image.width + x];
      }
    }
  }
  return static_cast<float>(sum / (4.0 * side * side));
}

float local_noise(const GrayImage& image) {
  std::vector<float> across, down;
  across.reserve(image.pixels.size());
  down.reserve(image.pixels.size());
  for (int y = 0; y < image.height; ++y) {
    const float* row = &image.pixels[static_cast<std::size_t>(y) * image.width];
    for (int x = 0; x + 1 < image.width; ++x) across.push_back(std::abs(row[x + 1] - row[x]));
    if (y + 1 == image.height) continue;
    for (int x = 0; x < image.width; ++x) down.push_back(std::abs(row[x + image.width] - row[x]));
  }
  const auto noise = [](std::vector<float>& steps) {
    return steps.empty() ? std::numeric_limits<float>::infinity() : median_of(steps) / 0.954f;
  };
  const float smaller = std::min(noise(across), noise(down));
  return std::isinf(smaller) ? 0.0f : smaller;
}

}  // namespace

FrameReading read_frame(const GrayImage& image) {
  FrameReading frame;
  const float light = quantile_of(image.pixels, 0.98), dark = quantile_of(image.pixels, 0.02);
  frame.local_noise = local_noise(image);
  frame.two_levels = light - dark > kTwoLevels * frame.local_noise && light > dark;
  if (light <= dark) return frame;
  const auto darkness = [&](float v) {
    return std::clamp((light - v) / (light - dark), 0.0f, 1.0f);
  };
  double ring = 0.0;
  const std::vector<float> values = outer_ring(image);
  for (const float v : values) ring += darkness(v);
  ring /= static_cast<double>(values.size());
  const double coverage = (ring + darkness(corners_mean(image))) / 2.0;
  frame.paper_is_light = coverage < 0.5;
  frame.certainty = std::abs(coverage - 0.5) * 2.0;
  return frame;
}

bool stroke_shaped(const GrayImage& image) {
  return 2 * std::max(image.width, image.height) >=
         kStrokeAspect * std::min(image.width, image.height);
}

FramePaper frame_paper(const GrayImage& image, bool paper_is_light) {
  std::vector<float> ring = outer_ring(image);
  std::vector<double> histogram(kGreyBins, 0.0);
  const auto bin = [](float v) {
    return static_cast<int>(std::clamp(static_cast<int>(v * kGreyBins), 0, kGreyBins - 1));
  };
  for (const float v : ring) histogram[static_cast<std::size_t>(bin(v))] += 1.0;
  const auto count = [&](int from, int to) {  // ring pixels in bins [from, to), clamped
    double n = 0.0;
    for (int b = std::max(from, 0); b < std::min(to, kGreyBins); ++b)
      n += histogram[static_cast<std::size_t>(b)];
    return n;
  };
  std::sort(ring.begin(), ring.end());
  const std::size_t quarter = std::max<std::size_t>(1, ring.size() / 4);
  const int first = bin(paper_is_light ? ring[ring.size() - quarter] : ring.front());
  const int last = bin(paper_is_light ? ring.back() : ring[quarter - 1]) + 1;
  int peak = first;
  for (int b = first; b < last; ++b) {
    if (count(b - kPaperPeakBins, b + kPaperPeakBins + 1) >
        count(peak - kPaperPeakBins, peak + kPaperPeakBins + 1))
      peak = b;
  }
  FramePaper paper;
  paper.level = (peak + 0.5f) / kGreyBins;
  std::vector<float> far_side;
  for (const float v : ring) {
    const float away = paper_is_light ? v - paper.level : paper.level - v;
    if (away > 0.0f) far_side.push_back(away);
  }
  paper.sigma = 1.4826f * median_of(far_side);
  return paper;
}

int margin_for(const GrayImage& image) {
  return std::max(
      1, static_cast<int>(std::lround(kMarginOfLongerSide * std::max(image.width, image.height))));
}

GrayImage with_paper_margin(const GrayImage& image, const FramePaper& paper, int margin) {
  GrayImage framed;
  framed.width = image.width + 2 * margin;
  framed.height = image.height + 2 * margin;
  framed.pixels.resize(static_cast<std::size_t>(framed.width) * framed.height);
  SplitMix64 rng(0x6d617267696eull);  // "margin"
  for (float& p : framed.pixels) {
    // Box-Muller: a normal deviate from two uniform ones.
    const double u = 1.0 - rng.uniform(), v = rng.uniform();
    const double normal = std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * v);
    p = std::clamp(paper.level + paper.sigma * static_cast<float>(normal), 0.0f, 1.0f);
  }
  for (int y = 0; y < image.height; ++y) {
    std::copy_n(&image.pixels[static_cast<std::size_t>(y) * image.width], image.width,
                &framed.pixels[static_cast<std::size_t>(y + margin) * framed.width + margin]);
  }
  return framed;
}

}  // namespace lenet5
