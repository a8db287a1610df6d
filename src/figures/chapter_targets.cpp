// The chapter's CPU targets, §1.2-§1.10 of textbook-figures.md: the network's shapes and counts
// (Figs 16.2, 16.3, 16.11), the sequential layers (Figs 16.4, 16.5, 16.10, Exercise 1), and the
// backward pass (Figs 16.6-16.9). The rest of the chapter (§1.13-§1.22) is in
// chapter_gemm_targets.cpp. Every number printed as a result is computed here, by the CPU
// reference layers (layers/reference_cpu.hpp) or by the host versions of the printed listings
// (figures/chapter_math.hpp); the specification's values appear only as the checks' expectations.
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/activation_math.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"
#include "core/rng.hpp"
#include "core/topology.hpp"
#include "figures/chapter_math.hpp"
#include "figures/fig16_14_data.hpp"
#include "figures/figure_util.hpp"
#include "figures/targets_internal.hpp"
#include "layers/reference_cpu.hpp"

namespace lenet5::figures {
namespace {

using Floats = std::vector<float>;
namespace fig = fig16_14;

std::string dims(const Dims& d) {
  return d.h == 1 && d.w == 1 && d.c > 1
             ? std::to_string(d.c)
             : std::to_string(d.c) + "x" + std::to_string(d.h) + "x" + std::to_string(d.w);
}

// Two samples, both `sample`.
Floats twice(const Floats& sample) {
  Floats out = sample;
  out.insert(out.end(), sample.begin(), sample.end());
  return out;
}

Floats random_floats(std::size_t count, std::uint64_t seed) {
  SplitMix64 rng(seed);
  Floats out(count);
  for (auto& v : out) v = float(2.0 * rng.uniform() - 1.0);
  return out;
}

// ---- fig16.2 ------------------------------------------------------------------------------------

// One row of Fig 16.2's layer table in the chapter's variant (§1.2): C3 fully connected to S2, a
// bias per convolution map and one per pooling map.
struct CountRow {
  const LayerSpec* spec;
  long long banks = 0, weights = 0, biases = 0, macs = 0, adds = 0, outputs = 0;
  long long params() const { return weights + biases; }
};

CountRow count_layer(const LayerSpec& l) {
  CountRow row{&l};
  row.outputs = (long long)l.out.size();
  if (l.kind == LayerKind::convolution) {
    row.banks = (long long)l.out.c * l.in.c;
    row.weights = row.banks * l.kernel * l.kernel;
    row.biases = l.out.c;
    row.macs = row.weights * l.out.h * l.out.w;
  } else if (l.kind == LayerKind::subsampling) {
    row.biases = l.out.c;
    row.adds = (long long)l.in.size();
  } else if (l.kind == LayerKind::fully_connected) {
    row.weights = (long long)l.in.size() * (long long)l.out.size();
    row.biases = l.name == "output" ? 0 : l.out.c;  // the book's output is RBF, no bias (below)
    row.macs = row.weights;
  }
  return row;
}

std::vector<CountRow> chapter_counts() {
  std::vector<CountRow> rows;
  for (const LayerSpec& l : lenet5_topology(NetConfig{}))
    if (l.kind != LayerKind::activation) rows.push_back(count_layer(l));
  return rows;
}

void layer_table(Block& b, const std::vector<CountRow>& rows) {
  Table table{{"layer", "type", "in", "out", "filter banks", "weights", "biases", "params",
               "MACs/sample", "outputs/sample"},
              {}};
  const char* type[] = {"conv", "subsampling (+b)", "activation", "fully connected"};
  for (const CountRow& r : rows) {
    const bool output = r.spec->name == "output";
    table.add({r.spec->name, type[int(r.spec->kind)], dims(r.spec->in), dims(r.spec->out),
               r.banks ? grouped(r.banks) : "-", grouped(r.weights),
               output ? "0 (RBF) / 10 (FC)" : grouped(r.biases),
               output ? grouped(r.weights) + " / " + grouped(r.weights + 10) : grouped(r.params()),
               r.adds ? grouped(r.adds) + " adds" : grouped(r.macs), grouped(r.outputs)});
  }
  b.table("layers", table);
}

void check_shape_chain(Block& b) {
  std::string chain = std::to_string(kInputSide);
  bool rule = true;  // convolution: H - K + 1; subsampling: H / K
  for (const LayerSpec& l : lenet5_topology(NetConfig{})) {
    if (l.kind == LayerKind::convolution) rule &= l.out.h == l.in.h - l.kernel + 1;
    if (l.kind == LayerKind::subsampling) rule &= l.out.h == l.in.h / l.kernel;
    if (l.kind == LayerKind::convolution || l.kind == LayerKind::subsampling)
      chain += "->" + std::to_string(l.out.h);
  }
  b.line("side of the maps: " + chain);
  b.check("every convolution gives H-K+1 and every subsampling H/K", rule);
  b.check("the chain is 32->28->14->10->5->1", chain == "32->28->14->10->5->1", chain);
}

void check_chapter_totals(Block& b, const std::vector<CountRow>& rows) {
  long long through_f6 = 0, macs = 0, output_weights = 0;
  std::string banks;
  for (const CountRow& r : rows) {
    macs += r.macs;
    if (r.spec->name == "output")
      output_weights = r.weights;
    else
      through_f6 += r.params();
    if (r.banks) banks += (banks.empty() ? "" : " / ") + grouped(r.banks);
  }
  b.line("filter banks: " + banks);
  b.check("filter banks are 6 / 96 / 1,920", banks == "6 / 96 / 1,920", banks);
  const long long rbf = through_f6 + output_weights, fc = rbf + 10;
  b.line("parameters: " + grouped(through_f6) + " through F6, " + grouped(rbf) +
         " with an RBF output, " + grouped(fc) + " with an FC output (+10 biases)");
  b.check("60,878 parameters through F6", through_f6 == 60878, grouped(through_f6));
  b.check("61,718 with the RBF output, 61,728 with an FC output", rbf == 61718 && fc == 61728);
  const double mflop = 2.0 * macs / 1e6, epoch_gflop = 2.0 * macs * 60000 / 1e9;
  b.line("forward MACs/sample " + grouped(macs) + " = " + fixed(mflop, 3) + " MFLOP; " +
         fixed(epoch_gflop, 1) + " GFLOP per 60k-image forward epoch, about " +
         fixed(3 * epoch_gflop, 0) + " per training epoch (forward + 2x backward)");
  b.check("416,520 forward MACs per sample", macs == 416520, grouped(macs));
  b.check("about 0.833 MFLOP/sample and 50 GFLOP per forward epoch",
          fixed(mflop, 3) == "0.833" && std::lround(epoch_gflop) == 50);
}

// The network this program trains (core/layout.hpp) differs from the chapter's table only in the
// biases: C1 and C3 have none of their own because S2 and S4 add one per map right after them
// (Fig 16.5), and the output layer is fully connected with a bias.
void check_our_network(Block& b, const std::vector<CountRow>& rows) {
  const ParamLayout layout = lenet5_layout(NetConfig{});
  Table table{{"tensor", "shape", "count"}, {}};
  bool has_conv_bias = false, has_output_bias = false;
  for (const ParamSpec& t : layout.tensors) {
    std::string shape;
    for (auto e : t.shape) shape += (shape.empty() ? "(" : ",") + std::to_string(e);
    table.add({t.name, shape + ")", grouped((long long)t.count)});
    has_conv_bias |= t.name == "c1.bias" || t.name == "c3.bias";
    has_output_bias |= t.name == "output.bias";
  }
  b.table("our_parameters", table);
  long long fc_total = 10, c1_c3_biases = 0;
  for (const CountRow& r : rows) {
    fc_total += r.params();
    if (r.spec->name == "c1" || r.spec->name == "c3") c1_c3_biases += r.biases;
  }
  const long long ours = (long long)layout.trainable_count;
  b.line("our network: " + grouped(ours) + " parameters = " + grouped(fc_total) + " - " +
         grouped(c1_c3_biases) +
         " (C1 and C3 have no bias of their own: S2 and S4 add one per "
         "map, Fig 16.5; the output layer is fully connected with a bias)");
  b.line(
      "ordering used: conv -> subsampling (+ bias per map) -> activation for C1/S2 and C3/S4 "
      "(the chapter's, Fig 16.5); C5 and F6 -> activation; output linear -> softmax "
      "cross-entropy (instead of the book's RBF output)");
  b.check("our network has 61,706 parameters", ours == 61706, grouped(ours));
  b.check("61,706 = 61,728 - the C1 and C3 biases", ours == fc_total - c1_c3_biases);
  b.check("no c1.bias or c3.bias tensor, and an output.bias", !has_conv_bias && has_output_bias);
}

void fig16_2(Block& b) {
  const std::vector<CountRow> rows = chapter_counts();
  b.line(
      "the chapter's variant: C3 fully connected to S2, a bias per convolution map and per "
      "pooling map, MACs counted for convolutions and fully connected layers");
  layer_table(b, rows);
  check_shape_chain(b);
  check_chapter_totals(b, rows);
  check_our_network(b, rows);
}

// ---- fig16.3 ------------------------------------------------------------------------------------

void fig16_3(Block& b) {
  const ParamLayout layout = lenet5_layout(NetConfig{});
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"c1", "X[1,32,32] W[6,1,5,5] Y[6,28,28]"},
      {"c3", "X[6,14,14] W[16,6,5,5] Y[16,10,10]"},
      {"c5", "X[16,5,5] W[120,16,5,5] Y[120,1,1]"}};
  Table table{{"layer", "X[C,H,W]", "W[M,C,K,K]", "Y[M,H-K+1,W-K+1]"}, {}};
  for (const auto& [name, want] : expected) {
    const LayerSpec& l = layer(name);
    const auto t = [](int a, int b2, int c) {
      return "[" + std::to_string(a) + "," + std::to_string(b2) + "," + std::to_string(c);
    };
    const std::string x = "X" + t(l.in.c, l.in.h, l.in.w) + "]";
    const std::string w = "W" + t(l.out.c, l.in.c, l.kernel) + "," + std::to_string(l.kernel) + "]";
    const std::string y = "Y" + t(l.out.c, l.in.h - l.kernel + 1, l.in.w - l.kernel + 1) + "]";
    table.add({name, x, w, y});
    b.check(name + " shapes are " + want, x + " " + w + " " + y == want, x + " " + w + " " + y);
    const auto& shape = layout.find(l.weight).shape;
    b.check(name + "'s W matches the parameter tensor " + l.weight,
            shape == std::vector<std::int64_t>{l.out.c, l.in.c, l.kernel, l.kernel});
  }
  b.table("shapes", table);
}

