// The CPU targets of the other seed documents (textbook-figures.md §3-§5): the cuDNN paper's
// output-size formula and Eq. (3), its Table 2 with derived quantities, consistency checks of
// its printed Tables 3 and 4 and of the ZF-Net report's tables, and the CUTLASS blog's example
// policy. Printed tables of those documents are DATA here (transcribed in §3.5, §3.7, §4.2): the
// targets recompute what can be recomputed from them and report the inconsistencies (D01-D06,
// Z01-Z07) as findings. A check passes when the recomputation gives the specification's derived
// value; it does not assert that the printed documents are right.
#include <algorithm>
#include <cmath>

#include "core/rng.hpp"
#include "core/topology.hpp"
#include "figures/cudnn_table4.hpp"
#include "figures/fig16_14_data.hpp"
#include "figures/figure_util.hpp"
#include "figures/paper_math.hpp"
#include "layers/reference_cpu.hpp"

namespace lenet5::figures {
namespace {

using Doubles = std::vector<double>;

// ---- cudnn.eq1 ----------------------------------------------------------------------------------

void output_size_sweep(Block& b) {
  const OutputSizeSweep s = sweep_output_sizes(299, 8, 5);
  b.line("sweep H <= 299, R <= H, u <= 8, pad <= 5: " + grouped(s.cases) +
         " cases; formula (1) "
         "vs floor((H + 2pad - R)/u) + 1: " +
         grouped(s.formula1_vs_floor) + " mismatches");
  b.check("formula (1) equals the floor formula everywhere (so it is right for stride > 1)",
          s.cases > 0 && s.formula1_vs_floor == 0);
  b.line("Caffe's ceil mode ceil((H + 2pad - R)/u) + 1 differs in " + grouped(s.ceil_mode_differs) +
         " cases: exactly those with (H + 2pad - R) mod u != 0 (" + grouped(s.off_grid) + ")");
  b.check("the ceil mode differs exactly where (H + 2pad - R) mod u != 0",
          s.ceil_mode_differs > 0 && s.ceil_mode_differs == s.off_grid &&
              s.ceil_mode_differs_off_grid == s.off_grid);
  const int conv1 = cudnn_output_size(224, 7, 2, 1), pool1 = floor_output_size(conv1, 3, 2, 0);
  const int pool1_ceil = ceil_mode_output_size(conv1, 3, 2, 0);
  const int conv2 = cudnn_output_size(pool1_ceil, 5, 2, 0);
  const int pool2 = floor_output_size(conv2, 3, 2, 0),
            pool2_ceil = ceil_mode_output_size(conv2, 3, 2, 0);
  b.line("ZF-Net: conv1 224 -> " + std::to_string(conv1) + ", pool 3/2 -> " +
         std::to_string(pool1) + " (floor) or " + std::to_string(pool1_ceil) +
         " (ceil mode); conv2 -> " + std::to_string(conv2) + ", pool -> " + std::to_string(pool2) +
         " or " + std::to_string(pool2_ceil));
  b.check("ZF-Net's 110 -> 55 and 26 -> 13 need the ceil mode (floor gives 54 and 12)",
          conv1 == 110 && pool1 == 54 && pool1_ceil == 55 && conv2 == 26 && pool2 == 12 &&
              pool2_ceil == 13);
  b.line("caveat: with H + 2pad < R, C++'s truncating division makes the floor form give " +
         std::to_string(floor_output_size(4, 5, 2, 0)) +
         " for H=4, R=5, u=2 where formula (1) "
         "gives " +
         std::to_string(cudnn_output_size(4, 5, 2, 0)) + ": reject such layers");
}

void output_size_modes(Block& b) {
  const int H = 32;
  Table table{{"R", "valid (pad 0)", "same (pad floor(R/2))", "full (pad R-1)"}, {}};
  bool valid_full = true, same_odd_only = true;
  for (int R : {2, 3, 4, 5, 7, 11}) {
    const int valid = cudnn_output_size(H, R, 1, 0), same = cudnn_output_size(H, R, 1, R / 2);
    const int full = cudnn_output_size(H, R, 1, R - 1);
    table.add(
        {std::to_string(R), std::to_string(valid), std::to_string(same), std::to_string(full)});
    valid_full &= valid == H - R + 1 && full == H + R - 1;
    same_odd_only &= (same == H) == (R % 2 == 1) && (R % 2 == 1 || same == H + 1);
  }
  b.table("modes_h32", table);
  b.check("valid gives H-R+1 and full H+R-1 for every R", valid_full);
  b.check("D06: same gives P = H only for odd R (33 = H+1 for R = 2 and 4)", same_odd_only);
}

std::vector<double> random_integers(std::size_t count, std::uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<double> out(count);
  for (auto& v : out) v = std::floor(-3.0 + 7.0 * rng.uniform());  // in [-3, 3]
  return out;
}

// Integer data keep every sum exact, so the different summation orders of Eq. (3) and the
// rotated cross-correlation give identical results.
void eq3_is_flipped_correlation(Block& b) {
  b.line(
      "Eq. (3) is a seven-way loop nest: four independent loops (n, k, p, q), three "
      "accumulation loops (c, r, s), implemented literally with Eq. (2)'s accessor");
  for (const ConvParams& cp :
       {ConvParams{2, 3, 7, 7, 4, 3, 3}, ConvParams{2, 3, 8, 7, 4, 3, 2, 2, 1, 1, 0}}) {
    const Doubles d = random_integers(std::size_t(cp.n) * cp.c * cp.h * cp.w, 31 + cp.u);
    const Doubles f = random_integers(std::size_t(cp.k) * cp.c * cp.r * cp.s, 41 + cp.u);
    const bool equal = cudnn_eq3(cp, d, f) == cross_correlation(cp, d, rotate180(cp, f));
    b.check("Eq. (3) = cross-correlation with F rotated 180 degrees (u=" + std::to_string(cp.u) +
                ", pad_h=" + std::to_string(cp.pad_h) + ", " + std::to_string(cp.r) + "x" +
                std::to_string(cp.s) + " filters)",
            equal);
  }
  const ConvParams cp{2, 3, 7, 7, 4, 3, 3};
  const Doubles d = random_integers(2 * 3 * 49, 51), f = random_integers(4 * 3 * 9, 52);
  Doubles chapter(std::size_t(2) * 4 * 25);
  conv_forward_cpu<double>({2, 3, 7, 7, 4, 3}, d.data(), f.data(), nullptr, chapter.data());
  b.check("the cross-correlation used here is the chapter's (conv_forward_cpu, u=1, pad 0)",
          cross_correlation(cp, d, f) == chapter);
  const ConvParams fig{1, 3, 3, 3, 2, 2, 2};
  const Doubles o = cudnn_eq3(fig, as_doubles(fig16_14::x()), as_doubles(fig16_14::w()));
  check_maps(b, "Eq. (3) on the Fig 16.14 data, unflipped F", o, {15, 18, 15, 24, 17, 23, 23, 25},
             2, 2, 2);
  b.check("it differs from the chapter's printed Y",
          !same_values(o, as_doubles(fig16_14::printed_y())));
}

void cudnn_eq1(Block& b) {
  output_size_sweep(b);
  output_size_modes(b);
  eq3_is_flipped_correlation(b);
  b.line("cudnnGetConvolution2dForwardOutputDim is not compared: this build does not link cuDNN");
}

// ---- cudnn.tab2 ---------------------------------------------------------------------------------

// Table 3 of the paper as printed (TFLOPS per Table-2 layer), and the peaks it quotes.
const Doubles kK40Tflops = {0.99, 1.52, 1.51, 1.38, 1.01};
const Doubles kGtx980Tflops = {1.46, 2.49, 2.42, 2.19, 1.87};
constexpr double kK40Peak = 4.29, kGtx980Peak = 4.95;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

Table table2(const std::vector<CudnnLayer>& layers) {
  Table t{{"layer", "N", "C", "H=W", "K", "R=S", "P=Q", "GFLOP", "D_m (CRS x NPQ)", "D_m GiB",
           "D_m MB/sample", "expansion", "implied K40 ms", "implied GTX980 ms"},
          {}};
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const CudnnLayer& l = layers[i];
    const LayerDerived d = derive(l);
    t.add({std::to_string(i + 1), std::to_string(l.n), std::to_string(l.c), std::to_string(l.h),
           std::to_string(l.k), std::to_string(l.r), std::to_string(d.p), fixed(d.flop / 1e9, 2),
           grouped(d.dm_rows) + " x " + grouped(d.dm_cols), fixed(d.dm_bytes / kGiB, 2),
           fixed(d.dm_bytes_per_sample / 1e6, 1), fixed(d.expansion, 2),
           fixed(d.flop / (kK40Tflops[i] * 1e12) * 1e3, 1),
           fixed(d.flop / (kGtx980Tflops[i] * 1e12) * 1e3, 1)});
  }
  return t;
}

void check_paper_rows(Block& b) {
  Doubles p, gflop, gib, expansion, k40_ms, gtx_ms;
  std::string dm;
  const auto& layers = cudnn_table2_paper();
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const LayerDerived d = derive(layers[i]);
    p.push_back(d.p), gflop.push_back(d.flop / 1e9), gib.push_back(d.dm_bytes / kGiB);
    expansion.push_back(d.expansion);
    k40_ms.push_back(d.flop / (kK40Tflops[i] * 1e12) * 1e3);
    gtx_ms.push_back(d.flop / (kGtx980Tflops[i] * 1e12) * 1e3);
    dm += (dm.empty() ? "" : "; ") + grouped(d.dm_rows) + " x " + grouped(d.dm_cols);
  }
  check_list(b, "P = Q", p, {118, 56, 24, 10, 11}, 0);
  check_list(b, "GFLOP = 2NKCRSPQ / 1e9", gflop, {124.22, 799.07, 195.69, 20.55, 13.70}, 2);
  b.check("D_m = 363 x 1,782,272; 7,776 x 401,408; 10,368 x 73,728; 6,272 x 12,800; 1,152 x 15,488",
          dm == "363 x 1,782,272; 7,776 x 401,408; 10,368 x 73,728; 6,272 x 12,800; 1,152 x 15,488",
          dm);
  check_list(b, "D_m GiB (float32)", gib, {2.41, 11.63, 2.85, 0.30, 0.07}, 2);
  check_list(b, "expansion R*S*P*Q/(H*W)", expansion, {102.83, 62.02, 45.56, 19.14, 6.44}, 2);
  check_list(b, "implied K40 ms (GFLOP / Table 3 TFLOPS)", k40_ms,
             {125.5, 525.7, 129.6, 14.9, 13.6}, 1);
  check_list(b, "implied GTX980 ms", gtx_ms, {85.1, 320.9, 80.9, 9.4, 7.3}, 1);
  const double per_sample_mb = derive(layers[1]).dm_bytes_per_sample / 1e6;
  b.line("layer 2's D_m per sample: " + fixed(per_sample_mb, 1) +
         " MB (the \"prohibitively large "
         "temporary allocation\" for a whole batch: 0.07-11.6 GiB)");
  b.check("layer 2's D_m is 97.5 MB per sample", agrees(per_sample_mb, 97.5, 1));
}

