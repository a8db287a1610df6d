// Finite-difference gradient checks, in double, of every CPU reference layer and of the whole
// network (textbook-figures.md §1.6, §1.8; house style: "finite-difference gradient checks").
//
// Each layer's backward pass is tested through the scalar L = sum(r * y) with a fixed random r:
// then dL/dy = r, so the layer's backward applied to r must equal the central differences
// (L(v + h) - L(v - h)) / 2h of every input, weight and bias element v.
//
// Tolerance: relative error |analytic - numeric| / max(|analytic|, |numeric|, kFloor) < 1e-6.
// In double with h = 1e-6 the truncation error of central differences is O(h^2 f''') ~ 1e-12 for
// these smooth functions (the linear layers have none at all), and the rounding error of L
// (a few 1e-15 for |L| ~ 1-10, summed over hundreds of terms) divided by 2h is ~1e-9 absolute
// (measured: at most 1.1e-9 absolute and 6e-8 relative over every check in this file). kFloor =
// 1e-2 keeps the test meaningful where a gradient element happens to be near 0: there it becomes
// an absolute check at 1e-8, still about 10x that noise.
// A wrong index (erratum E08), a missing term or a wrong factor gives errors of order 1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/device.hpp"
#include "core/layout.hpp"
#include "core/net_config.hpp"
#include "core/rbf_prototypes.hpp"
#include "core/rng.hpp"
#include "core/topology.hpp"
#include "data/batch.hpp"
#include "engine/network.hpp"
#include "layers/reference_cpu.hpp"

namespace {

using lenet5::Activation;
using lenet5::Subsampling;
using Doubles = std::vector<double>;
const lenet5::PixelScaling kMnistScaling = lenet5::pixel_scaling(lenet5::InputScaling::mnist);

constexpr double kStep = 1e-6;
constexpr double kTolerance = 1e-6;
constexpr double kFloor = 1e-2;

Doubles random_doubles(std::size_t count, std::uint64_t seed, double lo = -1.0, double hi = 1.0) {
  lenet5::SplitMix64 rng(seed);
  Doubles out(count);
  for (auto& v : out) v = lo + (hi - lo) * rng.uniform();
  return out;
}

double weighted_sum(const Doubles& r, const Doubles& y) {
  double sum = 0;
  for (std::size_t i = 0; i < r.size(); ++i) sum += r[i] * y[i];
  return sum;
}

double relative_error(double analytic, double numeric) {
  const double scale = std::max({std::abs(analytic), std::abs(numeric), kFloor});
  return std::abs(analytic - numeric) / scale;
}

// Central difference of loss() with respect to *value.
double central_difference(const std::function<double()>& loss, double* value, double step = kStep) {
  const double saved = *value;
  *value = saved + step;
  const double up = loss();
  *value = saved - step;
  const double down = loss();
  *value = saved;
  return (up - down) / (2 * step);
}

// Compares every element of `analytic` with central differences of loss() in `values`.
void expect_gradient(const std::string& what, const std::function<double()>& loss, Doubles& values,
                     const Doubles& analytic, double step = kStep) {
  ASSERT_EQ(values.size(), analytic.size()) << what;
  double largest = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double numeric = central_difference(loss, &values[i], step);
    EXPECT_LT(relative_error(analytic[i], numeric), kTolerance)
        << what << "[" << i << "]: analytic " << analytic[i] << ", numeric " << numeric;
    largest = std::max(largest, std::abs(analytic[i]));
  }
  // A gradient of zeros would pass against a function that ignores its input; make sure not.
  EXPECT_GT(largest, 10 * kFloor) << what << " is (nearly) zero everywhere";
}

// The passes of a layer with weights and a bias, y = forward(x, weight, bias), in double.
template <class Shape>
struct WeightedLayerPasses {
  void (*forward)(const Shape&, const double* x, const double* weight, const double* bias,
                  double* y);
  void (*backward_input)(const Shape&, const double* dL_dy, const double* weight, double* dL_dx);
  void (*backward_weights)(const Shape&, const double* x, const double* dL_dy, double* dL_dweight,
                           double* dL_dbias);
};

struct WeightedLayerValues {
  Doubles x, weight, bias;
};