// ---- fig16.4 ------------------------------------------------------------------------------------

float all_ones_e01(int C, int K) {
  const ConvShape s{1, C, K, K, 1, K};
  const Floats x(std::size_t(C) * K * K, 1.0f), w(x.size(), 1.0f);
  return conv_forward_e01(s, x.data(), w.data())[0];
}

void fig16_4(Block& b) {
  Floats y(8);
  conv_forward_cpu<float>(fig::shape(), fig::x().data(), fig::w().data(), nullptr, y.data());
  check_maps(b, "conv_forward_cpu on the Fig 16.14 data: Y", y, as_doubles(fig::printed_y()), 2, 2,
             2);
  b.line("E01 (rendering A, Y += Y + X*W, i.e. y <- 2y + term), host version of the listing:");
  const Floats e01 = conv_forward_e01(fig::shape(), fig::x().data(), fig::w().data());
  check_maps(b, "E01 on the Fig 16.14 data: Y", e01,
             {5816, 7110, 4346, 8754, 2504, 5692, 2852, 3564}, 2, 2, 2);
  const float ones = all_ones_e01(1, 5);
  b.line("E01, all ones, C=1, K=5 (25 terms): " + number(ones) +
         " (exactly 2^25-1 = 33,554,431, "
         "which float32 cannot hold) instead of 25");
  b.check("E01 all-ones C=1 K=5 gives 2^25-1 as float (33,554,432)",
          ones == float(33554431.0) && ones == 33554432.0f, number(ones));
  const float c3 = all_ones_e01(6, 5);
  b.line("E01, all ones, C=6, K=5 (C3's 150 terms): " + number(c3));
  b.check("E01 with C3's 150 terms overflows to +inf", std::isinf(c3) && c3 > 0, number(c3));
}