void check_benchmark_rows(Block& b) {
  const auto& layers = cudnn_table2_convnet_benchmarks();
  const LayerDerived l2 = derive(layers[1]), l5 = derive(layers[4]);
  b.line(
      "D04: the cited convnet-benchmarks use C = 64 (layer 2) and C = 384 (layer 5) [X]: layer 2 " +
      fixed(l2.flop / 1e9, 2) + " GFLOP, D_m " + fixed(l2.dm_bytes / kGiB, 2) + " GiB; layer 5 " +
      fixed(l5.flop / 1e9, 2) + " GFLOP, D_m " + grouped(l5.dm_rows) + " x " + grouped(l5.dm_cols));
  b.check(
      "with those C: 532.71 GFLOP and 7.75 GiB (layer 2), 41.11 GFLOP and 3,456 x 15,488 (layer 5)",
      agrees(l2.flop / 1e9, 532.71, 2) && agrees(l2.dm_bytes / kGiB, 7.75, 2) &&
          agrees(l5.flop / 1e9, 41.11, 2) && l5.dm_rows == 3456 && l5.dm_cols == 15488);
}

void cudnn_tab2(Block& b) {
  b.line(
      "Table 2 as printed in the paper (u = v = 1, no padding); both rows are shown, the paper's "
      "C first and the cited benchmark's C second");
  b.table("table2_paper", table2(cudnn_table2_paper()));
  check_paper_rows(b);
  b.table("table2_convnet_benchmarks", table2(cudnn_table2_convnet_benchmarks()));
  check_benchmark_rows(b);
}

