// GPU targets of `lenet5 figures`: the printed Figs 16.12 and 16.13 run as printed
// (cuda/figures/as_printed.cuh) next to the corrected versions, with the bug signatures of
// textbook-figures.md §2.2 checked (fig16.12, fig16.13); gpu_targets() joins every GPU part.
//
// Every output buffer is filled with NaN before a launch: "unwritten" counts what is still NaN,
// "wrong" what was written with another value than the reference's.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "cuda/figures/as_printed.cuh"
#include "cuda/kernels/conv/registry.hpp"
#include "cuda/runtime/check.hpp"
#include "figures/figure_util.hpp"
#include "figures/gpu_common.hpp"

namespace lenet5::figures {

std::vector<Target> gpu_targets() {
  std::vector<Target> all;
  for (auto part : {gpu_errata_targets(), gpu_unroll_targets(), layout_targets(),
                    gpu_fft_targets(), timing_targets(), cudnn_targets(), phase_timing_targets()})
    for (auto& target : part) all.push_back(std::move(target));
  return all;
}

namespace {

namespace ap = cuda::as_printed;

// The §2.2 cases: LeNet's layers at N = 2 and the two cases with whole 16x16 tiles.
struct Case {
  const char* name;
  ConvShape s;
};
const std::vector<Case>& signature_cases() {
  static const std::vector<Case> cases{
      {"LeNet C1", ConvShape{2, 1, 32, 32, 6, 5}},   {"LeNet C3", ConvShape{2, 6, 14, 14, 16, 5}},
      {"LeNet C5", ConvShape{2, 16, 5, 5, 120, 5}},  {"one tile", ConvShape{1, 3, 20, 20, 2, 5}},
      {"2x2 tiles", ConvShape{1, 3, 36, 36, 2, 5}},
  };
  return cases;
}

std::string status_text(const ap::Launch& launch) {
  return launch.launched() ? "ok" : cudaGetErrorName(launch.status);
}

std::string dim3_text(const dim3& d) {
  return "(" + std::to_string(d.x) + ", " + std::to_string(d.y) + ", " + std::to_string(d.z) + ")";
}

// Integer test data and the exact CPU result (integers: every float sum is exact).
struct IntegerCase {
  std::vector<float> x, weight, y_ref;
};
IntegerCase integer_case(const ConvShape& s, std::uint64_t seed) {
  IntegerCase c{random_integers(x_count(s), -3, 3, seed),
                random_integers(weight_count(s), -3, 3, seed + 1), std::vector<float>(y_count(s))};
  conv_forward_cpu(s, c.x.data(), c.weight.data(), static_cast<const float*>(nullptr),
                   c.y_ref.data());
  return c;
}

// ==== fig16.12 ====================================================================================

struct LayerLaunch {
  const char* name;
  ConvShape s;  // N is symbolic in the table; 1 here
  unsigned printed_z, ceil_z;
  int active;  // threads per map that have an output
};

void fig16_12_configuration(Block& b) {
  const std::vector<LayerLaunch> layers{{"C1", ConvShape{1, 1, 32, 32, 6, 5}, 1, 4, 784},
                                        {"C3", ConvShape{1, 6, 14, 14, 16, 5}, 0, 1, 100},
                                        {"C5", ConvShape{1, 16, 5, 5, 120, 5}, 0, 1, 1}};
  Table t{{"layer", "H_out", "printed W_out/16 -> Z", "ceil gridDim", "active threads / map"}, {}};
  for (const LayerLaunch& l : layers) {
    const dim3 printed = ap::fig16_12_grid(l.s, ap::GridRule::printed);
    const dim3 ceil = ap::fig16_12_grid(l.s, ap::GridRule::ceil);
    const int threads = int(ceil.z) * ap::kTileWidth * ap::kTileWidth;
    const int active = l.s.h_out() * l.s.w_out();
    t.add({l.name, std::to_string(l.s.h_out()),
           std::to_string(l.s.w_out() / ap::kTileWidth) + " -> Z=" + std::to_string(printed.z) +
               (printed.z == 0 ? " (launch fails)" : ""),
           "(N, " + std::to_string(ceil.y) + ", " + std::to_string(ceil.z) + ")",
           grouped(active) + " / " + grouped(threads) + " = " +
               fixed(100.0 * active / threads, 1) + " %"});
    b.check(std::string(l.name) + " grid: printed Z = " + std::to_string(l.printed_z) +
                ", ceil Z = " + std::to_string(l.ceil_z) + ", " + std::to_string(l.active) +
                " active threads per map (§1.11)",
            printed.z == l.printed_z && ceil.z == l.ceil_z && active == l.active);
  }
  b.table("launch_configuration", t);
}

// The printed kernel on one case under one grid rule: poisoned output, launch, comparison.
struct PrintedRun {
  ap::Launch launch;
  Mismatch mismatch;
  std::vector<float> y;
};
PrintedRun run_fig16_12(const ConvShape& s, const IntegerCase& data, ap::GridRule rule,
                        bool printed_index) {
  const Buffer<float> x = upload(data.x), weight = upload(data.weight);
  Buffer<float> y = poisoned(y_count(s));
  PrintedRun run;
  run.launch = ap::conv_forward_fig16_12(s, rule, printed_index, x.data(), weight.data(), y.data());
  run.y = download(y);
  run.mismatch = compare_exact(run.y, data.y_ref);
  return run;
}

Mismatch run_version(ConvAlgo algo, const ConvShape& s, const IntegerCase& data, std::string& why) {
  const auto version = try_make_version(algo, s, why);
  if (!version) return Mismatch{};
  const Buffer<float> x = upload(data.x), weight = upload(data.weight);
  Buffer<float> y = poisoned(y_count(s));
  version->forward(s, x.data(), weight.data(), nullptr, y.data(), cudaStreamPerThread);
  return compare_exact(download(y), data.y_ref);
}

// §2.2's deterministic columns for Fig 16.12.
struct Fig16_12Expect {
  long long printed_unwritten;
  long long ceil_unwritten, ceil_out_of_map;
};
const Fig16_12Expect kFig16_12Expect[] = {
    {6336, 5940, 0}, {3200, 0, 4992}, {240, 0, 61200}, {0, 0, 0}, {1470, 1470, 0}};

// 2x2 tiles with E10: blocks (0..1, 0..1) all write inside the top-left 17x17 corner of a map.
bool corner_only(const std::vector<float>& y, const ConvShape& s, int map) {
  const int H_out = s.h_out(), W_out = s.w_out();
  int unwritten = 0;
  bool shape_ok = true;
  for (int h = 0; h < H_out; ++h)
    for (int w = 0; w < W_out; ++w) {
      const bool nan = std::isnan(y[(std::size_t(map) * H_out + h) * W_out + w]);
      unwritten += nan;
      shape_ok = shape_ok && nan == (h > 16 || w > 16);
    }
  return shape_ok && unwritten == 735;
}

void fig16_12_signatures(Block& b) {
  Table t{{"case", "outputs", "printed grid: launch", "unwritten", "ceil grid: unwritten",
           "out-of-map threads", "written but wrong", "corrected index", "version 1"},
          {}};
  for (std::size_t i = 0; i < signature_cases().size(); ++i) {
    const Case& c = signature_cases()[i];
    const Fig16_12Expect& e = kFig16_12Expect[i];
    const IntegerCase data = integer_case(c.s, 1200 + i);
    const PrintedRun printed = run_fig16_12(c.s, data, ap::GridRule::printed, true);
    const PrintedRun ceil = run_fig16_12(c.s, data, ap::GridRule::ceil, true);
    const PrintedRun fixed_index = run_fig16_12(c.s, data, ap::GridRule::ceil, false);
    std::string why;
    const Mismatch v1 = run_version(ConvAlgo::direct, c.s, data, why);
    t.add({c.name, grouped((long long)y_count(c.s)), status_text(printed.launch),
           grouped((long long)printed.mismatch.unwritten), grouped((long long)ceil.mismatch.unwritten),
           grouped(ceil.launch.tally.out_of_map_threads),
           grouped((long long)(printed.mismatch.wrong + ceil.mismatch.wrong)),
           fixed_index.mismatch.text(), why.empty() ? v1.text() : why});
    const std::string name = c.name;
    b.check(name + ": printed grid leaves " + grouped(e.printed_unwritten) + " unwritten (§2.2)" +
                (printed.launch.launched() ? "" : ", launch refused: " + std::string(cudaGetErrorName(printed.launch.status))),
            (long long)printed.mismatch.unwritten == e.printed_unwritten &&
                printed.launch.launched() == (ap::fig16_12_grid(c.s, ap::GridRule::printed).z > 0));
    b.check(name + ": ceil grid leaves " + grouped(e.ceil_unwritten) + " unwritten, " +
                grouped(e.ceil_out_of_map) + " out-of-map threads (§2.2)",
            (long long)ceil.mismatch.unwritten == e.ceil_unwritten &&
                ceil.launch.tally.out_of_map_threads == e.ceil_out_of_map);
    b.check(name + ": what E10 writes is correct",
            printed.mismatch.wrong == 0 && ceil.mismatch.wrong == 0);
    b.check(name + ": corrected index and version 1 write every output correctly",
            fixed_index.mismatch.ok() && why.empty() && v1.ok(), why);
    if (c.s.h_out() == 32)
      b.check(name + ": each map has exactly its top-left 17x17 written, 735 of 1,024 unwritten",
              corner_only(ceil.y, c.s, 0) && corner_only(ceil.y, c.s, 1));
  }
  b.table("signatures", t);
}

void fig16_12(Block& b) {
  b.line("Fig 16.12 as printed: tile index not multiplied by TILE_WIDTH (E10), grid W_out/16 (E11),");
  b.line("no bounds guard. Integer data; outputs NaN-poisoned before each launch.");
  fig16_12_configuration(b);
  fig16_12_signatures(b);
  b.line("Out-of-map threads are counted and their stores skipped, as §2.2's host emulation did.");
  b.line("The literal code would store them at linear offsets that alias other outputs (racing with");
  b.line("their owners) or lie past Y: on a GPU its C3/C5 ceil-grid runs would then show wrong,");
  b.line("run-to-run varying values where this count shows none.");
}

// ==== fig16.13 ====================================================================================

void fig16_13_shared_memory(Block& b) {
  const int K = 5, tile = ap::kTileWidth, x_tile = tile + K - 1;
  const int floats = x_tile * x_tile + K * K;
  const int naive_loads = 2 * K * K * tile * tile;  // X and W per output per channel (Fig 16.12)
  const double ratio = double(naive_loads) / floats;
  b.line("TILE_WIDTH 16, K 5: X_tile_width = " + std::to_string(x_tile) + ", shared memory " +
         std::to_string(floats) + " floats = " + grouped(floats * 4) + " bytes");
  b.line("global loads per block per channel: " + std::to_string(floats) + " (tiled) vs " +
         grouped(naive_loads) + " (Fig 16.12 for the same 256 outputs): " + fixed(ratio, 1) +
         "x fewer");
  b.check("425 floats = 1,700 bytes and 30.1x fewer global loads (§1.12)",
          floats == 425 && floats * 4 == 1700 && fixed(ratio, 1) == "30.1");
}

struct Variant {
  const char* name;
  ap::Fig16_13Errata errata;
};
const std::vector<Variant>& fig16_13_variants() {
  static const std::vector<Variant> v{{"printed (E15+E16)", {true, true, true}},
                                      {"E15 only", {true, false, true}},
                                      {"E16 only", {false, true, true}},
                                      {"E15, E16 fixed", {false, false, true}}};
  return v;
}

// Outputs of one map that read at least one misplaced tile element, with distinct (float)
// inputs, 16x16 tiles and K <= 16. E16 computes at global coordinates, which equal the tile's
// own only in the first tile: every output outside it reads misplaced elements. E15 fills every
// slot a thread loads with its own pixel: tile rows (columns) 16.. then hold the pixel 16 rows
// (columns) before, and an output reads them when its row (column) in the tile is >= 17 - K.
long long e15_clear(int extent, int K) {
  long long clear = 0;
  for (int i = 0; i < extent; ++i) clear += (i % ap::kTileWidth) < 17 - K;
  return clear;
}
long long expected_wrong(const ConvShape& s, const ap::Fig16_13Errata& e) {
  const long long H_out = s.h_out(), W_out = s.w_out(), all = H_out * W_out, K = s.k;
  long long per_map = 0;
  if (e.e16 && e.e15)
    per_map = all - std::min(H_out, 17 - K) * std::min(W_out, 17 - K);
  else if (e.e16)
    per_map = all - std::min<long long>(H_out, 16) * std::min<long long>(W_out, 16);
  else if (e.e15)
    per_map = all - e15_clear(s.h_out(), s.k) * e15_clear(s.w_out(), s.k);
  return per_map * s.n * s.m;
}

// §2.2's counts (integer data, so some wrong sums happen to equal the right ones) and its
// out-of-tile reads for E16; per case, per variant (printed, E15 only, E16 only, fixed).
const long long kSpecWrong[5][4] = {
    {7446, 2413, 6169, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}, {220, 220, 0, 0}, {1722, 883, 1507, 0}};
const long long kSpecSharedOut[5] = {210000, 0, 0, 0, 105000};

struct Fig16_13Run {
  ap::Launch launch;
  std::vector<float> y;
};
Fig16_13Run run_fig16_13(const ConvShape& s, const std::vector<float>& x_host,
                         const std::vector<float>& w_host, const ap::Fig16_13Errata& errata) {
  const Buffer<float> x = upload(x_host), weight = upload(w_host);
  Buffer<float> y = poisoned(y_count(s));
  Fig16_13Run run;
  run.launch = ap::conv_forward_fig16_13(s, ap::GridRule::ceil, errata, x.data(), weight.data(),
                                         y.data());
  run.y = download(y);
  return run;
}

// The fixed variant against the CPU reference in double. rel 1e-4: at most C*K*K = 400 terms,
// whose float rounding in any order stays below 400 * 2^-24 = 2.4e-5 of the sum of |terms|.
bool fixed_matches_cpu(const ConvShape& s, const std::vector<float>& x, const std::vector<float>& w,
                       const std::vector<float>& y) {
  const std::vector<double> xd = as_doubles(x), wd = as_doubles(w);
  std::vector<double> ref(y_count(s)), scale(y_count(s));
  conv_forward_cpu(s, xd.data(), wd.data(), static_cast<const double*>(nullptr), ref.data());
  const std::vector<double> xa = absolute(xd), wa = absolute(wd);
  conv_forward_cpu(s, xa.data(), wa.data(), static_cast<const double*>(nullptr), scale.data());
  return compare_close(y, ref, scale, 1e-4).ok();
}

void fig16_13_case(Block& b, Table& t, std::size_t index) {
  const Case& c = signature_cases()[index];
  const std::vector<float> x = random_floats(x_count(c.s), 1300 + index);
  const std::vector<float> w = random_floats(weight_count(c.s), 1400 + index);
  const IntegerCase ints = integer_case(c.s, 1500 + index);
  const Fig16_13Run fixed_run = run_fig16_13(c.s, x, w, fig16_13_variants().back().errata);
  b.check(std::string(c.name) + ": all-fixed as-printed kernel matches the CPU reference",
          fixed_matches_cpu(c.s, x, w, fixed_run.y));
  for (std::size_t v = 0; v < fig16_13_variants().size(); ++v) {
    const Variant& variant = fig16_13_variants()[v];
    const Fig16_13Run run = run_fig16_13(c.s, x, w, variant.errata);
    // Same kernel, same summation order: right outputs are bit-identical to the fixed variant's.
    const Mismatch m = compare_exact(run.y, fixed_run.y);
    const Mismatch mi = compare_exact(run_fig16_13(c.s, ints.x, ints.weight, variant.errata).y,
                                      ints.y_ref);
    const long long expected = expected_wrong(c.s, variant.errata);
    const long long shared_out = variant.errata.e16 ? kSpecSharedOut[index] : 0;
    t.add({c.name, variant.name, grouped((long long)m.wrong), grouped(expected),
           grouped((long long)mi.wrong), grouped(kSpecWrong[index][v]),
           grouped((long long)m.unwritten), grouped(run.launch.tally.shared_out_of_tile),
           grouped(run.launch.tally.shared_past_allocation), grouped(run.launch.tally.x_reads_outside)});
    const std::string what = std::string(c.name) + ", " + variant.name;
    b.check(what + ": " + grouped(expected) + " wrong (float data), " + grouped(shared_out) +
                " out-of-tile shared reads, none unwritten",
            (long long)m.wrong == expected && m.unwritten == 0 &&
                run.launch.tally.shared_out_of_tile == shared_out);
    b.check(what + ": integer data (" + grouped((long long)mi.wrong) + ") and §2.2 (" +
                grouped(kSpecWrong[index][v]) + ") within that bound",
            (long long)mi.wrong <= expected && mi.unwritten == 0 && kSpecWrong[index][v] <= expected);
  }
}

void fig16_13_variants_table(Block& b) {
  b.line("Fig 16.13 as printed and with E15 or E16 alone (rounded-up grid, E18 kept: it changes");
  b.line("no value). 'wrong' with float data counts outputs whose sum reads a misplaced tile");
  b.line("element; with integer data some such sums equal the right one by chance, which is why");
  b.line("§2.2's counts (its own random integers) lie a little below.");
  Table t{{"case", "variant", "wrong (float)", "expected", "wrong (integer)", "§2.2 (integer)",
           "unwritten", "shared out-of-tile reads", "past allocation (read as 0)",
           "X reads outside (read as 0)"},
          {}};
  for (std::size_t i = 0; i < signature_cases().size(); ++i) fig16_13_case(b, t, i);
  b.table("variants", t);
}

void fig16_13_version2(Block& b) {
  for (std::size_t i = 0; i < signature_cases().size(); ++i) {
    const Case& c = signature_cases()[i];
    std::string why;
    const Mismatch m = run_version(ConvAlgo::tiled, c.s, integer_case(c.s, 1600 + i), why);
    b.check(std::string(c.name) + ": version 2 (tiled, Fig 16.13 corrected) exact: " +
                (why.empty() ? m.text() : "cannot run"),
            why.empty() && m.ok(), why);
  }
}

// E18: the same corrected kernel with threadIdx.x walking down a column (printed) or along a row.
void fig16_13_e18_timing(Block& b) {
  const std::vector<Case> cases{{"LeNet C1, N=128", ConvShape{128, 1, 32, 32, 6, 5}},
                                {"LeNet C3, N=128", ConvShape{128, 6, 14, 14, 16, 5}},
                                {"N=32, C=16, 68x68, M=16", ConvShape{32, 16, 68, 68, 16, 5}}};
  Table t{{"case", "transposed (E18) us", "corrected us", "transposed / corrected"}, {}};
  for (const Case& c : cases) {
    const std::vector<float> xh = random_floats(x_count(c.s), 1700), wh = random_floats(weight_count(c.s), 1701);
    const Buffer<float> x = upload(xh), weight = upload(wh);
    Buffer<float> y_t = poisoned(y_count(c.s)), y_c = poisoned(y_count(c.s));
    const ap::Fig16_13Errata transposed{false, false, true}, corrected{false, false, false};
    auto launch = [&](const ap::Fig16_13Errata& e, Buffer<float>& y) {
      ap::conv_forward_fig16_13_async(c.s, e, x.data(), weight.data(), y.data(), cudaStreamPerThread);
    };
    launch(transposed, y_t);
    launch(corrected, y_c);
    const std::vector<float> out_t = download(y_t), out_c = download(y_c);
    b.check(std::string(c.name) + ": both mappings give the same outputs, matching the CPU",
            compare_exact(out_t, out_c).ok() && fixed_matches_cpu(c.s, xh, wh, out_c));
    const double us_t = gpu_median_us(20, [&] { launch(transposed, y_t); });
    const double us_c = gpu_median_us(20, [&] { launch(corrected, y_c); });
    t.add({c.name, fixed(us_t, 1), fixed(us_c, 1), fixed(us_t / us_c, 2)});
  }
  b.table("e18_timing", t);
  b.line("E18 timing: kernel only, CUDA events, median of 20 after a warm-up; " + gpu_info().text());
}

void fig16_13(Block& b) {
  fig16_13_shared_memory(b);
  fig16_13_variants_table(b);
  fig16_13_version2(b);
  fig16_13_e18_timing(b);
}

}  // namespace

std::vector<Target> gpu_errata_targets() {
  return {
      {"fig16.12", "basic forward kernel as printed (E10, E11) vs corrected, on the GPU", "§1.11, §2.2",
       true, fig16_12},
      {"fig16.13", "shared-memory tiled kernel as printed (E15, E16, E18) vs corrected, on the GPU",
       "§1.12, §2.2", true, fig16_13},
  };
}

}  // namespace lenet5::figures
