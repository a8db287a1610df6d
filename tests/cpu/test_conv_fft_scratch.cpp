// Exercise 3's FFT convolution on the host (cuda/figures/conv_fft.hpp): the extra memory it needs,
// which is pure arithmetic. Its header names CUDA types, so a build without GPU support leaves this
// file out (tests/CMakeLists.txt); the convolution itself is tested in tests/gpu/test_conv_fft.cpp.
#include <gtest/gtest.h>

#include <cmath>

#include "cuda/figures/conv_fft.hpp"

namespace lenet5 {
namespace {

// §1.22 ex 3: the FFT convolution's extra memory (cuda::fft_scratch, pure arithmetic). C1's
// filters padded to 32x32: 6,144 floats instead of 150, 40.96x ("41x" in the spec).
TEST(FiguresUnit, Exercise3FftScratch) {
  const cuda::FftScratch c1 = cuda::fft_scratch({64, 1, 32, 32, 6, 5});
  EXPECT_EQ(c1.filter_floats, 150u);
  EXPECT_EQ(c1.padded_filter_floats, 6144u);
  EXPECT_DOUBLE_EQ(c1.padding_ratio(), 40.96);
  EXPECT_EQ(std::lround(c1.padding_ratio()), 41);
  EXPECT_EQ(c1.filter_spectrum_complex, 6u * 32 * 17);  // W/2+1 = 17 columns
  EXPECT_EQ(c1.input_spectrum_complex, 64u * 32 * 17);
  EXPECT_EQ(c1.output_spectrum_complex, 64u * 6 * 32 * 17);
  EXPECT_EQ(c1.circular_output_floats, 64u * 6 * 32 * 32);
  EXPECT_EQ(c1.bytes(), 4u * (6144 + 393216) + 8u * (3264 + 34816 + 208896));
  const cuda::FftScratch c3 = cuda::fft_scratch({64, 6, 14, 14, 16, 5});
  EXPECT_EQ(c3.filter_floats, 2400u);
  EXPECT_EQ(c3.padded_filter_floats, 18816u);  // 7.84x
  const cuda::FftScratch c5 = cuda::fft_scratch({64, 16, 5, 5, 120, 5});
  EXPECT_EQ(c5.padded_filter_floats, c5.filter_floats);  // K = H = W: nothing to pad
  EXPECT_EQ(cuda::fft_scratch({1, 1, 9, 20, 1, 3}).filter_spectrum_complex, 9u * 11);  // odd rows
}

}  // namespace
}  // namespace lenet5
