// The book's own form of convolution version 3 (cuda/kernels/conv/unroll_gemm.cuh): the GPU unroll of
// Figs 16.17/16.18 against the CPU unroll of Fig 16.16 and the corrected Fig 16.14 matrix
// (textbook-figures.md §1.13), and the per-sample unroll + cublasSgemm of Fig 16.15 against the CPU
// forward (Fig 16.4). The batched ConvAlgorithm of version 3 runs, with every other version, in
// test_conv_kernels.cpp.
//
// Every output buffer is filled with NaN first, so an element the kernel does not write shows.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "cuda/kernels/conv/unroll_gemm.cuh"
#include "gpu_test_util.hpp"
#include "layers/reference_cpu.hpp"

namespace {

using lenet5::Buffer;
using lenet5::ConvShape;
using namespace lenet5::test;

std::size_t sample_count(const ConvShape& s) {
  return std::size_t(s.c) * s.h * s.w;
}
// One sample's CKK x HW unrolled matrix.
std::size_t unrolled_count(const ConvShape& s) {
  return std::size_t(s.c) * s.k * s.k * s.h_out() * s.w_out();
}

// The unroll of sample n of x; the caller offsets the pointer (erratum E21), as Fig 16.15 must.
std::vector<float> unroll_gpu(const ConvShape& s, const std::vector<float>& x, int n) {
  const Buffer<float> x_device = upload(x);
  Buffer<float> x_unroll = poisoned(unrolled_count(s));
  lenet5::cuda::conv_unroll(s, x_device.data() + n * sample_count(s), x_unroll.data(), nullptr);
  return download(x_unroll);
}

std::vector<float> unroll_cpu(const ConvShape& s, const std::vector<float>& x, int n) {
  std::vector<float> x_unroll(unrolled_count(s));
  lenet5::conv_unroll_cpu<float>(s, x.data() + n * sample_count(s), x_unroll.data());
  return x_unroll;
}

// No NaN and the same bits (an unroll only copies, so not even -0 versus +0 may differ).
testing::AssertionResult same_bits(const std::vector<float>& actual,
                                   const std::vector<float>& expected) {
  if (actual.size() != expected.size())
    return testing::AssertionFailure()
           << "size " << actual.size() << ", expected " << expected.size();
  if (count_nans(actual) > 0) return testing::AssertionFailure() << count_nans(actual) << " NaN";
  if (std::memcmp(actual.data(), expected.data(), actual.size() * sizeof(float)) != 0)
    return testing::AssertionFailure() << "bits differ: " << all_equal(actual, expected).message();
  return testing::AssertionSuccess();
}

// Fig 16.14's data as reconstructed in textbook-figures.md §1.13: X (1,3,3,3), W (2,3,2,2).
const ConvShape kFig1614{1, 3, 3, 3, 2, 2};
const std::vector<float> kFigX = {1, 2, 0, 1, 1, 3, 0, 2, 2,            // X[0]
                                  0, 2, 1, 0, 3, 2, 1, 1, 0,            // X[1]
                                  1, 2, 1, 0, 1, 3, 3, 3, 2};           // X[2]
const std::vector<float> kFigW = {1, 1, 2, 2, 1, 1, 1, 1, 0, 1, 1, 0,   // W[0][0..2]
                                  1, 0, 0, 1, 2, 1, 2, 1, 1, 2, 2, 0};  // W[1][0..2]

TEST(ConvUnrollGpu, Fig16_14GivesTheCorrectedMatrix) {
  LENET5_REQUIRE_GPU();
  // §1.13's 12x4 matrix: the printed one with rows 9 and 10 of column 3 swapped (erratum E26).
  const std::vector<float> corrected = {1, 2, 1, 1, 2, 0, 1, 3, 1, 1, 0, 2, 1, 3, 2, 2,   // r1-r4
                                        0, 2, 0, 3, 2, 1, 3, 2, 0, 3, 1, 1, 3, 2, 1, 0,   // r5-r8
                                        1, 2, 0, 1, 2, 1, 1, 3, 0, 1, 3, 3, 1, 3, 3, 2};  // r9-r12
  const std::vector<float> gpu = unroll_gpu(kFig1614, kFigX, 0);
  EXPECT_TRUE(all_equal(gpu, corrected)) << "textbook-figures.md §1.13";
  EXPECT_TRUE(same_bits(gpu, unroll_cpu(kFig1614, kFigX, 0))) << "conv_unroll_cpu";
}

// Random floats on LeNet's C1 (784 threads: the printed block count gives 0 blocks) and C3 (600),
// every sample of a batch, each through its own offset pointer.
TEST(ConvUnrollGpu, MatchesCpuBitExactlyOnC1AndC3) {
  LENET5_REQUIRE_GPU();
  for (const ConvShape& s : {ConvShape{3, 1, 32, 32, 6, 5}, ConvShape{2, 6, 14, 14, 16, 5}}) {
    const std::vector<float> x = random_floats(std::size_t(s.n) * sample_count(s), 7);
    for (int n = 0; n < s.n; ++n)
      EXPECT_TRUE(same_bits(unroll_gpu(s, x, n), unroll_cpu(s, x, n)))
          << "C = " << s.c << ", H = " << s.h << ", sample " << n;
  }
}

// ---- Fig 16.15: one unroll and one cublasSgemm per sample ---------------------------------------

std::vector<float> forward_per_sample_gpu(const ConvShape& s, const std::vector<float>& x,
                                          const std::vector<float>& weight) {
  const Buffer<float> x_device = upload(x), weight_device = upload(weight);
  Buffer<float> y = poisoned(y_count(s));
  Buffer<float> x_unroll = poisoned(unrolled_count(s));  // one buffer for every sample
  lenet5::cuda::CublasHandle cublas;
  lenet5::cuda::conv_forward_unroll_per_sample(cublas, s, x_device.data(), weight_device.data(),
                                               y.data(), x_unroll.data());
  return download(y);  // waits before the handle and the buffers go
}

std::vector<float> forward_cpu(const ConvShape& s, const std::vector<float>& x,
                               const std::vector<float>& weight) {
  std::vector<float> y(y_count(s));
  lenet5::conv_forward_cpu<float>(s, x.data(), weight.data(), nullptr, y.data());
  return y;
}

struct PerSampleCase {
  const char* name;
  ConvShape shape;  // n, c, h, w, m, k
};

void PrintTo(const PerSampleCase& c, std::ostream* out) {
  *out << c.name;
}

class ConvForwardPerSample : public testing::TestWithParam<PerSampleCase> {};

// Small integers in -3..3: every product and partial sum is an integer far below 2^24, exact in
// float32, so cuBLAS's summation order cannot change a bit. Several samples, so that a sample
// reading sample 0's input (E21 "fixed" by dropping n) or writing over another's output shows.
TEST_P(ConvForwardPerSample, MatchesCpuExactlyOnIntegers) {
  LENET5_REQUIRE_GPU();
  const ConvShape s = GetParam().shape;
  const std::vector<float> x = random_integers(std::size_t(s.n) * sample_count(s), -3, 3, 101);
  const std::vector<float> weight = random_integers(std::size_t(s.m) * s.c * s.k * s.k, -3, 3, 102);
  EXPECT_TRUE(all_equal(forward_per_sample_gpu(s, x, weight), forward_cpu(s, x, weight)));
}

INSTANTIATE_TEST_SUITE_P(LeNetShapes, ConvForwardPerSample,
                         testing::Values(PerSampleCase{"C1", {3, 1, 32, 32, 6, 5}},
                                         PerSampleCase{"C3", {2, 6, 14, 14, 16, 5}},
                                         PerSampleCase{"C5", {2, 16, 5, 5, 120, 5}},
                                         PerSampleCase{"Fig16_14", kFig1614}),
                         [](const testing::TestParamInfo<PerSampleCase>& param) {
                           return std::string(param.param.name);
                         });

TEST(ConvForwardPerSampleFig1614, GivesThePrintedY) {
  LENET5_REQUIRE_GPU();
  const std::vector<float> y = forward_per_sample_gpu(kFig1614, kFigX, kFigW);
  EXPECT_TRUE(all_equal(y, {14, 20, 15, 24, 12, 24, 17, 26}));
  EXPECT_TRUE(all_equal(y, forward_cpu(kFig1614, kFigX, kFigW)));
}

}  // namespace
