// Subsampling kernels (cuda/kernels/subsample.cu) against the CPU reference
// (layers/subsample_cpu.cpp), for average, max and trainable (LeCun et al. 1998: a coefficient per
// map times the window's sum), on LeNet's S2 and S4 shapes and on odd sizes whose last rows and
// columns belong to no full window (they must get zero gradient). Max inputs are small integers, so
// windows often hold tied maxima: forward and backward must both pick the first one in row-major
// order.
//
// Every output buffer is filled with NaN before each launch, so an output the kernel does not write
// is counted as a NaN in the failure message.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "cuda/kernels/subsample.cuh"
#include "gpu_test_util.hpp"
#include "layers/reference_cpu.hpp"

namespace {

using lenet5::Buffer;
using lenet5::PoolShape;
using lenet5::Subsampling;
using namespace lenet5::test;

std::size_t x_count(const PoolShape& s) {
  return std::size_t(s.n) * s.c * s.h * s.w;
}
std::size_t y_count(const PoolShape& s) {
  return std::size_t(s.n) * s.c * s.h_out() * s.w_out();
}

const char* name_of(Subsampling kind) {
  return lenet5::to_string(kind);
}
constexpr Subsampling kKinds[] = {Subsampling::average, Subsampling::max, Subsampling::trainable};

// x (N,C,H,W), bias (C), dL_dy (N,C,H/K,W/K), coef (C): trainable subsampling's coefficients
// (the other kinds ignore them).
struct PoolData {
  std::vector<float> x, bias, dL_dy, coef;
};

// Integers in -2..2: five values over windows of 4 or 9 elements, so most windows have a tied
// maximum. Sums are small integers (exact in float32); each average is then one division, which
// both sides round the same way; a coefficient in -3..3 times a sum, and every coefficient
// gradient (at most 2,352 terms of at most 3 x 18 here), are integers below 2^24: exact too.
PoolData integer_data(const PoolShape& s, unsigned seed) {
  return PoolData{random_integers(x_count(s), -2, 2, seed),
                  random_integers(std::size_t(s.c), -3, 3, seed + 1),
                  random_integers(y_count(s), -3, 3, seed + 2),
                  random_integers(std::size_t(s.c), -3, 3, seed + 3)};
}

PoolData float_data(const PoolShape& s, unsigned seed) {
  return PoolData{random_floats(x_count(s), seed), random_floats(std::size_t(s.c), seed + 1),
                  random_floats(y_count(s), seed + 2), random_floats(std::size_t(s.c), seed + 3)};
}

// ---- CPU reference and GPU runs, vectors in and out ---------------------------------------------

// One direction's output from the GPU kernel and from the CPU reference, on the same inputs.
struct Outputs {
  std::vector<float> gpu, cpu;
};

Outputs forward(const PoolShape& s, Subsampling kind, const PoolData& d) {
  const Buffer<float> x = upload(d.x), bias = upload(d.bias), coef = upload(d.coef);
  return {gpu_output(y_count(s),
                     [&](float* y) {
                       lenet5::cuda::subsample_forward(s, kind, x.data(), bias.data(), y, nullptr,
                                                       {}, coef.data());
                     }),
          cpu_output(y_count(s), [&](float* y) {
            lenet5::subsample_forward_cpu<float>(s, kind, d.x.data(), d.bias.data(), y,
                                                 d.coef.data());
          })};
}

Outputs backward_input(const PoolShape& s, Subsampling kind, const PoolData& d) {
  const Buffer<float> x = upload(d.x), dL_dy = upload(d.dL_dy), coef = upload(d.coef);
  return {gpu_output(x_count(s),
                     [&](float* dL_dx) {
                       lenet5::cuda::subsample_backward_input(s, kind, x.data(), dL_dy.data(),
                                                              dL_dx, nullptr, {}, nullptr,
                                                              coef.data());
                     }),
          cpu_output(x_count(s), [&](float* dL_dx) {
            lenet5::subsample_backward_input_cpu<float>(s, kind, d.x.data(), d.dL_dy.data(), dL_dx,
                                                        d.coef.data());
          })};
}

Outputs backward_coef(const PoolShape& s, const std::vector<float>& x_host,
                      const std::vector<float>& dL_dy) {
  const Buffer<float> x = upload(x_host), dy = upload(dL_dy);
  return {gpu_output(std::size_t(s.c),
                     [&](float* dL_dcoef) {
                       lenet5::cuda::subsample_backward_coef(s, x.data(), dy.data(), dL_dcoef,
                                                             nullptr);
                     }),
          cpu_output(std::size_t(s.c), [&](float* dL_dcoef) {
            lenet5::subsample_backward_coef_cpu<float>(s, x_host.data(), dL_dy.data(), dL_dcoef);
          })};
}

Outputs backward_bias(const PoolShape& s, const std::vector<float>& dL_dy) {
  const Buffer<float> dy = upload(dL_dy);
  return {gpu_output(std::size_t(s.c),
                     [&](float* dL_dbias) {
                       lenet5::cuda::subsample_backward_bias(s, dy.data(), dL_dbias, nullptr);
                     }),
          cpu_output(std::size_t(s.c), [&](float* dL_dbias) {
            lenet5::subsample_backward_bias_cpu<float>(s, dL_dy.data(), dL_dbias);
          })};
}

// Elements of dL/dX outside every full window: rows >= H_out*K or columns >= W_out*K.
std::size_t nonzero_beyond_last_window(const PoolShape& s, const std::vector<float>& dL_dx) {
  std::size_t nonzero = 0;
  for (std::size_t i = 0; i < dL_dx.size(); ++i) {
    const int w = int(i % s.w), h = int(i / s.w % s.h);
    if ((h >= s.h_out() * s.k || w >= s.w_out() * s.k) && !(dL_dx[i] == 0.0f)) ++nonzero;
  }
  return nonzero;
}

// ---- the LeNet shapes and odd sizes -------------------------------------------------------------

struct PoolCase {
  const char* name;
  PoolShape shape;  // n, c, h, w, k
};

void PrintTo(const PoolCase& c, std::ostream* out) {
  *out << c.name;
}

const PoolCase kPoolCases[] = {
    {"S2", {3, 6, 28, 28, 2}},      // (3,6,28,28) -> (3,6,14,14)
    {"S4", {3, 16, 10, 10, 2}},     // (3,16,10,10) -> (3,16,5,5)
    {"Odd7x7", {2, 3, 7, 7, 2}},    // -> (2,3,3,3): row 6 and column 6 get zero gradient
    {"Odd8x7K3", {2, 2, 8, 7, 3}},  // -> (2,2,2,2): rows 6-7 and column 6; H != W, K = 3
};

class SubsampleKernels : public testing::TestWithParam<PoolCase> {};

TEST_P(SubsampleKernels, ForwardMatchesCpuExactlyOnIntegers) {
  LENET5_REQUIRE_GPU();
  const PoolShape s = GetParam().shape;
  const PoolData d = integer_data(s, 101);
  for (Subsampling kind : kKinds) {
    const Outputs y = forward(s, kind, d);
    EXPECT_TRUE(all_equal(y.gpu, y.cpu)) << name_of(kind);
  }
}

TEST_P(SubsampleKernels, BackwardInputMatchesCpuExactlyOnIntegers) {
  LENET5_REQUIRE_GPU();
  const PoolShape s = GetParam().shape;
  const PoolData d = integer_data(s, 111);
  for (Subsampling kind : kKinds) {
    const Outputs dL_dx = backward_input(s, kind, d);
    EXPECT_TRUE(all_equal(dL_dx.gpu, dL_dx.cpu)) << name_of(kind);
    EXPECT_EQ(nonzero_beyond_last_window(s, dL_dx.gpu), 0u) << name_of(kind);
  }
}

// Not only integers: both sides perform the same float operations in the same order (the window
// sum p-major, one correctly rounded division or multiplication by the coefficient, one bias
// addition, never fused; max only selects), so even random floats must agree bit for bit.
TEST_P(SubsampleKernels, ForwardAndBackwardInputMatchCpuBitForBitOnRandomFloats) {
  LENET5_REQUIRE_GPU();
  const PoolShape s = GetParam().shape;
  const PoolData d = float_data(s, 121);
  for (Subsampling kind : kKinds) {
    const Outputs y = forward(s, kind, d), dL_dx = backward_input(s, kind, d);
    EXPECT_TRUE(all_equal(y.gpu, y.cpu)) << name_of(kind);
    EXPECT_TRUE(all_equal(dL_dx.gpu, dL_dx.cpu)) << name_of(kind);
  }
}

TEST_P(SubsampleKernels, BackwardBiasMatchesCpuExactlyOnIntegers) {
  LENET5_REQUIRE_GPU();
  const PoolShape s = GetParam().shape;
  const PoolData d = integer_data(s, 131);
  const Outputs dL_dbias = backward_bias(s, d.dL_dy);
  EXPECT_TRUE(all_equal(dL_dbias.gpu, dL_dbias.cpu));
}

// Random floats: the GPU adds the N*H_out*W_out terms of each bias (at most 2,352 here) in another
// order, so results differ by rounding: typically about 2^-24, at worst about n * 2^-24, times the
// sum of |terms|. 1e-5 of that sum leaves a wide margin; a missing term (about 1/n of it) fails.
TEST_P(SubsampleKernels, BackwardBiasMatchesCpuOnRandomFloats) {
  LENET5_REQUIRE_GPU();
  const PoolShape s = GetParam().shape;
  const PoolData d = float_data(s, 141);
  const Outputs dL_dbias = backward_bias(s, d.dL_dy);
  EXPECT_TRUE(all_close(dL_dbias.gpu, dL_dbias.cpu, backward_bias(s, absolute(d.dL_dy)).cpu, 1e-5));
}

TEST_P(SubsampleKernels, BackwardCoefMatchesCpuExactlyOnIntegers) {
  LENET5_REQUIRE_GPU();
  const PoolShape s = GetParam().shape;
  const PoolData d = integer_data(s, 161);
  const Outputs dL_dcoef = backward_coef(s, d.x, d.dL_dy);
  EXPECT_TRUE(all_equal(dL_dcoef.gpu, dL_dcoef.cpu));
}

// Random floats: as for the bias, the GPU adds the terms in another order (and may fuse each
// product into its running sum), so results differ by rounding. The scale is the same sum over
// |dL/dS| and |x| (which bounds every |term|, since |window sum| <= the sum of |x|); 1e-5 of it
// leaves a wide margin, and a missing term or window element fails.
TEST_P(SubsampleKernels, BackwardCoefMatchesCpuOnRandomFloats) {
  LENET5_REQUIRE_GPU();
  const PoolShape s = GetParam().shape;
  const PoolData d = float_data(s, 171);
  const Outputs dL_dcoef = backward_coef(s, d.x, d.dL_dy);
  EXPECT_TRUE(all_close(dL_dcoef.gpu, dL_dcoef.cpu,
                        backward_coef(s, absolute(d.x), absolute(d.dL_dy)).cpu, 1e-5));
}

TEST_P(SubsampleKernels, BackwardCoefIsBitIdenticalRunToRun) {
  LENET5_REQUIRE_GPU();
  const PoolShape s = GetParam().shape;
  const PoolData d = float_data(s, 181);
  const std::vector<float> first = backward_coef(s, d.x, d.dL_dy).gpu;
  const std::vector<float> second = backward_coef(s, d.x, d.dL_dy).gpu;
  ASSERT_EQ(count_nans(first), 0u);
  ASSERT_EQ(first.size(), second.size());
  EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * sizeof(float)), 0);
}