// ---- cudnn.printed ------------------------------------------------------------------------------

// A printed whole percentage is consistent with the printed TFLOPS when some throughput that
// rounds to the printed TFLOPS (2 decimals, so +-0.005) gives a percentage rounding to it.
bool percent_consistent(double tflops, double peak, double printed_percent) {
  const double lo = (tflops - 0.005) / peak * 100, hi = (tflops + 0.005) / peak * 100;
  return printed_percent + 0.5 >= lo && printed_percent - 0.5 <= hi;
}

void table3_checks(Block& b) {
  const Doubles k40_printed = {23, 35, 35, 32, 24}, gtx_printed = {30, 51, 49, 45, 38};
  Doubles k40, gtx;
  std::string inconsistent;
  Table t{{"layer", "K40 TFLOPS", "K40 % printed", "K40 % computed", "GTX980 TFLOPS",
           "GTX980 % printed", "GTX980 % computed"},
          {}};
  for (std::size_t i = 0; i < 5; ++i) {
    k40.push_back(kK40Tflops[i] / kK40Peak * 100),
        gtx.push_back(kGtx980Tflops[i] / kGtx980Peak * 100);
    t.add({std::to_string(i + 1), fixed(kK40Tflops[i], 2), fixed(k40_printed[i], 0),
           fixed(k40[i], 1), fixed(kGtx980Tflops[i], 2), fixed(gtx_printed[i], 0),
           fixed(gtx[i], 1)});
    if (!percent_consistent(kK40Tflops[i], kK40Peak, k40_printed[i]))
      inconsistent += " K40-L" + std::to_string(i + 1);
    if (!percent_consistent(kGtx980Tflops[i], kGtx980Peak, gtx_printed[i]))
      inconsistent += " GTX980-L" + std::to_string(i + 1);
  }
  b.table("table3", t);
  check_list(b, "K40 % of 4.29 TFLOPS", k40, {23.1, 35.4, 35.2, 32.2, 23.5}, 1);
  check_list(b, "GTX980 % of 4.95 TFLOPS", gtx, {29.5, 50.3, 48.9, 44.2, 37.8}, 1);
  b.line("printed percentages no TFLOPS within the printed rounding can give:" + inconsistent);
  b.check("D03: exactly GTX980 layers 2 and 4 are inconsistent (printed 51 and 45)",
          inconsistent == " GTX980-L2 GTX980-L4", inconsistent);
  const auto range = [](const Doubles& v) {
    return fixed(*std::min_element(v.begin(), v.end()), 0) + "-" +
           fixed(*std::max_element(v.begin(), v.end()), 0);
  };
  b.check("the text's 23-35 % and 30-51 % are the printed columns' ranges",
          range(k40_printed) == "23-35" && range(gtx_printed) == "30-51");
}