// The layer's dL/dx, dL/dweight and dL/dbias for L = sum(r * y) at `at`, against central
// differences; `layer` names it in the messages.
template <class Shape>
void expect_weighted_layer_gradients(const std::string& layer, const Shape& s,
                                     const WeightedLayerPasses<Shape>& passes,
                                     WeightedLayerValues at, const Doubles& r) {
  Doubles &x = at.x, &w = at.weight, &b = at.bias;
  const auto loss = [&] {
    Doubles y(r.size());
    passes.forward(s, x.data(), w.data(), b.data(), y.data());
    return weighted_sum(r, y);
  };
  Doubles dx(x.size()), dw(w.size()), db(b.size());
  passes.backward_input(s, r.data(), w.data(), dx.data());
  passes.backward_weights(s, x.data(), r.data(), dw.data(), db.data());
  expect_gradient(layer + " dL/dx", loss, x, dx);
  expect_gradient(layer + " dL/dweight", loss, w, dw);
  expect_gradient(layer + " dL/dbias", loss, b, db);
}

// ---------------------------------------------------------------------------------------------
// Layers.

// C = 3 and N = 2: with C = 1 the E08 index dE_dY[m, c, h, w] would coincide with the correct one
// (§1.8); with C >= 2 and N >= 2 any mix-up of the n, m, c strides changes the result.
TEST(GradientCheck, ConvolutionInputWeightsAndBias) {
  const lenet5::ConvShape s{2, 3, 6, 6, 2, 3};
  const std::size_t y_count = std::size_t(s.n) * s.m * s.h_out() * s.w_out();
  expect_weighted_layer_gradients(
      "conv", s,
      {lenet5::conv_forward_cpu<double>, lenet5::conv_backward_input_cpu<double>,
       lenet5::conv_backward_weights_cpu<double>},
      {random_doubles(std::size_t(s.n) * s.c * s.h * s.w, 1),
       random_doubles(std::size_t(s.m) * s.c * s.k * s.k, 2), random_doubles(std::size_t(s.m), 3)},
      random_doubles(y_count, 4));
}

// The subsampling layer's dL/dx and dL/dbias at x, against central differences (the bias and the
// weights r of the loss drawn from seeds bias_seed and bias_seed + 1).
void expect_subsampling_gradients(const lenet5::PoolShape& s, Subsampling kind, Doubles x,
                                  std::uint64_t bias_seed) {
  const std::size_t y_count = std::size_t(s.n) * s.c * s.h_out() * s.w_out();
  Doubles b = random_doubles(std::size_t(s.c), bias_seed);
  const Doubles r = random_doubles(y_count, bias_seed + 1);
  const auto loss = [&] {
    Doubles y(y_count);
    lenet5::subsample_forward_cpu(s, kind, x.data(), b.data(), y.data());
    return weighted_sum(r, y);
  };
  Doubles dx(x.size()), db(b.size());
  lenet5::subsample_backward_input_cpu(s, kind, x.data(), r.data(), dx.data());
  lenet5::subsample_backward_bias_cpu(s, r.data(), db.data());
  expect_gradient(std::string(lenet5::to_string(kind)) + " subsampling dL/dx", loss, x, dx);
  expect_gradient("subsampling dL/dbias", loss, b, db);
}

// 7 rows: the last row lies outside every 2x2 window, so both gradients must be 0 there.
TEST(GradientCheck, AverageSubsamplingInputAndBias) {
  const lenet5::PoolShape s{2, 3, 7, 6, 2};
  expect_subsampling_gradients(s, Subsampling::average,
                               random_doubles(std::size_t(s.n) * s.c * s.h * s.w, 5), 6);
}

// Max is not differentiable where two window elements tie; random doubles are distinct, and the
// test first asserts that the two largest of every window are more than 100 h apart, so no
// perturbation of +-h can change which one is the maximum.
TEST(GradientCheck, MaxSubsamplingInputAndBias) {
  const lenet5::PoolShape s{2, 3, 6, 6, 2};
  const Doubles x = random_doubles(std::size_t(s.n) * s.c * s.h * s.w, 8);
  for (int map = 0; map < s.n * s.c; ++map)
    for (int h = 0; h < s.h; h += 2)
      for (int w = 0; w < s.w; w += 2) {
        const double* window = x.data() + (std::size_t(map) * s.h + h) * s.w + w;
        Doubles v = {window[0], window[1], window[s.w], window[s.w + 1]};
        std::sort(v.begin(), v.end());
        ASSERT_GT(v[3] - v[2], 100 * kStep) << "near-tie in window " << map << "," << h << "," << w;
      }
  expect_subsampling_gradients(s, Subsampling::max, x, 9);
}