// ---- fig16.5 and ex1 --------------------------------------------------------------------------

const PoolShape kPool4x4{1, 1, 4, 4, 2};

Floats one_to_sixteen() {
  Floats x(16);
  std::iota(x.begin(), x.end(), 1.0f);
  return x;
}

// Printed to 7 decimals (+-5e-8); float32's spacing just below 1 is 6e-8 and exp/tanh in float are
// within an ulp or two, so 2e-7 covers both.
constexpr double kSevenDecimals = 2e-7;

bool near_all(const Floats& a, const std::vector<double>& b, double tolerance) {
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::fabs(a[i] - b[i]) > tolerance) return false;
  return a.size() == b.size();
}

void pooling_activations(Block& b, const Floats& average) {
  const std::vector<std::pair<Activation, std::vector<double>>> cases = {
      {Activation::sigmoid, {0.9706878, 0.9959299, 0.9999899, 0.9999986}},
      {Activation::tanh, {0.9981779, 0.9999666, 1.0000000, 1.0000000}}};
  for (const auto& [kind, want] : cases) {
    Floats y(4);
    activation_forward_cpu(kind, average.data(), y.data(), 4);
    const std::string name = to_string(kind);
    b.line("with b = 0 and " + name + ": " + fixed(y[0], 7) + " " + fixed(y[1], 7) + " " +
           fixed(y[2], 7) + " " + fixed(y[3], 7));
    b.check(name + " values match §1.5 to 7 decimals", near_all(y, want, kSevenDecimals));
  }
}