void cudnn_printed(Block& b) {
  b.line("Table 3 (performance portability)");
  table3_checks(b);
  b.line("Table 4 (Caffe integration, 200 iterations)");
  paper_table4(b);  // cudnn_table4.cpp: cudnn.tab4 prints it too, beside the LeNet analogue
}

// ---- zf.printed ---------------------------------------------------------------------------------

// The report's Tables 1 and 3 (§4.2), rows = layers 1-5, columns = serial, naive, input in shared,
// input + filter in shared, advanced; then the printed totals.
const std::vector<Doubles> kZfTable1 = {{41473.43, 18.30, 17.23, 12.20, 6.98},
                                        {9043.57, 27.23, 29.64, 24.30, 8.69},
                                        {3307.84, 15.19, 14.75, 17.24, 8.35},
                                        {3715.06, 19.89, 18.91, 23.08, 11.85},
                                        {2495.45, 13.24, 13.43, 13.66, 9.32}};
const Doubles kZfTable1Total = {60035.35, 93.85, 93.96, 90.48, 45.19};
const std::vector<Doubles> kZfTable3 = {{41473.43, 12.05, 11.59, 6.76, 1.74},
                                        {9043.57, 23.30, 25.95, 20.64, 5.09},
                                        {3307.84, 12.15, 11.82, 14.30, 5.43},
                                        {3715.06, 15.91, 15.01, 19.20, 7.89},
                                        {2495.45, 9.73, 10.09, 10.35, 6.04}};