// LeCun et al. 1998's trainable subsampling: dL/dx = coef * r over each window, dL/dcoef the
// r-weighted window sums, dL/dbias as for average. 7 rows and 5 columns: inputs outside every
// window get 0; K = 3 on the second shape checks windows other than 2x2.
TEST(GradientCheck, TrainableSubsamplingInputCoefficientsAndBias) {
  for (const lenet5::PoolShape& s : {lenet5::PoolShape{2, 3, 7, 6, 2}, {2, 2, 7, 5, 3}}) {
    const std::size_t y_count = std::size_t(s.n) * s.c * s.h_out() * s.w_out();
    Doubles x = random_doubles(std::size_t(s.n) * s.c * s.h * s.w, 30);
    Doubles coef = random_doubles(std::size_t(s.c), 31), b = random_doubles(std::size_t(s.c), 32);
    const Doubles r = random_doubles(y_count, 33);
    const auto loss = [&] {
      Doubles y(y_count);
      lenet5::subsample_forward_cpu(s, Subsampling::trainable, x.data(), b.data(), y.data(),
                                    coef.data());
      return weighted_sum(r, y);
    };
    Doubles dx(x.size()), dcoef(coef.size()), db(b.size());
    lenet5::subsample_backward_input_cpu(s, Subsampling::trainable, x.data(), r.data(), dx.data(),
                                         coef.data());
    lenet5::subsample_backward_coef_cpu(s, x.data(), r.data(), dcoef.data());
    lenet5::subsample_backward_bias_cpu(s, r.data(), db.data());
    expect_gradient("trainable subsampling dL/dx", loss, x, dx);
    expect_gradient("trainable subsampling dL/dcoef", loss, coef, dcoef);
    expect_gradient("trainable subsampling dL/dbias", loss, b, db);
  }
}

// The backward pass gets only the forward OUTPUT y (activation_math.hpp) and must still give
// f'(x). ReLU's kink at 0 is avoided: every |x| > 1e-3 >> h is asserted first.
TEST(GradientCheck, EveryActivation) {
  for (Activation kind :
       {Activation::tanh, Activation::sigmoid, Activation::scaled_tanh, Activation::relu}) {
    SCOPED_TRACE(lenet5::to_string(kind));
    Doubles x = random_doubles(64, 11, -3.0, 3.0);
    for (double v : x) ASSERT_GT(std::abs(v), 1e-3);
    const Doubles r = random_doubles(x.size(), 12);
    const auto loss = [&] {
      Doubles y(x.size());
      lenet5::activation_forward_cpu(kind, x.data(), y.data(), x.size());
      return weighted_sum(r, y);
    };
    Doubles y(x.size()), dx(x.size());
    lenet5::activation_forward_cpu(kind, x.data(), y.data(), x.size());
    lenet5::activation_backward_cpu(kind, y.data(), r.data(), dx.data(), x.size());
    expect_gradient(std::string(lenet5::to_string(kind)) + " dL/dx", loss, x, dx);
  }
}

TEST(GradientCheck, FullyConnectedInputWeightsAndBias) {
  const lenet5::FcShape s{3, 7, 5};
  expect_weighted_layer_gradients(
      "fc", s,
      {lenet5::fc_forward_cpu<double>, lenet5::fc_backward_input_cpu<double>,
       lenet5::fc_backward_weights_cpu<double>},
      {random_doubles(std::size_t(s.n) * s.in, 13), random_doubles(std::size_t(s.out) * s.in, 14),
       random_doubles(std::size_t(s.out), 15)},
      random_doubles(std::size_t(s.n) * s.out, 16));
}

// dL_dlogits is the gradient of the MEAN loss, loss_sum / n (the 1/n of reference_cpu.hpp).
TEST(GradientCheck, SoftmaxCrossEntropyOfTheMeanLoss) {
  constexpr int n = 4, classes = 10;
  Doubles logits = random_doubles(n * classes, 17, -3.0, 3.0);
  const std::vector<std::uint8_t> labels = {0, 9, 4, 4};
  const auto loss = [&] {
    return lenet5::softmax_cross_entropy_cpu(logits.data(), labels.data(), n, classes,
                                             static_cast<double*>(nullptr),
                                             static_cast<int*>(nullptr))
               .loss_sum /
           n;
  };
  Doubles grad(logits.size());
  lenet5::softmax_cross_entropy_cpu(logits.data(), labels.data(), n, classes, grad.data(),
                                    static_cast<int*>(nullptr));
  expect_gradient("softmax cross-entropy dL/dlogits", loss, logits, grad);
}

