// ex3 (textbook-figures.md §1.22 item 3, Exercise 3): the forward convolution by FFT with cuFFT
// (cuda/figures/conv_fft.hpp), on LeNet's C1, C3 and C5 at N = 64 and on the Fig 16.14 example:
//   * accuracy against the double-precision CPU reference, relative tolerance 1e-4 (the spec's);
//   * the extra memory, the filters zero-padded to the input size (C1: 6,144 floats instead of
//     150, 41x), the temporary-memory cost the cuDNN paper cites (§3.6);
//   * its time next to versions 1 (direct) and 5 (staged) of the registry on the same data.
// Correctness before speed: every method's output is checked before it is timed.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "cuda/figures/conv_fft.hpp"
#include "cuda/kernels/conv/registry.hpp"
#include "figures/fig16_14_data.hpp"
#include "figures/figure_util.hpp"
#include "figures/gpu_common.hpp"

namespace lenet5::figures {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// The relative error is normwise, max_i |y_i - ref_i| / max_i |ref_i| over a layer's whole output,
// not per element: the FFT's round-off is spread over every output of a map (each output mixes all
// H*W frequencies), so an output that is small only by cancellation carries the map's error, and a
// per-element bound would fail it for no fault. That error is about log2(HW) * 2^-24 times the
// sizes of X and W (under 1e-6 here: log2(1024) = 10 for C1), far below the spec's 1e-4; a wrong
// index, a missing conj (convolution instead of correlation) or a wrong window gives O(1).
constexpr double kRelTolerance = 1e-4;
constexpr int kRepetitions = 20;  // timing: CUDA events, one warm-up, median of 20

struct Case {
  std::string name;
  ConvShape s;
  std::vector<float> x, w;
  std::vector<double> y_ref;  // the CPU reference in double
};

Case make_case(std::string name, const ConvShape& s, std::vector<float> x, std::vector<float> w) {
  Case c{std::move(name), s, std::move(x), std::move(w), std::vector<double>(y_count(s))};
  const std::vector<double> xd = as_doubles(c.x), wd = as_doubles(c.w);
  conv_forward_cpu(s, xd.data(), wd.data(), static_cast<const double*>(nullptr), c.y_ref.data());
  return c;
}

// LeNet's three convolutions at N = 64 with random data in [-1, 1), and the Fig 16.14 example
// (the figure's integer X and W, whose Y is printed).
std::vector<Case> cases() {
  const ConvShape c1{64, 1, 32, 32, 6, 5}, c3{64, 6, 14, 14, 16, 5}, c5{64, 16, 5, 5, 120, 5};
  return {
      make_case("C1", c1, random_floats(x_count(c1), 7101), random_floats(weight_count(c1), 7102)),
      make_case("C3", c3, random_floats(x_count(c3), 7103), random_floats(weight_count(c3), 7104)),
      make_case("C5", c5, random_floats(x_count(c5), 7105), random_floats(weight_count(c5), 7106)),
      make_case("Fig 16.14", fig16_14::shape(), fig16_14::x(), fig16_14::w())};
}

// max |y - ref| / max |ref| (see kRelTolerance); NaN when any output is NaN (unwritten: the
// outputs are poisoned before each launch).
double relative_error(const std::vector<float>& y, const std::vector<double>& ref) {
  double error = 0, size = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (std::isnan(y[i])) return kNaN;
    error = std::max(error, std::fabs(double(y[i]) - ref[i]));
    size = std::max(size, std::fabs(ref[i]));
  }
  return size > 0 ? error / size : error;
}

std::string error_text(double e) {
  if (std::isnan(e)) return "NaN (unwritten outputs)";
  char text[32];
  std::snprintf(text, sizeof text, "%.2e", e);
  return text;
}

// One method's outcome on one case: error, then (only when within the tolerance) its time.
struct Outcome {
  double error = kNaN, us = kNaN;
};

using Forward = std::function<void(const float* x, const float* w, float* y)>;

Outcome check_and_time(Block& b, const Case& c, const std::string& method, const Forward& forward) {
  const Buffer<float> x = upload(c.x), w = upload(c.w);
  Buffer<float> y = poisoned(y_count(c.s));
  forward(x.data(), w.data(), y.data());
  Outcome o;
  o.error = relative_error(download(y), c.y_ref);
  if (!b.check(c.name + " " + method + ": max |y - ref| / max |ref| = " + error_text(o.error) +
                   " <= 1e-4",
               o.error <= kRelTolerance))
    return o;
  o.us = gpu_median_us(kRepetitions, [&] { forward(x.data(), w.data(), y.data()); });
  return o;
}

Outcome run_version(Block& b, const Case& c, ConvAlgo algo) {
  std::string why;
  const auto v = try_make_version(algo, c.s, why);
  if (!b.check(c.name + " version " + version_label(algo) + " can run", v != nullptr, why))
    return {};
  return check_and_time(b, c, "version " + version_label(algo),
                        [&](const float* x, const float* w, float* y) {
                          v->forward(c.s, x, w, nullptr, y, cudaStreamPerThread);
                        });
}

// The example's outputs are integers (integer X and W): the FFT's, rounded, must be the figure's.
void check_fig16_14(Block& b, const Case& c) {
  cuda::FftConvolution fft(c.s);
  const Buffer<float> x = upload(c.x), w = upload(c.w);
  Buffer<float> y = poisoned(y_count(c.s));
  fft.forward(x.data(), w.data(), y.data(), cudaStreamPerThread);
  std::vector<float> rounded = download(y);
  for (float& v : rounded) v = std::nearbyint(v);
  const auto text = [](const std::vector<float>& v) {
    return maps_text(v, fig16_14::kM, fig16_14::kHout, fig16_14::kWout);
  };
  b.check("Fig 16.14 by FFT, rounded to integers, is the printed Y " + text(fig16_14::printed_y()),
          rounded == fig16_14::printed_y(), "computed " + text(rounded));
}