const Doubles kZfTable3Total = {60035.35, 73.14, 74.46, 71.25, 26.19};
// Tables 5 and 6 (FC 1-3: serial, naive, opt1, opt2, opt3), 8 and 9 (softmax: serial, naive,
// shared).
const std::vector<Doubles> kZfTable5 = {{2875.13, 28.93, 20.64, 16.88, 16.72},
                                        {1202.82, 20.23, 13.69, 7.61, 7.49},
                                        {48.36, 0.78, 0.64, 0.53, 0.52}};
const std::vector<Doubles> kZfTable6 = {{2875.13, 220.67, 146.35, 119.72, 110.58},
                                        {1202.82, 146.22, 96.19, 87.93, 62.33},
                                        {48.36, 5.83, 4.32, 4.05, 3.91}};
const Doubles kZfTable8 = {7.05, 0.96, 0.36}, kZfTable9 = {7.05, 2.70, 2.28};

double column_sum(const std::vector<Doubles>& table, std::size_t column) {
  double sum = 0;
  for (const Doubles& row : table) sum += row[column];
  return sum;
}

void zf_column_sums(Block& b) {
  bool all = true;
  for (std::size_t j = 0; j < 5; ++j)
    all &= agrees(column_sum(kZfTable1, j), kZfTable1Total[j], 2) &&
           agrees(column_sum(kZfTable3, j), kZfTable3Total[j], 2);
  b.check("Tables 1 and 3: every column sums to its printed Total", all);
  Doubles overhead;
  for (std::size_t i = 0; i < 5; ++i)
    for (std::size_t j = 1; j < 5; ++j) overhead.push_back(kZfTable1[i][j] - kZfTable3[i][j]);
  const double lo = *std::min_element(overhead.begin(), overhead.end());
  const double hi = *std::max_element(overhead.begin(), overhead.end());
  b.line("copy overhead (Table 1 - Table 3) per layer and GPU method: " + fixed(lo, 2) + " to " +
         fixed(hi, 2) + " ms");
  b.check("copy overhead is 2.9-6.3 ms per layer", agrees(lo, 2.9, 1) && agrees(hi, 6.3, 1));
}

// Ratio definitions: total_serial / total_method and total_naive / total_method.
void zf_ratio_tables(Block& b) {
  const auto ratios = [](const Doubles& total, std::size_t base, std::size_t first) {
    Doubles r;
    for (std::size_t j = first; j < 5; ++j) r.push_back(total[base] / total[j]);
    return r;
  };
  struct Printed {
    std::string name;
    Doubles computed, printed;
  };
  const std::vector<Printed> tables = {
      {"Table 2 vs serial", ratios(kZfTable1Total, 0, 1), {639.70, 638.94, 663.52, 1328.51}},
      {"Table 2 vs naive", ratios(kZfTable1Total, 1, 2), {1.00, 1.04, 2.08}},
      {"Table 4 vs serial", ratios(kZfTable3Total, 0, 1), {820.82, 806.28, 842.60, 2292.30}},
      {"Table 4 vs naive", ratios(kZfTable3Total, 1, 2), {0.98, 1.02, 2.79}}};
  bool within = true;
  for (const Printed& t : tables) {
    b.line(t.name + ": printed " + list_text(t.printed, 2) + "; ratio of the column totals " +
           list_text(t.computed, 3));
    for (std::size_t i = 0; i < t.printed.size(); ++i)
      within &= std::fabs(t.computed[i] - t.printed[i]) <= 0.01;
  }
  // Rounded or truncated to 2 decimals, a ratio lands within 0.01 of the exact one.
  b.check("Tables 2 and 4 are ratios of the column totals (every printed value within 0.01)",
          within);
  b.check("Table 4's \"1.02\" is 73.14/71.25 = 1.03", fixed(tables[3].computed[1], 2) == "1.03");
  Doubles mean(4, 0.0);
  for (std::size_t j = 1; j < 5; ++j)
    for (const Doubles& row : kZfTable1) mean[j - 1] += row[0] / row[j] / 5;
  b.line("the other definition, the mean of the per-layer ratios, gives " + list_text(mean, 2) +
         " for Table 2 vs serial");
  b.check("the mean of the per-layer ratios does not reproduce Table 2 (off by more than 1 %)",
          std::fabs(mean[3] / tables[0].printed[3] - 1) > 0.01);
  b.check(
      "Z01: Table 4's values are the kernel-only ratios (Table 3), not Table 1's, so its caption "
      "(\"memory copy time ... together\", copied from Table 2) is wrong",
      agrees(tables[2].computed[0], 820.82, 1) && !agrees(tables[0].computed[0], 820.82, 1));
}

