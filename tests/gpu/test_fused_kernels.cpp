// The "fast" kernel set's own kernels against the CPU reference: fully connected version 2 with
// the bias and the activation fused in, and subsampling with the activation fused in. The CPU side
// composes the reference layers (fc/subsample, then the activation), which is the function the
// fused kernels must compute.
#include <gtest/gtest.h>

#include <cstring>

#include "cuda/kernels/dense.cuh"
#include "cuda/kernels/subsample.cuh"
#include "gpu/gpu_test_util.hpp"
#include "layers/reference_cpu.hpp"

namespace lenet5 {
namespace {

using test::all_close;
using test::all_equal;
using test::download;
using test::poisoned;
using test::random_floats;
using test::random_integers;
using test::upload;

// LeNet's three dense products at batch 64: C5 as 400 -> 120, F6 120 -> 84, output 84 -> 10.
const FcShape kDenseShapes[] = {{64, 400, 120}, {64, 120, 84}, {64, 84, 10}};

// Tolerances. Sums: the GPU adds the same products in another order (and may fuse a multiply and
// an add into one rounding); a float sum in any order is within a few units of 2^-24 times the sum
// of the absolute terms per term, so 1e-5 times that scale covers sums of up to 400 terms. Fused
// activations: the device's tanhf/expf differ from glibc's by at most 2 ulp, i.e. below 3e-7 for
// |f| <= 1 (about 2.4e-7 for the scaled tanh's |f| <= 1.7159); 1e-6 absolute leaves room and is
// far below any real error. kScaleFloor is added to every sum's scale so that an output whose
// terms are all zero still has a tolerance: 1e-7 x 1e-5 = 1e-12 absolute, far below a float's
// smallest meaningful gradient here.
constexpr double kSumRelative = 1e-5;
constexpr double kActivationAbsolute = 1e-6;
constexpr double kScaleFloor = 1e-7;

std::vector<float> plus(std::vector<float> scale, double absolute) {
  for (float& s : scale) s = float(s + absolute);
  return scale;
}

TEST(DenseKernels2, SmallIntegersMatchTheCpuExactlyWithoutActivation) {
  LENET5_REQUIRE_GPU();
  for (const FcShape& s : kDenseShapes) {
    // Sums of at most 400 products of integers in [-3, 3] stay far below 2^24: exact in float in
    // any order, so the GPU must equal the CPU bit for bit.
    const auto x = random_integers(std::size_t(s.n) * s.in, -3, 3, 1);
    const auto w = random_integers(std::size_t(s.out) * s.in, -3, 3, 2);
    const auto b = random_integers(s.out, -3, 3, 3);
    const auto dy = random_integers(std::size_t(s.n) * s.out, -3, 3, 4);
    std::vector<float> y(std::size_t(s.n) * s.out), dx(std::size_t(s.n) * s.in),
        dw(std::size_t(s.out) * s.in), db(s.out);
    fc_forward_cpu(s, x.data(), w.data(), b.data(), y.data());
    fc_backward_input_cpu(s, dy.data(), w.data(), dx.data());
    fc_backward_weights_cpu(s, x.data(), dy.data(), dw.data(), db.data());

    const auto d_x = upload(x), d_w = upload(w), d_b = upload(b), d_dy = upload(dy);
    auto d_y = poisoned(y.size()), d_dx = poisoned(dx.size()), d_dw = poisoned(dw.size()),
         d_db = poisoned(db.size());
    const FusedActivation none{};
    cuda::dense_forward2(s, d_x.data(), d_w.data(), d_b.data(), none, d_y.data(), cuda::kDefaultStream);
    cuda::dense_backward_input2(s, d_dy.data(), nullptr, none, d_w.data(), d_dx.data(),
                                cuda::kDefaultStream);
    cuda::dense_backward_weights2(s, d_x.data(), d_dy.data(), nullptr, none, d_dw.data(),
                                  d_db.data(), cuda::kDefaultStream);
    EXPECT_TRUE(all_equal(download(d_y), y)) << "forward " << s.in << "->" << s.out;
    EXPECT_TRUE(all_equal(download(d_dx), dx)) << "input gradient " << s.in << "->" << s.out;
    EXPECT_TRUE(all_equal(download(d_dw), dw)) << "weight gradient " << s.in << "->" << s.out;
    EXPECT_TRUE(all_equal(download(d_db), db)) << "bias gradient " << s.in << "->" << s.out;
  }
}

TEST(DenseKernels2, FusedTanhMatchesTheCpuComposition) {
  LENET5_REQUIRE_GPU();
  const FusedActivation tanh_act{true, Activation::tanh};
  for (const FcShape& s : kDenseShapes) {
    const auto x = random_floats(std::size_t(s.n) * s.in, 11);
    const auto w = random_floats(std::size_t(s.out) * s.in, 12);
    const auto b = random_floats(s.out, 13);
    std::vector<float> z(std::size_t(s.n) * s.out), y(z.size()), scale(z.size());
    fc_forward_cpu(s, x.data(), w.data(), b.data(), z.data());
    activation_forward_cpu(Activation::tanh, z.data(), y.data(), y.size());
    const auto ax = test::absolute(x), aw = test::absolute(w), ab = test::absolute(b);
    fc_forward_cpu(s, ax.data(), aw.data(), ab.data(), scale.data());
    // tanh is 1-Lipschitz: the sum's error passes through, plus the activation's own few ulp.
    const auto d_x = upload(x), d_w = upload(w), d_b = upload(b);
    auto d_y = poisoned(y.size());
    cuda::dense_forward2(s, d_x.data(), d_w.data(), d_b.data(), tanh_act, d_y.data(),
                         cuda::kDefaultStream);
    EXPECT_TRUE(all_close(download(d_y), y, plus(scale, kActivationAbsolute / kSumRelative),
                          kSumRelative))
        << "forward " << s.in << "->" << s.out;

    // Backward from a given output y (as the forward pass stored it) and dL/dy.
    const auto dy = random_floats(y.size(), 14);
    std::vector<float> dz(y.size()), dx(std::size_t(s.n) * s.in), dw(std::size_t(s.out) * s.in),
        db(s.out);
    activation_backward_cpu(Activation::tanh, y.data(), dy.data(), dz.data(), dz.size());
    fc_backward_input_cpu(s, dz.data(), w.data(), dx.data());
    fc_backward_weights_cpu(s, x.data(), dz.data(), dw.data(), db.data());
    const auto adz = test::absolute(dz);
    std::vector<float> dx_scale(dx.size()), dw_scale(dw.size()), db_scale(db.size());
    fc_backward_input_cpu(s, adz.data(), aw.data(), dx_scale.data());
    fc_backward_weights_cpu(s, ax.data(), adz.data(), dw_scale.data(), db_scale.data());
    const auto d_y_given = upload(y), d_dy = upload(dy);
    auto d_dx = poisoned(dx.size()), d_dw = poisoned(dw.size()), d_db = poisoned(db.size());
    cuda::dense_backward_input2(s, d_dy.data(), d_y_given.data(), tanh_act, d_w.data(),
                                d_dx.data(), cuda::kDefaultStream);
    cuda::dense_backward_weights2(s, d_x.data(), d_dy.data(), d_y_given.data(), tanh_act,
                                  d_dw.data(), d_db.data(), cuda::kDefaultStream);
    // f'(z) = 1 - y^2 may be one fused multiply-add on the GPU: a relative 2^-24 per dz term,
    // inside the same sum-of-magnitudes bound.
    EXPECT_TRUE(all_close(download(d_dx), dx, plus(dx_scale, kScaleFloor), kSumRelative));
    EXPECT_TRUE(all_close(download(d_dw), dw, plus(dw_scale, kScaleFloor), kSumRelative));
    EXPECT_TRUE(all_close(download(d_db), db, plus(db_scale, kScaleFloor), kSumRelative));

    // Deterministic: a second run writes the same bits.
    const std::vector<float> first = download(d_dw);
    cuda::dense_backward_weights2(s, d_x.data(), d_dy.data(), d_y_given.data(), tanh_act,
                                  d_dw.data(), d_db.data(), cuda::kDefaultStream);
    const std::vector<float> second = download(d_dw);
    EXPECT_EQ(0, std::memcmp(first.data(), second.data(), first.size() * sizeof(float)));
  }
}

// A batch so large that the staged dL/dz no longer fits in shared memory: the launchers fall back
// to the unstaged kernels, which must compute the same sums (the order is the same, so the same
// bits as the CPU-order reference up to the usual summation tolerance).
TEST(DenseKernels2, LargeBatchFallbackMatchesTheCpu) {
  LENET5_REQUIRE_GPU();
  const FcShape s{4096, 84, 10};
  const FusedActivation tanh_act{true, Activation::tanh};
  const auto x = random_floats(std::size_t(s.n) * s.in, 31);
  const auto w = random_floats(std::size_t(s.out) * s.in, 32);
  const auto y = random_floats(std::size_t(s.n) * s.out, 33);
  const auto dy = random_floats(y.size(), 34);
  std::vector<float> dz(y.size()), dx(std::size_t(s.n) * s.in), dw(std::size_t(s.out) * s.in),
      db(s.out), dx_scale(dx.size()), dw_scale(dw.size()), db_scale(db.size());
  activation_backward_cpu(Activation::tanh, y.data(), dy.data(), dz.data(), dz.size());
  fc_backward_input_cpu(s, dz.data(), w.data(), dx.data());
  fc_backward_weights_cpu(s, x.data(), dz.data(), dw.data(), db.data());
  const auto adz = test::absolute(dz), ax = test::absolute(x), aw = test::absolute(w);
  fc_backward_input_cpu(s, adz.data(), aw.data(), dx_scale.data());
  fc_backward_weights_cpu(s, ax.data(), adz.data(), dw_scale.data(), db_scale.data());
  const auto d_x = upload(x), d_w = upload(w), d_y = upload(y), d_dy = upload(dy);
  auto d_dx = poisoned(dx.size()), d_dw = poisoned(dw.size()), d_db = poisoned(db.size());
  cuda::dense_backward_input2(s, d_dy.data(), d_y.data(), tanh_act, d_w.data(), d_dx.data(),
                              cuda::kDefaultStream);
  cuda::dense_backward_weights2(s, d_x.data(), d_dy.data(), d_y.data(), tanh_act, d_dw.data(),
                                d_db.data(), cuda::kDefaultStream);
  // Same bound as above; the weight sums now run over 4,096 samples, still far inside it.
  EXPECT_TRUE(all_close(download(d_dx), dx, plus(dx_scale, kScaleFloor), kSumRelative));
  EXPECT_TRUE(all_close(download(d_dw), dw, plus(dw_scale, kScaleFloor), kSumRelative));
  EXPECT_TRUE(all_close(download(d_db), db, plus(db_scale, kScaleFloor), kSumRelative));
}

struct PoolCase {
  const char* name;
  PoolShape shape;
  Subsampling kind;
  Activation activation;
};

class FusedSubsampling : public ::testing::TestWithParam<PoolCase> {};

TEST_P(FusedSubsampling, MatchesSubsamplingThenActivationOnTheCpu) {
  LENET5_REQUIRE_GPU();
  const PoolCase& c = GetParam();
  const PoolShape& s = c.shape;
  const std::size_t in_count = std::size_t(s.n) * s.c * s.h * s.w;
  const std::size_t out_count = std::size_t(s.n) * s.c * s.h_out() * s.w_out();
  const FusedActivation fused{true, c.activation};
  const auto x = random_floats(in_count, 21);
  const auto b = random_floats(s.c, 22);
  const auto coef = random_floats(s.c, 24);  // read by trainable subsampling only
  std::vector<float> z(out_count), y(out_count);
  subsample_forward_cpu(s, c.kind, x.data(), b.data(), z.data(), coef.data());
  activation_forward_cpu(c.activation, z.data(), y.data(), out_count);
  const auto d_x = upload(x), d_b = upload(b), d_coef = upload(coef);
  auto d_y = poisoned(out_count);
  cuda::subsample_forward(s, c.kind, d_x.data(), d_b.data(), d_y.data(), cuda::kDefaultStream,
                          fused, d_coef.data());
  // The pooled sum is computed exactly as on the CPU (same order, no fused multiply-add); only
  // the activation differs, by the device's few ulp (see kActivationAbsolute).
  EXPECT_TRUE(all_close(download(d_y), y, std::vector<float>(out_count, 1.0f), kActivationAbsolute));

  const auto dy = random_floats(out_count, 23);
  std::vector<float> dz(out_count), dx(in_count), db(s.c), db_scale(s.c);
  activation_backward_cpu(c.activation, y.data(), dy.data(), dz.data(), out_count);
  subsample_backward_input_cpu(s, c.kind, x.data(), dz.data(), dx.data(), coef.data());
  subsample_backward_bias_cpu(s, dz.data(), db.data());
  const auto adz = test::absolute(dz);
  subsample_backward_bias_cpu(s, adz.data(), db_scale.data());
  const auto d_y_given = upload(y), d_dy = upload(dy);
  auto d_dx = poisoned(in_count), d_db = poisoned(s.c);
  cuda::subsample_backward_input(s, c.kind, d_x.data(), d_dy.data(), d_dx.data(),
                                 cuda::kDefaultStream, fused, d_y_given.data(), d_coef.data());
  cuda::subsample_backward_bias(s, d_dy.data(), d_db.data(), cuda::kDefaultStream, fused,
                                d_y_given.data());
  // dL/dz = dL/dy * f'(z): one product (and f' may use one fused multiply-add): within a couple
  // of ulp of values below 1 in magnitude (times |coef| <= 1 for trainable); the bias adds 12,544
  // of them (S2) in another order.
  EXPECT_TRUE(all_close(download(d_dx), dx, std::vector<float>(in_count, 1.0f), kActivationAbsolute));
  EXPECT_TRUE(all_close(download(d_db), db, plus(db_scale, kScaleFloor), kSumRelative));
  if (c.kind != Subsampling::trainable) return;

  // dL/dcoef = sum of dL/dz times the window sums: the same sum as the bias's, each term weighted.
  // Scale: the same sum over |dL/dz| and |x|, which bounds every |term|.
  std::vector<float> dcoef(s.c), dcoef_scale(s.c);
  subsample_backward_coef_cpu(s, x.data(), dz.data(), dcoef.data());
  const auto ax = test::absolute(x);
  subsample_backward_coef_cpu(s, ax.data(), adz.data(), dcoef_scale.data());
  auto d_dcoef = poisoned(s.c);
  cuda::subsample_backward_coef(s, d_x.data(), d_dy.data(), d_dcoef.data(), cuda::kDefaultStream,
                                fused, d_y_given.data());
  EXPECT_TRUE(all_close(download(d_dcoef), dcoef, plus(dcoef_scale, kScaleFloor), kSumRelative));
}

INSTANTIATE_TEST_SUITE_P(
    LeNetShapes, FusedSubsampling,
    ::testing::Values(
        PoolCase{"S2AverageTanh", {64, 6, 28, 28, 2}, Subsampling::average, Activation::tanh},
        PoolCase{"S4AverageTanh", {64, 16, 10, 10, 2}, Subsampling::average, Activation::tanh},
        PoolCase{"S2MaxRelu", {64, 6, 28, 28, 2}, Subsampling::max, Activation::relu},
        PoolCase{"S4MaxSigmoid", {64, 16, 10, 10, 2}, Subsampling::max, Activation::sigmoid},
        PoolCase{"S4AverageScaledTanh",
                 {64, 16, 10, 10, 2},
                 Subsampling::average,
                 Activation::scaled_tanh},
        // LeCun et al. 1998: trainable subsampling with the scaled tanh, and tanh.
        PoolCase{"S2TrainableScaledTanh",
                 {64, 6, 28, 28, 2},
                 Subsampling::trainable,
                 Activation::scaled_tanh},
        PoolCase{"S4TrainableScaledTanh",
                 {64, 16, 10, 10, 2},
                 Subsampling::trainable,
                 Activation::scaled_tanh},
        PoolCase{"S4TrainableTanh", {64, 16, 10, 10, 2}, Subsampling::trainable, Activation::tanh}),
    [](const ::testing::TestParamInfo<PoolCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace lenet5

namespace lenet5 {
namespace {

// Every device buffer is counted on the way in and out, so the peak the benchmark reports is real.
TEST(DeviceMemory, BuffersAreCountedWhileTheyLive) {
  LENET5_REQUIRE_GPU();
  const std::size_t before = cuda::allocated_bytes();
  {
    Buffer<float> buffer(Device::gpu, 1 << 20);
    EXPECT_EQ(cuda::allocated_bytes(), before + (std::size_t(4) << 20));
    EXPECT_GE(cuda::peak_allocated_bytes(), before + (std::size_t(4) << 20));
    Buffer<float> moved = std::move(buffer);  // moving transfers ownership, not memory
    EXPECT_EQ(cuda::allocated_bytes(), before + (std::size_t(4) << 20));
  }
  EXPECT_EQ(cuda::allocated_bytes(), before);
  EXPECT_GT(cuda::device_used_bytes(), 0u);
}

// bench resets the peak before each seed, so each seed reports its own run's peak, not the
// largest of all the runs before it.
TEST(DeviceMemory, ThePeakRestartsFromWhatIsAllocatedNow) {
  LENET5_REQUIRE_GPU();
  const std::size_t before = cuda::allocated_bytes();
  { Buffer<float> large(Device::gpu, 1 << 20); }
  EXPECT_GE(cuda::peak_allocated_bytes(), before + (std::size_t(4) << 20));
  cuda::reset_peak_allocated_bytes();
  EXPECT_EQ(cuda::peak_allocated_bytes(), before);
  { Buffer<float> small(Device::gpu, 1 << 10); }
  EXPECT_EQ(cuda::peak_allocated_bytes(), before + (std::size_t(4) << 10));
}

}  // namespace
}  // namespace lenet5
