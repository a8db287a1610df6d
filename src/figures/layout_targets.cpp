// Exercise 2 (textbook-figures.md §1.22): tensor layouts NCHW, NHWC and CHWN in the basic
// (Fig 16.12) and unroll (Fig 16.18) kernels of cuda/figures/conv_layouts.cuh, on LeNet's three
// convolution layers at N = 64 (the `ex2` target).
//
// Per layer, layout and kernel: the result (converted back to NCHW) against the CPU reference,
// exactly (integer data); the kernel time (CUDA events, warm-up, median of 20); and the exact
// analytic sector model of layout_math.hpp (32-byte sectors per warp request of the loads and
// stores). DRAM bytes and the measured sectors per request come from Nsight Compute:
// scripts/ncu_layouts.sh profiles this target. For that, the first launch of each kernel runs
// inside the NVTX push/pop ranges "ex2" > "ex2 <layer> <layout> <kernel>" (and Exercise 5's
// unroll kernel inside "ex5" > "ex5 <case> unroll"): ncu --nvtx --nvtx-include "ex2/" profiles
// exactly those launches and --print-nvtx-rename kernel names each row after its range.
#include <nvtx3/nvToolsExt.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "cuda/figures/conv_layouts.cuh"
#include "cuda/kernels/conv/unroll_gemm.cuh"
#include "figures/chapter_math.hpp"
#include "figures/gpu_common.hpp"
#include "figures/layout_math.hpp"