void zf_table7(Block& b) {
  Doubles mean, sums;
  for (std::size_t j = 1; j < 5; ++j) {
    double m = 0;
    for (const Doubles& row : kZfTable6) m += row[0] / row[j] / 3;
    mean.push_back(m);
    sums.push_back(column_sum(kZfTable6, 0) / column_sum(kZfTable6, j));
  }
  b.line("Table 7 printed vs serial 9.18, 9.30, 11.87, 12.88; vs naive /, 1.01, 1.40, 1.29");
  check_list(b, "FC with copies, mean of per-layer serial ratios", mean,
             {9.85, 14.45, 16.55, 19.22}, 2);
  check_list(b, "FC with copies, ratio of the sums", sums, {11.07, 16.72, 19.49, 23.34}, 2);
  const Doubles printed_row1 = {9.18, 9.30, 11.87, 12.88};
  b.check("Z02: Table 7's row 1 is neither definition (not derivable from Tables 5/6)",
          !all_agree(mean, printed_row1, 2) && !all_agree(sums, printed_row1, 2));
  Doubles row2;
  for (std::size_t j = 1; j < 4; ++j) row2.push_back(printed_row1[j] / printed_row1[0]);
  check_list(b, "Table 7 row 2 from its own row 1 (row 1 / 9.18)", row2, {1.01, 1.29, 1.40}, 2);
  b.check("Z02: the printed row 2 has 1.29 and 1.40 swapped (printed 1.40, 1.29)",
          agrees(row2[1], 1.29, 2) && agrees(row2[2], 1.40, 2) && !agrees(row2[1], 1.40, 2));
}

void zf_table10(Block& b) {
  const Doubles copies = {kZfTable9[0] / kZfTable9[1], kZfTable9[0] / kZfTable9[2],
                          kZfTable9[1] / kZfTable9[2]};
  const Doubles kernel = {kZfTable8[0] / kZfTable8[1], kZfTable8[0] / kZfTable8[2],
                          kZfTable8[1] / kZfTable8[2]};
  b.line("Table 10 printed: vs serial 2.10, 3.68; vs naive 1.75");
  check_list(b, "softmax with copies (serial/naive, serial/shared, naive/shared)", copies,
             {2.61, 3.09, 1.18}, 2);
  check_list(b, "softmax kernel only", kernel, {7.34, 19.58, 2.67}, 2);
  const Doubles printed = {2.10, 3.68, 1.75};
  b.check("Z03: Table 10 cannot be derived from Tables 8/9 (neither definition matches)",
          !all_agree(copies, printed, 2) && !all_agree(kernel, printed, 2));
  b.line(
      "Z07: Table 10's caption mentions the \"advanced block setting method\" of the "
      "convolution tables (text only)");
}

