// Timing tables in the ZF-Net report's style (textbook-figures.md §4.4) for every convolution
// version: LeNet-5's conv layers at batch 128 and 64 (lenet.timing) and ZF-Net's conv layers at
// batch 1 (zf.timing). Per layer: kernel-only and with-copies times, totals, the ratio tables
// total_serial / total_method and total_naive / total_method, GFLOP/s from the MAC counts.
//
// Correctness before speed: every method's output is checked against the CPU reference (in
// double) on the very data it is then timed on; a method that fails is not timed. GPU times:
// CUDA events on the per-thread default stream, one warm-up, median of 20 (LeNet) or 10 (ZF)
// runs. "With copies" = H2D of the input, the kernels, D2H of the output, in order on that
// stream, from pageable host memory; the weights stay on the device (not copied each time).
// Serial = the CPU reference (layers/conv_cpu.cpp) on one OpenMP thread, wall clock.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "cuda/kernels/conv/registry.hpp"
#include "cuda/kernels/conv/unroll_gemm.cuh"
#include "cuda/kernels/dense.cuh"
#include "cuda/runtime/check.hpp"
#include "cuda/runtime/runtime.hpp"
#include "figures/figure_util.hpp"
#include "figures/gpu_common.hpp"

namespace lenet5::figures {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// Random-sign float data, CPU reference in double: a float32 sum of n such terms in any order is
// off by about 2^-24 * sqrt(n) of the sum of |terms| (1.9e-5 for C1's 100,352-term weight
// gradient at N=128), while a wrong index moves an element by about 1/sqrt(n) of it (>= 3e-3).
constexpr double kRel = 1e-4;

struct Layer {
  std::string name;
  ConvShape s;
  double reference_macs;  // the network's own MACs for the layer (ZF: stride 2 where it has it)
};

// One column of the tables: the CPU reference, a registry version, or the book's per-sample loop.
struct Method {
  std::string name;
  ConvAlgo algo = ConvAlgo::direct;
  enum Kind { serial, version, book } kind = version;
};

std::vector<Method> methods(bool with_book) {
  std::vector<Method> all{{"serial CPU", ConvAlgo::direct, Method::serial}};
  for (const ConvAlgoInfo& info : conv_algorithms()) {
    if (info.algo == ConvAlgo::unroll_gemm && with_book)
      all.push_back({"3 unroll-gemm (book, per sample)", info.algo, Method::book});
    all.push_back({version_label(info.algo), info.algo, Method::version});
  }
  return all;
}

// Times of one method on one layer, in microseconds (NaN: not measured).
struct Times {
  double forward = kNaN, forward_copies = kNaN, backward_input = kNaN, backward_weights = kNaN;
  std::string problem;  // why some are missing
};

// The layer's data on host and device, and the CPU results in double with their scales.
struct LayerData {
  std::vector<float> x, w, dy;
  Buffer<float> x_dev, w_dev, dy_dev;
  std::vector<double> y_ref, y_scale, dx_ref, dx_scale, dw_ref, dw_scale, db_ref, db_scale;
};

LayerData layer_data(const ConvShape& s, std::uint64_t seed, bool backward) {
  LayerData d;
  d.x = random_floats(x_count(s), seed);
  d.w = random_floats(weight_count(s), seed + 1);
  d.dy = random_floats(backward ? y_count(s) : 0, seed + 2);
  d.x_dev = upload(d.x);
  d.w_dev = upload(d.w);
  d.dy_dev = upload(d.dy);
  const std::vector<double> x = as_doubles(d.x), w = as_doubles(d.w), dy = as_doubles(d.dy);
  const std::vector<double> xa = absolute(x), wa = absolute(w), dya = absolute(dy);
  const double* none = nullptr;
  d.y_ref.resize(y_count(s));
  d.y_scale.resize(y_count(s));
  conv_forward_cpu(s, x.data(), w.data(), none, d.y_ref.data());
  conv_forward_cpu(s, xa.data(), wa.data(), none, d.y_scale.data());
  if (!backward) return d;
  d.dx_ref.resize(x.size());
  d.dx_scale.resize(x.size());
  d.dw_ref.resize(w.size());
  d.dw_scale.resize(w.size());
  d.db_ref.resize(s.m);
  d.db_scale.resize(s.m);
  conv_backward_input_cpu(s, dy.data(), w.data(), d.dx_ref.data());
  conv_backward_input_cpu(s, dya.data(), wa.data(), d.dx_scale.data());
  conv_backward_weights_cpu(s, x.data(), dy.data(), d.dw_ref.data(), d.db_ref.data());
  conv_backward_weights_cpu(s, xa.data(), dya.data(), d.dw_scale.data(), d.db_scale.data());
  return d;
}

// The serial column: the float CPU reference on one thread.
Times time_serial(const ConvShape& s, const LayerData& d, int repetitions, bool backward,
                  bool warm_up) {
  SerialCpu one_thread;
  Times t;
  std::vector<float> y(y_count(s)), dx(x_count(s)), dw(weight_count(s)), db(s.m);
  t.forward = host_median_us(repetitions, [&] {
    conv_forward_cpu(s, d.x.data(), d.w.data(), static_cast<const float*>(nullptr), y.data());
  }, warm_up);
  t.forward_copies = t.forward;  // nothing to copy
  if (!backward) return t;
  t.backward_input = host_median_us(repetitions, [&] {
    conv_backward_input_cpu(s, d.dy.data(), d.w.data(), dx.data());
  });
  t.backward_weights = host_median_us(repetitions, [&] {
    conv_backward_weights_cpu(s, d.x.data(), d.dy.data(), dw.data(), db.data());
  });
  return t;
}

// Checks one output against its reference; records the failure in t.problem.
bool verified(Block& b, const std::string& what, const std::vector<float>& out,
              const std::vector<double>& ref, const std::vector<double>& scale, Times& t) {
  const Mismatch m = compare_close(out, ref, scale, kRel);
  if (!b.check(what + " matches the CPU reference (rel 1e-4 of sum |terms|)", m.ok(), m.text()))
    t.problem += what + ": " + m.text() + "; ";
  return m.ok();
}

using Forward = std::function<void(const float* x, float* y)>;

void time_forward(Block& b, const std::string& what, const ConvShape& s, LayerData& d,
                  const Forward& forward, int repetitions, Times& t) {
  Buffer<float> y = poisoned(y_count(s));
  try {
    forward(d.x_dev.data(), y.data());
    cuda::synchronize();
  } catch (const std::exception& e) {  // one method failing leaves the others' columns
    b.check(what + " forward runs", false, e.what());
    t.problem = e.what();
    return;
  }
  if (!verified(b, what + " forward", download(y), d.y_ref, d.y_scale, t)) return;
  t.forward = gpu_median_us(repetitions, [&] { forward(d.x_dev.data(), y.data()); });
  std::vector<float> y_host(y.size());
  t.forward_copies = gpu_median_us(repetitions, [&] {
    CUDA_CHECK(cudaMemcpyAsync(d.x_dev.data(), d.x.data(), d.x_dev.bytes(), cudaMemcpyHostToDevice,
                               cudaStreamPerThread));
    forward(d.x_dev.data(), y.data());
    CUDA_CHECK(cudaMemcpyAsync(y_host.data(), y.data(), y.bytes(), cudaMemcpyDeviceToHost,
                               cudaStreamPerThread));
  });
}

void time_backward(Block& b, const std::string& what, const ConvShape& s, LayerData& d,
                   cuda::ConvAlgorithm& v, int repetitions, Times& t) {
  const cudaStream_t stream = cudaStreamPerThread;
  Buffer<float> dx = poisoned(x_count(s)), dw = poisoned(weight_count(s)), db = poisoned(s.m);
  v.backward_input(s, d.dy_dev.data(), d.w_dev.data(), dx.data(), stream);
  if (verified(b, what + " backward input", download(dx), d.dx_ref, d.dx_scale, t))
    t.backward_input = gpu_median_us(repetitions, [&] {
      v.backward_input(s, d.dy_dev.data(), d.w_dev.data(), dx.data(), stream);
    });
  v.backward_weights(s, d.x_dev.data(), d.dy_dev.data(), dw.data(), db.data(), nullptr, stream);
  const bool weights_ok = verified(b, what + " backward weights", download(dw), d.dw_ref, d.dw_scale, t);
  if (verified(b, what + " backward bias", download(db), d.db_ref, d.db_scale, t) && weights_ok)
    t.backward_weights = gpu_median_us(repetitions, [&] {
      v.backward_weights(s, d.x_dev.data(), d.dy_dev.data(), dw.data(), db.data(), nullptr, stream);
    });
}

Times time_method(Block& b, const Method& m, const Layer& layer, LayerData& d, int repetitions,
                  bool backward) {
  const ConvShape& s = layer.s;
  Times t;
  const std::string what = layer.name + " " + m.name;
  if (m.kind == Method::book) {
    Buffer<float> x_unroll(Device::gpu, std::size_t(s.c) * s.k * s.k * s.h_out() * s.w_out());
    time_forward(b, what, s, d, [&](const float* x, float* y) {
      cuda::conv_forward_unroll_per_sample(cuda::default_cublas_handle(), s, x, d.w_dev.data(), y,
                                           x_unroll.data());
    }, repetitions, t);
    return t;
  }
  std::string why;
  const auto v = try_make_version(m.algo, s, why);
  if (!b.check(what + " can run", v != nullptr, why)) {
    t.problem = why;
    return t;
  }
  time_forward(b, what, s, d, [&](const float* x, float* y) {
    v->forward(s, x, d.w_dev.data(), nullptr, y, cudaStreamPerThread);
  }, repetitions, t);
  if (backward) time_backward(b, what, s, d, *v, repetitions, t);
  return t;
}

// ---- tables -------------------------------------------------------------------------------------

using Grid = std::vector<std::vector<Times>>;  // [layer][method]

std::string cell(double us) { return std::isnan(us) ? "n/a" : fixed(us, 1); }

double total(const Grid& g, std::size_t method, double Times::*field) {
  double sum = 0;
  for (const auto& row : g) sum += row[method].*field;  // NaN propagates: a missing layer -> n/a
  return sum;
}

Table time_table(const std::vector<Layer>& layers, const std::vector<Method>& ms, const Grid& g,
                 double Times::*field) {
  Table t{{"layer (us)"}, {}};
  for (const Method& m : ms) t.columns.push_back(m.name);
  for (std::size_t l = 0; l < layers.size(); ++l) {
    std::vector<std::string> row{layers[l].name};
    for (std::size_t k = 0; k < ms.size(); ++k) row.push_back(cell(g[l][k].*field));
    t.add(row);
  }
  std::vector<std::string> row{"Total"};
  for (std::size_t k = 0; k < ms.size(); ++k) row.push_back(cell(total(g, k, field)));
  t.add(row);
  return t;
}

// total_serial / total_method and total_naive / total_method (naive = version 1, direct).
Table ratio_table(const std::vector<Method>& ms, const Grid& g, double Times::*field) {
  Table t{{"ratio"}, {}};
  for (const Method& m : ms) t.columns.push_back(m.name);
  std::vector<std::string> vs_serial{"total serial / total method"}, vs_naive{"total naive / total method"};
  for (std::size_t k = 0; k < ms.size(); ++k) {
    const double mine = total(g, k, field);
    vs_serial.push_back(std::isnan(mine) ? "n/a" : fixed(total(g, 0, field) / mine, 2));
    vs_naive.push_back(k == 0 || std::isnan(mine) ? "/" : fixed(total(g, 1, field) / mine, 2));
  }
  t.add(vs_serial);
  t.add(vs_naive);
  return t;
}

Table gflops_table(const std::vector<Layer>& layers, const std::vector<Method>& ms, const Grid& g) {
  Table t{{"layer (GFLOP/s, kernel only)", "MACs run", "MACs of the network"}, {}};
  for (const Method& m : ms) t.columns.push_back(m.name);
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const double macs = conv_macs(layers[l].s);
    std::vector<std::string> row{layers[l].name, grouped((long long)macs),
                                 grouped((long long)layers[l].reference_macs)};
    for (std::size_t k = 0; k < ms.size(); ++k) {
      const double us = g[l][k].forward;
      row.push_back(std::isnan(us) ? "n/a" : fixed(2.0 * macs / (us * 1e3), 2));
    }
    t.add(row);
  }
  return t;
}

