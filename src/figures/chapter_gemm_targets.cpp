// The chapter's CPU targets of §1.13-§1.22 of textbook-figures.md: the numeric example of Fig
// 16.14 (erratum E26), the expansion ratio, the unroll + GEMM forward path (Figs 16.15-16.17),
// Table 16.1, and Exercises 4 and 5. Results are computed by the CPU references and by
// figures/chapter_math.hpp; the specification's values appear only as the checks' expectations.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "core/topology.hpp"
#include "figures/chapter_math.hpp"
#include "figures/fig16_14_data.hpp"
#include "figures/figure_util.hpp"
#include "figures/paper_math.hpp"
#include "figures/targets_internal.hpp"
#include "layers/reference_cpu.hpp"

namespace lenet5::figures {
namespace {

using Floats = std::vector<float>;
namespace fig = fig16_14;

std::vector<ConvShape> lenet_convolutions() {
  return {conv_shape("c1"), conv_shape("c3"), conv_shape("c5")};
}

template <class T>
std::vector<T> random_values(std::size_t count, std::uint64_t seed, double lo, double hi) {
  SplitMix64 rng(seed);
  std::vector<T> out(count);
  for (auto& v : out) v = T(lo + (hi - lo) * rng.uniform());
  return out;
}

// Small integers in [-3, 3]: every product and sum below stays exact in float (§0.3).
Floats random_integers(std::size_t count, std::uint64_t seed) {
  Floats out = random_values<float>(count, seed, -3.0, 4.0);
  for (auto& v : out) v = std::floor(v);
  return out;
}

std::string cell_name(const Cell& c) {  // 1-based, as the specification names the cells
  return "r" + std::to_string(c.row + 1) + "c" + std::to_string(c.col + 1);
}

std::string cells_text(const std::vector<Cell>& cells) {
  std::string out;
  for (const Cell& c : cells) out += (out.empty() ? "" : " ") + cell_name(c);
  return out.empty() ? "none" : out;
}

// ---- fig16.14 -----------------------------------------------------------------------------------

// The figure's inputs, read back from the printed X_unrolled (§1.13's reconstruction).
void fig16_14_reconstruct(Block& b) {
  const std::vector<InputCopies> copies = unrolled_copies(fig::shape(), fig::printed_x_unrolled());
  bool channels01_agree = true, channels01_match = true;
  std::vector<std::string> conflicts;
  for (const InputCopies& e : copies) {
    const std::size_t at = (std::size_t(e.c) * fig::kH + e.h) * fig::kW + e.w;
    if (e.c < 2) {
      channels01_agree &= e.agree();
      channels01_match &= e.values.front() == fig::x()[at];
    } else if (!e.agree()) {
      std::string where;
      for (std::size_t i = 0; i < e.cells.size(); ++i)
        where += " " + cell_name(e.cells[i]) + "=" + number(e.values[i]);
      conflicts.push_back("X[2][" + std::to_string(e.h) + "][" + std::to_string(e.w) +
                          "]:" + where);
    }
  }
  b.check("channels 0 and 1: every copy in the printed X_unrolled agrees", channels01_agree);
  b.check("they give X[0] and X[1] of §1.13", channels01_match);
  for (const auto& c : conflicts) b.line("channel 2 conflict: " + c);
  b.check("channel 2 has exactly 2 conflicting elements, X[2][1][0] and X[2][1][1]",
          conflicts.size() == 2 && conflicts[0].rfind("X[2][1][0]", 0) == 0 &&
              conflicts[1].rfind("X[2][1][1]", 0) == 0);
  const ChannelSearch search = search_last_channel(fig::shape(), fig::x(), fig::w(),
                                                   fig::printed_y(), fig::printed_x_unrolled(), 3);
  b.line("brute force over channel 2 (entries 0..3): " + grouped(search.tried) + " inputs, " +
         grouped(search.consistent) +
         " reproduce the printed Y, the closest to the printed "
         "X_unrolled differs in " +
         std::to_string(search.distance) + " cells (" + std::to_string(search.best.size()) +
         " such input)");
  const Floats x2(fig::x().begin() + 18, fig::x().end());
  b.check("a unique closest input, 2 cells away, and it is the X[2] used here: " +
              matrix_text(x2, 3, 3),
          search.best.size() == 1 && search.distance == 2 && search.best[0] == x2);
}

void fig16_14_unroll(Block& b, const Floats& unrolled) {
  b.line("X_unrolled as printed (B:244-250):");
  b.table("x_unrolled_printed", matrix_table(fig::printed_x_unrolled(), fig::kRows, fig::kCols));
  b.line("CPU unroll (Fig 16.16) of X:");
  b.table("x_unrolled_cpu", matrix_table(unrolled, fig::kRows, fig::kCols));
  const std::vector<Cell> diff = differing_cells(unrolled, fig::printed_x_unrolled(), fig::kCols);
  std::string detail;
  for (const Cell& c : diff)
    detail += " " + cell_name(c) + ": printed " +
              number(fig::printed_x_unrolled()[std::size_t(c.row) * fig::kCols + c.col]) +
              ", computed " + number(unrolled[std::size_t(c.row) * fig::kCols + c.col]) + ";";
  b.line("cells where the CPU unroll differs from the printed matrix:" + detail);
  b.check("exactly 2 cells differ, r9c3 and r10c3 (erratum E26)", cells_text(diff) == "r9c3 r10c3",
          cells_text(diff));
}

// W' columns [4c, 4c+4) times X_unrolled rows [4c, 4c+4): input channel c's share of Y.
Floats channel_contribution(const Floats& unrolled, int c) {
  const int taps = fig::kK * fig::kK;
  Floats w_block, x_block(unrolled.begin() + c * taps * fig::kCols,
                          unrolled.begin() + (c + 1) * taps * fig::kCols);
  for (int m = 0; m < fig::kM; ++m)
    for (int t = 0; t < taps; ++t)
      w_block.push_back(fig::printed_w_prime()[m * fig::kRows + c * taps + t]);
  return matmul(w_block, x_block, fig::kM, taps, fig::kCols);
}

void fig16_14_products(Block& b, const Floats& unrolled) {
  const Floats& w_prime = fig::printed_w_prime();
  const Floats printed =
      matmul(w_prime, fig::printed_x_unrolled(), fig::kM, fig::kRows, fig::kCols);
  check_maps(b, "W' x X_unrolled as printed (figure erratum E26)", printed,
             {14, 20, 14, 24, 12, 24, 16, 26}, 1, 2, 4);
  const std::string off = cells_text(differing_cells(printed, fig::printed_y(), fig::kCols));
  b.check("it differs from the printed Y in column 3 of both rows only", off == "r1c3 r2c3", off);
  const Floats corrected = matmul(w_prime, unrolled, fig::kM, fig::kRows, fig::kCols);
  check_maps(b, "W' x X_unrolled (CPU unroll)", corrected, as_doubles(fig::printed_y()), 1, 2, 4);
  Floats direct(8);
  conv_forward_cpu<float>(fig::shape(), fig::x().data(), fig::w().data(), nullptr, direct.data());
  check_maps(b, "direct convolution (Fig 16.4)", direct, as_doubles(fig::printed_y()), 2, 2, 2);
  const std::vector<std::vector<double>> want = {
      {7, 10, 6, 12, 2, 5, 3, 3}, {5, 8, 5, 6, 5, 13, 6, 10}, {2, 2, 3, 6, 5, 6, 7, 13}};
  for (int c = 0; c < fig::kC; ++c)
    check_maps(b, "channel " + std::to_string(c) + " contribution, printed matrices",
               channel_contribution(fig::printed_x_unrolled(), c), want[std::size_t(c)], 1, 2, 4);
  check_maps(b, "channel 2 contribution, corrected X_unrolled", channel_contribution(unrolled, 2),
             {2, 2, 4, 6, 5, 6, 8, 13}, 1, 2, 4);
}

void fig16_14_duplication(Block& b) {
  const std::vector<int> count = unroll_duplication(fig::shape());
  bool maps_ok = true;
  int total = 0;
  for (int c = 0; c < fig::kC; ++c) {
    const std::vector<int> map(count.begin() + c * 9, count.begin() + (c + 1) * 9);
    b.line("duplication map of input map " + std::to_string(c) + ": " + matrix_text(map, 3, 3));
    maps_ok &= same_values(map, {1, 2, 1, 2, 4, 2, 1, 2, 1});
    for (int v : map) total += v;
  }
  b.check("each input map's duplication map is [[1,2,1],[2,4,2],[1,2,1]] (sum 16)", maps_ok);
  b.check("3 x 16 = 48 = 12 x 4 elements in X_unrolled (T06: 16 is per input map)",
          total == 48 && total == fig::kRows * fig::kCols, std::to_string(total));
  b.png("duplication_map", as_doubles(std::vector<int>(count.begin(), count.begin() + 9)), 3, 3, 0,
        4, 32);
}

void fig16_14_pictures(Block& b, const Floats& unrolled) {
  b.png("w_prime", as_doubles(fig::printed_w_prime()), fig::kM, fig::kRows, 0, 3);
  b.png("x_unrolled_printed", as_doubles(fig::printed_x_unrolled()), fig::kRows, fig::kCols, 0, 3);
  b.png("x_unrolled_corrected", as_doubles(unrolled), fig::kRows, fig::kCols, 0, 3);
}

// The cuDNN paper's names for the same matrices (CDNN Fig 1, N = 1) and its Eq. (3), a true
// convolution: on these data it differs from the chapter's cross-correlation.
void fig16_14_cudnn(Block& b) {
  const ConvShape s = fig::shape();
  const int crs = s.c * s.k * s.k, npq = s.n * s.h_out() * s.w_out();
  const std::string names = "F_m " + std::to_string(s.m) + "x" + std::to_string(crs) + ", D_m " +
                            std::to_string(crs) + "x" + std::to_string(npq) + ", O_m " +
                            std::to_string(s.m) + "x" + std::to_string(npq);
  b.line("cuDNN names (K x CRS, CRS x NPQ, K x NPQ): " + names);
  b.check("F_m 2x12, D_m 12x4, O_m 2x4", names == "F_m 2x12, D_m 12x4, O_m 2x4", names);
  const ConvParams cp{1, 3, 3, 3, 2, 2, 2};
  const std::vector<double> o = cudnn_eq3(cp, as_doubles(fig::x()), as_doubles(fig::w()));
  check_maps(b, "cuDNN Eq. (3), true convolution (filter flipped)", o,
             {15, 18, 15, 24, 17, 23, 23, 25}, 2, 2, 2);
}

void fig16_14_target(Block& b) {
  b.line("W' as printed (2 x 12, one 2x4 block per input channel):");
  b.table("w_prime", matrix_table(fig::printed_w_prime(), fig::kM, fig::kRows));
  b.line("X (3 maps of 3x3) = " + maps_text(fig::x(), 3, 3, 3));
  fig16_14_reconstruct(b);
  Floats unrolled(std::size_t(fig::kRows) * fig::kCols);
  conv_unroll_cpu<float>(fig::shape(), fig::x().data(), unrolled.data());
  fig16_14_unroll(b, unrolled);
  fig16_14_products(b, unrolled);
  fig16_14_duplication(b);
  fig16_14_pictures(b, unrolled);
  fig16_14_cudnn(b);
}

// ---- expansion ----------------------------------------------------------------------------------

struct ExpansionCase {
  std::string name;
  ConvShape shape;
  std::size_t buffer;  // expected unrolled floats (§1.14)
  std::string ratio;   // expected ratio to 4 decimals
};

void expansion(Block& b) {
  const std::vector<ExpansionCase> cases = {{"Fig 16.14", fig::shape(), 48, "1.7778"},
                                            {"LeNet C1", conv_shape("c1"), 19600, "19.1406"},
                                            {"LeNet C3", conv_shape("c3"), 15000, "12.7551"},
                                            {"LeNet C5", conv_shape("c5"), 400, "1.0000"}};
  Table table{{"case", "K", "H_in", "H_out", "unrolled floats (measured)", "size(X)",
               "measured ratio", "K*K*H_out*W_out/(H*W)"},
              {}};
  for (const ExpansionCase& e : cases) {
    const ConvShape& s = e.shape;
    const std::size_t written = unroll_written_count(s), size_x = std::size_t(s.c) * s.h * s.w;
    const double measured = double(written) / double(size_x);
    const double formula = double(s.k) * s.k * s.h_out() * s.w_out() / (double(s.h) * s.w);
    table.add({e.name, std::to_string(s.k), std::to_string(s.h), std::to_string(s.h_out()),
               grouped((long long)written), grouped((long long)size_x), fixed(measured, 4),
               fixed(formula, 4)});
    b.check(e.name + ": the unroll writes " + grouped((long long)e.buffer) + " floats, ratio " +
                e.ratio + " = the formula",
            written == e.buffer && fixed(measured, 4) == e.ratio && measured == formula,
            versus(grouped((long long)written) + " / " + fixed(measured, 4), e.ratio));
  }
  b.table("lenet", table);
  ConvShape many_maps = conv_shape("c3");
  many_maps.m = 1;
  b.check("M does not change the duplication (C3 unrolled with M = 1 and M = 16)",
          unroll_written_count(many_maps) == unroll_written_count(conv_shape("c3")));
  const ConvShape large{1, 1, 1024, 1024, 1, 5};
  const double large_ratio = double(unroll_written_count(large)) / (1024.0 * 1024.0);
  b.line("a 1024x1024 map with K = 5: ratio " + fixed(large_ratio, 4) + " (tends to K*K = 25)");
  b.check("the ratio tends to K*K from below for large maps",
          large_ratio > 24.7 && large_ratio < 25);
  Table paper{{"cuDNN Table 2 layer", "R*S", "expansion R*S*P*Q/(H*W)"}, {}};
  std::string ratios;
  bool below_rs = true;
  for (std::size_t i = 0; i < cudnn_table2_paper().size(); ++i) {
    const CudnnLayer& l = cudnn_table2_paper()[i];
    const double ratio = derive(l).expansion;
    paper.add({std::to_string(i + 1), std::to_string(l.r * l.s), fixed(ratio, 2)});
    ratios += (ratios.empty() ? "" : ", ") + fixed(ratio, 1);
    below_rs &= ratio < l.r * l.s;
  }
  b.table("cudnn_table2", paper);
  b.check("cuDNN Table 2 ratios are 102.8, 62.0, 45.6, 19.1, 6.4, all below R*S",
          ratios == "102.8, 62.0, 45.6, 19.1, 6.4" && below_rs, ratios);
}

// ---- fig16.15 -----------------------------------------------------------------------------------

void gemm_shapes(Block& b) {
  Table table{{"layer", "m = H_out*W_out", "n = M", "k = C*K*K", "m*n*k", "X_unrolled bytes",
               "C*H_out*W_out", "CRS"},
              {}};
  std::string got;
  for (const char* name : {"c1", "c3", "c5"}) {
    const ConvShape s = conv_shape(name);
    const long long m = s.h_out() * s.w_out(), n = s.m, k = (long long)s.c * s.k * s.k;
    const long long bytes = m * k * (long long)sizeof(float), chw = s.c * m;
    table.add({name, grouped(m), grouped(n), grouped(k), grouped(m * n * k), grouped(bytes),
               grouped(chw), grouped(k)});
    got += (got.empty() ? "" : "; ") + std::to_string(m) + "," + std::to_string(n) + "," +
           std::to_string(k) + " " + grouped(bytes) + " B " + std::to_string(chw);
  }
  b.table("gemm_shapes", table);
  b.check(
      "(m,n,k) 784,6,25 / 100,16,150 / 1,120,400; 78,400 / 60,000 / 1,600 B; "
      "C*H_out*W_out 784 / 600 / 16",
      got == "784,6,25 78,400 B 784; 100,16,150 60,000 B 600; 1,120,400 1,600 B 16", got);
  b.line(
      "T10: C*H_out*W_out is 16 for C5, not \"fairly large for all layers\"; per-sample GEMMs "
      "are tiny, so batching over samples (one CKK x N*HW GEMM, as cuDNN) is needed");
}

// Random data: unroll + GEMM against the direct convolution. The GEMM sums the k = c*K*K + p*K + q
// products in the same order as conv_forward_cpu, so the results are normally bit-identical; the
// compiler may still contract a*b + c into an FMA in one loop and not the other, so allow float
// rounding over at most 400 terms: 1e-5 relative to max(1, |ref|) (§0.3).
constexpr double kGemmTolerance = 1e-5;

void gemm_matches_direct(Block& b) {
  for (const ConvShape& one : lenet_convolutions()) {
    ConvShape s = one;
    s.n = 2;
    const Floats x = random_values<float>(std::size_t(s.n) * s.c * s.h * s.w, 150 + s.c, -1, 1);
    const Floats w = random_values<float>(std::size_t(s.m) * s.c * s.k * s.k, 160 + s.c, -1, 1);
    Floats direct(std::size_t(s.n) * s.m * s.h_out() * s.w_out());
    conv_forward_cpu<float>(s, x.data(), w.data(), nullptr, direct.data());
    const Floats gemm = conv_forward_unroll_gemm(s, x.data(), w.data());
    double worst = 0;
    for (std::size_t i = 0; i < direct.size(); ++i)
      worst = std::max(worst, std::fabs(double(gemm[i]) - direct[i]) /
                                  std::max(1.0, std::fabs(double(direct[i]))));
    b.check("unroll + column-major GEMM = direct convolution, N=2 random, C=" +
                std::to_string(s.c) + " (largest relative difference " + number(worst) + ")",
            worst <= kGemmTolerance);
  }
  const Floats fig_y = conv_forward_unroll_gemm(fig::shape(), fig::x().data(), fig::w().data());
  check_maps(b, "unroll + GEMM on Fig 16.14 (exact)", fig_y, as_doubles(fig::printed_y()), 2, 2, 2);
}

void e21_demo(Block& b) {
  const ConvShape s = conv_shape("c3", 3);
  const std::size_t in = std::size_t(s.c) * s.h * s.w, out = std::size_t(s.m) * 100;
  const Floats x = random_values<float>(s.n * in, 210, -1, 1);
  const Floats w = random_values<float>(std::size_t(s.m) * s.c * 25, 211, -1, 1);
  const Floats good = conv_forward_unroll_gemm(s, x.data(), w.data(), true);
  const Floats bad = conv_forward_unroll_gemm(s, x.data(), w.data(), false);
  int like_sample0 = 0, correct = 0;
  for (int n = 0; n < s.n; ++n) {
    like_sample0 += std::memcmp(bad.data() + n * out, bad.data(), out * sizeof(float)) == 0;
    correct += std::memcmp(bad.data() + n * out, good.data() + n * out, out * sizeof(float)) == 0;
  }
  b.line("E21 dropped n (unroll of X instead of X + n*C*H*W), C3, N = 3: " +
         std::to_string(like_sample0) + " of 3 samples equal sample 0's output, " +
         std::to_string(correct) + " of 3 correct");
  b.check("E21: every sample's output equals sample 0's, only sample 0 is right",
          like_sample0 == s.n && correct == 1);
}

void fig16_15(Block& b) {
  gemm_shapes(b);
  gemm_matches_direct(b);
  e21_demo(b);
}

// ---- fig16.17.host ------------------------------------------------------------------------------

void fig16_17_host(Block& b) {
  constexpr int kMaxThreads = 1024;  // CUDA_MAX_NUM_THREADS
  struct Case {
    std::string name;
    ConvShape s;
    long long printed, correct;  // expected blocks
  };
  const std::vector<Case> cases = {{"LeNet C1", conv_shape("c1"), 0, 1},
                                   {"LeNet C3", conv_shape("c3"), 0, 1},
                                   {"LeNet C5", conv_shape("c5"), 0, 1},
                                   {"Fig 16.14", fig::shape(), 0, 1},
                                   {"C=40, 28x28 outputs", {1, 40, 32, 32, 1, 5}, 30, 31}};
  Table table{
      {"case", "threads C*H_out*W_out", "printed ceil(int/int)", "correct", "threads missing"}, {}};
  for (const Case& c : cases) {
    const long long threads = (long long)c.s.c * c.s.h_out() * c.s.w_out();
    const long long printed = unroll_blocks_printed(threads, kMaxThreads);
    const long long correct = unroll_blocks_correct(threads, kMaxThreads);
    const long long missing = threads - std::min(threads, printed * kMaxThreads);
    table.add({c.name, grouped(threads), grouped(printed), grouped(correct), grouped(missing)});
    b.check(c.name + ": " + std::to_string(c.printed) + " blocks as printed, " +
                std::to_string(c.correct) + " correct",
            printed == c.printed && correct == c.correct,
            versus(std::to_string(printed) + "/" + std::to_string(correct),
                   std::to_string(c.printed) + "/" + std::to_string(c.correct)));
    if (c.printed > 0)
      b.check(c.name + ": the last 640 threads are missing", missing == 640, grouped(missing));
  }
  b.table("unroll_blocks", table);
  b.line(
      "E23: a zero-block launch fails with cudaErrorInvalidConfiguration and unrolls nothing "
      "(the GPU target fig16.17 launches it)");
}

// ---- tab16.1 ------------------------------------------------------------------------------------

void tab16_1(Block& b) {
  Table params{{"parameter", "meaning"},
               {{"N", "Number of images in mini-batch"},
                {"C", "Number of input feature maps"},
                {"H", "Height of input image"},
                {"W", "Width of input image"},
                {"K", "Number of output feature maps"},
                {"R", "Height of filter kernel"},
                {"S", "Width of filter kernel"},
                {"u", "Vertical stride"},
                {"v", "Horizontal stride"},
                {"pad_h", "Height of zero-padding"},
                {"pad_w", "Width of zero-padding"}}};
  b.table("parameters", params);
  b.line(
      "chapter -> cuDNN: M -> K (output maps), K -> R = S (filter size), H_out, W_out -> P, Q, "
      "X, W, Y -> D, F, O");
  Table lenet{{"layer", "N", "C", "H", "W", "K", "R", "S", "u", "v", "pad_h", "pad_w", "P", "Q"},
              {}};
  std::string pq;
  for (const char* name : {"c1", "c3", "c5"}) {
    const LayerSpec& l = layer(name);
    const int P = cudnn_output_size(l.in.h, l.kernel, 1, 0),
              Q = cudnn_output_size(l.in.w, l.kernel, 1, 0);
    lenet.add({name, "batch", std::to_string(l.in.c), std::to_string(l.in.h),
               std::to_string(l.in.w), std::to_string(l.out.c), std::to_string(l.kernel),
               std::to_string(l.kernel), "1", "1", "0", "0", std::to_string(P), std::to_string(Q)});
    b.check(std::string(name) + ": formula (1) gives the topology's output size",
            P == l.out.h && Q == l.out.w);
    pq += (pq.empty() ? "" : " / ") + std::to_string(P);
  }
  b.table("lenet_cudnn_notation", lenet);
  b.check("P = Q = 28 / 10 / 1", pq == "28 / 10 / 1", pq);
  b.line("cudnnGetConvolution2dForwardOutputDim is not compared: this build does not link cuDNN");
}

// ---- ex4 ----------------------------------------------------------------------------------------

// E = sum tanh(Y)^2 / 2 with Y the convolution plus bias; dE/dY = tanh(Y) (1 - tanh(Y)^2).
double conv_loss(const ConvShape& s, const std::vector<double>& x, const std::vector<double>& w,
                 const std::vector<double>& bias, std::vector<double>* dy) {
  std::vector<double> y(std::size_t(s.n) * s.m * s.h_out() * s.w_out());
  conv_forward_cpu<double>(s, x.data(), w.data(), bias.data(), y.data());
  return tanh_square_loss(y, dy);
}

void ex4_finite_differences(Block& b) {
  const ConvShape s{2, 6, 7, 7, 4, 5};  // C3-like: 6 input maps, 5x5 filters, 3x3 outputs
  std::vector<double> x = random_values<double>(std::size_t(2) * 6 * 49, 401, -1, 1);
  std::vector<double> w = random_values<double>(std::size_t(4) * 6 * 25, 402, -0.2, 0.2);
  std::vector<double> bias = random_values<double>(4, 403, -0.5, 0.5), dy;
  conv_loss(s, x, w, bias, &dy);
  std::vector<double> dx(x.size()), dw(w.size()), db(4);
  conv_backward_input_cpu<double>(s, dy.data(), w.data(), dx.data());
  conv_backward_weights_cpu<double>(s, x.data(), dy.data(), dw.data(), db.data());
  check_finite_differences(b, "N=2, C=6, 7x7, M=4, K=5", "conv_backward_*_cpu<double>",
                           [&] { return conv_loss(s, x, w, bias, nullptr); }, x, dx, w, dw, bias,
                           db);
}

void ex4_batch_sum(Block& b) {
  const ConvShape s = conv_shape("c3", 2), one = conv_shape("c3", 1);
  const std::size_t in = 6 * 14 * 14, out = 16 * 100;
  const Floats x = random_integers(2 * in, 404), dy = random_integers(2 * out, 405);
  Floats dw(2400), dw0(2400), dw1(2400);
  conv_backward_weights_cpu<float>(s, x.data(), dy.data(), dw.data(), nullptr);
  conv_backward_weights_cpu<float>(one, x.data(), dy.data(), dw0.data(), nullptr);
  conv_backward_weights_cpu<float>(one, x.data() + in, dy.data() + out, dw1.data(), nullptr);
  bool summed = true;
  for (std::size_t i = 0; i < dw.size(); ++i) summed &= dw[i] == dw0[i] + dw1[i];
  b.check("mini-batch dE/dW (C3, N=2, integer data, exact) is the sum of the samples' dE/dW",
          summed);
}

void ex4(Block& b) {
  Floats dx(27), dw(24), y(8);
  conv_backward_input_cpu<float>(fig::shape(), fig::dy().data(), fig::w().data(), dx.data());
  conv_backward_weights_cpu<float>(fig::shape(), fig::x().data(), fig::dy().data(), dw.data(),
                                   nullptr);
  conv_forward_cpu<float>(fig::shape(), fig::x().data(), fig::w().data(), nullptr, y.data());
  check_maps(b, "dE/dX (§1.7)", dx, {6,  9,  2,  12, 26, 14, 6,  21, 16, 11, 20, 8,  28, 50,
                                     20, 17, 30, 12, 5,  17, 14, 18, 39, 20, 17, 20, 0},
             3, 3, 3);
  check_maps(b, "dE/dW (§1.8)", dw, {12, 17, 11, 21, 16, 21, 13, 10, 9,  19, 23, 24,
                                     32, 41, 27, 53, 36, 53, 33, 34, 25, 47, 51, 60},
             6, 2, 2);
  double sy = 0, sx = 0, sw = 0;  // sums of small integer products: exact in double
  for (int i = 0; i < 8; ++i) sy += double(fig::dy()[i]) * y[i];
  for (int i = 0; i < 27; ++i) sx += double(dx[i]) * fig::x()[i];
  for (int i = 0; i < 24; ++i) sw += double(dw[i]) * fig::w()[i];
  b.line("sum dE/dY*Y = " + number(sy) + ", sum dE/dX*X = " + number(sx) +
         ", sum dE/dW*W = " + number(sw));
  b.check("the 726 invariant holds for all three", sy == 726 && sx == 726 && sw == 726);
  ex4_batch_sum(b);
  ex4_finite_differences(b);
}

// ---- ex5 ----------------------------------------------------------------------------------------

void ex5(Block& b) {
  struct Case {
    std::string name;
    int c, h, k;
    std::vector<std::string> expected;  // reads, writes (Fig 16.14), writes (row-major), ideal
  };
  const std::vector<Case> cases = {
      {"LeNet C1 (C=1, 32x32, K=5)", 1, 32, 5, {"5.15", "3.92", "31.36", "3.92"}},
      {"LeNet C3 (C=6, 14x14, K=5)", 6, 14, 5, {"6.34", "4.56", "31.58", "3.95"}},
      {"cuDNN L1 (C=3, 128x128, K=11)", 3, 128, 11, {"5.04", "4.49", "31.98", "4.00"}}};
  b.line(
      "model: 32 consecutive threads per warp, one request per (p,q), 128-B aligned bases, "
      "distinct 32-B sectors per request averaged over all requests");
  Table table{{"case", "X reads", "X_unroll writes (Fig 16.14 layout)",
               "writes (row-major literal)", "ideal", "requests"},
              {}};
  for (const Case& c : cases) {
    const SectorCounts s = unroll_sector_counts(c.c, c.h, c.h, c.k);
    const std::vector<std::string> got = {fixed(s.x_reads, 2), fixed(s.writes_fig16_14, 2),
                                          fixed(s.writes_row_major, 2), fixed(s.ideal, 2)};
    table.add({c.name, got[0], got[1], got[2], got[3], grouped(s.requests)});
    b.check(c.name + ": " + c.expected[0] + " / " + c.expected[1] + " / " + c.expected[2] + " / " +
                c.expected[3] + " sectors per request",
            got == c.expected, got[0] + " / " + got[1] + " / " + got[2] + " / " + got[3]);
  }
  b.table("sectors_per_request", table);
  const SectorCounts c1 = unroll_sector_counts(1, 32, 32, 5);
  const double factor = c1.writes_row_major / c1.writes_fig16_14;
  b.line("row-major literal writes cost " + fixed(factor, 1) +
         "x the Fig 16.14 layout's on C1 "
         "(hazard H2)");
  b.check("the literal row-major layout makes C1's writes 8x less efficient",
          fixed(factor, 1) == "8.0");
}

}  // namespace

std::vector<Target> chapter_gemm_cpu_targets() {
  return {
      {"fig16.14", "GEMM form of convolution on the printed example; erratum E26", "§1.13", false,
       fig16_14_target},
      {"expansion", "expansion ratio of the unrolled input, measured", "§1.14", false, expansion},
      {"fig16.15", "unroll + GEMM forward: shapes, correctness, erratum E21", "§1.15, §1.19", false,
       fig16_15},
      {"fig16.17.host", "unroll kernel launch arithmetic; erratum E23", "§1.17", false,
       fig16_17_host},
      {"tab16.1", "cuDNN convolution parameters and LeNet in that notation", "§1.20", false,
       tab16_1},
      {"ex4", "Exercise 4: backward path checks and finite differences", "§1.22", false, ex4},
      {"ex5", "Exercise 5: memory sectors per warp request of the unroll kernel", "§1.22", false,
       ex5},
  };
}

}  // namespace lenet5::figures
