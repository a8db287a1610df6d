// CPU reference layers against hand-computed values: the book's Fig 16.14 data for convolution
// (forward, backward input, backward weights; textbook-figures.md §1.4, §1.7-§1.9, §1.13), the
// 4x4 subsampling example (§1.5), the fully connected example (§1.6), activations, softmax
// cross-entropy, the parameter layout, the topology (§1.2), batch gathering and epoch shuffling.
//
// Exactness: wherever the inputs are small integers the expected values are compared with ==.
// float32 represents every integer below 2^24 exactly, every product and partial sum here stays far
// below that, and the divisions are by 4 (a power of two), so no rounding ever happens and any
// summation order gives the same bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "core/activation_math.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"
#include "core/net_config.hpp"
#include "core/rng.hpp"
#include "core/topology.hpp"
#include "data/batch.hpp"
#include "layers/reference_cpu.hpp"

namespace {

using lenet5::Activation;
using lenet5::Subsampling;
using Floats = std::vector<float>;

// ---------------------------------------------------------------------------------------------
// Fig 16.14 data (textbook-figures.md §1.13): C = 3 input maps of 3x3, M = 2 filters of 2x2 each.

// X[c][h][w], (1, 3, 3, 3)
const Floats kFigX = {
    1, 2, 0, 1, 1, 3, 0, 2, 2,  // X[0]
    0, 2, 1, 0, 3, 2, 1, 1, 0,  // X[1]
    1, 2, 1, 0, 1, 3, 3, 3, 2,  // X[2]
};
// W[m][c][p][q], (2, 3, 2, 2)
const Floats kFigW = {
    1, 1, 2, 2, 1, 1, 1, 1, 0, 1, 1, 0,  // W[0][0..2]
    1, 0, 0, 1, 2, 1, 2, 1, 1, 2, 2, 0,  // W[1][0..2]
};
// Y[m][h][w], (1, 2, 2, 2): [[14,20],[15,24]] and [[12,24],[17,26]].
const Floats kFigY = {14, 20, 15, 24, 12, 24, 17, 26};
// dE/dY[m,h,w] = 1 + 4m + 2h + w, i.e. [[1,2],[3,4]] and [[5,6],[7,8]] (§1.7).
const Floats kFigDy = {1, 2, 3, 4, 5, 6, 7, 8};
// §1.7, (1, 3, 3, 3)
const Floats kFigDx = {
    6,  9,  2,  12, 26, 14, 6,  21, 16,  // dE/dX[0]
    11, 20, 8,  28, 50, 20, 17, 30, 12,  // dE/dX[1]
    5,  17, 14, 18, 39, 20, 17, 20, 0,   // dE/dX[2]
};
// §1.8, (2, 3, 2, 2)
const Floats kFigDw = {
    12, 17, 11, 21, 16, 21, 13, 10, 9,  19, 23, 24,  // dE/dW[0][c0..c2]
    32, 41, 27, 53, 36, 53, 33, 34, 25, 47, 51, 60,  // dE/dW[1][c0..c2]
};

lenet5::ConvShape fig_shape(int n) {
  return {n, 3, 3, 3, 2, 2};
}

Floats repeat(const Floats& sample, int n) {
  Floats out;
  for (int i = 0; i < n; ++i) out.insert(out.end(), sample.begin(), sample.end());
  return out;
}

double dot(const Floats& a, const Floats& b) {
  double sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += double(a[i]) * double(b[i]);
  return sum;
}

Floats random_floats(std::size_t count, std::uint64_t seed) {
  lenet5::SplitMix64 rng(seed);
  Floats out(count);
  for (auto& v : out) v = float(2.0 * rng.uniform() - 1.0);
  return out;
}

TEST(ConvForwardCpu, Fig16_14GivesThePrintedOutputExactly) {
  Floats y(8, -1.0f);
  lenet5::conv_forward_cpu<float>(fig_shape(1), kFigX.data(), kFigW.data(), nullptr, y.data());
  EXPECT_EQ(y, kFigY);
}

// Fig 16.16 on the Fig 16.14 data gives the corrected 12x4 matrix of textbook-figures.md §1.13:
// the printed one with rows 9 and 10 of column 3 swapped (erratum E26), and W' times it is Y.
TEST(ConvUnrollCpu, Fig16_14UnrollIsTheCorrectedMatrixAndGemmGivesY) {
  const Floats expected = {1, 2, 1, 1, 2, 0, 1, 3, 1, 1, 0, 2, 1, 3, 2, 2,   // rows 1-4
                           0, 2, 0, 3, 2, 1, 3, 2, 0, 3, 1, 1, 3, 2, 1, 0,   // rows 5-8
                           1, 2, 0, 1, 2, 1, 1, 3, 0, 1, 3, 3, 1, 3, 3, 2};  // rows 9-12
  Floats unrolled(48, -1.0f);
  lenet5::conv_unroll_cpu<float>(fig_shape(1), kFigX.data(), unrolled.data());
  EXPECT_EQ(unrolled, expected);
  Floats y(8, 0.0f);
  for (int m = 0; m < 2; ++m)
    for (int col = 0; col < 4; ++col)
      for (int row = 0; row < 12; ++row) y[m * 4 + col] += kFigW[m * 12 + row] * unrolled[row * 4 + col];
  EXPECT_EQ(y, kFigY);
}

TEST(ConvForwardCpu, BiasIsAddedPerOutputMap) {
  const Floats bias = {10, -3};
  Floats y(8);
  lenet5::conv_forward_cpu<float>(fig_shape(1), kFigX.data(), kFigW.data(), bias.data(), y.data());
  EXPECT_EQ(y, (Floats{24, 30, 25, 34, 9, 21, 14, 23}));
}

TEST(ConvForwardCpu, MiniBatchOfIdenticalSamplesGivesIdenticalOutputs) {
  const Floats x = repeat(kFigX, 2);
  Floats y(16);
  lenet5::conv_forward_cpu<float>(fig_shape(2), x.data(), kFigW.data(), nullptr, y.data());
  EXPECT_EQ(y, repeat(kFigY, 2));
}

// Fig 16.10: the n loop only selects the sample, so a batch is bit-identical to n single calls,
// on random (non-integer) data too: each output is the same sum in the same order.
TEST(ConvForwardCpu, BatchEqualsSingleSampleCallsBitExactly) {
  const lenet5::ConvShape batch{4, 6, 14, 14, 16, 5};  // LeNet C3
  const Floats x = random_floats(std::size_t(batch.n) * 6 * 14 * 14, 11);
  const Floats w = random_floats(16 * 6 * 25, 12);
  const Floats b = random_floats(16, 13);
  Floats y(std::size_t(batch.n) * 16 * 10 * 10);
  lenet5::conv_forward_cpu<float>(batch, x.data(), w.data(), b.data(), y.data());
  lenet5::ConvShape single = batch;
  single.n = 1;
  for (int n = 0; n < batch.n; ++n) {
    Floats y1(16 * 10 * 10);
    lenet5::conv_forward_cpu<float>(single, x.data() + std::size_t(n) * 6 * 14 * 14, w.data(),
                                    b.data(), y1.data());
    EXPECT_TRUE(std::equal(y1.begin(), y1.end(), y.begin() + std::ptrdiff_t(n) * 1600))
        << "sample " << n;
  }
}

TEST(ConvBackwardCpu, InputGradientOfFig16_14) {
  Floats dx(27, -1.0f);
  lenet5::conv_backward_input_cpu(fig_shape(1), kFigDy.data(), kFigW.data(), dx.data());
  EXPECT_EQ(dx, kFigDx);
}

TEST(ConvBackwardCpu, WeightAndBiasGradientsOfFig16_14) {
  Floats dw(24, -1.0f), db(2, -1.0f);
  lenet5::conv_backward_weights_cpu(fig_shape(1), kFigX.data(), kFigDy.data(), dw.data(),
                                    db.data());
  EXPECT_EQ(dw, kFigDw);
  EXPECT_EQ(db, (Floats{1 + 2 + 3 + 4, 5 + 6 + 7 + 8}));
}

// Backward weights SUM over the batch (the 1/n lives in dL/dlogits): two copies of the sample give
// twice the gradient; backward input treats samples independently.
TEST(ConvBackwardCpu, MiniBatchSumsWeightGradientsAndKeepsInputGradientsPerSample) {
  const Floats x = repeat(kFigX, 2), dy = repeat(kFigDy, 2);
  Floats dw(24), db(2), dx(54);
  lenet5::conv_backward_weights_cpu(fig_shape(2), x.data(), dy.data(), dw.data(), db.data());
  Floats twice = kFigDw;
  for (auto& v : twice) v *= 2;
  EXPECT_EQ(dw, twice);
  EXPECT_EQ(db, (Floats{20, 52}));
  lenet5::conv_backward_input_cpu(fig_shape(2), dy.data(), kFigW.data(), dx.data());
  EXPECT_EQ(dx, repeat(kFigDx, 2));
}

// Convolution is bilinear in (X, W), so with L = sum dY*Y: sum dY*Y = sum dX*X = sum dW*W.
// All three sums are of small integer products: exact in double.
TEST(ConvBackwardCpu, BilinearityInvariant726) {
  Floats y(8), dx(27), dw(24);
  lenet5::conv_forward_cpu<float>(fig_shape(1), kFigX.data(), kFigW.data(), nullptr, y.data());
  lenet5::conv_backward_input_cpu(fig_shape(1), kFigDy.data(), kFigW.data(), dx.data());
  lenet5::conv_backward_weights_cpu<float>(fig_shape(1), kFigX.data(), kFigDy.data(), dw.data(),
                                           nullptr);
  EXPECT_EQ(dot(kFigDy, y), 726.0);
  EXPECT_EQ(dot(dx, kFigX), 726.0);
  EXPECT_EQ(dot(dw, kFigW), 726.0);
}

// Backward input overwrites: a buffer full of garbage gives the same result as a zeroed one.
TEST(ConvBackwardCpu, BackwardOverwritesItsOutputs) {
  Floats dx(27, 1e9f), dw(24, 1e9f), db(2, 1e9f);
  lenet5::conv_backward_input_cpu(fig_shape(1), kFigDy.data(), kFigW.data(), dx.data());
  lenet5::conv_backward_weights_cpu(fig_shape(1), kFigX.data(), kFigDy.data(), dw.data(),
                                    db.data());
  EXPECT_EQ(dx, kFigDx);
  EXPECT_EQ(dw, kFigDw);
  EXPECT_EQ(db, (Floats{10, 26}));
}

// ---------------------------------------------------------------------------------------------
// Subsampling, §1.5: one 4x4 map holding 1..16 in row-major order, K = 2.

Floats one_to_sixteen() {
  Floats x(16);
  std::iota(x.begin(), x.end(), 1.0f);
  return x;
}

const lenet5::PoolShape kPool4x4{1, 1, 4, 4, 2};

TEST(SubsampleForwardCpu, AverageOf4x4Example) {
  const Floats x = one_to_sixteen(), zero_bias = {0}, bias = {-0.5f};
  Floats y(4);
  lenet5::subsample_forward_cpu(kPool4x4, Subsampling::average, x.data(), zero_bias.data(),
                                y.data());
  EXPECT_EQ(y, (Floats{3.5f, 5.5f, 11.5f, 13.5f}));
  lenet5::subsample_forward_cpu(kPool4x4, Subsampling::average, x.data(), bias.data(), y.data());
  EXPECT_EQ(y, (Floats{3.0f, 5.0f, 11.0f, 13.0f}));
}

TEST(SubsampleForwardCpu, MaxOf4x4Example) {
  const Floats x = one_to_sixteen(), bias = {0}, bias2 = {2};
  Floats y(4);
  lenet5::subsample_forward_cpu(kPool4x4, Subsampling::max, x.data(), bias.data(), y.data());
  EXPECT_EQ(y, (Floats{6, 8, 14, 16}));
  lenet5::subsample_forward_cpu(kPool4x4, Subsampling::max, x.data(), bias2.data(), y.data());
  EXPECT_EQ(y, (Floats{8, 10, 16, 18}));
}

// Fig 16.5 complete: average, + b (0), then the activation. The expected values are printed in
// §1.5 rounded to 7 decimals (+-5e-8); float32's spacing just below 1 is 6e-8 and tanh/exp in
// float are within an ulp or two, so 2e-7 covers both.
TEST(SubsampleForwardCpu, AverageThenActivationMatchesPrintedValues) {
  const Floats x = one_to_sixteen(), bias = {0};
  Floats pooled(4), y(4);
  lenet5::subsample_forward_cpu(kPool4x4, Subsampling::average, x.data(), bias.data(),
                                pooled.data());
  const Floats sigmoid = {0.9706878f, 0.9959299f, 0.9999899f, 0.9999986f};
  const Floats tanh = {0.9981779f, 0.9999666f, 1.0000000f, 1.0000000f};
  lenet5::activation_forward_cpu(Activation::sigmoid, pooled.data(), y.data(), 4);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[i], sigmoid[i], 2e-7) << i;
  lenet5::activation_forward_cpu(Activation::tanh, pooled.data(), y.data(), 4);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[i], tanh[i], 2e-7) << i;
}

