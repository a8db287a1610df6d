// Convolution kernels, every version of the registry (core/conv_algo.hpp, through
// cuda/kernels/conv/registry.hpp), against the CPU reference
// (layers/conv_cpu.cpp) on every LeNet shape and on the cases that expose the printed Fig 16.12's
// errata (textbook-figures.md §2.2): C1 has H_out = 28 > 16 (several tiles, E10/E11), "one tile"
// fills exactly one 16x16 tile, "2x2 tiles" has H_out = 32 (E10 leaves 735 of 1,024 outputs per map
// unwritten), and C >= 2 (C3, C5, Fig 16.14) is needed to see E08 in the weight gradient. Version 5
// adds the batch the network trains with (64: many blocks per layer), a non-square input with
// K = 3 (a swapped H/W or a wrong filter instantiation shows), and the shapes where it hands over
// to version 1 (more than 48 KiB of shared memory; K > 7 in the weight gradient).
//
// Every output buffer is filled with NaN before each launch, so an output the kernel does not write
// is counted as a NaN in the failure message.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "cuda/kernels/conv/registry.hpp"
#include "gpu_test_util.hpp"
#include "layers/reference_cpu.hpp"

namespace {

using lenet5::Buffer;
using lenet5::ConvShape;
using namespace lenet5::test;

using lenet5::ConvAlgo;

// Every version of the registry (core/conv_algo.hpp); every test below runs on each.
std::vector<ConvAlgo> all_versions() {
  std::vector<ConvAlgo> versions;
  for (const auto& info : lenet5::conv_algorithms()) versions.push_back(info.algo);
  return versions;
}

std::string version_label(ConvAlgo algo) {
  const auto& info = lenet5::conv_algorithm_info(algo);
  std::string name = "v" + std::to_string(info.number) + "_" + info.name;
  for (char& ch : name)
    if (ch == '-') ch = '_';  // test names are C identifiers
  return name;
}

// The inputs of all three directions: x (N,C,H,W), weight (M,C,K,K), bias (M), dL_dy
// (N,M,H_out,W_out).
struct ConvData {
  std::vector<float> x, weight, bias, dL_dy;
};

// Small integers in -3..3: with at most a few thousand terms of magnitude <= 9 per sum, every
// partial sum is an integer far below 2^24, exactly representable in float32, so the GPU's
// summation order (and its fused multiply-adds) cannot change a single bit: the comparison is
// exact.
ConvData integer_data(const ConvShape& s, unsigned seed) {
  return ConvData{random_integers(x_count(s), -3, 3, seed),
                  random_integers(weight_count(s), -3, 3, seed + 1),
                  random_integers(std::size_t(s.m), -3, 3, seed + 2),
                  random_integers(y_count(s), -3, 3, seed + 3)};
}

ConvData float_data(const ConvShape& s, unsigned seed) {
  return ConvData{random_floats(x_count(s), seed), random_floats(weight_count(s), seed + 1),
                  random_floats(std::size_t(s.m), seed + 2), random_floats(y_count(s), seed + 3)};
}

// The same data with every value replaced by its magnitude: running a reference on it gives, for
// each output, the sum of the magnitudes of its terms (the scale of its rounding error).
ConvData magnitudes(const ConvData& d) {
  return ConvData{absolute(d.x), absolute(d.weight), absolute(d.bias), absolute(d.dL_dy)};
}

// Random floats: the GPU adds the terms in another order than the CPU (backward passes) and fuses
// multiply-adds (all passes), so results differ by rounding. For a sum of n terms in any order the
// error is at most about n * 2^-24 times the sum of |terms| and, with random signs, typically about
// 2^-24 times it (n <= 50,176 here: C1's weight gradient with N = 64). 1e-5 of the sum of |terms|
// leaves a wide margin over that, while a missing or doubled term (typically about 1/n of the
// scale, far above 1e-5) still fails.
constexpr double kFloatRel = 1e-5;

// ---- CPU reference and GPU runs, vectors in and out ---------------------------------------------

std::vector<float> forward_cpu(const ConvShape& s, const ConvData& d, bool with_bias) {
  std::vector<float> y(y_count(s));
  lenet5::conv_forward_cpu<float>(s, d.x.data(), d.weight.data(),
                                  with_bias ? d.bias.data() : nullptr, y.data());
  return y;
}

// Each call builds the version for exactly this shape (its scratch, if any, sized for it).
std::unique_ptr<lenet5::cuda::ConvAlgorithm> kernels_of(ConvAlgo algo, const ConvShape& s) {
  return lenet5::cuda::make_conv_algorithm(algo, s);
}

std::vector<float> forward_gpu(ConvAlgo algo, const ConvShape& s, const ConvData& d,
                               bool with_bias) {
  const Buffer<float> x = upload(d.x), weight = upload(d.weight), bias = upload(d.bias);
  Buffer<float> y = poisoned(y_count(s));
  const float* b = with_bias ? bias.data() : nullptr;
  kernels_of(algo, s)->forward(s, x.data(), weight.data(), b, y.data(), nullptr);
  return download(y);
}

std::vector<float> backward_input_cpu(const ConvShape& s, const ConvData& d) {
  std::vector<float> dL_dx(x_count(s));
  lenet5::conv_backward_input_cpu<float>(s, d.dL_dy.data(), d.weight.data(), dL_dx.data());
  return dL_dx;
}

std::vector<float> backward_input_gpu(ConvAlgo algo, const ConvShape& s, const ConvData& d) {
  const Buffer<float> dL_dy = upload(d.dL_dy), weight = upload(d.weight);
  Buffer<float> dL_dx = poisoned(x_count(s));
  kernels_of(algo, s)->backward_input(s, dL_dy.data(), weight.data(), dL_dx.data(), nullptr);
  return download(dL_dx);
}

struct WeightGrads {
  std::vector<float> weight, bias;  // bias empty when not asked for
};

WeightGrads backward_weights_cpu(const ConvShape& s, const ConvData& d, bool with_bias) {
  WeightGrads g{std::vector<float>(weight_count(s)),
                std::vector<float>(with_bias ? std::size_t(s.m) : 0)};
  lenet5::conv_backward_weights_cpu<float>(s, d.x.data(), d.dL_dy.data(), g.weight.data(),
                                           with_bias ? g.bias.data() : nullptr);
  return g;
}

WeightGrads backward_weights_gpu(ConvAlgo algo, const ConvShape& s, const ConvData& d,
                                 bool with_bias, const std::vector<float>* mask = nullptr) {
  const Buffer<float> x = upload(d.x), dL_dy = upload(d.dL_dy);
  const Buffer<float> mask_device = upload(mask ? *mask : std::vector<float>());
  Buffer<float> dL_dweight = poisoned(weight_count(s));
  Buffer<float> dL_dbias = poisoned(with_bias ? std::size_t(s.m) : 0);
  float* db = with_bias ? dL_dbias.data() : nullptr;
  const float* m = mask ? mask_device.data() : nullptr;
  const auto kernels = kernels_of(algo, s);
  kernels->backward_weights(s, x.data(), dL_dy.data(), dL_dweight.data(), db, m, nullptr);
  WeightGrads result{download(dL_dweight), download(dL_dbias)};  // waits before the scratch goes
  return result;
}

// ---- the LeNet shapes and the tile cases --------------------------------------------------------

struct ConvCase {
  const char* name;
  ConvShape shape;  // n, c, h, w, m, k
};

void PrintTo(const ConvCase& c, std::ostream* out) {
  *out << c.name;
}

const ConvCase kConvCases[] = {
    {"C1", {3, 1, 32, 32, 6, 5}},   // (3,1,32,32) -> (3,6,28,28): 2x2 tiles, 784 of 1,024 active
    {"C3", {2, 6, 14, 14, 16, 5}},  // (2,6,14,14) -> (2,16,10,10): one partly idle tile
    {"C5", {2, 16, 5, 5, 120, 5}},  // (2,16,5,5) -> (2,120,1,1): 1 of 256 threads active;
                                    // version 5: 29 maps per block, the last group of 4 short
    {"OneTile", {1, 3, 20, 20, 2, 5}},        // -> (1,2,16,16): exactly one full tile
    {"TwoByTwoTiles", {1, 3, 36, 36, 2, 5}},  // -> (1,2,32,32): 2x2 full tiles
    {"C1Batch64", {64, 1, 32, 32, 6, 5}},     // the training batch: 384 blocks in version 5
    {"C3Batch64", {64, 6, 14, 14, 16, 5}},    // 512 (forward) and 1,024 (weights) blocks
    {"NonSquareK3", {2, 3, 9, 7, 5, 3}},      // -> (2,5,7,5): H != W, another filter size
    // Odd widths with 5x5 filters: version 5's input gradient computes two columns per thread,
    // and the last pair of each row has only one real column.
    {"OddWidthK5", {2, 3, 11, 13, 4, 5}},  // -> (2,4,7,9): input rows of 13 (6 pairs and a half)
    // Version 5 hands over to version 1: x[n] alone is 12,544 floats (> 48 KiB of shared memory)
    // in the forward pass and the weight gradient; the input gradient still fits (2,404 floats).
    {"LargeInput", {1, 16, 28, 28, 4, 5}},
    {"Filter9x9", {1, 2, 12, 12, 2, 9}},  // -> (1,2,4,4): K > 7, version 5's weights -> version 1
};

// (version, case): every version on every shape.
using VersionAndCase = std::tuple<ConvAlgo, ConvCase>;

class ConvKernels : public testing::TestWithParam<VersionAndCase> {
 protected:
  void SetUp() override { LENET5_REQUIRE_GPU(); }  // skips every test of the suite without one
  ConvAlgo version() const { return std::get<0>(GetParam()); }
  ConvShape shape() const { return std::get<1>(GetParam()).shape; }
};

TEST_P(ConvKernels, ForwardMatchesCpuExactlyOnIntegers) {
  const ConvShape s = shape();
  const ConvData d = integer_data(s, 11);
  EXPECT_TRUE(all_equal(forward_gpu(version(), s, d, true), forward_cpu(s, d, true)))
      << "with bias";
  EXPECT_TRUE(all_equal(forward_gpu(version(), s, d, false), forward_cpu(s, d, false)))
      << "bias null";
}

TEST_P(ConvKernels, BackwardInputMatchesCpuExactlyOnIntegers) {
  const ConvShape s = shape();
  const ConvData d = integer_data(s, 21);
  EXPECT_TRUE(all_equal(backward_input_gpu(version(), s, d), backward_input_cpu(s, d)));
}

TEST_P(ConvKernels, BackwardWeightsAndBiasMatchCpuExactlyOnIntegers) {
  const ConvShape s = shape();
  const ConvData d = integer_data(s, 31);
  const WeightGrads gpu = backward_weights_gpu(version(), s, d, true);
  const WeightGrads cpu = backward_weights_cpu(s, d, true);
  EXPECT_TRUE(all_equal(gpu.weight, cpu.weight)) << "dL/dweight";
  EXPECT_TRUE(all_equal(gpu.bias, cpu.bias)) << "dL/dbias";
}

TEST_P(ConvKernels, BackwardWeightsWithoutBiasMatchesCpuExactlyOnIntegers) {
  const ConvShape s = shape();
  const ConvData d = integer_data(s, 41);
  EXPECT_TRUE(all_equal(backward_weights_gpu(version(), s, d, false).weight,
                        backward_weights_cpu(s, d, false).weight));
}

// A connection table (C3's, in LeNet) zeroes the gradient of absent (m, c) pairs: the kernel must
// multiply each weight's sum by its mask entry. Random 0/1 per (m, c), the same for its K x K taps.
TEST_P(ConvKernels, BackwardWeightsAppliesMask) {
  const ConvShape s = shape();
  const ConvData d = integer_data(s, 51);
  const std::vector<float> pairs = random_integers(std::size_t(s.m) * s.c, 0, 1, 52);
  std::vector<float> mask(weight_count(s));
  for (std::size_t i = 0; i < mask.size(); ++i) mask[i] = pairs[i / (std::size_t(s.k) * s.k)];

  WeightGrads expected = backward_weights_cpu(s, d, true);
  for (std::size_t i = 0; i < mask.size(); ++i) expected.weight[i] *= mask[i];
  const WeightGrads gpu = backward_weights_gpu(version(), s, d, true, &mask);
  EXPECT_TRUE(all_equal(gpu.weight, expected.weight)) << "dL/dweight * mask";
  EXPECT_TRUE(all_equal(gpu.bias, expected.bias)) << "dL/dbias (not masked)";
}

TEST_P(ConvKernels, ForwardMatchesCpuOnRandomFloats) {
  const ConvShape s = shape();
  const ConvData d = float_data(s, 61);
  EXPECT_TRUE(all_close(forward_gpu(version(), s, d, true), forward_cpu(s, d, true),
                        forward_cpu(s, magnitudes(d), true), kFloatRel));
}

TEST_P(ConvKernels, BackwardInputMatchesCpuOnRandomFloats) {
  const ConvShape s = shape();
  const ConvData d = float_data(s, 71);
  EXPECT_TRUE(all_close(backward_input_gpu(version(), s, d), backward_input_cpu(s, d),
                        backward_input_cpu(s, magnitudes(d)), kFloatRel));
}

TEST_P(ConvKernels, BackwardWeightsMatchCpuOnRandomFloats) {
  const ConvShape s = shape();
  const ConvData d = float_data(s, 81);
  const WeightGrads gpu = backward_weights_gpu(version(), s, d, true);
  const WeightGrads cpu = backward_weights_cpu(s, d, true);
  const WeightGrads scale = backward_weights_cpu(s, magnitudes(d), true);
  EXPECT_TRUE(all_close(gpu.weight, cpu.weight, scale.weight, kFloatRel)) << "dL/dweight";
  EXPECT_TRUE(all_close(gpu.bias, cpu.bias, scale.bias, kFloatRel)) << "dL/dbias";
}

// Fixed assignment of terms to threads and a fixed reduction tree: the same inputs give the same
// bits every time (float atomics would not).
TEST_P(ConvKernels, BackwardWeightsAreBitIdenticalRunToRun) {
  const ConvShape s = shape();
  const ConvData d = float_data(s, 91);
  const WeightGrads first = backward_weights_gpu(version(), s, d, true);
  const WeightGrads second = backward_weights_gpu(version(), s, d, true);
  ASSERT_EQ(count_nans(first.weight), 0u);
  ASSERT_EQ(count_nans(first.bias), 0u);
  ASSERT_EQ(first.weight.size(), second.weight.size());
  ASSERT_EQ(first.bias.size(), second.bias.size());
  EXPECT_EQ(
      std::memcmp(first.weight.data(), second.weight.data(), first.weight.size() * sizeof(float)),
      0);
  EXPECT_EQ(std::memcmp(first.bias.data(), second.bias.data(), first.bias.size() * sizeof(float)),
            0);
}

INSTANTIATE_TEST_SUITE_P(LeNetAndTileShapes, ConvKernels,
                         testing::Combine(testing::ValuesIn(all_versions()),
                                          testing::ValuesIn(kConvCases)),
                         [](const testing::TestParamInfo<VersionAndCase>& param) {
                           return version_label(std::get<0>(param.param)) + "_" +
                                  std::get<1>(param.param).name;
                         });

// ---- Fig 16.14: the chapter's numeric example, with known answers -------------------------------

// X (1,3,3,3) and W (2,3,2,2) as reconstructed in textbook-figures.md §1.13; dL/dY[m,h,w] =
// 1 + 4m + 2h + w. Expected values from §1.4, §1.7 and §1.8. C = 3, so E08 would show here.
const ConvShape kFig1614{1, 3, 3, 3, 2, 2};

ConvData fig1614_data() {
  return ConvData{{1, 2, 0, 1, 1, 3, 0, 2, 2,            // X[0]
                   0, 2, 1, 0, 3, 2, 1, 1, 0,            // X[1]
                   1, 2, 1, 0, 1, 3, 3, 3, 2},           // X[2]
                  {1, 1, 2, 2, 1, 1, 1, 1, 0, 1, 1, 0,   // W[0][0..2]
                   1, 0, 0, 1, 2, 1, 2, 1, 1, 2, 2, 0},  // W[1][0..2]
                  {0, 0},                                // no bias
                  {1, 2, 3, 4, 5, 6, 7, 8}};             // dL/dY
}

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) sum += double(a[i]) * b[i];
  return sum;
}

