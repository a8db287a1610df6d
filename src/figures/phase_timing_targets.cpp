// cudnn.tab4 (textbook-figures.md §3.7): the LeNet analogue of the cuDNN paper's Table 4, which
// timed 200 Caffe training iterations per phase with and without cuDNN. Here: 200 iterations of
// batch 64 and one pass over a 10,000-image test set by the GPU engine, per phase
// (figures/phase_timing.hpp says what each phase holds), for the book's kernels with version 1 (the
// baseline, the paper's plain Caffe) and for the fast kernel set with every convolution version of
// the registry; version 3, unroll + cuBLAS SGEMM, is the specification's "cuBLAS-backed build"
// (cuDNN runs only forward convolutions in this project, cudnn.tab3, so no cuDNN-backed training
// exists).
//
// Before any time counts, each configuration is checked: overall = sum of the phases within the
// event-timing bound, every time positive and finite, the timed run repeating its warm-up bit for
// bit, and the same losses and final weights as the baseline's, so that the speedups compare the
// same training. The paper's own table is printed first (cudnn_table4.cpp, shared with
// cudnn.printed) with its findings D01, D02 and D05.
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/shapes.hpp"
#include "figures/cudnn_table4.hpp"
#include "figures/figure_util.hpp"
#include "figures/gpu_common.hpp"
#include "figures/phase_timing.hpp"

