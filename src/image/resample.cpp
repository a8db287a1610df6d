// Area, bilinear and nearest-neighbour resizing of grey images (resample.hpp).
#include "image/resample.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace lenet5 {
namespace {

struct Tap {
  int index;
  float weight;
};

// Each source pixel weighs by the length of the output pixel's footprint it covers, so the same
// rule downscales (many taps) and upscales (one or two taps) without special cases.
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

// The two source pixels whose centres bracket output pixel o's centre, edges clamped.
std::vector<Tap> bilinear_taps(int n_in, int n_out) {
  std::vector<Tap> taps(static_cast<std::size_t>(n_out) * 2);
  for (int o = 0; o < n_out; ++o) {
    const double u = std::clamp((o + 0.5) * n_in / n_out - 0.5, 0.0, n_in - 1.0);
    const int i = std::min(static_cast<int>(u), n_in - 1);
    const float f = static_cast<float>(u - i);
    taps[2 * static_cast<std::size_t>(o)] = {i, 1.0f - f};
    taps[2 * static_cast<std::size_t>(o) + 1] = {std::min(i + 1, n_in - 1), f};
  }
  return taps;
}

}  // namespace

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

std::vector<float> resample_bilinear(const std::vector<float>& src, int w, int h, int out_w,
                                     int out_h) {
  const std::vector<Tap> x_taps = bilinear_taps(w, out_w), y_taps = bilinear_taps(h, out_h);
  std::vector<float> out(static_cast<std::size_t>(out_w) * static_cast<std::size_t>(out_h));
  for (int y = 0; y < out_h; ++y) {
    const Tap top = y_taps[2 * static_cast<std::size_t>(y)];
    const Tap bottom = y_taps[2 * static_cast<std::size_t>(y) + 1];
    const float* row0 = &src[static_cast<std::size_t>(top.index) * w];
    const float* row1 = &src[static_cast<std::size_t>(bottom.index) * w];
    for (int x = 0; x < out_w; ++x) {
      const Tap left = x_taps[2 * static_cast<std::size_t>(x)];
      const Tap right = x_taps[2 * static_cast<std::size_t>(x) + 1];
      const float upper = left.weight * row0[left.index] + right.weight * row0[right.index];
      const float lower = left.weight * row1[left.index] + right.weight * row1[right.index];
      out[static_cast<std::size_t>(y) * out_w + static_cast<std::size_t>(x)] =
          top.weight * upper + bottom.weight * lower;
    }
  }
  return out;
}

std::vector<float> resample_nearest(const std::vector<float>& src, int w, int h, int out_w,
                                    int out_h) {
  std::vector<float> out(static_cast<std::size_t>(out_w) * static_cast<std::size_t>(out_h));
  for (int y = 0; y < out_h; ++y) {
    const std::size_t sy =
        static_cast<std::size_t>(std::min(h - 1, int(std::int64_t(y) * h / out_h)));
    for (int x = 0; x < out_w; ++x) {
      const std::size_t sx =
          static_cast<std::size_t>(std::min(w - 1, int(std::int64_t(x) * w / out_w)));
      out[static_cast<std::size_t>(y) * out_w + static_cast<std::size_t>(x)] = src[sy * w + sx];
    }
  }
  return out;
}

}  // namespace lenet5
