// cudnn.tab3 (textbook-figures.md §3.4-§3.5): the cuDNN paper's Table 2 layers at N = 128 on
// this GPU, for our implicit GEMM (version 4) and unroll + GEMM (version 3), and, in a build with
// cuDNN, cuDNN's IMPLICIT_GEMM and the fastest algorithm cudnnFindConvolutionForwardAlgorithm
// finds: GFLOP, time, TFLOP/s and % of the FP32 peak (from device attributes), workspace bytes;
// then a batch sweep N = 16..128 of one layer (the paper's "86 % of its maximum at N = 16").
//
// Shapes: the row set that --cudnn-table2 names (Block::settings()): the paper's printed rows
// (C = 96 for layer 2 and C = 128 for layer 5, the default) or those of the convnet-benchmarks the
// paper cites (64 and 384; §3.4 caveat, D04). The block says which it ran, and its files carry the
// row set's name. Valid, stride 1, cross-correlation.
// Correctness first: every method is checked on 512 sampled outputs against a double-precision
// CPU sum, and cuDNN's whole output against ours, before its time counts.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "cuda/figures/cudnn_conv.hpp"
#include "cuda/kernels/conv/registry.hpp"
#include "figures/gpu_common.hpp"
#include "figures/paper_math.hpp"

namespace lenet5::figures {
namespace {

// One Table 2 row [T CDNN:133-141] in the chapter's naming (M = the paper's K, K = R = S) with
// its GFLOP = 2*N*K*C*R*S*P*Q as §3.4 gives it.
struct PaperLayer {
  int number;
  ConvShape s;
  double gflop;
};

// §3.4's GFLOP: the table's [D] column for the printed rows; the caveat's 532.71 (layer 2) and
// 41.11 (layer 5) for the convnet-benchmarks rows.
std::vector<double> spec_gflop(const CudnnRowSet& rows) {
  if (rows.name == "paper") return {124.22, 799.07, 195.69, 20.55, 13.70};
  if (rows.name == "convnet-benchmarks") return {124.22, 532.71, 195.69, 20.55, 41.11};
  throw Error("internal: no GFLOP figures for Table 2 row set " + rows.name);
}

std::vector<PaperLayer> table2(const CudnnRowSet& rows) {
  const std::vector<double> gflop = spec_gflop(rows);
  std::vector<PaperLayer> layers;
  for (std::size_t i = 0; i < rows.layers->size(); ++i) {
    const CudnnLayer& l = (*rows.layers)[i];
    if (l.h != l.w || l.r != l.s) throw Error("internal: Table 2 rows must be square (H = W, R = S)");
    layers.push_back({int(i + 1), ConvShape{l.n, l.c, l.h, l.w, l.k, l.r}, gflop.at(i)});
  }
  return layers;
}

// Per measurement: at most this much timing (reps 3..10 chosen from the warm-up), so that the
// big layers (layer 2: 0.8 TFLOP per run) keep the target near a minute.
constexpr double kBudgetMs = 1500;
constexpr int kSamples = 512;
// Sampled outputs vs a double CPU sum: <= 10,368 float terms per output, rounding well below
// 1e-4 of sum |terms| in any order. cuDNN vs ours, whole output: 1e-3, since FFT and Winograd
// algorithms round through their transforms; any layout or flipping error moves an element by
// about sum|terms| / sqrt(C*R*S) >= 1e-2 of it.
constexpr double kRelSampled = 1e-4, kRelCudnn = 1e-3;

struct LayerData {
  std::vector<float> x, w;
  Buffer<float> x_dev, w_dev, x_abs, w_abs;
};

LayerData layer_data(const ConvShape& s, std::uint64_t seed) {
  LayerData d{random_floats(x_count(s), seed), random_floats(weight_count(s), seed + 1), {}, {}, {}, {}};
  d.x_dev = upload(d.x);
  d.w_dev = upload(d.w);
  std::vector<float> xa(d.x), wa(d.w);
  for (float& v : xa) v = std::fabs(v);
  for (float& v : wa) v = std::fabs(v);
  d.x_abs = upload(xa);
  d.w_abs = upload(wa);
  return d;
}

// `count` output indices and their values and scales, summed in double on the CPU.
struct Samples {
  std::vector<std::size_t> index;
  std::vector<double> value, scale;
};
Samples sample_outputs(const ConvShape& s, const LayerData& d, std::uint64_t seed) {
  Samples out;
  const std::vector<float> picks = random_floats(kSamples, seed);
  for (float r : picks) {
    const std::size_t i = std::min(y_count(s) - 1, std::size_t((r + 1.0) / 2.0 * y_count(s)));
    const int w = int(i % s.w_out()), h = int(i / s.w_out() % s.h_out());
    const int m = int(i / (std::size_t(s.w_out()) * s.h_out()) % s.m);
    const int n = int(i / (std::size_t(s.w_out()) * s.h_out() * s.m));
    double sum = 0, scale = 0;
    for (int c = 0; c < s.c; ++c)
      for (int p = 0; p < s.k; ++p)
        for (int q = 0; q < s.k; ++q) {
          const double term = double(d.x[((std::size_t(n) * s.c + c) * s.h + h + p) * s.w + w + q]) *
                              d.w[((std::size_t(m) * s.c + c) * s.k + p) * s.k + q];
          sum += term;
          scale += std::fabs(term);
        }
    out.index.push_back(i);
    out.value.push_back(sum);
    out.scale.push_back(scale);
  }
  return out;
}

bool samples_match(const std::vector<float>& y, const Samples& samples) {
  for (std::size_t k = 0; k < samples.index.size(); ++k) {
    const double got = y[samples.index[k]];
    if (std::isnan(got) || std::fabs(got - samples.value[k]) > kRelSampled * samples.scale[k]) return false;
  }
  return true;
}

// One timed method: a name and a forward that enqueues on the per-thread default stream.
struct Measured {
  std::string method, problem;
  double us = NAN;
  int reps = 0;
  std::string workspace = "-";
};

std::vector<std::string> result_row(const PaperLayer& l, const Measured& r, double peak) {
  const double tflops = std::isnan(r.us) ? NAN : l.gflop / (r.us * 1e-6) / 1e3;
  return {std::to_string(l.number), fixed(l.gflop, 2), r.method,
          std::isnan(r.us) ? "n/a" : fixed(r.us / 1e3, 2), std::isnan(r.us) ? "n/a" : fixed(tflops, 2),
          std::isnan(r.us) ? "n/a" : fixed(100.0 * tflops / peak, 1) + " %",
          std::to_string(r.reps), r.workspace, r.problem.empty() ? "ok" : r.problem};
}

// Our version `algo` on the layer: checked on the samples, then timed. Its whole output (and
// scale, from |x| and |w|) is kept in `full` when that is still empty, as cuDNN's reference.
struct Full {
  std::vector<float> y, scale;
};
Measured measure_version(Block& b, ConvAlgo algo, const ConvShape& s, LayerData& d,
                         const Samples& samples, Full& full) {
  Measured r{version_label(algo), "", NAN, 0, "-"};
  std::string why;
  const auto v = try_make_version(algo, s, why);
  if (!b.check("layer " + shape_text(s) + ", version " + r.method + " can run", v != nullptr, why)) {
    r.problem = "cannot run";
    return r;
  }
  Buffer<float> y = poisoned(y_count(s));
  auto forward = [&](const float* x, const float* w) { v->forward(s, x, w, nullptr, y.data(), cudaStreamPerThread); };
  forward(d.x_dev.data(), d.w_dev.data());
  std::vector<float> out = download(y);
  if (!b.check("version " + r.method + " on " + shape_text(s) + ": 512 sampled outputs match the CPU",
               samples_match(out, samples))) {
    r.problem = "wrong outputs";
    return r;
  }
  r.us = gpu_median_us_budget(kBudgetMs, [&] { forward(d.x_dev.data(), d.w_dev.data()); }, r.reps);
  if (full.y.empty()) {
    full.y = std::move(out);
    forward(d.x_abs.data(), d.w_abs.data());
    full.scale = download(y);
  }
  return r;
}

bool matches_ours(const std::vector<float>& y, const Full& full) {
  if (full.y.empty()) return false;
  for (std::size_t i = 0; i < y.size(); ++i)
    if (std::isnan(y[i]) || std::fabs(double(y[i]) - full.y[i]) > kRelCudnn * double(full.scale[i])) return false;
  return true;
}

// cuDNN with algorithm `algo` (IMPLICIT_GEMM or the fastest found): checked against the samples
// and our whole output, then timed with our events.
Measured measure_cudnn(Block& b, cuda::CudnnConvolution& conv, int algo, const std::string& label,
                       const ConvShape& s, LayerData& d, const Samples& samples, const Full& full) {
  Measured r{label, "", NAN, 0, "-"};
  conv.use_algorithm(algo);
  r.workspace = grouped((long long)conv.workspace_bytes(algo)) + " B";
  Buffer<float> y = poisoned(y_count(s));
  auto forward = [&] { conv.forward(d.x_dev.data(), d.w_dev.data(), y.data(), cudaStreamPerThread); };
  forward();
  const std::vector<float> out = download(y);
  const bool ok = samples_match(out, samples) && (full.y.empty() || matches_ours(out, full));
  if (!b.check(label + " on " + shape_text(s) + ": matches the CPU samples and our output (rel 1e-3)", ok)) {
    r.problem = "wrong outputs";
    return r;
  }
  r.us = gpu_median_us_budget(kBudgetMs, forward, r.reps);
  return r;
}

std::vector<Measured> cudnn_rows(Block& b, const ConvShape& s, LayerData& d, const Samples& samples,
                                 const Full& full) {
  if (!cuda::cudnn_built()) return {Measured{"cuDNN", "not built with cuDNN", NAN, 0, "-"}};
  cuda::CudnnConvolution conv(s);
  const std::vector<int> dims = conv.output_dims();
  b.check("cuDNN output dims of " + shape_text(s) + " = formula (1)",
          dims == std::vector<int>{s.n, s.m, s.h_out(), s.w_out()});
  const int implicit = cuda::CudnnConvolution::implicit_gemm_id();
  std::vector<Measured> rows{measure_cudnn(b, conv, implicit, "cuDNN IMPLICIT_GEMM", s, d, samples, full)};
  const std::vector<cuda::CudnnAlgorithm> found = conv.find_algorithms();
  if (!b.check("cudnnFindConvolutionForwardAlgorithm found an algorithm", !found.empty())) return rows;
  rows.push_back(measure_cudnn(b, conv, found.front().id, "cuDNN fastest: " + found.front().name, s,
                               d, samples, full));
  return rows;
}

std::vector<Measured> measure_layer(Block& b, const ConvShape& s, std::uint64_t seed) {
  LayerData d = layer_data(s, seed);
  const Samples samples = sample_outputs(s, d, seed + 7);
  Full full;
  std::vector<Measured> rows{measure_version(b, ConvAlgo::implicit_gemm, s, d, samples, full),
                             measure_version(b, ConvAlgo::unroll_gemm, s, d, samples, full)};
  try {
    for (Measured& r : cudnn_rows(b, s, d, samples, full)) rows.push_back(std::move(r));
  } catch (const std::exception& e) {  // a cuDNN failure leaves our rows standing
    b.check("cuDNN runs on " + shape_text(s), false, e.what());
    rows.push_back(Measured{"cuDNN", e.what(), NAN, 0, "-"});
  }
  return rows;
}

void table3(Block& b, const CudnnRowSet& rows, double peak) {
  Table t{{"layer", "GFLOP", "method", "ms", "TFLOP/s", "% of FP32 peak", "reps", "workspace", "check"}, {}};
  for (const PaperLayer& l : table2(rows)) {
    b.check("layer " + std::to_string(l.number) + ": GFLOP = " + fixed(l.gflop, 2) + " (§3.4)",
            fixed(2.0 * conv_macs(l.s) / 1e9, 2) == fixed(l.gflop, 2));
    for (const Measured& r : measure_layer(b, l.s, 5000 + 10 * l.number)) t.add(result_row(l, r, peak));
  }
  b.table("table3_" + rows.file_suffix, t);
}

// The batch sweep: layer 3 at N = 16, 32, 64, 128, each method's TFLOP/s as a share of its own
// at N = 128. (Layer 3 is the same in both row sets; its file still carries the row set's name,
// so that every file of a run says which run it came from.)
void batch_sweep(Block& b, const CudnnRowSet& rows, double peak) {
  const PaperLayer base = table2(rows)[2];
  std::vector<std::vector<Measured>> per_n;
  std::vector<double> gflop;
  const std::vector<int> batches{16, 32, 64, 128};
  for (int n : batches) {
    ConvShape s = base.s;
    s.n = n;
    gflop.push_back(2.0 * conv_macs(s) / 1e9);
    per_n.push_back(measure_layer(b, s, 6000 + n));
  }
  Table t{{"N", "GFLOP", "method", "ms", "TFLOP/s", "% of FP32 peak", "% of its N=128 TFLOP/s"}, {}};
  for (std::size_t i = 0; i < batches.size(); ++i)
    for (std::size_t k = 0; k < per_n[i].size(); ++k) {
      const Measured& r = per_n[i][k];
      const double tflops = gflop[i] / (r.us * 1e-6) / 1e3;
      const double at_128 = k < per_n.back().size()
                                ? gflop.back() / (per_n.back()[k].us * 1e-6) / 1e3
                                : NAN;
      const bool has = !std::isnan(r.us);
      t.add({std::to_string(batches[i]), fixed(gflop[i], 2), r.method, has ? fixed(r.us / 1e3, 3) : "n/a",
             has ? fixed(tflops, 2) : "n/a", has ? fixed(100.0 * tflops / peak, 1) + " %" : "n/a",
             has && !std::isnan(at_128) ? fixed(100.0 * tflops / at_128, 1) + " %" : "n/a"});
    }
  b.table("batch_sweep_layer3_" + rows.file_suffix, t);
}

void cudnn_tab3(Block& b) {
  const CudnnRowSet rows = cudnn_row_set(b.settings().cudnn_table2);
  const GpuInfo gpu = gpu_info();
  b.line(gpu.text());
  b.line(cuda::cudnn_description() + "; cuDNN with CUDNN_FMA_MATH (FP32, no TF32), cross-correlation");
  b.line("row set: " + rows.description + "; --cudnn-table2 chooses");
  b.line("Table 2 shapes, N = 128; times: CUDA events, warm-up, median of");
  b.line("10 runs, or of 3..9 where 10 would exceed 1.5 s (the 'reps' column)");
  b.line("paper (K40 / GTX 980): 23-35 % / 30-51 % of peak; the paper's Table 3 is not re-run here");
  table3(b, rows, gpu.fp32_peak_tflops());
  batch_sweep(b, rows, gpu.fp32_peak_tflops());
}

}  // namespace

std::vector<Target> cudnn_targets() {
  return {{"cudnn.tab3", "cuDNN Table 2 layers: our GEMM convolutions vs cuDNN, TFLOP/s, % of peak",
           "§3.4, §3.5", true, cudnn_tab3}};
}

}  // namespace lenet5::figures
