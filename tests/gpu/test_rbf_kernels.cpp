// The RBF output layer and the MAP criterion of LeCun et al. 1998 (--output rbf) on the GPU: the
// kernels of cuda/kernels/rbf.cuh against the CPU reference (layers/reference_cpu.hpp), and the
// GPU engine with an RBF output, book and fast kernel sets, against the CPU engine.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "core/error.hpp"
#include "core/rbf_math.hpp"
#include "core/rbf_prototypes.hpp"
#include "core/rng.hpp"
#include "cuda/engine/gpu_engine.hpp"
#include "cuda/kernels/dense.cuh"
#include "cuda/kernels/rbf.cuh"
#include "data/mnist.hpp"
#include "engine/engine.hpp"
#include "gpu_test_util.hpp"
#include "layers/reference_cpu.hpp"

namespace lenet5 {
namespace {

using test::all_close;
using test::all_equal;

constexpr int kBatch = 64;

std::int64_t ulp_distance(float a, float b) {
  if (a == b) return 0;
  if ((a < 0) != (b < 0)) return std::int64_t(1) << 32;  // a sign change counts as far apart
  std::int32_t ia, ib;
  std::memcpy(&ia, &a, sizeof a);
  std::memcpy(&ib, &b, sizeof b);
  return std::llabs(std::int64_t(ia) - std::int64_t(ib));
}

template <class T>
Buffer<T> to_device(const std::vector<T>& host) {
  Buffer<T> buffer(Device::gpu, host.size());
  buffer.copy_from_host(host.data());
  return buffer;
}

const float* device_prototypes() {
  static const Buffer<float> prototypes = [] {
    Buffer<float> b(Device::gpu, rbf_prototypes().size());
    b.copy_from_host(rbf_prototypes().data());
    return b;
  }();
  return prototypes.data();
}

// F6 outputs in multiples of 1/8 within +-2: each difference from +-1 and its square are exact in
// float, and the sums of 84 such squares (below 84 * 9) stay exact, so any order, with or without
// fused multiply-adds, gives the same bits.
std::vector<float> dyadic_inputs(std::size_t count, unsigned seed) {
  std::vector<float> values = test::random_integers(count, -16, 16, seed);
  for (float& v : values) v /= 8;
  return values;
}

TEST(RbfKernels, ForwardIsExactOnExactInputs) {
  LENET5_REQUIRE_GPU();
  const std::vector<float> x = dyadic_inputs(std::size_t(kBatch) * kRbfUnits, 1);
  const std::vector<float> cpu = test::cpu_output(std::size_t(kBatch) * kClasses, [&](float* y) {
    rbf_forward_cpu(kBatch, kRbfUnits, kClasses, x.data(), rbf_prototypes().data(), y);
  });
  const Buffer<float> d_x = test::upload(x);
  const std::vector<float> gpu = test::gpu_output(std::size_t(kBatch) * kClasses, [&](float* y) {
    cuda::rbf_forward(d_x.data(), device_prototypes(), kBatch, y, cuda::kDefaultStream);
  });
  EXPECT_TRUE(all_equal(gpu, cpu));
}

// Random F6 outputs (scaled tanh's range): the same index order on both sides, but the device may
// fuse each d*d + sum into an FMA, which rounds once instead of twice: each of the 84 additions
// may differ by an ulp of the partial sum, 84 * 2^-24 of the sum of the (positive) terms in all,
// and 1e-5 of it leaves a factor 2 while a wrong prototype or offset changes the sum by O(1).
TEST(RbfKernels, ForwardMatchesCpuOnRandomInputs) {
  LENET5_REQUIRE_GPU();
  std::vector<float> x = test::random_floats(std::size_t(kBatch) * kRbfUnits, 2);
  for (float& v : x) v *= 1.7159f;
  const std::vector<float> cpu = test::cpu_output(std::size_t(kBatch) * kClasses, [&](float* y) {
    rbf_forward_cpu(kBatch, kRbfUnits, kClasses, x.data(), rbf_prototypes().data(), y);
  });
  const Buffer<float> d_x = test::upload(x);
  const std::vector<float> gpu = test::gpu_output(std::size_t(kBatch) * kClasses, [&](float* y) {
    cuda::rbf_forward(d_x.data(), device_prototypes(), kBatch, y, cuda::kDefaultStream);
  });
  EXPECT_TRUE(all_close(gpu, cpu, cpu, 1e-5));  // the terms are positive: their sum is the scale
}

// dL/dx = sum_i dL/dy_i 2 (x_j - w_ij): ten terms in class order on both sides; FMA contraction
// again changes each addition by at most an ulp, 10 * 2^-24 of the sum of |terms|; 1e-5 of that
// sum leaves a factor 16.
TEST(RbfKernels, InputGradientMatchesCpu) {
  LENET5_REQUIRE_GPU();
  std::vector<float> x = test::random_floats(std::size_t(kBatch) * kRbfUnits, 3);
  for (float& v : x) v *= 1.7159f;
  const std::vector<float> dL_dy = test::random_floats(std::size_t(kBatch) * kClasses, 4);
  const std::size_t count = std::size_t(kBatch) * kRbfUnits;
  const std::vector<float> cpu = test::cpu_output(count, [&](float* dx) {
    rbf_backward_input_cpu(kBatch, kRbfUnits, kClasses, x.data(), rbf_prototypes().data(),
                           dL_dy.data(), dx);
  });
  // The scale: the same sum over |dL/dy| and |x - w| (every term counted positive).
  std::vector<float> scale(count);
  for (int s = 0; s < kBatch; ++s)
    for (int j = 0; j < kRbfUnits; ++j) {
      double sum = 0;
      for (int i = 0; i < kClasses; ++i)
        sum += std::fabs(dL_dy[std::size_t(s * kClasses + i)]) * 2 *
               std::fabs(x[std::size_t(s * kRbfUnits + j)] -
                         rbf_prototypes()[std::size_t(i * kRbfUnits + j)]);
      scale[std::size_t(s * kRbfUnits + j)] = float(sum);
    }
  const Buffer<float> d_x = test::upload(x), d_dy = test::upload(dL_dy);
  const std::vector<float> gpu = test::gpu_output(count, [&](float* dx) {
    cuda::rbf_backward_input(d_x.data(), device_prototypes(), d_dy.data(), kBatch, dx,
                             cuda::kDefaultStream);
  });
  EXPECT_TRUE(all_close(gpu, cpu, scale, 1e-5));
}

struct MapInputs {
  std::vector<float> y;
  std::vector<std::uint8_t> labels;
};

// Distances spread around the rejection constant j = 10 (where every term of the criterion
// counts), one sample far from every prototype (distances in the hundreds: e^-y underflows), and
// ties for the nearest prototype: sample 0 all equal (prediction 0), sample 1 classes 3 and 7
// equal and nearest (prediction 3).
MapInputs map_inputs(int n) {
  MapInputs in{std::vector<float>(std::size_t(n) * kClasses), std::vector<std::uint8_t>(n)};
  SplitMix64 rng(5);
  for (float& v : in.y) v = float(1 + 30 * rng.uniform());
  for (auto& label : in.labels) label = std::uint8_t(rng.below(kClasses));
  std::fill(in.y.begin(), in.y.begin() + kClasses, 12.0f);
  in.y[kClasses + 3] = in.y[kClasses + 7] = 0.5f;
  for (int k = 0; k < kClasses; ++k) in.y[std::size_t(2 * kClasses + k)] = float(700 + 13 * k);
  return in;
}

// The kernel runs the reference's double formula (core/rbf_math.hpp, the same code): the device's
// exp/log and glibc's are each within an ulp of a double, so the float gradients agree but for a
// value within ~1e-16 of a float rounding boundary: at most 1 float ulp. The loss sums 64 doubles
// in another order (a tree): 1e-12 relative is far above that rounding and far below any error.
TEST(MapLossKernels, MatchCpu) {
  LENET5_REQUIRE_GPU();
  for (const int n : {kBatch, 200}) {  // 200: threads of the one block take 0, 1 or 2 samples
    SCOPED_TRACE(n);
    const MapInputs in = map_inputs(n);
    std::vector<float> dL_dy(in.y.size());
    std::vector<int> predictions(n);
    const LossStats cpu =
        map_loss_cpu(in.y.data(), in.labels.data(), n, kClasses, dL_dy.data(), predictions.data());
    ASSERT_EQ(predictions[0], 0);
    ASSERT_EQ(predictions[1], 3);

    const Buffer<float> d_y = to_device(in.y);
    const Buffer<std::uint8_t> d_labels = to_device(in.labels);
    Buffer<float> d_dL_dy = test::poisoned(in.y.size());
    Buffer<std::int32_t> d_predictions(Device::gpu, std::size_t(n));
    CUDA_CHECK(cudaMemset(d_predictions.data(), 0xFF, d_predictions.bytes()));
    Buffer<cuda::StepStats> d_stats(Device::gpu, 2);  // zeroed, as begin_epoch leaves them
    cuda::map_loss(d_y.data(), d_labels.data(), n, d_dL_dy.data(), d_predictions.data(),
                   d_stats.data() + 1, cuda::kDefaultStream);
    const std::vector<float> gpu_gradient = test::download(d_dL_dy);
    const std::vector<std::int32_t> gpu_predictions = d_predictions.to_vector();
    const std::vector<cuda::StepStats> stats = d_stats.to_vector();

    EXPECT_EQ(test::count_nans(gpu_gradient), 0u);
    for (std::size_t i = 0; i < dL_dy.size(); ++i)
      ASSERT_LE(ulp_distance(gpu_gradient[i], dL_dy[i]), 1)
          << "dL/dy[" << i << "]: gpu " << gpu_gradient[i] << ", cpu " << dL_dy[i];
    for (int s = 0; s < n; ++s) EXPECT_EQ(gpu_predictions[s], predictions[s]) << "sample " << s;
    EXPECT_EQ(stats[0].loss_sum, 0.0) << "a neighbouring slot was written";
    EXPECT_NEAR(stats[1].loss_sum, cpu.loss_sum, 1e-12 * cpu.loss_sum);
    EXPECT_EQ(stats[1].correct, cpu.correct);
  }
}

// Probabilities and the nearest class: the same double formula, at most 1 float ulp apart as
// above; the sample far from every prototype has all ten at 0 and its class from the distances.
TEST(MapLossKernels, ProbabilitiesAndPredictionsMatchCpu) {
  LENET5_REQUIRE_GPU();
  const int n = 300;
  const MapInputs in = map_inputs(n);
  std::vector<float> expected(in.y.size());
  map_probabilities_cpu(in.y.data(), n, kClasses, expected.data());
  const Buffer<float> d_y = to_device(in.y);
  Buffer<float> d_p = test::poisoned(in.y.size());
  Buffer<std::int32_t> d_predictions(Device::gpu, std::size_t(n));
  cuda::map_probabilities(d_y.data(), n, d_p.data(), d_predictions.data(), cuda::kDefaultStream);
  const std::vector<float> gpu = test::download(d_p);
  const std::vector<std::int32_t> predicted = d_predictions.to_vector();
  EXPECT_EQ(test::count_nans(gpu), 0u);
  for (std::size_t i = 0; i < gpu.size(); ++i)
    ASSERT_LE(ulp_distance(gpu[i], expected[i]), 1)
        << "p[" << i << "]: gpu " << gpu[i] << ", cpu " << expected[i];
  for (int s = 0; s < n; ++s)
    EXPECT_EQ(predicted[std::size_t(s)], nearest_class(in.y.data() + s * kClasses, kClasses))
        << "sample " << s;
  EXPECT_EQ(predicted[2], 0);  // 700 is the smallest of 700 + 13k
  for (int k = 0; k < kClasses; ++k) EXPECT_EQ(gpu[std::size_t(2 * kClasses + k)], 0.0f);
}

// ---- the engine with an RBF output -----------------------------------------------------------

const SgdSettings kMomentum{0.9, false, 0.0};
// The MAP criterion's gradient is larger than softmax's: with momentum 0.9 one epoch of these
// 1,000 images (constant rate, seed 3) measured 71.4 % test accuracy on the CPU at 0.002, 46.8 % at
// 0.005 and 39.2 % at 0.01.
constexpr float kLr = 0.002f;

const Mnist* mnist() {
  static const std::unique_ptr<Mnist> data = []() -> std::unique_ptr<Mnist> {
    try {
      return std::make_unique<Mnist>(load_mnist(LENET5_SOURCE_DIR "/data/mnist"));
    } catch (const Error&) {
      return nullptr;
    }
  }();
  return data.get();
}

#define REQUIRE_GPU_AND_MNIST() \
  LENET5_REQUIRE_GPU();         \
  if (!mnist()) GTEST_SKIP() << "MNIST not in data/mnist: run scripts/fetch_mnist.sh"

Dataset first_images(const Dataset& data, int count) {
  Dataset subset;
  subset.count = count;
  subset.images.assign(data.images.begin(), data.images.begin() + std::size_t(count) * kImageBytes);
  subset.labels.assign(data.labels.begin(), data.labels.begin() + count);
  return subset;
}

NetConfig rbf_config(GpuKernels kernels) {
  NetConfig config;
  config.activation = Activation::scaled_tanh;
  config.subsampling = Subsampling::average;
  config.c3_table = C3Table::lecun;
  config.output = OutputLayer::rbf;
  config.kernels = kernels;
  return config;
}

EpochTotals train_steps(Engine& engine, const Dataset& train, std::uint64_t seed, int steps) {
  engine.set_training_data(train, Augmentation{});
  const int epoch_steps = (train.count + kBatch - 1) / kBatch;
  engine.begin_epoch(0, epoch_permutation(seed, 0, train.count),
                     std::vector<float>(epoch_steps, kLr));
  engine.train_steps(0, std::min(steps, epoch_steps));
  return engine.take_epoch_totals();
}

class RbfGpuEngine : public ::testing::TestWithParam<GpuKernels> {};

// One step from the same weights on the same 64 images, for each kernel set, against the CPU
// engine with the same kernel set (the reference for book, the fast CPU layers for fast). With
// momentum from zero velocity and no weight decay the velocity after the step is the batch
// gradient, so it exposes every layer's gradient through the RBF layer and the criterion: 1e-4
// relative (L2) per tensor, as the softmax network's test (test_gpu_engine.cpp) allows for
// summation-order differences, while an indexing error gives O(1).
TEST_P(RbfGpuEngine, OneStepMatchesTheCpuEngine) {
  REQUIRE_GPU_AND_MNIST();
  const NetConfig config = rbf_config(GetParam());
  auto gpu = make_gpu_engine(config, kMomentum, kBatch, true);
  auto cpu = make_engine(Device::cpu, config, kMomentum, kBatch);
  gpu->initialise(5);
  cpu->initialise(5);
  ASSERT_TRUE(gpu->parameters() == cpu->parameters());
  ASSERT_EQ(gpu->layout().tensors.back().name, "f6.bias");
  const Dataset train = first_images(mnist()->train, 1000);
  const EpochTotals tg = train_steps(*gpu, train, 5, 1), tc = train_steps(*cpu, train, 5, 1);
  EXPECT_EQ(tg.seen, kBatch);
  EXPECT_NEAR(tg.loss_sum, tc.loss_sum, 1e-5 * tc.loss_sum);
  EXPECT_LE(std::llabs(tg.correct - tc.correct), 1);

  const std::vector<float> vg = find_state(gpu->optimizer_state(), kMomentumState)->values;
  const std::vector<float> vc = find_state(cpu->optimizer_state(), kMomentumState)->values;
  for (const ParamSpec& tensor : cpu->layout().tensors) {
    SCOPED_TRACE(tensor.name);
    double diff2 = 0, norm2 = 0;
    for (std::size_t i = tensor.offset; i < tensor.offset + tensor.count; ++i) {
      diff2 += (double(vg[i]) - vc[i]) * (double(vg[i]) - vc[i]);
      norm2 += double(vc[i]) * vc[i];
    }
    RecordProperty(tensor.name + ".gradient_relative_error",
                   std::to_string(std::sqrt(diff2 / norm2)));
    EXPECT_GT(norm2, 0.0) << "no gradient reached this tensor";
    EXPECT_LE(std::sqrt(diff2), 1e-4 * std::sqrt(norm2));
  }
}

// After an epoch of 1,000 images on the GPU, the CPU engine from the same weights evaluates and
// classifies the same way: the distances differ by summation order only (~1e-6 relative), so a
// prediction can flip only where two prototypes are that close to equally near: a couple of
// 1,000 at most; the probabilities agree to 1e-4 (as the softmax engine's test), and each
// engine's class is the nearest prototype's, its largest probability.
TEST_P(RbfGpuEngine, EvaluatesAndClassifiesLikeTheCpuEngine) {
  REQUIRE_GPU_AND_MNIST();
  const NetConfig config = rbf_config(GetParam());
  auto gpu = make_gpu_engine(config, kMomentum, kBatch, true);
  gpu->initialise(3);
  const EpochTotals totals = train_steps(*gpu, first_images(mnist()->train, 1000), 3, 1 << 30);
  EXPECT_EQ(totals.seen, 1000);
  auto cpu = make_engine(Device::cpu, config, kMomentum, kBatch);
  cpu->set_state(gpu->parameters(), gpu->optimizer_state());

  const Dataset test = first_images(mnist()->test, 1000);
  const Evaluation g = gpu->evaluate(test), c = cpu->evaluate(test);
  EXPECT_EQ(g.output, OutputLayer::rbf);
  EXPECT_LE(std::llabs(g.correct - c.correct), 2);
  EXPECT_NEAR(g.loss_sum, c.loss_sum, 1e-4 * c.loss_sum);
  // Chance is 10 %; the CPU engine measured 71.4 % on the whole test set after these 16 steps.
  EXPECT_GT(g.accuracy(), 0.5);

  std::vector<std::int32_t> predicted_g, predicted_c;
  const std::vector<float> pg = gpu->classify(test.images.data(), test.count, predicted_g);
  const std::vector<float> pc = cpu->classify(test.images.data(), test.count, predicted_c);
  ASSERT_EQ(pg.size(), pc.size());
  ASSERT_EQ(predicted_g.size(), std::size_t(test.count));
  int flips = 0;
  for (int i = 0; i < test.count; ++i) {
    flips += predicted_g[std::size_t(i)] != predicted_c[std::size_t(i)];
    const float* row = pg.data() + i * kClasses;
    float sum = 0;
    for (int k = 0; k < kClasses; ++k) {
      EXPECT_NEAR(row[k], pc[std::size_t(i * kClasses + k)], 1e-4) << i;
      sum += row[k];
    }
    EXPECT_LE(sum, 1.0f + 1e-6f) << i;  // "none of these" takes the rest
    EXPECT_EQ(row[predicted_g[std::size_t(i)]], *std::max_element(row, row + kClasses)) << i;
  }
  EXPECT_LE(flips, 2);

  const Activations ag = gpu->activations(test.images.data());
  const Activations ac = cpu->activations(test.images.data());
  ASSERT_EQ(ag.layers.back().name, "output");
  for (int k = 0; k < kClasses; ++k)
    EXPECT_NEAR(ag.layers.back().values[std::size_t(k)], ac.layers.back().values[std::size_t(k)],
                1e-4 * std::max(1.0f, ac.layers.back().values[std::size_t(k)]));
  EXPECT_EQ(ag.predicted, ac.predicted);
}

// Same seed, same data: bit-identical weights, with the epoch replayed as a graph or not.
TEST_P(RbfGpuEngine, IsDeterministic) {
  REQUIRE_GPU_AND_MNIST();
  const Dataset train = first_images(mnist()->train, 640);
  std::vector<float> weights[2];
  for (int run = 0; run < 2; ++run) {
    auto gpu = make_gpu_engine(rbf_config(GetParam()), kMomentum, kBatch, run == 0);
    gpu->initialise(7);
    train_steps(*gpu, train, 7, 1 << 30);
    weights[run] = gpu->parameters();
  }
  EXPECT_TRUE(weights[0] == weights[1]);
}

INSTANTIATE_TEST_SUITE_P(BookAndFast, RbfGpuEngine,
                         ::testing::Values(GpuKernels::book, GpuKernels::fast),
                         [](const ::testing::TestParamInfo<GpuKernels>& info) {
                           return std::string(gpu_kernel_set(info.param).name);
                         });

// The whole-step kernels compute the softmax output only: an engine asked for both is an
// internal error (the settings refuse the combination first, test_rbf_output.cpp).
TEST(RbfGpuEngineWholeStep, IsRefused) {
  LENET5_REQUIRE_GPU();
  EXPECT_THROW(make_gpu_engine(rbf_config(GpuKernels::whole_step), SgdSettings{}, kBatch, true),
               Error);
}

}  // namespace
}  // namespace lenet5