void fig16_5(Block& b) {
  const Floats x = one_to_sixteen(), zero = {0};
  b.line("one 4x4 map holding 1..16 in row-major order, K = 2");
  Floats average(4);
  subsample_forward_cpu(kPool4x4, Subsampling::average, x.data(), zero.data(), average.data());
  check_maps(b, "average", average, {3.5, 5.5, 11.5, 13.5}, 1, 2, 2);
  pooling_activations(b, average);
  check_maps(b, "E04 (A: S += S + Y/K^2, hh,ww read as h,w)", pool_forward_e04(kPool4x4, x.data()),
             {8, 15.5, 38, 45.5}, 1, 2, 2);
  const PoolE06Result e06 = pool_forward_e06(kPool4x4, x.data());
  b.line("E06 (B: bias + sigmoid after the loops): outputs " + matrix_text(e06.s, 2, 2) +
         ", the stray statement writes S[" + std::to_string(e06.stray_index) + "] of " +
         std::to_string(e06.size) + " elements (not performed here)");
  b.check("E06 signature: outputs equal the plain average (no bias, no sigmoid)", e06.s == average);
  b.line("E06's stray write goes to index " + std::to_string(e06.stray_index) + ", past the " +
         std::to_string(e06.size) + " outputs");
  for (const char* name : {"s2", "s4"}) {
    const LayerSpec& l = layer(name);
    b.line(std::string("LeNet ") + name + ": " + dims(l.in) + " -> " + dims(l.out));
    b.check(std::string(name) + " keeps the maps and halves rows and columns",
            l.out.c == l.in.c && l.out.h == l.in.h / 2 && l.out.w == l.in.w / 2);
  }
}