// Bars of log10(microseconds) per layer and method: columns are bars (one per method, a gap
// between layers), rows are height steps from the top; dark = bar.
void bar_chart(Block& b, const std::string& name, const std::vector<Layer>& layers,
               const std::vector<Method>& ms, const Grid& g) {
  const int rows = 60, cols = int(layers.size() * (ms.size() + 1));
  double slowest = 10.0;
  for (const auto& row : g)
    for (const Times& t : row)
      if (!std::isnan(t.forward)) slowest = std::max(slowest, t.forward);
  const double top = std::ceil(std::log10(slowest));  // full height: the next power of ten
  std::vector<double> pixels(std::size_t(rows) * cols, 1.0);
  for (std::size_t l = 0; l < layers.size(); ++l)
    for (std::size_t k = 0; k < ms.size(); ++k) {
      const double us = g[l][k].forward;
      if (std::isnan(us)) continue;
      const int height = int(std::clamp(std::log10(std::max(us, 1.0)) / top, 0.0, 1.0) * rows + 0.5);
      const int col = int(l * (ms.size() + 1) + k);
      for (int r = rows - height; r < rows; ++r) pixels[std::size_t(r) * cols + col] = 0.0;
    }
  b.png(name, pixels, rows, cols, 0.0, 1.0, 8);
  std::string order;
  for (const Method& m : ms) order += (order.empty() ? "" : ", ") + m.name;
  b.line("bars per layer (" + std::to_string(layers.size()) + " groups, left to right): " + order);
  b.line("bar height = log10(kernel-only microseconds), full height = 10^" + fixed(top, 0) +
         " us; a missing bar = n/a");
}