// Table 11 (whole network): every combination of conv, FC and softmax times, each with or
// without copies, for the naive and the best method.
void zf_table11(Block& b) {
  const double serial = kZfTable1Total[0] + column_sum(kZfTable5, 0) + kZfTable8[0];
  const auto range = [&](std::size_t conv, std::size_t fc, std::size_t soft) {
    double lo = 1e300, hi = 0;
    for (int mask = 0; mask < 8; ++mask) {
      const double t = (mask & 1 ? kZfTable1Total : kZfTable3Total)[conv] +
                       column_sum(mask & 2 ? kZfTable6 : kZfTable5, fc) +
                       (mask & 4 ? kZfTable9 : kZfTable8)[soft];
      lo = std::min(lo, serial / t), hi = std::max(hi, serial / t);
    }
    return std::make_pair(lo, hi);
  };
  const auto naive = range(1, 1, 1), best = range(4, 4, 2);
  b.line("serial total (conv + FC + softmax) " + fixed(serial, 2) +
         " ms; serial/naive over the 8 "
         "combinations " +
         fixed(naive.first, 1) + "-" + fixed(naive.second, 1) + ", serial/best " +
         fixed(best.first, 1) + "-" + fixed(best.second, 1) + "; printed 620.93 and 1287.47");
  b.check("serial total 64,168.71 ms", agrees(serial, 64168.71, 2));
  b.check("Z04: ranges 136.7-517.3 and 286.1-1251.3 never reach the printed 620.93 / 1287.47",
          agrees(naive.first, 136.7, 1) && agrees(naive.second, 517.3, 1) &&
              agrees(best.first, 286.1, 1) && agrees(best.second, 1251.3, 1) &&
              naive.second < 620.93 && best.second < 1287.47);
  const double ratio = 1287.47 / 620.93;
  // Arithmetic on the printed numbers only (nothing computed here could make them fail): lines.
  b.line("only 1287.47 / 620.93 = " + fixed(ratio, 4) + " (the abstract's 107.35 %) is consistent");
  b.line("Z06: 1287.47 rounds to " + std::to_string(std::lround(1287.47)) +
         " (abstract), not the 1286 of ZF:422/434");
  b.line(
      "Z05: \"the z dimension of a block is always 0\" (ZF:141): a block dimension is at least 1 "
      "(text only, nothing to compute)");
}

// The serial (Python) baseline tracks output points, not MACs (§4.3; shapes §4.1 [X]).
void zf_serial_baseline(Block& b) {
  const double points1 = 96.0 * 110 * 110, points2 = 256.0 * 26 * 26;
  const double macs1 = points1 * 3 * 7 * 7, macs2 = points2 * 96 * 5 * 5;
  const double faster = kZfTable1[0][0] / kZfTable1[1][0];
  b.line("layer 1: " + fixed(points1 / 1e6, 2) + " M output points, " + fixed(macs1 / 1e6, 1) +
         " M MACs; layer 2: " + fixed(points2 / 1e6, 2) + " M points, " + fixed(macs2 / 1e6, 1) +
         " M MACs, yet serial layer 2 is " + fixed(faster, 1) + "x faster");
  b.check("layer 2 has more MACs (415.3 M vs 170.8 M) but runs 4.6x faster serially",
          agrees(macs1 / 1e6, 170.8, 1) && agrees(macs2 / 1e6, 415.3, 1) && agrees(faster, 4.6, 1));
}

void zf_printed(Block& b) {
  zf_column_sums(b);
  zf_ratio_tables(b);
  zf_table7(b);
  zf_table10(b);
  zf_table11(b);
  zf_serial_baseline(b);
}

// ---- cutlass.policy -----------------------------------------------------------------------------

