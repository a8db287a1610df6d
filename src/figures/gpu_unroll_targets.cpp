// GPU targets of `lenet5 figures` around the unrolled (im2col) form: Fig 16.14's numeric example
// through the GPU unroll and every registered version, forward and backward (fig16.14.gpu), and
// the printed Fig 16.17 host code's truncating block count (fig16.17).
//
// The GPU unroll, cuda::conv_unroll (Fig 16.18 corrected), and the book's per-sample loop,
// cuda::conv_forward_unroll_per_sample (Fig 16.15), come from cuda/kernels/conv/unroll_gemm.cuh.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "cuda/figures/as_printed.cuh"
#include "cuda/kernels/conv/registry.hpp"
#include "cuda/kernels/conv/unroll_gemm.cuh"
#include "cuda/kernels/dense.cuh"
#include "figures/gpu_common.hpp"

namespace lenet5::figures {
namespace {

namespace ap = cuda::as_printed;

// ==== fig16.14.gpu: the data implied by the figure (textbook-figures.md §1.13) ==================

const ConvShape kFig16_14{1, 3, 3, 3, 2, 2};  // N, C, H, W, M, K

const std::vector<float> kX = {1, 2, 0, 1, 1, 3, 0, 2, 2,   // X[0]
                               0, 2, 1, 0, 3, 2, 1, 1, 0,   // X[1]
                               1, 2, 1, 0, 1, 3, 3, 3, 2};  // X[2]
const std::vector<float> kW = {1, 1, 2, 2, 1, 1, 1, 1, 0, 1, 1, 0,   // W[0][0..2], rows of W'
                               1, 0, 0, 1, 2, 1, 2, 1, 1, 2, 2, 0};  // W[1][0..2]
// X_unrolled (12 x 4, row c*K*K + p*K + q, column h*W_out + w): printed (B:248) and corrected,
// which differ in rows 9 and 10 of column 3 (1-based; erratum E26).
const std::vector<float> kUnrollPrinted = {1, 2, 1, 1, 2, 0, 1, 3, 1, 1, 0, 2, 1, 3, 2, 2,
                                           0, 2, 0, 3, 2, 1, 3, 2, 0, 3, 1, 1, 3, 2, 1, 0,
                                           1, 2, 1, 1, 2, 1, 0, 3, 0, 1, 3, 3, 1, 3, 3, 2};
const std::vector<float> kUnrollCorrect = {1, 2, 1, 1, 2, 0, 1, 3, 1, 1, 0, 2, 1, 3, 2, 2,
                                           0, 2, 0, 3, 2, 1, 3, 2, 0, 3, 1, 1, 3, 2, 1, 0,
                                           1, 2, 0, 1, 2, 1, 1, 3, 0, 1, 3, 3, 1, 3, 3, 2};
const std::vector<float> kY = {14, 20, 15, 24, 12, 24, 17, 26};  // printed Y = corrected product
// Backward with dE/dY[m,h,w] = 1 + 4m + 2h + w (§1.7, §1.8).
const std::vector<float> kDy = {1, 2, 3, 4, 5, 6, 7, 8};
const std::vector<float> kDx = {6,  9,  2,  12, 26, 14, 6,  21, 16,   // dE/dX[0]
                                11, 20, 8,  28, 50, 20, 17, 30, 12,   // dE/dX[1]
                                5,  17, 14, 18, 39, 20, 17, 20, 0};   // dE/dX[2]
const std::vector<float> kDw = {12, 17, 11, 21, 16, 21, 13, 10, 9,  19, 23, 24,   // dE/dW[0]
                                32, 41, 27, 53, 36, 53, 33, 34, 25, 47, 51, 60};  // dE/dW[1]
const std::vector<float> kDbias = {10, 26};

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += double(a[i]) * b[i];
  return sum;
}

std::string cells_text(const std::vector<float>& v, std::size_t begin, std::size_t count) {
  std::string out;
  for (std::size_t i = begin; i < begin + count; ++i) out += (i > begin ? " " : "") + fixed(v[i], 0);
  return out;
}

void fig16_14_unroll(Block& b) {
  const Buffer<float> x = upload(kX);
  Buffer<float> unrolled = poisoned(kUnrollCorrect.size());
  cuda::conv_unroll(kFig16_14, x.data(), unrolled.data(), cudaStreamPerThread);
  const std::vector<float> gpu = download(unrolled);
  Table t{{"row", "GPU unroll", "printed (B:248)", "differs"}, {}};
  std::vector<std::string> differing;
  for (int r = 0; r < 12; ++r) {
    std::string diff;
    for (int c = 0; c < 4; ++c)
      if (gpu[r * 4 + c] != kUnrollPrinted[r * 4 + c]) {
        diff += "c" + std::to_string(c + 1) + " ";
        differing.push_back("r" + std::to_string(r + 1) + "c" + std::to_string(c + 1));
      }
    t.add({"r" + std::to_string(r + 1), cells_text(gpu, r * 4, 4), cells_text(kUnrollPrinted, r * 4, 4), diff});
  }
  b.table("x_unrolled_gpu", t);
  std::vector<float> cpu(kUnrollCorrect.size());
  conv_unroll_cpu(kFig16_14, kX.data(), cpu.data());
  b.check("GPU unroll (Fig 16.18 corrected) = corrected 12x4 matrix = CPU unroll (Fig 16.16)",
          compare_exact(gpu, kUnrollCorrect).ok() && compare_exact(cpu, kUnrollCorrect).ok(),
          compare_exact(gpu, kUnrollCorrect).text());
  b.check("it differs from the printed matrix in exactly r9c3 and r10c3 (E26)",
          differing == std::vector<std::string>{"r9c3", "r10c3"});
}

// One forward path on the figure's data: `run` writes y (2 x 4) from x and the filters.
void check_forward(Block& b, const std::string& what, const std::function<void(const float*, const float*, float*)>& run) {
  const Buffer<float> x = upload(kX), weight = upload(kW);
  Buffer<float> y = poisoned(kY.size());
  std::string failure;
  try {
    run(x.data(), weight.data(), y.data());
  } catch (const std::exception& e) {
    failure = e.what();
  }
  const std::vector<float> out = download(y);
  b.check(what + ": Y = [[14,20,15,24],[12,24,17,26]]" + (failure.empty() ? " (" + cells_text(out, 0, 8) + ")" : ""),
          failure.empty() && compare_exact(out, kY).ok(),
          failure.empty() ? compare_exact(out, kY).text() : failure);
}

void fig16_14_forward(Block& b) {
  for (const ConvAlgoInfo& info : conv_algorithms())
    check_forward(b, "version " + version_label(info.algo), [&](const float* x, const float* w, float* y) {
      std::string why;
      const auto version = try_make_version(info.algo, kFig16_14, why);
      if (!version) throw Error(why);
      version->forward(kFig16_14, x, w, nullptr, y, cudaStreamPerThread);
    });
  check_forward(b, "book's per-sample unroll + SGEMM (Fig 16.15)", [](const float* x, const float* w, float* y) {
    Buffer<float> x_unroll(Device::gpu, kUnrollCorrect.size());
    cuda::conv_forward_unroll_per_sample(cuda::default_cublas_handle(), kFig16_14, x, w, y, x_unroll.data());
  });
  check_forward(b, "Fig 16.12 as printed, rounded-up grid (one tile: E10 invisible)", [](const float* x, const float* w, float* y) {
    ap::conv_forward_fig16_12(kFig16_14, ap::GridRule::ceil, true, x, w, y);
  });
  check_forward(b, "Fig 16.13 as printed, rounded-up grid (one tile: E15, E16 invisible)", [](const float* x, const float* w, float* y) {
    ap::conv_forward_fig16_13(kFig16_14, ap::GridRule::ceil, ap::Fig16_13Errata{}, x, w, y);
  });
  const Buffer<float> x = upload(kX), w = upload(kW);
  Buffer<float> y = poisoned(kY.size());
  const ap::Launch printed = ap::conv_forward_fig16_12(kFig16_14, ap::GridRule::printed, true, x.data(), w.data(), y.data());
  b.check("Fig 16.12 with the printed grid: W_out/16 = 0 blocks, launch fails with invalid configuration, Y untouched",
          !printed.launched() && compare_exact(download(y), kY).unwritten == kY.size(),
          cudaGetErrorName(printed.status));
}

// Backward of one version on the figure's data, against §1.7/§1.8 and the 726 invariant.
void fig16_14_backward_version(Block& b, ConvAlgo algo) {
  const std::string name = "version " + version_label(algo);
  std::string why;
  const auto version = try_make_version(algo, kFig16_14, why);
  if (!b.check(name + ": can be built", version != nullptr, why)) return;
  const Buffer<float> x = upload(kX), w = upload(kW), dy = upload(kDy);
  Buffer<float> dx = poisoned(kDx.size()), dw = poisoned(kDw.size()), db = poisoned(kDbias.size());
  version->backward_input(kFig16_14, dy.data(), w.data(), dx.data(), cudaStreamPerThread);
  version->backward_weights(kFig16_14, x.data(), dy.data(), dw.data(), db.data(), nullptr, cudaStreamPerThread);
  const std::vector<float> dxh = download(dx), dwh = download(dw), dbh = download(db);
  b.check(name + ": dE/dX as §1.7", compare_exact(dxh, kDx).ok(), compare_exact(dxh, kDx).text());
  b.check(name + ": dE/dW as §1.8 and dE/db = [10, 26]",
          compare_exact(dwh, kDw).ok() && compare_exact(dbh, kDbias).ok(),
          compare_exact(dwh, kDw).text());
  b.check(name + ": sum dE/dY.Y = sum dE/dX.X = sum dE/dW.W = 726",
          dot(dxh, kX) == 726 && dot(dwh, kW) == 726);
}

void fig16_14_gpu(Block& b) {
  b.line("Fig 16.14's data (C=3 maps of 3x3, M=2, K=2) on the GPU; cuDNN names: F_m 2x12, D_m 12x4, O_m 2x4");
  fig16_14_unroll(b);
  fig16_14_forward(b);
  for (const ConvAlgoInfo& info : conv_algorithms()) fig16_14_backward_version(b, info.algo);
}

// ==== fig16.17: the printed block count ==========================================================

struct UnrollCase {
  const char* name;
  ConvShape s;  // one sample
  int printed_blocks, correct_blocks;
};

void fig16_17_case(Block& b, Table& t, const UnrollCase& c, std::uint64_t seed) {
  const std::vector<float> xh = random_integers(x_count(c.s), 0, 9, seed);
  const std::size_t cells = std::size_t(c.s.c) * c.s.k * c.s.k * c.s.h_out() * c.s.w_out();
  std::vector<float> expected(cells);
  conv_unroll_cpu(c.s, xh.data(), expected.data());
  const Buffer<float> x = upload(xh);
  Buffer<float> printed_out = poisoned(cells), fixed_out = poisoned(cells);
  const ap::Launch launch = ap::unroll_gpu_fig16_17(c.s, x.data(), printed_out.data());
  const Mismatch printed = compare_exact(download(printed_out), expected);
  cuda::conv_unroll(c.s, x.data(), fixed_out.data(), cudaStreamPerThread);
  const Mismatch corrected = compare_exact(download(fixed_out), expected);

  const long long threads = (long long)c.s.c * c.s.h_out() * c.s.w_out();
  const long long missing = std::max(0LL, threads - (long long)launch.grid.x * ap::kMaxNumThreads);
  const long long expect_unwritten = missing * c.s.k * c.s.k;
  t.add({c.name, grouped(threads), std::to_string(ap::fig16_17_printed_blocks(c.s)),
         std::to_string(ap::fig16_17_correct_blocks(c.s)),
         launch.launched() ? "ok" : cudaGetErrorName(launch.status), grouped((long long)cells),
         grouped((long long)printed.unwritten), grouped(missing), corrected.text()});
  const std::string name = c.name;
  b.check(name + ": printed " + std::to_string(c.printed_blocks) + " blocks, correct " +
              std::to_string(c.correct_blocks),
          ap::fig16_17_printed_blocks(c.s) == c.printed_blocks &&
              ap::fig16_17_correct_blocks(c.s) == c.correct_blocks);
  b.check(name + (c.printed_blocks == 0 ? ": zero blocks -> launch refused (" +
                                              std::string(cudaGetErrorName(launch.status)) +
                                              "), nothing unrolled"
                                        : ": the missing threads' " + grouped(expect_unwritten) + " cells stay unwritten"),
          launch.launched() == (c.printed_blocks > 0) &&
              (long long)printed.unwritten == expect_unwritten && printed.wrong == 0);
  b.check(name + ": corrected GPU unroll equals the CPU unroll", corrected.ok(), corrected.text());
}

void fig16_17(Block& b) {
  b.line("Fig 16.17: num_blocks = ceil((C*H_out*W_out) / CUDA_MAX_NUM_THREADS) divides in int first (E23)");
  const std::vector<UnrollCase> cases{
      {"LeNet C1", ConvShape{1, 1, 32, 32, 6, 5}, 0, 1},
      {"LeNet C3", ConvShape{1, 6, 14, 14, 16, 5}, 0, 1},
      {"LeNet C5", ConvShape{1, 16, 5, 5, 120, 5}, 0, 1},
      {"Fig 16.14", kFig16_14, 0, 1},
      {"C=40, 28x28 outputs", ConvShape{1, 40, 32, 32, 6, 5}, 30, 31},
  };
  Table t{{"case", "threads", "printed blocks", "correct blocks", "launch", "unrolled cells",
           "unwritten", "missing threads", "corrected unroll"},
          {}};
  for (std::size_t i = 0; i < cases.size(); ++i) fig16_17_case(b, t, cases[i], 1700 + i);
  b.table("blocks", t);
  b.line("A failed launch is caught by cudaGetLastError (which clears it: the error is not sticky).");
}

}  // namespace

std::vector<Target> gpu_unroll_targets() {
  return {
      {"fig16.14.gpu", "Fig 16.14 on the GPU: unroll, every version's forward and backward",
       "§1.13, §1.7, §1.8", true, fig16_14_gpu},
      {"fig16.17", "unroll host code as printed: truncating block count (E23) on the GPU",
       "§1.17, §1.18", true, fig16_17},
  };
}

}  // namespace lenet5::figures