struct Run {
  std::string prefix;
  std::vector<Layer> layers;
  int gpu_repetitions, serial_repetitions;
  bool serial_warm_up, backward, book;
};

void run_tables(Block& b, const Run& run) {
  const std::vector<Method> ms = methods(run.book);
  Grid g(run.layers.size(), std::vector<Times>(ms.size()));
  for (std::size_t l = 0; l < run.layers.size(); ++l) {
    LayerData d = layer_data(run.layers[l].s, 4000 + 10 * l, run.backward);
    g[l][0] = time_serial(run.layers[l].s, d, run.serial_repetitions, run.backward,
                          run.serial_warm_up);
    for (std::size_t k = 1; k < ms.size(); ++k)
      g[l][k] = time_method(b, ms[k], run.layers[l], d, run.gpu_repetitions, run.backward);
  }
  b.line(run.prefix + ": forward, kernel only");
  b.table(run.prefix + "_forward_kernel", time_table(run.layers, ms, g, &Times::forward));
  b.table(run.prefix + "_forward_kernel_ratios", ratio_table(ms, g, &Times::forward));
  b.line(run.prefix + ": forward with copies (H2D input, kernels, D2H output)");
  b.table(run.prefix + "_forward_copies", time_table(run.layers, ms, g, &Times::forward_copies));
  b.table(run.prefix + "_forward_copies_ratios", ratio_table(ms, g, &Times::forward_copies));
  b.table(run.prefix + "_gflops", gflops_table(run.layers, ms, g));
  if (run.backward) {
    b.line(run.prefix + ": backward, kernel only (the book's per-sample loop is forward only)");
    b.table(run.prefix + "_backward_input", time_table(run.layers, ms, g, &Times::backward_input));
    b.table(run.prefix + "_backward_weights", time_table(run.layers, ms, g, &Times::backward_weights));
  }
  bar_chart(b, run.prefix + "_forward_kernel", run.layers, ms, g);
}

