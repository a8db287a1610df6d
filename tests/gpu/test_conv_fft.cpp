// The FFT convolution (cuda/figures/conv_fft.hpp, Exercise 3) against the CPU reference in double, on every
// LeNet shape, the Fig 16.14 example, and shapes that a square-only or wrong-window implementation
// gets wrong: H != W with K odd and even, an output only one row high (K = H), and W odd (so that
// W/2+1 rounds). Every output is poisoned with NaN first, so an unwritten output fails.
//
// Tolerance: normwise, max |y - ref| / max |ref| <= 1e-4 (the spec's, textbook-figures.md §1.22):
// the FFT's round-off, about log2(HW) * 2^-24 times the sizes of X and W, is spread over a whole
// map, so it is not bounded per element; it stays below 1e-6 at these sizes, while a wrong index,
// a convolution instead of a correlation or a wrong window gives errors of order 1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "cuda/figures/conv_fft.hpp"
#include "figures/fig16_14_data.hpp"
#include "gpu_test_util.hpp"
#include "layers/reference_cpu.hpp"

namespace {

using lenet5::Buffer;
using lenet5::ConvShape;
using namespace lenet5::test;

constexpr double kRelTolerance = 1e-4;

struct Case {
  const char* name;
  ConvShape s;
};

std::ostream& operator<<(std::ostream& out, const Case& c) {
  return out << c.name;
}

std::vector<double> reference(const ConvShape& s, const std::vector<float>& x,
                              const std::vector<float>& w) {
  const std::vector<double> xd(x.begin(), x.end()), wd(w.begin(), w.end());
  std::vector<double> y(y_count(s));
  lenet5::conv_forward_cpu(s, xd.data(), wd.data(), static_cast<const double*>(nullptr), y.data());
  return y;
}

// max |actual - expected| / max |expected| <= rel, and no NaN.
testing::AssertionResult normwise_close(const std::vector<float>& actual,
                                        const std::vector<double>& expected, double rel) {
  if (actual.size() != expected.size())
    return testing::AssertionFailure()
           << "size " << actual.size() << ", expected " << expected.size();
  if (const std::size_t nans = count_nans(actual))
    return testing::AssertionFailure() << nans << " NaN (unwritten) outputs";
  double error = 0, size = 0;
  std::size_t worst = 0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double e = std::fabs(double(actual[i]) - expected[i]);
    if (e > error) error = e, worst = i;
    size = std::max(size, std::fabs(expected[i]));
  }
  if (error <= rel * size) return testing::AssertionSuccess() << "relative error " << error / size;
  return testing::AssertionFailure()
         << "max |error| " << error << " at [" << worst << "] (" << actual[worst] << ", expected "
         << expected[worst] << ") is " << error / size << " of max |ref| " << size << ", above "
         << rel;
}

class FftConvolutionShapes : public testing::TestWithParam<Case> {};

TEST_P(FftConvolutionShapes, ForwardMatchesTheCpuReference) {
  LENET5_REQUIRE_GPU();
  const ConvShape s = GetParam().s;
  const std::vector<float> x = random_floats(x_count(s), 11),
                           w = random_floats(weight_count(s), 12);
  const Buffer<float> x_dev = upload(x), w_dev = upload(w);
  Buffer<float> y = poisoned(y_count(s));
  lenet5::cuda::FftConvolution fft(s);
  fft.forward(x_dev.data(), w_dev.data(), y.data(), cudaStreamPerThread);
  EXPECT_TRUE(normwise_close(download(y), reference(s, x, w), kRelTolerance));
  // The inputs are only read (cufftExecR2C gets a const_cast x) and a second call gives the
  // same bits (no state carried between calls).
  EXPECT_TRUE(all_equal(x_dev.to_vector(), x));
  EXPECT_TRUE(all_equal(w_dev.to_vector(), w));
  const std::vector<float> first = download(y);
  poison(y);
  fft.forward(x_dev.data(), w_dev.data(), y.data(), cudaStreamPerThread);
  EXPECT_TRUE(all_equal(download(y), first));
}

INSTANTIATE_TEST_SUITE_P(LeNetAndOdd, FftConvolutionShapes,
                         testing::Values(Case{"LeNet_C1", ConvShape{64, 1, 32, 32, 6, 5}},
                                         Case{"LeNet_C3", ConvShape{64, 6, 14, 14, 16, 5}},
                                         Case{"LeNet_C5", ConvShape{64, 16, 5, 5, 120, 5}},
                                         Case{"H_ne_W_K3", ConvShape{3, 4, 9, 20, 5, 3}},
                                         Case{"H_ne_W_K4_even", ConvShape{2, 3, 12, 7, 2, 4}},
                                         Case{"one_output_row", ConvShape{2, 2, 6, 11, 3, 6}},
                                         Case{"K1", ConvShape{2, 3, 5, 6, 4, 1}}),
                         [](const testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.name);
                         });

// The Fig 16.14 example (integer data): the FFT's outputs, rounded, are the figure's printed Y.
TEST(FftConvolutionExample, Fig16_14RoundsToThePrintedOutput) {
  LENET5_REQUIRE_GPU();
  namespace fig = lenet5::figures::fig16_14;
  const ConvShape s = fig::shape();
  const std::vector<float>& x = fig::x();
  const std::vector<float>& w = fig::w();
  const Buffer<float> x_dev = upload(x), w_dev = upload(w);
  Buffer<float> y = poisoned(y_count(s));
  lenet5::cuda::FftConvolution fft(s);
  fft.forward(x_dev.data(), w_dev.data(), y.data(), cudaStreamPerThread);
  std::vector<float> out = download(y);
  EXPECT_TRUE(normwise_close(out, reference(s, x, w), kRelTolerance));
  for (float& v : out) v = std::nearbyint(v);
  EXPECT_TRUE(all_equal(out, fig::printed_y()));
}

TEST(FftConvolutionExample, InvalidShapeIsAClearError) {
  LENET5_REQUIRE_GPU();
  try {
    lenet5::cuda::FftConvolution fft(ConvShape{1, 1, 4, 4, 1, 5});  // K > H
    FAIL() << "no error for K > H";
  } catch (const lenet5::Error& e) {
    EXPECT_NE(std::string(e.what()).find("K <= H, W"), std::string::npos) << e.what();
  }
}

}  // namespace