// The RBF output layer (--output rbf): y_i = sum_j (x_j - w_ij)^2 with the fixed prototypes, so
// only dL/dx exists. x over the range of scaled-tanh outputs (+-1.7159). The distances are large
// (~100), so L's rounding (~1e-13) over 2h = 2e-6 would reach 5e-8, above the 1e-8 this file
// allows near 0 (measured: 4e-8). L is quadratic in each x_j, so central differences have no
// truncation error at all: a step of 1e-3 divides the rounding by 1,000 and costs nothing.
constexpr double kQuadraticStep = 1e-3;
TEST(GradientCheck, RbfOutputInput) {
  constexpr int n = 3;
  Doubles x = random_doubles(std::size_t(n) * lenet5::kRbfUnits, 18, -1.7, 1.7);
  const Doubles r = random_doubles(std::size_t(n) * lenet5::kClasses, 19);
  const float* prototypes = lenet5::rbf_prototypes().data();
  Doubles y(r.size());
  const auto loss = [&] {
    lenet5::rbf_forward_cpu(n, lenet5::kRbfUnits, lenet5::kClasses, x.data(), prototypes, y.data());
    return weighted_sum(r, y);
  };
  Doubles dx(x.size());
  lenet5::rbf_backward_input_cpu(n, lenet5::kRbfUnits, lenet5::kClasses, x.data(), prototypes,
                                 r.data(), dx.data());
  expect_gradient("rbf dL/dx", loss, x, dx, kQuadraticStep);
}

// The MAP criterion's dL/dy, of the MEAN loss as the softmax's. Distances around the rejection
// constant j = 10, where every term of e^-j + sum e^-y_i matters and so every part of the
// gradient is exercised; and far beyond it (all near 200), where e^-y underflows without the
// log-sum-exp.
TEST(GradientCheck, MapCriterionOfTheMeanLoss) {
  constexpr int n = 4, classes = 10;
  for (const double centre : {10.0, 200.0}) {
    Doubles y = random_doubles(n * classes, 20, centre - 5, centre + 5);
    const std::vector<std::uint8_t> labels = {0, 9, 4, 4};
    const auto loss = [&] {
      return lenet5::map_loss_cpu(y.data(), labels.data(), n, classes,
                                  static_cast<double*>(nullptr), static_cast<int*>(nullptr))
                 .loss_sum /
             n;
    };
    Doubles grad(y.size());
    lenet5::map_loss_cpu(y.data(), labels.data(), n, classes, grad.data(),
                         static_cast<int*>(nullptr));
    expect_gradient("MAP criterion dL/dy around " + std::to_string(centre), loss, y, grad);
  }
}

// ---------------------------------------------------------------------------------------------
// The whole network: Network<double> on the CPU, mean loss of a batch of 3 (softmax
// cross-entropy, or the MAP criterion with the RBF output).

constexpr int kBatch = 3;
constexpr int kSamplesPerTensor = 8;  // random indices, plus the first and the last element

lenet5::NetConfig make_config(Activation activation, Subsampling subsampling,
                              lenet5::C3Table table) {
  lenet5::NetConfig config;
  config.activation = activation;
  config.subsampling = subsampling;
  config.c3_table = table;
  return config;
}

// Inputs spread over the range of normalised MNIST pixels, black to white.
Doubles random_input(std::uint64_t seed) {
  return random_doubles(std::size_t(kBatch) * lenet5::kInputSide * lenet5::kInputSide, seed,
                        lenet5::normalise_pixel(0, kMnistScaling),
                        lenet5::normalise_pixel(255, kMnistScaling));
}

// Distance to the nearest kink of the forward pass: the smallest |input| of a ReLU and the
// smallest gap between the two largest elements of a max window. Runs the reference layers (one
// per operation, as the topology lists them) of a network initialised from `seed`.
double kink_margin(lenet5::NetConfig config, std::uint64_t seed, const Doubles& input) {
  config.kernels = lenet5::GpuKernels::book;
  lenet5::Network<double> network(config, lenet5::Device::cpu, kBatch);
  network.initialise(seed);
  const auto& topology = lenet5::lenet5_topology(config);
  double margin = std::numeric_limits<double>::infinity();
  Doubles x = input, y;
  for (std::size_t i = 0; i < topology.size(); ++i) {
    const lenet5::LayerSpec& spec = topology[i];
    if (spec.kind == lenet5::LayerKind::activation && config.activation == Activation::relu)
      for (double v : x) margin = std::min(margin, std::abs(v));
    if (spec.kind == lenet5::LayerKind::subsampling && config.subsampling == Subsampling::max) {
      const int k = spec.kernel, side = spec.in.w;
      for (int map = 0; map < kBatch * spec.in.c; ++map)
        for (int h = 0; h + k <= spec.in.h; h += k)
          for (int w = 0; w + k <= side; w += k) {
            Doubles window;
            for (int p = 0; p < k; ++p)
              for (int q = 0; q < k; ++q)
                window.push_back(x[(std::size_t(map) * spec.in.h + h + p) * side + w + q]);
            std::sort(window.begin(), window.end());
            margin = std::min(margin, window[window.size() - 1] - window[window.size() - 2]);
          }
    }
    y.assign(spec.out.size() * kBatch, 0.0);
    network.layers()[i]->forward(x.data(), y.data(), kBatch);
    x.swap(y);
  }
  return margin;
}