void ex1_backward(Block& b, const Floats& x) {
  Floats dx(16);
  const Floats ds_avg = {4, 8, 12, 16};
  subsample_backward_input_cpu(kPool4x4, Subsampling::average, x.data(), ds_avg.data(), dx.data());
  check_maps(b, "average backward, dS = [[4,8],[12,16]]: dY (dS/K^2 over each window)", dx,
             {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}, 1, 4, 4);
  const Floats ds = {1, 2, 3, 4};
  subsample_backward_input_cpu(kPool4x4, Subsampling::max, x.data(), ds.data(), dx.data());
  check_maps(b, "max backward, dS = [[1,2],[3,4]]: dY (to each window's maximum)", dx,
             {0, 0, 0, 0, 0, 1, 0, 2, 0, 0, 0, 0, 0, 3, 0, 4}, 1, 4, 4);
  const Floats ties(16, 5.0f);  // every window is a four-way tie
  subsample_backward_input_cpu(kPool4x4, Subsampling::max, ties.data(), ds.data(), dx.data());
  check_maps(b, "max backward on all-equal windows: dY (to the first maximum in row-major order)",
             dx, {1, 0, 2, 0, 0, 0, 0, 0, 3, 0, 4, 0, 0, 0, 0, 0}, 1, 4, 4);
}

// dE/dY = sigmoid'(z) dE/dS / K^2 through the whole corrected Fig 16.5 (average + b + sigmoid),
// against the same chain rule evaluated in double. Tolerance 1e-6: the float path rounds at the
// 1e-9 level on these values (all below 0.06), while a wrong factor in the chain (a missing
// 1/K^2 or slope) changes them by 1e-3 or more.
void ex1_chain(Block& b, const Floats& x) {
  const Floats bias = {-9.0f}, ds = {1, -2, 3, -4};
  Floats z(4), s(4), dz(4), dy(16);
  subsample_forward_cpu(kPool4x4, Subsampling::average, x.data(), bias.data(), z.data());
  activation_forward_cpu(Activation::sigmoid, z.data(), s.data(), 4);
  activation_backward_cpu(Activation::sigmoid, s.data(), ds.data(), dz.data(), 4);
  subsample_backward_input_cpu(kPool4x4, Subsampling::average, x.data(), dz.data(), dy.data());
  double worst = 0;
  for (int i = 0; i < 16; ++i) {
    const int window = (i / 4 / 2) * 2 + (i % 4) / 2;
    const double sig = activate(Activation::sigmoid, double(z[window]));
    worst = std::max(worst, std::fabs(dy[i] - sig * (1 - sig) * ds[window] / 4));
  }
  b.line("with b = -9 and sigmoid, dE/dS = [[1,-2],[3,-4]]: dE/dY = " + matrix_text(dy, 4, 4));
  b.check("dE/dY = sigmoid'(z) dE/dS / K^2 over each window (within 1e-6)", worst < 1e-6,
          "largest difference " + number(worst));
}

void ex1(Block& b) {
  const Floats x = one_to_sixteen(), zero = {0}, bias = {-0.5f};
  Floats y(4);
  subsample_forward_cpu(kPool4x4, Subsampling::average, x.data(), bias.data(), y.data());
  check_maps(b, "corrected Fig 16.5 without the activation, b = -0.5", y, {3, 5, 11, 13}, 1, 2, 2);
  subsample_forward_cpu(kPool4x4, Subsampling::max, x.data(), zero.data(), y.data());
  check_maps(b, "max pooling (the modern variant), b = 0", y, {6, 8, 14, 16}, 1, 2, 2);
  ex1_backward(b, x);
  ex1_chain(b, x);
}

// ---- fig16.6 ------------------------------------------------------------------------------------

// E(W, X, b) = sum tanh(Y)^2 / 2 over the batch, Y = W X + b: dE/dY = tanh(Y) (1 - tanh(Y)^2).
double fc_loss(const FcShape& s, const std::vector<double>& x, const std::vector<double>& w,
               const std::vector<double>& bias, std::vector<double>* dy) {
  std::vector<double> y(std::size_t(s.n) * s.out);
  fc_forward_cpu(s, x.data(), w.data(), bias.data(), y.data());
  return tanh_square_loss(y, dy);
}