// ==== lenet.timing ================================================================================

std::vector<Layer> lenet_layers(int n) {
  const std::vector<Layer> per_sample{{"C1", ConvShape{1, 1, 32, 32, 6, 5}, 117600},
                                      {"C3", ConvShape{1, 6, 14, 14, 16, 5}, 240000},
                                      {"C5", ConvShape{1, 16, 5, 5, 120, 5}, 48000}};
  std::vector<Layer> layers;
  for (Layer l : per_sample) {
    l.s.n = n;
    l.reference_macs *= n;
    layers.push_back(l);
  }
  return layers;
}

void lenet_timing(Block& b) {
  b.line(gpu_info().text());
  b.line("LeNet-5 conv layers, float32, random data in [-1, 1), no bias (C1/C3 take theirs in the");
  b.line("pooling layer; C5's is left out for every method alike)");
  b.line("GPU: CUDA events, warm-up, median of 20; serial CPU: one thread, median of 10 after a warm-up");
  for (int n : {128, 64}) run_tables(b, Run{"n" + std::to_string(n), lenet_layers(n), 20, 10, true, true, true});
}

// ==== zf.timing ===================================================================================

// ZF-Net's conv layers (textbook-figures.md §4.1) at batch 1, as the report ran them. Our versions
// are valid stride-1 convolutions: padding is folded into the input size (zero border), and
// conv1/conv2 (stride 2 in ZF-Net) run at stride 1, computing 4x their outputs (the stride-2
// outputs are the even-indexed ones), so "MACs run" exceeds the network's there.
std::vector<Layer> zf_layers() {
  return {{"conv1 (s2 run at s1)", ConvShape{1, 3, 226, 226, 96, 7}, 170.8e6},
          {"conv2 (s2 run at s1)", ConvShape{1, 96, 55, 55, 256, 5}, 415.3e6},
          {"conv3", ConvShape{1, 256, 15, 15, 384, 3}, 149.5e6},
          {"conv4", ConvShape{1, 384, 15, 15, 384, 3}, 224.3e6},
          {"conv5", ConvShape{1, 384, 15, 15, 256, 3}, 149.5e6}};
}