// The step of the whole network's finite differences. The softmax loss is ~2.3 and the file's step
// holds (measured: at most 3.7e-8 relative error). The MAP criterion of the RBF output is made of
// distances of ~100 (84 units, each about 1 from its prototype), so its rounding is ~40 times
// larger: with h = 1e-6 the worst relative error measured 9.1e-7, too close to the 1e-6
// tolerance. h = 1e-5 divides the rounding term by 10 while the truncation error, h^2 f''' / 6,
// stays far below it for these smooth layers (measured: 1.3e-7, with the same tolerance).
double network_step(lenet5::OutputLayer output) {
  return output == lenet5::OutputLayer::rbf ? 1e-5 : kStep;
}

// The whole network with one kernel set's CPU layers: the reference (book) or the fast ones.
void check_network_gradients(lenet5::NetConfig config, lenet5::GpuKernels kernels,
                             std::uint64_t seed) {
  SCOPED_TRACE(lenet5::to_string(kernels));
  config.kernels = kernels;
  lenet5::Network<double> network(config, lenet5::Device::cpu, kBatch);
  network.initialise(seed);
  const Doubles input = random_input(seed + 100);
  const std::vector<std::uint8_t> labels = {3, 7, 1};
  const auto loss = [&] {
    network.forward(input.data(), kBatch);
    return lenet5::output_loss_cpu(config.output, network.logits(), labels.data(), kBatch,
                                   lenet5::kClasses, static_cast<double*>(nullptr),
                                   static_cast<int*>(nullptr))
               .loss_sum /
           kBatch;
  };

  // Piecewise-linear parts (ReLU, max) have kinks; a perturbation of h moves any intermediate
  // value by at most h times its sensitivity to one parameter (of order 1 here: weights below
  // 0.5, inputs below 3), so a margin of 100 h means no kink is crossed.
  if (config.activation == Activation::relu || config.subsampling == Subsampling::max) {
    ASSERT_GT(kink_margin(config, seed, input), 100 * kStep) << "pick another seed";
  }

  network.forward(input.data(), kBatch);
  Doubles dL_dlogits(std::size_t(kBatch) * lenet5::kClasses);
  lenet5::output_loss_cpu(config.output, network.logits(), labels.data(), kBatch, lenet5::kClasses,
                          dL_dlogits.data(), static_cast<int*>(nullptr));
  network.backward(dL_dlogits.data(), kBatch);
  const Doubles analytic = network.gradients().to_vector();

  const std::vector<float> mask = lenet5::c3_weight_mask(config);
  double* params = network.parameters().data();
  lenet5::SplitMix64 pick(seed + 200);
  const double step = network_step(config.output);
  double worst = 0;
  for (const lenet5::ParamSpec& spec : network.layout().tensors) {
    const bool is_c3 = spec.name == "c3.weight";
    std::vector<std::size_t> indices = {0, spec.count - 1};
    while (indices.size() < 2 + kSamplesPerTensor) {
      const std::size_t i = pick.below(std::uint32_t(spec.count));
      if (is_c3 && mask[i] == 0.0f) continue;  // disconnected: checked exactly below
      indices.push_back(i);
    }
    double largest = 0;
    for (std::size_t i : indices) {
      if (is_c3 && mask[i] == 0.0f) continue;
      const double numeric = central_difference(loss, params + spec.offset + i, step);
      const double a = analytic[spec.offset + i];
      worst = std::max(worst, relative_error(a, numeric));
      EXPECT_LT(relative_error(a, numeric), kTolerance)
          << spec.name << "[" << i << "]: analytic " << a << ", numeric " << numeric;
      largest = std::max(largest, std::abs(a));
    }
    // Every tensor must actually receive gradient (a layer skipped by backward would give 0).
    EXPECT_GT(largest, 0.0) << spec.name << " got no gradient";
  }
  ::testing::Test::RecordProperty("largest_relative_error", std::to_string(worst));

  // LeCun's C3 table: weights the table disconnects get exactly zero gradient, so SGD keeps them
  // at their initial 0.
  const lenet5::ParamSpec& c3 = network.layout().find("c3.weight");
  std::size_t disconnected = 0;
  for (std::size_t i = 0; i < c3.count; ++i)
    if (mask[i] == 0.0f) {
      ++disconnected;
      EXPECT_EQ(analytic[c3.offset + i], 0.0) << "disconnected c3.weight[" << i << "]";
      EXPECT_EQ(params[c3.offset + i], 0.0) << "disconnected c3.weight[" << i << "]";
    }
  EXPECT_EQ(disconnected, config.c3_table == lenet5::C3Table::lecun ? 900u : 0u);
}