void fc_finite_differences(Block& b) {
  const FcShape s{3, 5, 4};
  SplitMix64 rng(616);
  auto draw = [&](std::size_t n) {
    std::vector<double> v(n);
    for (auto& e : v) e = 2 * rng.uniform() - 1;
    return v;
  };
  std::vector<double> x = draw(15), w = draw(20), bias = draw(4), dy, dx(15), dw(20), db(4);
  fc_loss(s, x, w, bias, &dy);
  fc_backward_input_cpu(s, dy.data(), w.data(), dx.data());
  fc_backward_weights_cpu(s, x.data(), dy.data(), dw.data(), db.data());
  check_finite_differences(b, "N=3, 5 -> 4", "dE/dX, dE/dW, dE/db",
                           [&] { return fc_loss(s, x, w, bias, nullptr); }, x, dx, w, dw, bias, db);
}

void fig16_6(Block& b) {
  const FcShape s{1, 3, 2};
  const Floats w = {1, 2, 3, 4, 5, 6}, x = {1, 0, -1}, dy = {1, 2};
  b.line("hand example: W = [[1,2,3],[4,5,6]], X = [1,0,-1], dE/dY = [1,2]");
  Floats dx(3), dw(6), db(2);
  fc_backward_input_cpu(s, dy.data(), w.data(), dx.data());
  fc_backward_weights_cpu(s, x.data(), dy.data(), dw.data(), db.data());
  check_maps(b, "dE/dX = W^T dE/dY", dx, {9, 12, 15}, 1, 1, 3);
  check_maps(b, "dE/dW = dE/dY X^T", dw, {1, 0, -1, 2, 0, -2}, 1, 2, 3);
  fc_finite_differences(b);
}

// ---- fig16.8, fig16.9 ---------------------------------------------------------------------------

double dot(const Floats& a, const Floats& b) {
  double sum = 0;  // small integer products: exact in double
  for (std::size_t i = 0; i < a.size(); ++i) sum += double(a[i]) * b[i];
  return sum;
}

const std::vector<double> kFigDx = {6,  9,  2,  12, 26, 14, 6,  21, 16, 11, 20, 8,  28, 50,
                                    20, 17, 30, 12, 5,  17, 14, 18, 39, 20, 17, 20, 0};
const std::vector<double> kFigDw = {12, 17, 11, 21, 16, 21, 13, 10, 9,  19, 23, 24,
                                    32, 41, 27, 53, 36, 53, 33, 34, 25, 47, 51, 60};

void fig16_8(Block& b) {
  b.line("Fig 16.14 data with dE/dY[m,h,w] = 1 + 4m + 2h + w = " + maps_text(fig::dy(), 2, 2, 2));
  Floats dx(27), gathered(27), y(8);
  conv_backward_input_cpu(fig::shape(), fig::dy().data(), fig::w().data(), dx.data());
  check_maps(b, "dE/dX (scatter form, as printed)", dx, kFigDx, 3, 3, 3);
  conv_backward_input_gather(fig::shape(), fig::dy().data(), fig::w().data(), gathered.data());
  b.check("the gather form (race-free on a GPU) gives the same dE/dX", gathered == dx);
  conv_forward_cpu<float>(fig::shape(), fig::x().data(), fig::w().data(), nullptr, y.data());
  const double dy_y = dot(fig::dy(), y), dx_x = dot(dx, fig::x());
  b.line("sum dE/dY*Y = " + number(dy_y) + ", sum dE/dX*X = " + number(dx_x));
  b.check("bilinearity: sum dE/dY*Y = sum dE/dX*X = 726", dy_y == 726 && dx_x == 726);
}