void zf_mapping(Block& b) {
  Table t{{"report's column", "here"}, {}};
  t.add({"serial (Python loops)", "serial CPU: the C++ reference on one thread (not comparable to the report's Python)"});
  t.add({"naive", "1 direct (Fig 16.12 corrected)"});
  t.add({"input in shared memory", "none: no version stages the input alone"});
  t.add({"input & filter in shared memory", "2 tiled (Fig 16.13 corrected); 5 staged (whole sample + filters)"});
  t.add({"advanced block setting", "3 unroll-gemm (Figs 16.15-16.18, batched), 4 implicit-gemm"});
  t.add({"(reference)", "cuDNN: see cudnn.tab3"});
  b.table("column_mapping", t);
}

void zf_timing(Block& b) {
  b.line(gpu_info().text());
  b.line("ZF-Net conv layers, batch 1, forward; padding folded into the input; stride 2 run at");
  b.line("stride 1 (4x the outputs). GPU: median of 10 after a warm-up; serial CPU: median of 3");
  b.line("runs, no warm-up (seconds each).");
  zf_mapping(b);
  run_tables(b, Run{"zf", zf_layers(), 10, 3, false, false, false});
}

}  // namespace

std::vector<Target> timing_targets() {
  return {
      {"lenet.timing", "LeNet-5 conv layers: every version timed, kernel only and with copies",
       "§4.4", true, lenet_timing},
      {"zf.timing", "ZF-Net conv layers at batch 1: every version timed, report's columns", "§4.4",
       true, zf_timing},
  };
}

}  // namespace lenet5::figures