void check_network_gradients(const lenet5::NetConfig& config, std::uint64_t seed) {
  for (const lenet5::GpuKernels kernels : {lenet5::GpuKernels::book, lenet5::GpuKernels::fast})
    check_network_gradients(config, kernels, seed);
}

TEST(NetworkGradientCheck, TanhAverageFullTable) {
  check_network_gradients(
      make_config(Activation::tanh, Subsampling::average, lenet5::C3Table::full), 1);
}

// Seed 6 puts every ReLU input and every max-window gap at least 3.7e-4 (370 h) from a kink;
// about half of all seeds come closer than 100 h, which kink_margin() would report.
TEST(NetworkGradientCheck, ReluMaxFullTable) {
  check_network_gradients(make_config(Activation::relu, Subsampling::max, lenet5::C3Table::full),
                          6);
}

TEST(NetworkGradientCheck, TanhAverageLeCunTable) {
  check_network_gradients(
      make_config(Activation::tanh, Subsampling::average, lenet5::C3Table::lecun), 3);
}

TEST(NetworkGradientCheck, SigmoidAndScaledTanh) {
  check_network_gradients(
      make_config(Activation::sigmoid, Subsampling::average, lenet5::C3Table::full), 4);
  check_network_gradients(
      make_config(Activation::scaled_tanh, Subsampling::average, lenet5::C3Table::full), 5);
}

// LeCun et al. 1998's network parts together: trainable subsampling (its coefficients checked
// like every other tensor), the scaled tanh and Table I.
TEST(NetworkGradientCheck, TrainableSubsamplingScaledTanhLeCunTable) {
  check_network_gradients(
      make_config(Activation::scaled_tanh, Subsampling::trainable, lenet5::C3Table::lecun), 7);
}

TEST(NetworkGradientCheck, TrainableSubsamplingTanhFullTable) {
  check_network_gradients(
      make_config(Activation::tanh, Subsampling::trainable, lenet5::C3Table::full), 8);
}

// LeCun 1998's output: RBF units and the MAP criterion after scaled-tanh F6 units (the paper's
// pairing), with no output.weight or output.bias in the layout to check.
TEST(NetworkGradientCheck, ScaledTanhRbfOutput) {
  lenet5::NetConfig config =
      make_config(Activation::scaled_tanh, Subsampling::average, lenet5::C3Table::lecun);
  config.output = lenet5::OutputLayer::rbf;
  check_network_gradients(config, 7);
}

// LeCun 1998's C1 and C3 units: c1.bias and c3.bias checked like every other tensor, through a1
// and a3, which the fast layers run as layers of their own.
TEST(NetworkGradientCheck, SquashedConvUnitsTanhAverage) {
  lenet5::NetConfig config =
      make_config(Activation::tanh, Subsampling::average, lenet5::C3Table::full);
  config.conv_units = lenet5::ConvUnits::squashed;
  check_network_gradients(config, 10);
}

// The whole of LeCun 1998's network that these settings build: squashed C1 and C3 units,
// trainable subsampling, scaled tanh, Table I and the RBF output with its MAP criterion.
TEST(NetworkGradientCheck, LeCun1998NetworkWithTrainableSubsamplingAndRbfOutput) {
  lenet5::NetConfig config =
      make_config(Activation::scaled_tanh, Subsampling::trainable, lenet5::C3Table::lecun);
  config.output = lenet5::OutputLayer::rbf;
  config.conv_units = lenet5::ConvUnits::squashed;
  check_network_gradients(config, 9);
}

}  // namespace
