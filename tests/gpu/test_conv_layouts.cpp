// Exercise 2's kernels (cuda/figures/conv_layouts.cuh): the direct forward kernel and the unroll kernel in
// each layout (NCHW, NHWC, CHWN) on LeNet's three convolution shapes, against the CPU reference,
// exactly (integer data: every float sum is exact). N = 64 (the `ex2` target's batch, two warps
// of samples for CHWN) and N = 5 (CHWN's samples-per-block guard: 27 of 32 lanes idle).
// Outputs are NaN-poisoned first, so an unwritten element shows.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda/figures/conv_layouts.cuh"
#include "gpu_test_util.hpp"
#include "layers/reference_cpu.hpp"

namespace {

using lenet5::Buffer;
using lenet5::ConvShape;
using lenet5::cuda::Layout;
namespace cuda = lenet5::cuda;
using namespace lenet5::test;

struct Case {
  const char* layer;
  ConvShape s;
  Layout layout;
};

std::string case_name(const testing::TestParamInfo<Case>& info) {
  return std::string(info.param.layer) + "_N" + std::to_string(info.param.s.n) + "_" +
         cuda::layout_name(info.param.layout);
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (int n : {64, 5})
    for (Layout l : cuda::kLayouts) {
      cases.push_back({"C1", ConvShape{n, 1, 32, 32, 6, 5}, l});
      cases.push_back({"C3", ConvShape{n, 6, 14, 14, 16, 5}, l});
      cases.push_back({"C5", ConvShape{n, 16, 5, 5, 120, 5}, l});
    }
  return cases;
}

class ConvLayoutKernels : public testing::TestWithParam<Case> {};

TEST_P(ConvLayoutKernels, DirectForwardMatchesTheCpuExactly) {
  LENET5_REQUIRE_GPU();
  const ConvShape& s = GetParam().s;
  const Layout layout = GetParam().layout;
  const cuda::ConvDims d = cuda::dims_of(s);
  const auto x = random_integers(std::size_t(s.n) * s.c * s.h * s.w, -3, 3, 21);
  const auto w = random_integers(std::size_t(s.m) * s.c * s.k * s.k, -3, 3, 22);
  std::vector<float> expected(std::size_t(s.n) * s.m * s.h_out() * s.w_out());
  lenet5::conv_forward_cpu<float>(s, x.data(), w.data(), nullptr, expected.data());
  const Buffer<float> x_dev = upload(cuda::to_layout(layout, cuda::x_extents(d), x));
  const Buffer<float> w_dev = upload(w);
  Buffer<float> y = poisoned(expected.size());
  cuda::conv_forward_layout(layout, s, x_dev.data(), w_dev.data(), y.data(), nullptr);
  EXPECT_TRUE(all_equal(cuda::from_layout(layout, cuda::y_extents(d), download(y)), expected));
}

TEST_P(ConvLayoutKernels, UnrollMatchesTheCpuUnrollOfEverySample) {
  LENET5_REQUIRE_GPU();
  const ConvShape& s = GetParam().s;
  const Layout layout = GetParam().layout;
  const std::size_t per_sample = std::size_t(s.c) * s.h * s.w;
  const auto x = random_integers(s.n * per_sample, -9, 9, 23);
  std::vector<float> expected(cuda::unrolled_floats(s));
  const std::size_t per_unrolled = expected.size() / s.n;
  for (int n = 0; n < s.n; ++n)
    lenet5::conv_unroll_cpu<float>(s, x.data() + n * per_sample,
                                   expected.data() + n * per_unrolled);
  const Buffer<float> x_dev = upload(cuda::to_layout(layout, cuda::x_extents(cuda::dims_of(s)), x));
  Buffer<float> x_unroll = poisoned(expected.size());
  cuda::conv_unroll_layout(layout, s, x_dev.data(), x_unroll.data(), nullptr);
  EXPECT_TRUE(all_equal(cuda::unrolled_per_sample(layout, s, download(x_unroll)), expected));
}

INSTANTIATE_TEST_SUITE_P(LeNetShapes, ConvLayoutKernels, testing::ValuesIn(all_cases()), case_name);

}  // namespace