namespace lenet5::figures {
namespace {

constexpr int kTestImages = 10000;  // MNIST's test set, as the paper's "Testing" ran its own
constexpr std::uint64_t kTrainSeed = 4401, kTestSeed = 4402;

// Configurations differ only in summation order, fused multiply-adds and the last bits of the
// activation functions (core/net_config.hpp): from the same weights and data, each step's loss
// (~2.3, ln 10 for random labels) agrees to a few float roundings, plus what the weights' drift
// adds. GpuEngine.BookAndFastKernelsComputeTheSameNetwork bounds that drift by 1e-3 after 16 MNIST
// steps at lr 0.05 (its comment reports ~1e-6). Here the rate is 0.01, so that with momentum 0.9
// each step stays a small move and rounding differences grow about with the number of steps
// rather than geometrically: an estimate of 1e-5 after 200, which 1e-3 covers a hundred times
// over. A kernel that computed something else moves the weights by whole gradient steps instead
// (about lr / (1 - momentum) times a gradient, 200 times) and the losses with them. The line
// before the checks prints the differences found.
constexpr double kLossRel = 1e-3;
constexpr double kParameterAbs = 1e-3;  // on weights of size up to sqrt(3 / 25) = 0.35

struct Configuration {
  std::string name;  // "book + 1 direct"
  std::string file;  // "book_direct": the table's file name
  NetConfig net;
};

Configuration configuration(GpuKernels kernels, ConvAlgo algo) {
  NetConfig net;
  net.kernels = kernels;
  net.conv_algo = algo;
  return {std::string(to_string(kernels)) + " + " + version_label(algo),
          std::string(to_string(kernels)) + "_" + to_string(algo), net};
}

// The baseline first, then the fast kernel set with every registered version (a new version
// appears here by itself). The fast set with version 1 separates the kernel set's own gain from
// the convolutions'.
std::vector<Configuration> configurations() {
  std::vector<Configuration> all{configuration(GpuKernels::book, ConvAlgo::direct)};
  for (const ConvAlgoInfo& info : conv_algorithms())
    all.push_back(configuration(GpuKernels::fast, info.algo));
  return all;
}

struct Measured {
  Configuration config;
  PhaseRun warm_up, timed;
};

// The warm-up run (first use of every kernel, cuBLAS's handles, caches), then the timed one.
std::optional<Measured> measure(Block& b, const Configuration& c, const PhaseRunSetup& setup,
                                const Dataset& train, const Dataset& test) {
  try {
    PhaseTrainer trainer(c.net, setup, train);
    PhaseRun warm_up = trainer.run(test);
    PhaseRun timed = trainer.run(test);
    return Measured{c, std::move(warm_up), std::move(timed)};
  } catch (const std::exception& e) {  // one configuration failing leaves the others' columns
    b.check(c.name + " runs", false, e.what());
    return std::nullopt;
  }
}

// What every configuration must show on its own.
bool check_own(Block& b, const Measured& m) {
  const PhaseTimes& t = m.timed.times;
  const double sum = t.phase_sum(), bound = overall_sum_bound_ms(m.timed.intervals, t.overall_ms);
  const double difference = std::fabs(t.overall_ms - sum);
  b.line(m.config.name + ": overall " + fixed(t.overall_ms, 3) +
         " ms (first mark to last), sum of the phases " + fixed(sum, 3) + " ms, |difference| " +
         fixed(difference * 1e3, 2) + " us, bound " + fixed(bound * 1e3, 1) + " us (" +
         std::to_string(m.timed.intervals + 1) + " readings)");
  const bool positive =
      b.check(m.config.name + ": every phase time and the overall positive and finite",
              positive_and_finite(t));
  const bool sums = b.check(
      m.config.name + ": overall = sum of the phases within the event-timing bound",
      difference <= bound, fixed(difference * 1e3, 2) + " us > " + fixed(bound * 1e3, 1) + " us");
  const bool repeats = b.check(
      m.config.name +
          ": the timed run repeats the warm-up bit for bit (same start, deterministic kernels)",
      m.timed.parameters == m.warm_up.parameters && m.timed.train_loss == m.warm_up.train_loss &&
          m.timed.test_loss == m.warm_up.test_loss);
  return positive && sums && repeats;
}

// The variant trains the same network as the baseline: same losses, same final weights.
void check_same_training(Block& b, const Measured& variant, const Measured& baseline) {
  const double loss_rel =
      max_relative_difference({variant.timed.train_loss, variant.timed.test_loss},
                              {baseline.timed.train_loss, baseline.timed.test_loss});
  const double weights = max_abs_difference(variant.timed.parameters, baseline.timed.parameters);
  b.line(variant.config.name + ": mean training loss " + fixed(variant.timed.train_loss, 6) +
         ", test loss " + fixed(variant.timed.test_loss, 6) + "; from the baseline's: losses " +
         number(loss_rel) + " relative at most, weights " + number(weights) + " at most");
  b.check(variant.config.name + ": the mean training loss and the test loss within rel " +
              number(kLossRel) + " of the baseline's",
          loss_rel <= kLossRel, number(loss_rel));
  b.check(variant.config.name + ": final weights within " + number(kParameterAbs) +
              " of the baseline's",
          weights <= kParameterAbs, number(weights));
}

void describe(Block& b, const PhaseRunSetup& s) {
  b.line(gpu_info().text());
  b.line("LeNet-5, " + std::to_string(s.iterations) + " training iterations of batch " +
         std::to_string(s.batch) + " (SGD, lr " + fixed(s.lr, 2) + ", momentum " +
         fixed(s.sgd.momentum, 1) + ") from the same initial weights, then testing on " +
         grouped(kTestImages) + " images in batches of " + std::to_string(kEvalBatch));
  b.line("the GPU engine's own steps and evaluation (cuda/engine/gpu_engine.cu), launched one by");
  b.line("one with a CUDA event where each phase begins, instead of replayed as a graph");
  b.line("data: random bytes as 28x28 images with random labels (SplitMix64, fixed seeds): only");
  b.line("time is measured, and every configuration gets the same data in the same order");
  b.line("Forward = gather + forward; Backward = loss + backward; Update = the SGD launch;");
  b.line("Testing = gather + forward + loss over the test set, once after the iterations");
  b.line("timing: CUDA events marked back to back on the stream between the phases, summed");
  b.line("per phase; Overall read from the first mark to the last; GPU wall time, waits for the");
  b.line("host's launches included; one warm-up run of the same work first, per configuration");
  b.line("baseline: the book's kernels with version 1 (the paper's plain Caffe); 3 unroll-gemm is");
  b.line("the cuBLAS-backed variant (cuDNN runs forward convolutions only here, see cudnn.tab3)");
  b.line("speedup = baseline / variant, from the unrounded times");
}

void cudnn_tab4(Block& b) {
  b.line("the paper's Table 4 (Caffe vs Caffe+cuDNN, 200 iterations, K40; §3.7), as printed:");
  paper_table4(b, "paper_table4");  // beside this target's own table4_* files
  const PhaseRunSetup setup;
  describe(b, setup);
  const Dataset train = random_dataset(setup.iterations * setup.batch, kTrainSeed);
  const Dataset test = random_dataset(kTestImages, kTestSeed);

  const std::vector<Configuration> configs = configurations();
  const std::optional<Measured> baseline = measure(b, configs.front(), setup, train, test);
  if (!baseline || !check_own(b, *baseline)) return;  // no column to compare with
  std::vector<PhaseColumn> columns{{baseline->config.name, baseline->timed.times}};
  for (std::size_t i = 1; i < configs.size(); ++i) {
    const std::optional<Measured> variant = measure(b, configs[i], setup, train, test);
    if (!variant) continue;
    const bool own = check_own(b, *variant);
    check_same_training(b, *variant, *baseline);
    if (!own) continue;  // its times are not trustworthy: no speedups from them
    const Table t = table4(baseline->config.name, baseline->timed.times, variant->config.name,
                           variant->timed.times);
    b.table("table4_" + variant->config.file, t);
    std::string detail;
    b.check(variant->config.name +
                ": each speedup printed is baseline / variant of the unrounded times",
            speedups_as_printed(t, baseline->timed.times, variant->timed.times, detail), detail);
    columns.push_back({variant->config.name, variant->timed.times});
  }
  b.line("every configuration, one row per phase (for plotting):");
  b.table("table4_all", table4_long(columns));
}

}  // namespace

std::vector<Target> phase_timing_targets() {
  return {{"cudnn.tab4",
           "training time per phase, book kernels vs every convolution version, with speedups",
           "§3.7", true, cudnn_tab4}};
}

}  // namespace lenet5::figures