TEST_P(SubsampleKernels, BackwardBiasIsBitIdenticalRunToRun) {
  LENET5_REQUIRE_GPU();
  const PoolShape s = GetParam().shape;
  const PoolData d = float_data(s, 151);
  const std::vector<float> first = backward_bias(s, d.dL_dy).gpu;
  const std::vector<float> second = backward_bias(s, d.dL_dy).gpu;
  ASSERT_EQ(count_nans(first), 0u);
  ASSERT_EQ(first.size(), second.size());
  EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * sizeof(float)), 0);
}

INSTANTIATE_TEST_SUITE_P(LeNetAndOddShapes, SubsampleKernels, testing::ValuesIn(kPoolCases),
                         [](const testing::TestParamInfo<PoolCase>& param) {
                           return std::string(param.param.name);
                         });

// ---- hand-computed examples ---------------------------------------------------------------------

// textbook-figures.md §1.5: one 4x4 map holding 1..16 row-major, K = 2, bias 0.
TEST(SubsampleKernelsExamples, Fig16_5AverageOfOneToSixteen) {
  LENET5_REQUIRE_GPU();
  const PoolShape s{1, 1, 4, 4, 2};
  PoolData d{std::vector<float>(16), {0}, {}, {1}};  // the coefficient only trainable reads
  for (int i = 0; i < 16; ++i) d.x[std::size_t(i)] = float(i + 1);
  EXPECT_TRUE(all_equal(forward(s, Subsampling::average, d).gpu, {3.5f, 5.5f, 11.5f, 13.5f}));
}