void e08_demo(Block& b) {
  const LiteralIndexReads r = e08_literal_dy_reads(fig::shape());
  b.line(
      "E08: the printed dE_dY[m, c, h, w] as index ((m*C+c)*H_out+h)*W_out+w on the Fig 16.14 "
      "data (C = 3): largest index " +
      std::to_string(r.max_index) + " into " + std::to_string(r.size) + " elements; " +
      std::to_string(r.out_of_range) + " of " + std::to_string(r.reads) +
      " reads out of range (counted, never performed)");
  b.check("E08 reaches index 23 of an 8-element dE/dY", r.max_index == 23 && r.size == 8);
  b.check("E08 makes 64 out-of-range reads", r.out_of_range == 64, std::to_string(r.out_of_range));
  const Floats dw = conv_backward_weights_e08(fig::shape(), fig::x().data(), fig::dy().data());
  int nan = 0, wrong = 0;
  for (std::size_t i = 0; i < dw.size(); ++i) nan += std::isnan(dw[i]), wrong += dw[i] != kFigDw[i];
  b.line("E08 dE/dW as printed, dE/dY padded with NaN: " + maps_text(dw, 6, 2, 2) + " (" +
         std::to_string(wrong) + " of 24 wrong, " + std::to_string(nan) + " of them NaN)");
  b.check("E08 gives wrong gradients when C > 1", wrong > 0);
  const ConvShape c1 = conv_shape("c1");
  const LiteralIndexReads r1 = e08_literal_dy_reads(c1);
  b.line("with C = 1 (LeNet C1): " + std::to_string(r1.differ) + " of " + std::to_string(r1.reads) +
         " literal indices differ from the correct ones");
  b.check("with C = 1 the literal index coincides with the correct one (E08 is invisible)",
          r1.differ == 0 && r1.out_of_range == 0);
  const Floats x = random_floats(c1.c * c1.h * c1.w, 91), dy = random_floats(6 * 28 * 28, 92);
  Floats correct(150);
  conv_backward_weights_cpu<float>(c1, x.data(), dy.data(), correct.data(), nullptr);
  b.check("so on C1 the printed dE/dW equals the corrected one bit for bit",
          conv_backward_weights_e08(c1, x.data(), dy.data()) == correct);
}

void fig16_9(Block& b) {
  Floats dw(24), db(2);
  conv_backward_weights_cpu(fig::shape(), fig::x().data(), fig::dy().data(), dw.data(), db.data());
  check_maps(b, "dE/dW[m][c]", dw, kFigDw, 6, 2, 2);
  const double dw_w = dot(dw, fig::w());
  b.line("sum dE/dW*W = " + number(dw_w));
  b.check("bilinearity: sum dE/dW*W = 726", dw_w == 726);
  // The mini-batch gradient is the SUM over samples; the trainer divides by N through dL/dlogits
  // ("average gradient over the mini-batch", A:231), and the update is W <- W - lr dE/dW.
  const Floats x2 = twice(fig::x()), dy2 = twice(fig::dy());
  Floats dw2(24);
  conv_backward_weights_cpu<float>(fig::shape(2), x2.data(), dy2.data(), dw2.data(), nullptr);
  bool doubled = true;
  for (std::size_t i = 0; i < 24; ++i) doubled &= dw2[i] == 2 * dw[i];
  b.check(
      "two copies of the sample give twice dE/dW (the batch gradient is a sum; the 1/N is "
      "applied once, in dL/dlogits)",
      doubled);
  e08_demo(b);
}

// ---- fig16.10, fig16.11 -------------------------------------------------------------------------

void fig16_10(Block& b) {
  const ConvShape batch = conv_shape("c3", 4);
  const std::size_t in = std::size_t(6) * 14 * 14, out = std::size_t(16) * 10 * 10;
  const Floats x = random_floats(batch.n * in, 101), w = random_floats(16 * 6 * 25, 102);
  Floats y(batch.n * out), y1(out);
  conv_forward_cpu<float>(batch, x.data(), w.data(), nullptr, y.data());
  ConvShape single = batch;
  single.n = 1;
  int identical = 0;
  for (int n = 0; n < batch.n; ++n) {
    conv_forward_cpu<float>(single, x.data() + n * in, w.data(), nullptr, y1.data());
    identical += std::memcmp(y1.data(), y.data() + n * out, out * sizeof(float)) == 0;
  }
  b.line("LeNet C3, N = 4, random data: " + std::to_string(identical) +
         " of 4 samples "
         "bit-identical to single-sample calls");
  b.check("the batch result equals N single-sample calls bit-exactly", identical == batch.n);
}