void cutlass_policy_derived(Block& b) {
  const int block_y = 128, block_x = 32, thread_y = 8, thread_x = 4, block_k = 8;  // CUT:165-173
  const int threads = block_y * block_x / (thread_y * thread_x);
  const int stage_floats = block_y * block_k + block_k * block_x;
  const int stage_bytes = stage_floats * int(sizeof(float));
  b.line(
      "policy <BlockItemsY 128, BlockItemsX 32, ThreadItemsY 8, ThreadItemsX 4, BlockItemsK 8, "
      "double-buffered>: " +
      std::to_string(threads) + " threads (" + std::to_string(threads / 32) + " warps), " +
      std::to_string(thread_y * thread_x) +
      " accumulators per thread; shared "
      "memory " +
      grouped(stage_bytes) + " B per stage, " + grouped(2 * stage_bytes) + " B double-buffered; " +
      grouped(stage_floats) + " floats per main-loop iteration (" +
      std::to_string(stage_floats / threads) + " per thread); per k-step " +
      std::to_string(thread_y + thread_x) + " shared loads for " +
      std::to_string(thread_y * thread_x) + " FMAs");
  b.check("128 threads (4 warps), 32 accumulators per thread",
          threads == 128 && threads / 32 == 4 && thread_y * thread_x == 32);
  b.check("5,120 B shared memory per stage, 10,240 B double-buffered",
          stage_bytes == 5120 && 2 * stage_bytes == 10240);
  b.check("1,280 floats per main-loop iteration, 10 per thread",
          stage_floats == 1280 && stage_floats / threads == 10);
  b.check("12 shared loads per 32 FMAs per k-step", thread_y + thread_x == 12);
  const int large_tile = 256 * 8 * 8;  // 8 warps of 32 threads, 8x8 thread tiles
  b.line("the 8-warp SGEMM block with 8x8 thread tiles covers " + grouped(large_tile) +
         " outputs = 128 x 128 (inferred, not stated in the blog)");
  b.check("8 warps x 8x8 thread tiles = a 128x128 block tile", large_tile == 128 * 128);
  const double gflop = 2.0 * 10240 * 4096 * 4096 / 1e9;
  b.line("the blog's GEMM, M = 10240, N = K = 4096: " + fixed(gflop, 1) + " GFLOP");
  b.check("343.6 GFLOP per GEMM", agrees(gflop, 343.6, 1));
}

// §5.4: the LeNet GEMMs in the column-major form of §1.15 (m = H_out*W_out, n = M, k = C*K*K).
void cutlass_lenet_shapes(Block& b) {
  struct Gemm {
    std::string layer;
    int m, n, k;
  };
  std::vector<Gemm> gemms;
  for (const LayerSpec& l : lenet5_topology(NetConfig{}))
    if (l.kind == LayerKind::convolution)
      gemms.push_back({l.name, l.out.h * l.out.w, l.out.c, l.in.c * l.kernel * l.kernel});
  Table t{{"layer", "m x n x k per sample", "128x32 tiles", "tile use", "k % 8", "m for N=256"},
          {}};
  std::string shapes;
  bool ragged = true;
  for (const Gemm& g : gemms) {
    const long long tiles = (long long)((g.m + 127) / 128) * ((g.n + 31) / 32);
    const double use = double(g.m) * g.n / (double(tiles) * 128 * 32);
    t.add({g.layer, std::to_string(g.m) + "x" + std::to_string(g.n) + "x" + std::to_string(g.k),
           grouped(tiles), fixed(100 * use, 1) + " %", std::to_string(g.k % 8),
           grouped(256LL * g.m)});
    shapes += (shapes.empty() ? "" : " ") + std::to_string(g.m) + "x" + std::to_string(g.n) + "x" +
              std::to_string(g.k);
    if (g.layer != "c5") ragged &= g.k % 8 != 0 && g.n < 32;
  }
  b.table("lenet_gemms", t);
  b.check("per-sample GEMMs 784x6x25, 100x16x150, 1x120x400",
          shapes == "784x6x25 100x16x150 1x120x400", shapes);
  b.check("C1 and C3 need ragged handling: k not a multiple of 8, n below 32", ragged);
  b.line("batched C1 with N = 256 gives m = " + grouped(256LL * gemms[0].m));
}

void cutlass_policy(Block& b) {
  cutlass_policy_derived(b);
  cutlass_lenet_shapes(b);
}

}  // namespace

std::vector<Target> paper_cpu_targets() {
  return {
      {"cudnn.eq1", "cuDNN output-size formula (1) and Eq. (3), a true convolution", "§3.1, §3.2",
       false, cudnn_eq1},
      {"cudnn.tab2", "cuDNN Table 2 layers with derived FLOPs, D_m sizes, expansion", "§3.4", false,
       cudnn_tab2},
      {"cudnn.printed", "consistency of the cuDNN paper's printed Tables 3 and 4 (D01-D05)",
       "§3.5, §3.7", false, cudnn_printed},
      {"zf.printed", "consistency of the ZF-Net report's printed tables (Z01-Z07)", "§4.3", false,
       zf_printed},
      {"cutlass.policy", "CUTLASS example policy: derived quantities; LeNet GEMM shapes",
       "§5.2, §5.4", false, cutlass_policy},
  };
}

}  // namespace lenet5::figures
