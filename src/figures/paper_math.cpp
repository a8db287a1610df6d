// The cuDNN paper's output-size formulas and its Eq. (3) written literally, with the quantities
// derived from its Table 2.
#include "figures/paper_math.hpp"

#include <cmath>
#include <cstddef>
#include <string>

#include "core/error.hpp"

namespace lenet5::figures {

int cudnn_output_size(int H, int R, int u, int pad) {
  return int(std::ceil(double(H - R + 1 + 2 * pad) / double(u)));
}

int floor_output_size(int H, int R, int u, int pad) {
  return (H + 2 * pad - R) / u + 1;
}

int ceil_mode_output_size(int H, int R, int u, int pad) {
  return int(std::ceil(double(H + 2 * pad - R) / double(u))) + 1;
}

OutputSizeSweep sweep_output_sizes(int max_h, int max_u, int max_pad) {
  OutputSizeSweep sweep;
  for (int H = 1; H <= max_h; ++H)
    for (int R = 1; R <= H; ++R)
      for (int u = 1; u <= max_u; ++u)
        for (int pad = 0; pad <= max_pad; ++pad) {
          ++sweep.cases;
          const int floor_form = floor_output_size(H, R, u, pad);
          const bool off_grid = (H + 2 * pad - R) % u != 0;
          sweep.off_grid += off_grid;
          if (cudnn_output_size(H, R, u, pad) != floor_form) ++sweep.formula1_vs_floor;
          if (ceil_mode_output_size(H, R, u, pad) != floor_form) {
            ++sweep.ceil_mode_differs;
            sweep.ceil_mode_differs_off_grid += off_grid;
          }
        }
  return sweep;
}

namespace {

// D[n][c][i][j] with zeros outside the image (D0 of Eq. 3).
double zero_extended(const ConvParams& cp, const std::vector<double>& d, int n, int c, int i,
                     int j) {
  if (i < 0 || i >= cp.h || j < 0 || j >= cp.w) return 0.0;
  return d[((std::size_t(n) * cp.c + c) * cp.h + i) * cp.w + j];
}

// The seven-way loop nest of Eq. (3): four independent loops (n, k, p, q) and three accumulation
// loops (c, r, s); `row`/`col` give the input coordinate each (output, filter) pair reads.
template <class Row, class Col>
std::vector<double> seven_loops(const ConvParams& cp, const std::vector<double>& d,
                                const std::vector<double>& f, Row row, Col col) {
  const int P = cp.p(), Q = cp.q();
  std::vector<double> o(std::size_t(cp.n) * cp.k * P * Q, 0.0);
  for (int n = 0; n < cp.n; ++n)
    for (int k = 0; k < cp.k; ++k)
      for (int p = 0; p < P; ++p)
        for (int q = 0; q < Q; ++q) {
          double sum = 0;
          for (int c = 0; c < cp.c; ++c)
            for (int r = 0; r < cp.r; ++r)
              for (int s = 0; s < cp.s; ++s)
                sum += zero_extended(cp, d, n, c, row(p, r), col(q, s)) *
                       f[((std::size_t(k) * cp.c + c) * cp.r + r) * cp.s + s];
          o[((std::size_t(n) * cp.k + k) * P + p) * Q + q] = sum;
        }
  return o;
}

}  // namespace

std::vector<double> cudnn_eq3(const ConvParams& cp, const std::vector<double>& d,
                              const std::vector<double>& f) {
  auto g = [](int p, int u, int R, int r, int pad) { return p * u + R - r - 1 - pad; };  // Eq. (2)
  return seven_loops(
      cp, d, f, [&](int p, int r) { return g(p, cp.u, cp.r, r, cp.pad_h); },
      [&](int q, int s) { return g(q, cp.v, cp.s, s, cp.pad_w); });
}

std::vector<double> cross_correlation(const ConvParams& cp, const std::vector<double>& d,
                                      const std::vector<double>& f) {
  return seven_loops(
      cp, d, f, [&](int p, int r) { return p * cp.u + r - cp.pad_h; },
      [&](int q, int s) { return q * cp.v + s - cp.pad_w; });
}

std::vector<double> rotate180(const ConvParams& cp, const std::vector<double>& f) {
  std::vector<double> out(f.size());
  for (int k = 0; k < cp.k; ++k)
    for (int c = 0; c < cp.c; ++c)
      for (int r = 0; r < cp.r; ++r)
        for (int s = 0; s < cp.s; ++s)
          out[((std::size_t(k) * cp.c + c) * cp.r + r) * cp.s + s] =
              f[((std::size_t(k) * cp.c + c) * cp.r + (cp.r - 1 - r)) * cp.s + (cp.s - 1 - s)];
  return out;
}

const std::vector<CudnnLayer>& cudnn_table2_paper() {
  static const std::vector<CudnnLayer> layers{
      {128, 3, 128, 128, 96, 11, 11}, {128, 96, 64, 64, 128, 9, 9},  {128, 128, 32, 32, 128, 9, 9},
      {128, 128, 16, 16, 128, 7, 7},  {128, 128, 13, 13, 384, 3, 3},
  };
  return layers;
}

const std::vector<CudnnLayer>& cudnn_table2_convnet_benchmarks() {
  static const std::vector<CudnnLayer> layers = [] {
    std::vector<CudnnLayer> l = cudnn_table2_paper();
    l[1].c = 64;
    l[4].c = 384;
    return l;
  }();
  return layers;
}

const std::vector<std::string>& cudnn_row_set_names() {
  static const std::vector<std::string> names{"paper", "convnet-benchmarks"};
  return names;
}

CudnnRowSet cudnn_row_set(const std::string& name) {
  if (name == "paper")
    return {name, "paper (as printed: C = 96 for layer 2, C = 128 for layer 5)", "paper",
            &cudnn_table2_paper()};
  if (name == "convnet-benchmarks")
    return {name, "convnet-benchmarks (C = 64 for layer 2, C = 384 for layer 5; D04)",
            "convnet_benchmarks", &cudnn_table2_convnet_benchmarks()};
  std::string accepted;
  for (const std::string& n : cudnn_row_set_names()) accepted += (accepted.empty() ? "" : ", ") + n;
  throw UsageError("--cudnn-table2: unknown row set '" + name + "' (accepted: " + accepted + ")");
}

LayerDerived derive(const CudnnLayer& l) {
  LayerDerived d;
  d.p = cudnn_output_size(l.h, l.r, 1, 0);
  d.q = cudnn_output_size(l.w, l.s, 1, 0);
  d.flop = 2.0 * l.n * l.k * l.c * l.r * l.s * double(d.p) * d.q;
  d.dm_rows = (long long)l.c * l.r * l.s;
  d.dm_cols = (long long)l.n * d.p * d.q;
  d.dm_bytes = double(d.dm_rows) * double(d.dm_cols) * sizeof(float);
  d.dm_bytes_per_sample = d.dm_bytes / l.n;
  d.expansion = double(l.r) * l.s * d.p * d.q / (double(l.h) * l.w);
  return d;
}

}  // namespace lenet5::figures