void fig16_11(Block& b) {
  const int N = 64;
  Table table{{"layer", "M x H_out x W_out", "threads/sample", "threads for N=64"}, {}};
  std::string counts;
  for (const char* name : {"c1", "c3", "c5"}) {
    const LayerSpec& l = layer(name);
    const long long per_sample = (long long)l.out.c * l.out.h * l.out.w;
    table.add(
        {name,
         std::to_string(l.out.c) + "x" + std::to_string(l.out.h) + "x" + std::to_string(l.out.w),
         grouped(per_sample), grouped(per_sample * N)});
    counts += (counts.empty() ? "" : " / ") + grouped(per_sample);
  }
  b.table("parallelism", table);
  b.check("parallel work per sample is 4,704 / 1,600 / 120", counts == "4,704 / 1,600 / 120",
          counts);
}

}  // namespace

std::vector<Target> chapter_cpu_targets() {
  std::vector<Target> targets{
      {"fig16.2", "LeNet-5 layer table: shapes, filter banks, parameters, MACs", "§1.2", false,
       fig16_2},
      {"fig16.3", "convolution layer shapes X, W, Y for C1, C3, C5", "§1.3", false, fig16_3},
      {"fig16.4", "sequential forward convolution; erratum E01", "§1.4", false, fig16_4},
      {"fig16.5", "subsampling forward; errata E04, E06", "§1.5", false, fig16_5},
      {"ex1", "Exercise 1: pooling forward (average, max) and backward", "§1.5, §1.22", false, ex1},
      {"fig16.6", "fully connected backward: hand example and finite differences", "§1.6", false,
       fig16_6},
      {"fig16.8", "convolution dE/dX on the Fig 16.14 data", "§1.7", false, fig16_8},
      {"fig16.9", "convolution dE/dW on the Fig 16.14 data; erratum E08", "§1.8", false, fig16_9},
      {"fig16.10", "mini-batch forward equals single-sample calls", "§1.9", false, fig16_10},
      {"fig16.11", "parallelism of the forward convolution", "§1.10", false, fig16_11},
  };
  for (Target& t : chapter_gemm_cpu_targets()) targets.push_back(std::move(t));
  return targets;
}

const LayerSpec& layer(const std::string& name) {
  for (const LayerSpec& l : lenet5_topology(NetConfig{}))
    if (l.name == name) return l;
  throw Error("internal: no layer '" + name + "' in the topology");
}

ConvShape conv_shape(const std::string& name, int n) {
  const LayerSpec& l = layer(name);
  return {n, l.in.c, l.in.h, l.in.w, l.out.c, l.kernel};
}

double tanh_square_loss(const std::vector<double>& y, std::vector<double>* dy) {
  double e = 0;
  if (dy) dy->resize(y.size());
  for (std::size_t i = 0; i < y.size(); ++i) {
    const double t = std::tanh(y[i]);
    e += t * t / 2;
    if (dy) (*dy)[i] = t * (1 - t * t);
  }
  return e;
}

void check_finite_differences(Block& b, const std::string& setup, const std::string& what,
                              const std::function<double()>& loss, std::vector<double>& x,
                              const std::vector<double>& dx, std::vector<double>& w,
                              const std::vector<double>& dw, std::vector<double>& bias,
                              const std::vector<double>& db) {
  const double ex = finite_difference_max_rel_error(loss, x, dx);
  const double ew = finite_difference_max_rel_error(loss, w, dw);
  const double eb = finite_difference_max_rel_error(loss, bias, db);
  b.line("central differences in double, " + setup +
         ", E = sum tanh(Y)^2/2: largest relative errors dX " + number(ex) + ", dW " + number(ew) +
         ", db " + number(eb));
  b.check("finite differences agree with " + what + " (relative error < 1e-6)",
          ex < 1e-6 && ew < 1e-6 && eb < 1e-6);
}

}  // namespace lenet5::figures