class ConvKernelsFig1614 : public testing::TestWithParam<ConvAlgo> {};

TEST_P(ConvKernelsFig1614, ForwardGivesThePrintedY) {
  LENET5_REQUIRE_GPU();
  const ConvData d = fig1614_data();
  const std::vector<float> y = forward_gpu(GetParam(), kFig1614, d, false);
  EXPECT_TRUE(all_equal(y, {14, 20, 15, 24, 12, 24, 17, 26}));
}

TEST_P(ConvKernelsFig1614, BackwardInputGivesTheDerivedValues) {
  LENET5_REQUIRE_GPU();
  const ConvData d = fig1614_data();
  const std::vector<float> dL_dx = backward_input_gpu(GetParam(), kFig1614, d);
  EXPECT_TRUE(all_equal(dL_dx, {6,  9,  2,  12, 26, 14, 6,  21, 16,    // dL/dX[0]
                                11, 20, 8,  28, 50, 20, 17, 30, 12,    // dL/dX[1]
                                5,  17, 14, 18, 39, 20, 17, 20, 0}));  // dL/dX[2]
  // Bilinearity: sum dL/dY * Y = sum dL/dX * X (= 726 for this data).
  EXPECT_EQ(dot(dL_dx, d.x), 726.0);
}

TEST_P(ConvKernelsFig1614, BackwardWeightsGiveTheDerivedValues) {
  LENET5_REQUIRE_GPU();
  const ConvData d = fig1614_data();
  const WeightGrads g = backward_weights_gpu(GetParam(), kFig1614, d, true);
  EXPECT_TRUE(all_equal(g.weight, {12, 17, 11, 21, 16, 21, 13, 10, 9,  19, 23, 24,     // m = 0
                                   32, 41, 27, 53, 36, 53, 33, 34, 25, 47, 51, 60}));  // m = 1
  EXPECT_TRUE(all_equal(g.bias, {1 + 2 + 3 + 4, 5 + 6 + 7 + 8}));
  EXPECT_EQ(dot(g.weight, d.weight), 726.0);  // = sum dL/dW * W, bilinearity again
}

INSTANTIATE_TEST_SUITE_P(Versions, ConvKernelsFig1614, testing::ValuesIn(all_versions()),
                         [](const testing::TestParamInfo<ConvAlgo>& param) {
                           return version_label(param.param);
                         });

}  // namespace