// The spec's memory figures: per case, the filters as stored and padded to H x W, and the rest of
// the scratch (cuda::fft_scratch, pure arithmetic), with cuFFT's own work area beside it.
void memory_table(Block& b, const std::vector<Case>& all, const std::vector<std::size_t>& work) {
  Table t{{"layer", "shape", "filter floats (M*C*K*K)", "padded to HxW (M*C*H*W)", "ratio",
           "filter spectrum (complex, M*C*H*(W/2+1))", "all scratch (bytes)",
           "cuFFT work area (bytes)"},
          {}};
  for (std::size_t i = 0; i < all.size(); ++i) {
    const cuda::FftScratch f = cuda::fft_scratch(all[i].s);
    t.add({all[i].name, shape_text(all[i].s), grouped((long long)f.filter_floats),
           grouped((long long)f.padded_filter_floats), fixed(f.padding_ratio(), 2) + "x",
           grouped((long long)f.filter_spectrum_complex), grouped((long long)f.bytes()),
           grouped((long long)work[i])});
  }
  b.table("memory", t);
  const cuda::FftScratch c1 = cuda::fft_scratch(all[0].s);
  b.check(
      "C1: the filters padded to 32x32 take 6,144 floats instead of 150 (41x)",
      c1.filter_floats == 150 && c1.padded_filter_floats == 6144 &&
          std::lround(c1.padding_ratio()) == 41,
      versus(grouped((long long)c1.padded_filter_floats) + " vs " +
                 grouped((long long)c1.filter_floats) + " (" + fixed(c1.padding_ratio(), 2) + "x)",
             "6,144 vs 150 (41x)"));
}

std::string us_text(double us) {
  return std::isnan(us) ? "n/a" : fixed(us, 1);
}
std::string ratio_text(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? "n/a" : fixed(a / b, 2);
}

void ex3(Block& b) {
  b.line(gpu_info().text());
  b.line(cuda::cufft_description() + ": Y = the window [0,H_out) x [0,W_out) of");
  b.line("IDFT(sum_c DFT(X) . conj(DFT(W padded to H x W))) / (H W): a circular correlation");
  b.line("that never wraps inside the window (cuda/figures/conv_fft.hpp has the algebra)");
  b.line("error: max |y - ref| / max |ref| over the whole output, ref = the double CPU reference");
  b.line("timing: CUDA events, one warm-up, median of 20; the FFT's includes the filter transform");
  const std::vector<Case> all = cases();
  Table acc{{"layer", "shape", "FFT rel. error", "1 direct rel. error", "5 staged rel. error"}, {}};
  Table time{{"layer", "direct MACs", "spectral MACs (complex)", "FFT us", "1 direct us",
              "5 staged us", "FFT / direct", "FFT / staged"},
             {}};
  std::vector<std::size_t> work;
  std::string faster_direct, faster_staged;
  double floor_us = kNaN;
  for (const Case& c : all) {
    cuda::FftConvolution fft(c.s);
    work.push_back(fft.cufft_work_bytes());
    const Outcome f = check_and_time(b, c, "FFT", [&](const float* x, const float* w, float* y) {
      fft.forward(x, w, y, cudaStreamPerThread);
    });
    const Outcome direct = run_version(b, c, ConvAlgo::direct);
    const Outcome staged = run_version(b, c, ConvAlgo::staged);
    if (f.us < direct.us) faster_direct += (faster_direct.empty() ? "" : ", ") + c.name;
    if (f.us < staged.us) faster_staged += (faster_staged.empty() ? "" : ", ") + c.name;
    floor_us = f.us;  // the last case, Fig 16.14, is the smallest
    acc.add({c.name, shape_text(c.s), error_text(f.error), error_text(direct.error),
             error_text(staged.error)});
    const cuda::FftScratch scratch = cuda::fft_scratch(c.s);
    time.add({c.name, grouped((long long)conv_macs(c.s)),
              grouped((long long)(scratch.output_spectrum_complex * std::size_t(c.s.c))),
              us_text(f.us), us_text(direct.us), us_text(staged.us), ratio_text(f.us, direct.us),
              ratio_text(f.us, staged.us)});
  }
  b.table("accuracy", acc);
  check_fig16_14(b, all.back());
  memory_table(b, all, work);
  b.table("timing", time);
  if (faster_direct.empty()) faster_direct = "none";
  if (faster_staged.empty()) faster_staged = "none";
  b.line("FFT pays off only for large filters (cuDNN paper, §3.6): the direct MACs grow with K*K,");
  b.line("the transforms' with H*W*log(H*W) whatever K is; and the padded filters take memory");
  b.line("FFT faster than 1 direct on: " + faster_direct +
         "; faster than 5 staged on: " + faster_staged);
  b.line("FFT on Fig 16.14's 3x3 maps: " + us_text(floor_us) + " us, the fixed cost of its six");
  b.line("steps (pad, R2C of W, R2C of X, product, C2R, crop) that every layer pays");
}

}  // namespace

std::vector<Target> gpu_fft_targets() {
  return {{"ex3", "Exercise 3: FFT convolution with cuFFT, accuracy, padded-filter memory, time",
           "§1.22, §3.6", true, ex3}};
}

}  // namespace lenet5::figures