namespace lenet5::figures {
namespace {

using cuda::Layout;

constexpr int kBatch = 64;
constexpr int kRepetitions = 20;

// A push/pop NVTX range for the lifetime of the object (free when no tool is attached).
class NvtxRange {
 public:
  explicit NvtxRange(const std::string& name) { nvtxRangePushA(name.c_str()); }
  ~NvtxRange() { nvtxRangePop(); }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

struct Layer {
  std::string name;
  ConvShape s;
};
std::vector<Layer> layers() {
  return {{"C1", ConvShape{kBatch, 1, 32, 32, 6, 5}},
          {"C3", ConvShape{kBatch, 6, 14, 14, 16, 5}},
          {"C5", ConvShape{kBatch, 16, 5, 5, 120, 5}}};
}

enum class Kernel { direct, unroll };
const char* kernel_name(Kernel k) {
  return k == Kernel::direct ? "direct" : "unroll";
}

// One (layer, layout, kernel): what was measured and modelled.
struct Row {
  std::string layer;
  Layout layout = Layout::nchw;
  Kernel kernel = Kernel::direct;
  std::string range;  // the NVTX range of its profiled launch
  double us = NAN;
  KernelSectors sectors;
  long long dram_read = 0, dram_write = 0;  // the least DRAM traffic: each byte once
};

// The layer's integer data (exact in float32 in any summation order) and the CPU results.
struct LayerData {
  std::vector<float> x, w, y_ref, unrolled_ref;
};
LayerData layer_data(const ConvShape& s, std::uint64_t seed) {
  LayerData d{random_integers(x_count(s), -3, 3, seed),
              random_integers(weight_count(s), -3, 3, seed + 1), std::vector<float>(y_count(s)),
              std::vector<float>(cuda::unrolled_floats(s))};
  conv_forward_cpu(s, d.x.data(), d.w.data(), static_cast<const float*>(nullptr), d.y_ref.data());
  const std::size_t per_x = x_count(s) / s.n, per_u = d.unrolled_ref.size() / s.n;
  for (int n = 0; n < s.n; ++n)
    conv_unroll_cpu(s, d.x.data() + n * per_x, d.unrolled_ref.data() + n * per_u);
  return d;
}

// Models, runs, checks and times one kernel in one layout (a wrong result is not timed).
Row run_one(Block& b, const Layer& layer, const LayerData& data, Layout layout, Kernel kernel) {
  const ConvShape& s = layer.s;
  const cuda::ConvDims d = cuda::dims_of(s);
  Row r;
  r.layer = layer.name, r.layout = layout, r.kernel = kernel;
  r.range = "ex2 " + layer.name + " " + cuda::layout_name(layout) + " " + kernel_name(kernel);
  const bool direct = kernel == Kernel::direct;
  r.sectors = direct ? direct_kernel_sectors(layout, s) : unroll_kernel_sectors(layout, s);
  const long long bytes = sizeof(float);
  r.dram_read = bytes * (long long)(x_count(s) + (direct ? weight_count(s) : 0));
  r.dram_write = bytes * (long long)(direct ? y_count(s) : cuda::unrolled_floats(s));
  const Buffer<float> x = upload(cuda::to_layout(layout, cuda::x_extents(d), data.x));
  const Buffer<float> w = upload(data.w);
  Buffer<float> out = poisoned(direct ? y_count(s) : cuda::unrolled_floats(s));
  auto launch = [&] {
    if (direct)
      cuda::conv_forward_layout(layout, s, x.data(), w.data(), out.data(), cudaStreamPerThread);
    else
      cuda::conv_unroll_layout(layout, s, x.data(), out.data(), cudaStreamPerThread);
  };
  {
    NvtxRange outer("ex2"), inner(r.range);
    launch();
  }
  const std::vector<float> got = download(out);
  const Mismatch m =
      direct ? compare_exact(cuda::from_layout(layout, cuda::y_extents(d), got), data.y_ref)
             : compare_exact(cuda::unrolled_per_sample(layout, s, got), data.unrolled_ref);
  const std::string what = r.range.substr(4);
  if (!b.check(what + (direct ? ": Y (back in NCHW) equals the CPU reference exactly"
                              : ": every sample's unrolled matrix equals conv_unroll_cpu's"),
               m.ok(), m.text()))
    return r;  // not timed: correctness first
  r.us = gpu_median_us(kRepetitions, launch);
  return r;
}

std::string per_request(const AccessCount& a) {
  return fixed(a.sectors_per_request(), 2);
}

Table layer_table(const std::vector<Row>& rows, const std::string& layer) {
  Table t{{"layout", "kernel", "time (us)", "load sectors/req", "X-load sectors/req",
           "lanes/req (X)", "X-load efficiency", "store sectors/req", "lanes/req (store)",
           "load requests", "store requests", "least DRAM read (B)", "least DRAM write (B)"},
          {}};
  for (const Row& r : rows) {
    if (r.layer != layer) continue;
    const KernelSectors& k = r.sectors;
    t.add({cuda::layout_name(r.layout), kernel_name(r.kernel),
           std::isnan(r.us) ? "n/a" : fixed(r.us, 2), per_request(k.loads()),
           per_request(k.x_loads), fixed(k.x_loads.lanes_per_request(), 1),
           fixed(100.0 * k.x_loads.efficiency(), 0) + " %", per_request(k.stores),
           fixed(k.stores.lanes_per_request(), 1), grouped(k.loads().requests),
           grouped(k.stores.requests), grouped(r.dram_read), grouped(r.dram_write)});
  }
  return t;
}

// All rows in one CSV for scripts/ncu_layouts.sh, which joins them with ncu's by NVTX range.
void write_joined_csv(Block& b, const std::vector<Row>& rows) {
  Table t{{"range", "layer", "layout", "kernel", "time_us", "load_sectors_per_request",
           "store_sectors_per_request", "least_dram_read_bytes", "least_dram_write_bytes"},
          {}};
  for (const Row& r : rows)
    t.add({r.range, r.layer, cuda::layout_name(r.layout), kernel_name(r.kernel),
           std::isnan(r.us) ? "" : fixed(r.us, 3),
           fixed(r.sectors.loads().sectors_per_request(), 4),
           fixed(r.sectors.stores.sectors_per_request(), 4), std::to_string(r.dram_read),
           std::to_string(r.dram_write)});
  std::filesystem::create_directories(b.folder());
  const auto path = b.folder() / "analytic.csv";
  std::ofstream file(path);
  file << t.csv();
  if (!file) throw Error("cannot write " + path.string() + ": check the --out folder");
  b.line("every row in one file for scripts/ncu_layouts.sh: " + path.string());
}

const Row& find(const std::vector<Row>& rows, const std::string& layer, Layout layout,
                Kernel kernel) {
  for (const Row& r : rows)
    if (r.layer == layer && r.layout == layout && r.kernel == kernel) return r;
  throw Error("internal: ex2 has no row " + layer);
}

// "direct CHWN 79.23 us" for the layer's fastest layout of a kernel (timings only: no check).
std::string fastest(const std::vector<Row>& rows, const std::string& layer, Kernel kernel) {
  const Row* best = nullptr;
  for (const Row& r : rows)
    if (r.layer == layer && r.kernel == kernel && !std::isnan(r.us) && (!best || r.us < best->us))
      best = &r;
  return std::string(kernel_name(kernel)) + " " +
         (best ? std::string(cuda::layout_name(best->layout)) + " " + fixed(best->us, 2) + " us"
               : "n/a");
}

// ---- checks of the model: properties derived from the layouts, not fitted to the numbers --------

bool all_four(const AccessCount& a) {
  return a.requests > 0 && a.sectors == 4 * a.requests;
}

void check_model(Block& b, const std::vector<Row>& rows) {
  bool chwn = true;
  for (const Row& r : rows)
    if (r.layout == Layout::chwn)
      chwn = chwn && all_four(r.sectors.x_loads) && all_four(r.sectors.stores);
  b.check(
      "CHWN, threads on n (N = 64): every X load and every store of both kernels touches exactly "
      "4 sectors (32 consecutive floats of one 128-B line), on every layer",
      chwn);

  bool c1_same = true;
  for (Kernel k : {Kernel::direct, Kernel::unroll}) {
    const AccessCount a = find(rows, "C1", Layout::nchw, k).sectors.x_loads;
    const AccessCount h = find(rows, "C1", Layout::nhwc, k).sectors.x_loads;
    c1_same = c1_same && a.requests == h.requests && a.sectors == h.sectors;
  }
  b.check("C1 (C = 1): NHWC is NCHW for X, so both kernels' X loads cost the same", c1_same);

  const auto stores = [&](const char* layer, Layout l) {
    return find(rows, layer, l, Kernel::direct).sectors.stores;
  };
  b.check(
      "direct kernel, threads on (h,w): NHWC stores Y with stride M and costs more sectors per "
      "request than NCHW (C1: M = 6, C3: M = 16)",
      stores("C1", Layout::nhwc).sectors_per_request() >
              stores("C1", Layout::nchw).sectors_per_request() &&
          stores("C3", Layout::nhwc).sectors_per_request() >
              stores("C3", Layout::nchw).sectors_per_request());
  const AccessCount c3_store = stores("C3", Layout::nhwc);
  b.check(
      "C3 NHWC direct: stride M = 16 floats = 64 B, so each active lane's store is a sector of its "
      "own",
      c3_store.sectors == c3_store.lanes,
      per_request(c3_store) + " sectors for " + fixed(c3_store.lanes_per_request(), 1) + " lanes");

  std::string ratios;
  bool c3_worse = true;
  for (Kernel k : {Kernel::direct, Kernel::unroll}) {
    const AccessCount a = find(rows, "C3", Layout::nchw, k).sectors.x_loads;
    const AccessCount h = find(rows, "C3", Layout::nhwc, k).sectors.x_loads;
    c3_worse = c3_worse && h.sectors_per_request() > a.sectors_per_request();
    ratios += std::string(ratios.empty() ? "" : ", ") + kernel_name(k) + " " +
              fixed(h.sectors_per_request() / a.sectors_per_request(), 1) + "x";
  }
  b.check(
      "C3 (C = 6): NHWC's X loads, stride C = 24 B along the warp, cost more sectors per request "
      "than NCHW's in both kernels (" +
          ratios + ")",
      c3_worse);

  const Row c5_chwn = find(rows, "C5", Layout::chwn, Kernel::direct);
  bool one_lane = true;
  for (Layout l : {Layout::nchw, Layout::nhwc}) {
    const KernelSectors k = find(rows, "C5", l, Kernel::direct).sectors;
    one_lane = one_lane && k.x_loads.lanes == k.x_loads.requests &&
               k.x_loads.sectors == k.x_loads.requests &&
               k.loads().requests == 32 * c5_chwn.sectors.loads().requests;
  }
  b.check(
      "C5 (1x1 outputs): threads on (h,w) leave one active lane per warp, so every request is one "
      "sector at 1/8 efficiency, and there are 32x the load requests of CHWN's threads on n",
      one_lane);

  const AccessCount c5_nchw = find(rows, "C5", Layout::nchw, Kernel::unroll).sectors.x_loads;
  const AccessCount c5_nhwc = find(rows, "C5", Layout::nhwc, Kernel::unroll).sectors.x_loads;
  b.check(
      "C5 unroll (H_out*W_out = 1): consecutive threads take consecutive channels c, so NHWC's "
      "loads are coalesced (4 sectors) and NCHW's, stride H*W = 25 floats, take one sector per "
      "lane (32)",
      all_four(c5_nhwc) && c5_nchw.sectors == 32 * c5_nchw.requests,
      per_request(c5_nhwc) + " and " + per_request(c5_nchw));
}

// ---- Exercise 5's kernel, for the profiler ------------------------------------------------------

// The `ex5` target states analytic sector counts for the project's unroll kernel (Fig 16.18,
// cuda::conv_unroll, one sample). Its cases run here once each inside NVTX ranges, so that
// scripts/ncu_layouts.sh --ex5 can measure them; the model of this file, at N = 1 and NCHW, must
// give Exercise 5's numbers exactly (two independent codings of the same access pattern).
void ex5_kernel(Block& b) {
  struct Case {
    std::string name;
    ConvShape s;
  };
  const std::vector<Case> cases{{"C1", ConvShape{1, 1, 32, 32, 1, 5}},
                                {"C3", ConvShape{1, 6, 14, 14, 1, 5}},
                                {"cuDNN-L1", ConvShape{1, 3, 128, 128, 1, 11}}};
  Table t{{"range", "case", "ex5 X reads", "ex5 writes (Fig 16.14)", "this model: loads", "stores"},
          {}};
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const std::vector<float> x = random_integers(x_count(c.s), -9, 9, 2200 + i);
    std::vector<float> expected(cuda::unrolled_floats(c.s));
    conv_unroll_cpu(c.s, x.data(), expected.data());
    const Buffer<float> x_dev = upload(x);
    Buffer<float> out = poisoned(expected.size());
    const std::string range = "ex5 " + c.name + " unroll";
    {
      NvtxRange outer("ex5"), inner(range);
      cuda::conv_unroll(c.s, x_dev.data(), out.data(), cudaStreamPerThread);
    }
    const Mismatch m = compare_exact(download(out), expected);
    b.check("ex5 " + c.name + ": cuda::conv_unroll equals conv_unroll_cpu", m.ok(), m.text());
    const SectorCounts ex5 = unroll_sector_counts(c.s.c, c.s.h, c.s.w, c.s.k);
    const KernelSectors mine = unroll_kernel_sectors(Layout::nchw, c.s);
    const double loads = mine.x_loads.sectors_per_request(),
                 stores = mine.stores.sectors_per_request();
    // Two independent models (ex5's per-warp count and this target's access model) of the same
    // integer sector and request totals, each divided once: they agree to the last bits when
    // they count the same thing, and a disagreement in a single sector moves the quotient by
    // more than 1e-6. 1e-12 only absorbs a different order of the divisions.
    b.check(
        "ex5 " + c.name + ": this model at N = 1 gives Exercise 5's " + fixed(ex5.x_reads, 2) +
            " / " + fixed(ex5.writes_fig16_14, 2) + " sectors per request",
        std::fabs(loads - ex5.x_reads) < 1e-12 && std::fabs(stores - ex5.writes_fig16_14) < 1e-12,
        fixed(loads, 4) + " / " + fixed(stores, 4));
    t.add({range, c.name, fixed(ex5.x_reads, 4), fixed(ex5.writes_fig16_14, 4), fixed(loads, 4),
           fixed(stores, 4)});
  }
  b.table("ex5_kernel", t);
}

void ex2(Block& b) {
  b.line(gpu_info().text());
  b.line("X and Y in NCHW, NHWC or CHWN; W stays (M, C, K, K). Threads on (h,w) (Fig 16.12's");
  b.line("16x16 tiles) for NCHW and NHWC, on n (32 samples x 8 output positions per block) for");
  b.line("CHWN. The unroll (Fig 16.18, 1-D blocks of 1,024) writes each sample's Fig 16.14");
  b.line("matrix, N outermost (NCHW, NHWC) or innermost (CHWN). N = 64, integer data: exact.");
  b.line("time: kernel only, CUDA events, warm-up, median of " + std::to_string(kRepetitions) +
         ". Sectors: the exact model of layout_math.hpp");
  b.line("(every warp request of the real launch, 32-B sectors, 128-B aligned buffers).");
  std::vector<Row> rows;
  for (const Layer& layer : layers()) {
    const LayerData data = layer_data(layer.s, 2000 + rows.size());
    for (Layout layout : cuda::kLayouts)
      for (Kernel kernel : {Kernel::direct, Kernel::unroll})
        rows.push_back(run_one(b, layer, data, layout, kernel));
    b.line(layer.name + ": " + shape_text(layer.s));
    b.table(layer.name, layer_table(rows, layer.name));
    b.line(layer.name + " fastest: " + fastest(rows, layer.name, Kernel::direct) + ", " +
           fastest(rows, layer.name, Kernel::unroll));
  }
  write_joined_csv(b, rows);
  check_model(b, rows);
  ex5_kernel(b);
  b.line("DRAM bytes (dram__bytes_read.sum, dram__bytes_write.sum) and the measured sectors");
  b.line("per request (l1tex__t_sectors / l1tex__t_requests, _pipe_lsu_mem_global_op_ld and _st)");
  b.line("come from scripts/ncu_layouts.sh, which profiles the NVTX-ranged launches above.");
}

}  // namespace

std::vector<Target> layout_targets() {
  return {{"ex2", "Exercise 2: layouts NCHW, NHWC, CHWN in the basic and unroll kernels", "§1.22",
           true, ex2}};
}

}  // namespace lenet5::figures