// LeCun et al. 1998: 1..16 again, coefficient 0.5 and bias 1. Window sums 14, 22, 46, 54 give
// 8, 12, 24, 28; dL/dS = 10, 20, 30, 40 gives dL/dX = 0.5 dL/dS over each window and
// dL/dcoef = 10*14 + 20*22 + 30*46 + 40*54 = 4,120.
TEST(SubsampleKernelsExamples, TrainableCoefficientOfOneToSixteen) {
  LENET5_REQUIRE_GPU();
  const PoolShape s{1, 1, 4, 4, 2};
  PoolData d{std::vector<float>(16), {1}, {10, 20, 30, 40}, {0.5f}};
  for (int i = 0; i < 16; ++i) d.x[std::size_t(i)] = float(i + 1);
  EXPECT_TRUE(all_equal(forward(s, Subsampling::trainable, d).gpu, {8, 12, 24, 28}));
  EXPECT_TRUE(all_equal(backward_input(s, Subsampling::trainable, d).gpu,
                        {5, 5, 10, 10, 5, 5, 10, 10, 15, 15, 20, 20, 15, 15, 20, 20}));
  EXPECT_TRUE(all_equal(backward_coef(s, d.x, d.dL_dy).gpu, {4120}));
}

// Four 2x2 windows, three with tied maxima; the gradient of each goes to its first maximum in
// row-major order and nowhere else.
TEST(SubsampleKernelsExamples, MaxTiesGoToTheFirstMaximum) {
  LENET5_REQUIRE_GPU();
  const PoolShape s{1, 1, 4, 4, 2};
  const PoolData d{{1, 1, 0, 2,   // window (0,0): 1 1 / 1 0 -> (0,0)
                    1, 0, 2, 1,   // window (0,1): 0 2 / 2 1 -> (0,1), not (1,0)
                    3, -1, 5, 5,  // window (1,0): 3 -1 / 3 3 -> (0,0)
                    3, 3, 5, 5},  // window (1,1): all 5 -> (0,0)
                   {0.5f},
                   {10, 20, 30, 40},
                   {1}};
  EXPECT_TRUE(all_equal(forward(s, Subsampling::max, d).gpu, {1.5f, 2.5f, 3.5f, 5.5f}));
  EXPECT_TRUE(all_equal(backward_input(s, Subsampling::max, d).gpu, {10, 0, 0, 20,  //
                                                                      0, 0, 0, 0,    //
                                                                      30, 0, 40, 0,  //
                                                                      0, 0, 0, 0}));
}

}  // namespace