TEST(SubsampleBackwardCpu, AverageSpreadsAQuarterOverEachWindow) {
  const Floats x = one_to_sixteen(), dy = {4, 8, 12, 16};
  Floats dx(16, -1.0f);
  lenet5::subsample_backward_input_cpu(kPool4x4, Subsampling::average, x.data(), dy.data(),
                                       dx.data());
  EXPECT_EQ(dx, (Floats{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
}

TEST(SubsampleBackwardCpu, MaxRoutesToTheMaximum) {
  const Floats x = one_to_sixteen(), dy = {1, 2, 3, 4};
  Floats dx(16, -1.0f);
  lenet5::subsample_backward_input_cpu(kPool4x4, Subsampling::max, x.data(), dy.data(), dx.data());
  EXPECT_EQ(dx, (Floats{0, 0, 0, 0, 0, 1, 0, 2, 0, 0, 0, 0, 0, 3, 0, 4}));
}

// Ties: the first maximum in row-major order of the window takes the whole gradient, both in the
// forward choice and in the backward routing.
TEST(SubsampleBackwardCpu, MaxTiesGoToTheFirstMaximumInRowMajorOrder) {
  const Floats x = {
      7, 7, 1, 5,  //  window (0,0): all four equal; window (0,1): 5 at (0,1) and (1,0)
      7, 7, 5, 2,  //
      0, 3, 9, 8,  //  window (1,0): 3 at (0,1) and (1,1); window (1,1): 9 twice, (0,0) and (1,1)
      1, 3, 4, 9,  //
  };
  const Floats bias = {0}, dy = {1, 2, 3, 4};
  Floats y(4), dx(16, -1.0f);
  lenet5::subsample_forward_cpu(kPool4x4, Subsampling::max, x.data(), bias.data(), y.data());
  EXPECT_EQ(y, (Floats{7, 5, 3, 9}));
  lenet5::subsample_backward_input_cpu(kPool4x4, Subsampling::max, x.data(), dy.data(), dx.data());
  EXPECT_EQ(dx, (Floats{1, 0, 0, 2, 0, 0, 0, 0, 0, 3, 4, 0, 0, 0, 0, 0}));
}

TEST(SubsampleBackwardCpu, BiasGradientSumsOverBatchAndPositions) {
  const lenet5::PoolShape s{2, 2, 4, 4, 2};  // dy is (2, 2, 2, 2)
  const Floats dy = {1, 2, 3, 4, 10, 20, 30, 40, 5, 6, 7, 8, 50, 60, 70, 80};
  Floats db(2, -1.0f);
  lenet5::subsample_backward_bias_cpu(s, dy.data(), db.data());
  EXPECT_EQ(db, (Floats{1 + 2 + 3 + 4 + 5 + 6 + 7 + 8, 100 + 260}));
}

// Odd sizes: the row and column beyond the last full window get no gradient.
TEST(SubsampleBackwardCpu, RowsBeyondTheLastWindowGetZero) {
  const lenet5::PoolShape s{1, 1, 5, 5, 2};
  Floats x(25);
  std::iota(x.begin(), x.end(), 1.0f);
  const Floats dy = {4, 4, 4, 4};
  Floats dx(25, -1.0f);
  lenet5::subsample_backward_input_cpu(s, Subsampling::average, x.data(), dy.data(), dx.data());
  for (int h = 0; h < 5; ++h)
    for (int w = 0; w < 5; ++w) EXPECT_EQ(dx[h * 5 + w], (h < 4 && w < 4) ? 1.0f : 0.0f);
}

// LeCun et al. 1998, section II.B: the window's sum times the map's coefficient, plus its bias.
// The window sums of 1..16 are 14, 22, 46 and 54; with coefficient 0.5 and bias 1 every value is
// exact in float.
TEST(SubsampleForwardCpu, TrainableOf4x4Example) {
  const Floats x = one_to_sixteen(), coef = {0.5f}, bias = {1};
  Floats y(4);
  lenet5::subsample_forward_cpu(kPool4x4, Subsampling::trainable, x.data(), bias.data(), y.data(),
                                coef.data());
  EXPECT_EQ(y, (Floats{8, 12, 24, 28}));
}

// dE/dX = coef * dE/dS on every input of the window; dE/dcoef = sum of dE/dS times the window's
// sum: 10*14 + 20*22 + 30*46 + 40*54 = 4,120.
TEST(SubsampleBackwardCpu, TrainableScalesByTheCoefficientAndItsGradientWeighsTheWindowSums) {
  const Floats x = one_to_sixteen(), coef = {0.5f}, dy = {10, 20, 30, 40};
  Floats dx(16, -1.0f), dcoef(1, -1.0f);
  lenet5::subsample_backward_input_cpu(kPool4x4, Subsampling::trainable, x.data(), dy.data(),
                                       dx.data(), coef.data());
  EXPECT_EQ(dx, (Floats{5, 5, 10, 10, 5, 5, 10, 10, 15, 15, 20, 20, 15, 15, 20, 20}));
  lenet5::subsample_backward_coef_cpu(kPool4x4, x.data(), dy.data(), dcoef.data());
  EXPECT_EQ(dcoef, (Floats{4120}));
}

// Two samples and two maps: each map's coefficient gradient sums over the batch and positions of
// its own map only. Map 0's windows: sample 0 sums 1..4 (10), sample 1 sums 5..8 (26); map 1's
// are 0 in sample 0 and 4 (ones) in sample 1.
TEST(SubsampleBackwardCpu, TrainableCoefficientGradientSumsOverBatchPerMap) {
  const lenet5::PoolShape s{2, 2, 2, 2, 2};  // dy is (2, 2, 1, 1)
  const Floats x = {1, 2, 3, 4, 0, 0, 0, 0, 5, 6, 7, 8, 1, 1, 1, 1};
  const Floats dy = {1, 2, 3, 4};
  Floats dcoef(2, -1.0f);
  lenet5::subsample_backward_coef_cpu(s, x.data(), dy.data(), dcoef.data());
  EXPECT_EQ(dcoef, (Floats{1 * 10 + 3 * 26, 2 * 0 + 4 * 4}));
}

TEST(SubsampleForwardCpu, TrainableWithoutCoefficientsIsAnInternalError) {
  const Floats x = one_to_sixteen(), bias = {0};
  Floats y(4), dx(16);
  EXPECT_THROW(lenet5::subsample_forward_cpu(kPool4x4, Subsampling::trainable, x.data(),
                                             bias.data(), y.data()),
               lenet5::Error);
  EXPECT_THROW(lenet5::subsample_backward_input_cpu(kPool4x4, Subsampling::trainable, x.data(),
                                                    y.data(), dx.data()),
               lenet5::Error);
}

// ---------------------------------------------------------------------------------------------
// Fully connected, §1.6: W = [[1,2,3],[4,5,6]], X = [1,0,-1], dE/dY = [1,2].

TEST(FullyConnectedCpu, Section1_6Example) {
  const lenet5::FcShape s{1, 3, 2};
  const Floats w = {1, 2, 3, 4, 5, 6}, x = {1, 0, -1}, bias = {10, 20}, dy = {1, 2};
  Floats y(2), dx(3, -1.0f), dw(6, -1.0f), db(2, -1.0f);
  lenet5::fc_forward_cpu<float>(s, x.data(), w.data(), nullptr, y.data());
  EXPECT_EQ(y, (Floats{-2, -2}));
  lenet5::fc_forward_cpu(s, x.data(), w.data(), bias.data(), y.data());
  EXPECT_EQ(y, (Floats{8, 18}));
  lenet5::fc_backward_input_cpu(s, dy.data(), w.data(), dx.data());
  EXPECT_EQ(dx, (Floats{9, 12, 15}));
  lenet5::fc_backward_weights_cpu(s, x.data(), dy.data(), dw.data(), db.data());
  EXPECT_EQ(dw, (Floats{1, 0, -1, 2, 0, -2}));
  EXPECT_EQ(db, (Floats{1, 2}));
}

TEST(FullyConnectedCpu, BatchSumsWeightGradients) {
  const lenet5::FcShape s{2, 3, 2};
  const Floats w = {1, 2, 3, 4, 5, 6}, x = {1, 0, -1, 2, 1, 0}, dy = {1, 2, 3, -1};
  Floats dx(6), dw(6), db(2);
  lenet5::fc_backward_input_cpu(s, dy.data(), w.data(), dx.data());
  EXPECT_EQ(dx, (Floats{9, 12, 15, 3 - 4, 6 - 5, 9 - 6}));
  lenet5::fc_backward_weights_cpu(s, x.data(), dy.data(), dw.data(), db.data());
  EXPECT_EQ(dw, (Floats{1 + 6, 0 + 3, -1 + 0, 2 - 2, 0 - 1, -2 + 0}));
  EXPECT_EQ(db, (Floats{4, 1}));
}

// ---------------------------------------------------------------------------------------------
// Activations: values and slopes (slope written through the output y). Reference values from the
// closed forms in double; 1e-12 allows for libm's last-bit differences.

// f and its slope at x = 0 (exact), at x = 1, and f(-1).
struct ActivationValues {
  double at_0, slope_at_0, at_1, slope_at_1, at_minus_1;
};

void expect_values_and_slopes(Activation kind, const ActivationValues& expected) {
  EXPECT_EQ(lenet5::activate(kind, 0.0), expected.at_0);
  EXPECT_EQ(lenet5::activation_slope(kind, expected.at_0), expected.slope_at_0);
  const double y1 = lenet5::activate(kind, 1.0);
  EXPECT_NEAR(y1, expected.at_1, 1e-12);
  EXPECT_NEAR(lenet5::activation_slope(kind, y1), expected.slope_at_1, 1e-12);
  EXPECT_NEAR(lenet5::activate(kind, -1.0), expected.at_minus_1, 1e-12);
}

TEST(ActivationMath, TanhValuesAndSlopes) {
  expect_values_and_slopes(Activation::tanh, {0.0, 1.0, 0.7615941559557649, 0.41997434161402614,
                                              -0.7615941559557649});
}

TEST(ActivationMath, SigmoidValuesAndSlopes) {
  expect_values_and_slopes(Activation::sigmoid, {0.5, 0.25, 0.7310585786300049,
                                                 0.19661193324148185, 1.0 - 0.7310585786300049});
}

// f(x) = 1.7159 tanh(2x/3): LeCun's constants are rounded, so f(1) = 0.99999..., not exactly 1;
// 1e-4 is the precision of the printed 1.7159.
TEST(ActivationMath, ScaledTanhHitsPlusMinusOneAtPlusMinusOne) {
  EXPECT_NEAR(lenet5::activate(Activation::scaled_tanh, 1.0), 1.0, 1e-4);
  EXPECT_NEAR(lenet5::activate(Activation::scaled_tanh, -1.0), -1.0, 1e-4);
  EXPECT_EQ(lenet5::activate(Activation::scaled_tanh, -1.0),
            -lenet5::activate(Activation::scaled_tanh, 1.0));  // odd function
  EXPECT_EQ(lenet5::activate(Activation::scaled_tanh, 0.0), 0.0);
  // Slope at 0 is A*S; at x = 1 it is A*S*(1 - tanh(2/3)^2).
  EXPECT_NEAR(lenet5::activation_slope(Activation::scaled_tanh, 0.0), 1.7159 * 2.0 / 3.0, 1e-12);
  const double t = std::tanh(2.0 / 3.0);
  EXPECT_NEAR(lenet5::activation_slope(Activation::scaled_tanh,
                                       lenet5::activate(Activation::scaled_tanh, 1.0)),
              1.7159 * 2.0 / 3.0 * (1 - t * t), 1e-12);
}

TEST(ActivationMath, ReluValuesAndSlopes) {
  EXPECT_EQ(lenet5::activate(Activation::relu, -2.0), 0.0);
  EXPECT_EQ(lenet5::activate(Activation::relu, 0.0), 0.0);
  EXPECT_EQ(lenet5::activate(Activation::relu, 3.0), 3.0);
  EXPECT_EQ(lenet5::activation_slope(Activation::relu, 0.0), 0.0);  // at 0 and below
  EXPECT_EQ(lenet5::activation_slope(Activation::relu, 3.0), 1.0);
}

// The array functions apply the scalar ones element by element and multiply by dL/dy.
TEST(ActivationCpu, ArraysMatchScalarFunctions) {
  const Floats x = {-2.0f, -0.5f, 0.0f, 0.25f, 1.0f, 3.0f}, dy = {1, 2, 3, 4, 5, 6};
  for (Activation kind :
       {Activation::tanh, Activation::sigmoid, Activation::scaled_tanh, Activation::relu}) {
    Floats y(x.size()), dx(x.size());
    lenet5::activation_forward_cpu(kind, x.data(), y.data(), x.size());
    lenet5::activation_backward_cpu(kind, y.data(), dy.data(), dx.data(), x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      EXPECT_EQ(y[i], lenet5::activate(kind, x[i])) << lenet5::to_string(kind) << " " << i;
      EXPECT_EQ(dx[i], dy[i] * lenet5::activation_slope(kind, y[i]))
          << lenet5::to_string(kind) << " " << i;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Softmax cross-entropy.

TEST(SoftmaxCrossEntropyCpu, UniformLogitsGiveLog10AndTenthMinusOneHot) {
  constexpr int n = 4, classes = 10;
  const std::vector<double> logits(n * classes, 0.0);
  const std::vector<std::uint8_t> labels = {0, 3, 9, 0};
  std::vector<double> grad(n * classes, -1.0);
  std::vector<int> predictions(n, -1);
  const lenet5::LossStats stats = lenet5::softmax_cross_entropy_cpu(
      logits.data(), labels.data(), n, classes, grad.data(), predictions.data());
  // log(10) per sample through exp/log in double: a few ulps.
  EXPECT_NEAR(stats.loss_sum, n * std::log(10.0), 1e-13);
  for (int s = 0; s < n; ++s)
    for (int k = 0; k < classes; ++k)
      EXPECT_NEAR(grad[s * classes + k], (0.1 - (k == labels[s])) / n, 1e-15) << s << "," << k;
  // All ten logits tie: the first maximum, class 0, is predicted; labels 0 are counted correct.
  EXPECT_EQ(predictions, (std::vector<int>{0, 0, 0, 0}));
  EXPECT_EQ(stats.correct, 2);
}

TEST(SoftmaxCrossEntropyCpu, PredictionsAreArgmaxWithFirstMaxOnTies) {
  constexpr int n = 3, classes = 10;
  std::vector<float> logits(n * classes, 0.0f);
  logits[0 * classes + 7] = 2.0f;  // sample 0: class 7
  logits[1 * classes + 2] = 3.0f;  // sample 1: tie between 2 and 5 -> 2
  logits[1 * classes + 5] = 3.0f;
  logits[2 * classes + 9] = -1.0f;  // sample 2: 0..8 tie at 0 -> 0
  const std::vector<std::uint8_t> labels = {7, 5, 0};
  std::vector<int> predictions(n, -1);
  const lenet5::LossStats stats = lenet5::softmax_cross_entropy_cpu(
      logits.data(), labels.data(), n, classes, static_cast<float*>(nullptr), predictions.data());
  EXPECT_EQ(predictions, (std::vector<int>{7, 2, 0}));
  EXPECT_EQ(stats.correct, 2);
  EXPECT_GT(stats.loss_sum, 0.0);
}

// Logits of 1e4 would overflow exp() in float and double without the max subtraction.
TEST(SoftmaxCrossEntropyCpu, HugeLogitsStayFinite) {
  constexpr int n = 2, classes = 10;
  std::vector<float> logits(n * classes, 0.0f);
  logits[0 * classes + 3] = 1e4f;  // confident and right: loss ~ 0
  logits[1 * classes + 3] = 1e4f;  // confident and wrong: loss ~ 1e4
  logits[1 * classes + 4] = -1e4f;
  const std::vector<std::uint8_t> labels = {3, 4};
  std::vector<float> grad(n * classes);
  const lenet5::LossStats stats = lenet5::softmax_cross_entropy_cpu(
      logits.data(), labels.data(), n, classes, grad.data(), static_cast<int*>(nullptr));
  ASSERT_TRUE(std::isfinite(stats.loss_sum));
  // Sample 1: -log p(4) = log-sum-exp - z_4 = 1e4 + log(1 + tiny) + 1e4 = 2e4.
  EXPECT_NEAR(stats.loss_sum, 2e4, 1e-6 * 2e4);  // relative: 2e4 is held in double, sums of ~1
  for (float g : grad) EXPECT_TRUE(std::isfinite(g));
  // Gradients: (p - onehot)/2 with p = onehot(3) for both samples.
  EXPECT_NEAR(grad[0 * classes + 3], 0.0f, 1e-7f);
  EXPECT_NEAR(grad[1 * classes + 3], 0.5f, 1e-7f);
  EXPECT_NEAR(grad[1 * classes + 4], -0.5f, 1e-7f);
  EXPECT_EQ(stats.correct, 1);
}

// ---------------------------------------------------------------------------------------------
// Parameter layout and initialisation.

lenet5::NetConfig config_with(lenet5::C3Table table) {
  lenet5::NetConfig config;
  config.c3_table = table;
  return config;
}

TEST(ParamLayout, TrainableCountFullC3TableIs61706) {
  // Required by the design (layout.hpp): the chapter's network with C3 fully connected.
  EXPECT_EQ(lenet5::lenet5_layout(config_with(lenet5::C3Table::full)).trainable_count, 61706u);
}

TEST(ParamLayout, TrainableCountLeCunTableIs60806) {
  // 96 - 60 = 36 disconnected 5x5 filters: 900 fewer weights.
  EXPECT_EQ(lenet5::lenet5_layout(config_with(lenet5::C3Table::lecun)).trainable_count, 60806u);
}

lenet5::NetConfig trainable_subsampling(lenet5::C3Table table) {
  lenet5::NetConfig config = config_with(table);
  config.subsampling = Subsampling::trainable;
  return config;
}

// LeCun et al. 1998's trainable coefficients: one per S2 map and one per S4 map, 6 + 16 = 22 more.
TEST(ParamLayout, TrainableSubsamplingAddsOneCoefficientPerMap) {
  EXPECT_EQ(lenet5::lenet5_layout(trainable_subsampling(lenet5::C3Table::full)).trainable_count,
            61706u + 22u);
  EXPECT_EQ(lenet5::lenet5_layout(trainable_subsampling(lenet5::C3Table::lecun)).trainable_count,
            60806u + 22u);
  // Only that setting has them: the others' layouts (and so checkpoints) are unchanged.
  for (const Subsampling kind : {Subsampling::average, Subsampling::max}) {
    lenet5::NetConfig config;
    config.subsampling = kind;
    for (const char* name : {"s2.weight", "s4.weight"})
      EXPECT_THROW(lenet5::lenet5_layout(config).find(name), lenet5::Error) << name;
  }
}

// Each coefficient just before its map's bias, with the window's fan-in (2x2 = 4).
TEST(ParamLayout, TrainableSubsamplingCoefficientsPrecedeTheirBiases) {
  const lenet5::ParamLayout layout =
      lenet5::lenet5_layout(trainable_subsampling(lenet5::C3Table::full));
  std::vector<std::string> names;
  for (const lenet5::ParamSpec& spec : layout.tensors) names.push_back(spec.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"c1.weight", "s2.weight", "s2.bias", "c3.weight", "s4.weight",
                                      "s4.bias", "c5.weight", "c5.bias", "f6.weight", "f6.bias",
                                      "output.weight", "output.bias"}));
  EXPECT_EQ(layout.find("s2.weight").shape, (std::vector<std::int64_t>{6}));
  EXPECT_EQ(layout.find("s4.weight").shape, (std::vector<std::int64_t>{16}));
  EXPECT_EQ(layout.find("s2.weight").fan_in, 4);
  EXPECT_EQ(layout.find("s4.weight").fan_in, 4);
}

TEST(ParamLayout, NamesAndShapesInCheckpointOrder) {
  struct Expected {
    const char* name;
    std::vector<std::int64_t> shape;
    int fan_in;
  };
  const std::vector<Expected> expected = {
      {"c1.weight", {6, 1, 5, 5}, 25},     {"s2.bias", {6}, 0},
      {"c3.weight", {16, 6, 5, 5}, 150},   {"s4.bias", {16}, 0},
      {"c5.weight", {120, 16, 5, 5}, 400}, {"c5.bias", {120}, 0},
      {"f6.weight", {84, 120}, 120},       {"f6.bias", {84}, 0},
      {"output.weight", {10, 84}, 84},     {"output.bias", {10}, 0},
  };
  const lenet5::ParamLayout layout = lenet5::lenet5_layout(lenet5::NetConfig{});
  ASSERT_EQ(layout.tensors.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const lenet5::ParamSpec& spec = layout.tensors[i];
    EXPECT_EQ(spec.name, expected[i].name);
    EXPECT_EQ(spec.shape, expected[i].shape) << spec.name;
    EXPECT_EQ(spec.fan_in, expected[i].fan_in) << spec.name;
    std::size_t product = 1;
    for (auto extent : spec.shape) product *= std::size_t(extent);
    EXPECT_EQ(spec.count, product) << spec.name;
    EXPECT_EQ(&layout.find(spec.name), &spec);
  }
}

TEST(ParamLayout, OffsetsAreAlignedAndDoNotOverlap) {
  const lenet5::ParamLayout layout = lenet5::lenet5_layout(lenet5::NetConfig{});
  std::size_t end = 0;
  for (const lenet5::ParamSpec& spec : layout.tensors) {
    EXPECT_EQ(spec.offset % lenet5::kParamAlignment, 0u) << spec.name;
    EXPECT_GE(spec.offset, end) << spec.name << " overlaps the previous tensor";
    EXPECT_LT(spec.offset - end, lenet5::kParamAlignment) << spec.name << ": gap beyond padding";
    end = spec.offset + spec.count;
  }
  EXPECT_EQ(layout.buffer_floats, end);
}

TEST(ParamLayout, LeCunTableHas60Connections) {
  int connections = 0;
  for (int m = 0; m < 16; ++m)
    for (int c = 0; c < 6; ++c) connections += lenet5::lecun_c3_connected(m, c);
  EXPECT_EQ(connections, 60);
  // Table I's pattern: maps 0-5 take 3 contiguous inputs, 6-14 take 4, map 15 takes all 6.
  for (int m = 0; m < 16; ++m) {
    int per_map = 0;
    for (int c = 0; c < 6; ++c) per_map += lenet5::lecun_c3_connected(m, c);
    EXPECT_EQ(per_map, m < 6 ? 3 : m < 15 ? 4 : 6) << "C3 map " << m;
  }
  const std::vector<float> mask = lenet5::c3_weight_mask(config_with(lenet5::C3Table::lecun));
  ASSERT_EQ(mask.size(), 2400u);
  EXPECT_EQ(std::accumulate(mask.begin(), mask.end(), 0.0), 60.0 * 25);
  const std::vector<float> full = lenet5::c3_weight_mask(config_with(lenet5::C3Table::full));
  EXPECT_EQ(std::accumulate(full.begin(), full.end(), 0.0), 2400.0);
}

std::vector<double> initialised(const lenet5::NetConfig& config, std::uint64_t seed) {
  const lenet5::ParamLayout layout = lenet5::lenet5_layout(config);
  std::vector<double> params(layout.buffer_floats, -7.0);
  lenet5::initialise_parameters(layout, config, seed, params.data());
  return params;
}

TEST(InitialiseParameters, DeterministicForASeedAndDifferentForAnother) {
  const lenet5::NetConfig config;
  const std::vector<double> a = initialised(config, 42), b = initialised(config, 42),
                            c = initialised(config, 43);
  EXPECT_EQ(a, b);
  const lenet5::ParamLayout layout = lenet5::lenet5_layout(config);
  for (const lenet5::ParamSpec& spec : layout.tensors) {
    if (spec.fan_in == 0) continue;
    std::size_t same = 0;
    for (std::size_t i = 0; i < spec.count; ++i) same += a[spec.offset + i] == c[spec.offset + i];
    EXPECT_EQ(same, 0u) << spec.name << ": seeds 42 and 43 share values";
  }
  // float and double initialisations draw the same numbers.
  std::vector<float> f(layout.buffer_floats);
  lenet5::initialise_parameters(layout, config, 42, f.data());
  for (std::size_t i = 0; i < f.size(); ++i) ASSERT_EQ(f[i], float(a[i])) << i;
}

TEST(InitialiseParameters, BiasesZeroWeightsWithinFanInBoundAndPaddingZero) {
  const lenet5::NetConfig config;
  const lenet5::ParamLayout layout = lenet5::lenet5_layout(config);
  const std::vector<double> params = initialised(config, 7);
  std::vector<bool> inside(layout.buffer_floats, false);
  for (const lenet5::ParamSpec& spec : layout.tensors) {
    double largest = 0, sum = 0;
    for (std::size_t i = 0; i < spec.count; ++i) {
      const double v = params[spec.offset + i];
      inside[spec.offset + i] = true;
      if (spec.fan_in == 0) {
        EXPECT_EQ(v, 0.0) << spec.name << "[" << i << "]";
        continue;
      }
      EXPECT_LE(std::abs(v), std::sqrt(3.0 / spec.fan_in)) << spec.name << "[" << i << "]";
      largest = std::max(largest, std::abs(v));
      sum += v;
    }
    if (spec.fan_in == 0) continue;
    // U(-a, a) over >= 150 draws: the largest |v| is above 0.9a with probability 1 - 0.9^150,
    // and the mean is within 4 standard errors (a / sqrt(3 count)) of 0.
    const double a = std::sqrt(3.0 / spec.fan_in);
    EXPECT_GT(largest, 0.9 * a) << spec.name;
    EXPECT_LT(std::abs(sum / spec.count), 4 * a / std::sqrt(3.0 * spec.count)) << spec.name;
  }
  for (std::size_t i = 0; i < params.size(); ++i)
    if (!inside[i]) {
      EXPECT_EQ(params[i], 0.0) << "padding at " << i;
    }
}

// The coefficients draw from streams of their own: every other tensor starts from the values it
// has without them, so the two settings differ only in the subsampling. The coefficients lie
// within the fan-in bound sqrt(3/4) and are not all equal.
TEST(InitialiseParameters, TrainableSubsamplingKeepsTheOtherTensorsInitialValues) {
  const lenet5::NetConfig average, trainable = trainable_subsampling(lenet5::C3Table::full);
  const lenet5::ParamLayout average_layout = lenet5::lenet5_layout(average),
                            trainable_layout = lenet5::lenet5_layout(trainable);
  const std::vector<double> a = initialised(average, 11), t = initialised(trainable, 11);
  for (const lenet5::ParamSpec& spec : average_layout.tensors) {
    const lenet5::ParamSpec& other = trainable_layout.find(spec.name);
    for (std::size_t i = 0; i < spec.count; ++i)
      ASSERT_EQ(a[spec.offset + i], t[other.offset + i]) << spec.name << "[" << i << "]";
  }
  for (const char* name : {"s2.weight", "s4.weight"}) {
    const lenet5::ParamSpec& spec = trainable_layout.find(name);
    std::set<double> values;
    for (std::size_t i = 0; i < spec.count; ++i) {
      const double v = t[spec.offset + i];
      EXPECT_LE(std::abs(v), std::sqrt(3.0 / 4)) << name << "[" << i << "]";
      values.insert(v);
    }
    EXPECT_EQ(values.size(), spec.count) << name;
  }
}

TEST(InitialiseParameters, LeCunTableZeroesDisconnectedC3WeightsAndUsesPerMapFanIn) {
  const lenet5::NetConfig config = config_with(lenet5::C3Table::lecun);
  const lenet5::ParamLayout layout = lenet5::lenet5_layout(config);
  const std::vector<double> params = initialised(config, 3);
  const lenet5::ParamSpec& c3 = layout.find("c3.weight");
  for (int m = 0; m < 16; ++m) {
    int connections = 0;
    for (int c = 0; c < 6; ++c) connections += lenet5::lecun_c3_connected(m, c);
    const double limit = std::sqrt(3.0 / (connections * 25));
    for (int c = 0; c < 6; ++c) {
      const bool connected = lenet5::lecun_c3_connected(m, c);
      for (int i = 0; i < 25; ++i) {
        const double v = params[c3.offset + std::size_t(m * 6 + c) * 25 + i];
        if (connected) {
          EXPECT_NE(v, 0.0) << "m " << m << " c " << c;
          EXPECT_LE(std::abs(v), limit) << "m " << m << " c " << c;
        } else {
          EXPECT_EQ(v, 0.0) << "m " << m << " c " << c;
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Topology (§1.2).

TEST(Topology, EachLayerFeedsTheNext) {
  const auto& layers = lenet5::lenet5_topology(lenet5::NetConfig{});
  ASSERT_FALSE(layers.empty());
  EXPECT_EQ(layers.front().in.c, 1);
  EXPECT_EQ(layers.front().in.h, lenet5::kInputSide);
  EXPECT_EQ(layers.front().in.w, lenet5::kInputSide);
  EXPECT_EQ(layers.back().out.size(), std::size_t(lenet5::kClasses));
  for (std::size_t i = 0; i + 1 < layers.size(); ++i) {
    EXPECT_EQ(layers[i].out.c, layers[i + 1].in.c) << layers[i].name;
    EXPECT_EQ(layers[i].out.h, layers[i + 1].in.h) << layers[i].name;
    EXPECT_EQ(layers[i].out.w, layers[i + 1].in.w) << layers[i].name;
  }
}

TEST(Topology, SpatialChainIs32_28_14_10_5_1AndShapesFollowTheKernels) {
  std::vector<int> sides = {lenet5::kInputSide};
  const lenet5::ParamLayout layout = lenet5::lenet5_layout(lenet5::NetConfig{});
  std::vector<std::int64_t> filter_banks;
  for (const lenet5::LayerSpec& layer : lenet5::lenet5_topology(lenet5::NetConfig{})) {
    switch (layer.kind) {
      case lenet5::LayerKind::convolution: {
        EXPECT_EQ(layer.out.h, layer.in.h - layer.kernel + 1) << layer.name;
        EXPECT_EQ(layer.out.w, layer.in.w - layer.kernel + 1) << layer.name;
        const auto& shape = layout.find(layer.weight).shape;  // (M, C, K, K)
        EXPECT_EQ(shape,
                  (std::vector<std::int64_t>{layer.out.c, layer.in.c, layer.kernel, layer.kernel}))
            << layer.name;
        filter_banks.push_back(shape[0] * shape[1]);
        break;
      }
      case lenet5::LayerKind::subsampling:
        EXPECT_EQ(layer.out.c, layer.in.c) << layer.name;
        EXPECT_EQ(layer.out.h, layer.in.h / layer.kernel) << layer.name;
        EXPECT_EQ(layout.find(layer.bias).count, std::size_t(layer.in.c)) << layer.name;
        break;
      case lenet5::LayerKind::activation:
        EXPECT_EQ(layer.out.size(), layer.in.size()) << layer.name;
        break;
      case lenet5::LayerKind::fully_connected:
        EXPECT_EQ(layout.find(layer.weight).shape,
                  (std::vector<std::int64_t>{std::int64_t(layer.out.size()),
                                             std::int64_t(layer.in.size())}))
            << layer.name;
        break;
      case lenet5::LayerKind::rbf:
        ADD_FAILURE() << layer.name << ": the default network has no RBF output layer";
        break;
    }
    if (layer.out.h != sides.back()) sides.push_back(layer.out.h);
  }
  EXPECT_EQ(sides, (std::vector<int>{32, 28, 14, 10, 5, 1}));
  EXPECT_EQ(filter_banks, (std::vector<std::int64_t>{6, 96, 1920}));
}

// ---------------------------------------------------------------------------------------------
// Batch gathering: 28x28 bytes -> normalised 32x32 fields.

// Every input scaling of the table: the padding is its black, each image pixel its normalised
// grey level.
TEST(GatherBatchCpu, PadsWithNormalisedBlackAndPicksTheIndexedImages) {
  for (const lenet5::InputScalingInfo& info : lenet5::input_scalings()) {
    SCOPED_TRACE(info.name);
    const lenet5::PixelScaling scaling = info.pixels;
    constexpr int side = 28, padded = 32, count = 3;
    std::vector<std::uint8_t> images(std::size_t(count) * side * side);
    for (int i = 0; i < count; ++i)
      for (int p = 0; p < side * side; ++p)
        images[std::size_t(i) * side * side + p] = std::uint8_t((p * 7 + i * 101) % 256);
    const std::vector<std::int32_t> indices = {2, 0};
    std::vector<float> out(2 * padded * padded, -100.0f);
    lenet5::gather_batch_cpu(images.data(), indices.data(), 2, scaling, out.data());
    const float black = lenet5::normalise_pixel(0, scaling);
    // 1e-6: float rounding of the constants
    EXPECT_NEAR(black, -scaling.mean / scaling.std, 1e-6f);
    for (int b = 0; b < 2; ++b)
      for (int h = 0; h < padded; ++h)
        for (int w = 0; w < padded; ++w) {
          const float v = out[(std::size_t(b) * padded + h) * padded + w];
          const int y = h - 2, x = w - 2;
          if (y < 0 || y >= side || x < 0 || x >= side) {
            ASSERT_EQ(v, black) << b << " " << h << " " << w;
          } else {
            const std::uint8_t pixel = images[std::size_t(indices[b]) * side * side + y * side + x];
            ASSERT_EQ(v, lenet5::normalise_pixel(pixel, scaling)) << b << " " << h << " " << w;
          }
        }
    // Without indices the images are taken in order.
    std::vector<double> in_order(std::size_t(count) * padded * padded);
    lenet5::gather_batch_cpu(images.data(), nullptr, count, scaling, in_order.data());
    for (int b = 0; b < count; ++b)
      EXPECT_EQ(in_order[(std::size_t(b) * padded + 2) * padded + 2],
                double(lenet5::normalise_pixel(images[std::size_t(b) * side * side], scaling)));
    // White: (1 - mean) / std; 1e-6 covers float rounding of 255 * (1/255) and the division.
    EXPECT_NEAR(lenet5::normalise_pixel(255, scaling), (1.0f - scaling.mean) / scaling.std, 1e-6f);
  }
}

// The table's rows are the published figures: MNIST's usual statistics, and LeCun et al. 1998's
// "the value of the background level (white) corresponds to a value of -0.1 and the foreground
// (black) corresponds to 1.175". 1e-6: float rounding of the constants and of the division.
TEST(InputScaling, MapsBlackAndWhiteToThePublishedValues) {
  using lenet5::InputScaling;
  using lenet5::normalise_pixel;
  using lenet5::pixel_scaling;
  EXPECT_NEAR(normalise_pixel(0, pixel_scaling(InputScaling::mnist)), -0.1307f / 0.3081f, 1e-6f);
  EXPECT_NEAR(normalise_pixel(0, pixel_scaling(InputScaling::lecun1998)), -0.1f, 1e-6f);
  EXPECT_NEAR(normalise_pixel(255, pixel_scaling(InputScaling::lecun1998)), 1.175f, 1e-6f);
  EXPECT_NEAR(normalise_pixel(0, pixel_scaling(InputScaling::fashion_mnist)),
              -0.2860406f / 0.3530242f, 1e-6f);
  for (const lenet5::InputScalingInfo& info : lenet5::input_scalings())
    EXPECT_EQ(lenet5::parse_input_scaling(info.name), info.scaling) << info.name;
  EXPECT_THROW(lenet5::parse_input_scaling("imagenet"), lenet5::UsageError);
}

// ---------------------------------------------------------------------------------------------
// Epoch shuffling.

TEST(EpochPermutation, IsAPermutationDeterministicPerSeedAndEpoch) {
  constexpr int count = 1000;
  const std::vector<std::int32_t> p = lenet5::epoch_permutation(5, 0, count);
  std::vector<std::int32_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::int32_t> identity(count);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_EQ(sorted, identity);
  EXPECT_NE(p, identity);
  EXPECT_EQ(p, lenet5::epoch_permutation(5, 0, count));
  EXPECT_NE(p, lenet5::epoch_permutation(5, 1, count));
  EXPECT_NE(p, lenet5::epoch_permutation(6, 0, count));
  // Distinct epochs are unrelated orders, not small variations: few fixed points in common.
  const std::vector<std::int32_t> q = lenet5::epoch_permutation(5, 1, count);
  int same_position = 0;
  for (int i = 0; i < count; ++i) same_position += p[i] == q[i];
  EXPECT_LT(same_position, 10);  // expected 1 for independent random permutations
  EXPECT_TRUE(lenet5::epoch_permutation(5, 0, 0).empty());
  EXPECT_EQ(lenet5::epoch_permutation(5, 0, 1), (std::vector<std::int32_t>{0}));
}

}  // namespace
