// The activation, fully connected, loss, SGD and gather kernels against their CPU references
// (layers/reference_cpu.hpp, core/sgd.hpp, data/batch.hpp), on LeNet's shapes at batch 64.
// Every output buffer is filled with NaN bytes (0xFF) before the launch, so an element a kernel
// forgets to write cannot pass by accident, and is checked for NaN afterwards.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/layout.hpp"
#include "core/net_config.hpp"
#include "core/rng.hpp"
#include "core/sgd.hpp"
#include "cuda/kernels/batch.cuh"
#include "cuda/kernels/dense.cuh"
#include "cuda/kernels/loss.cuh"
#include "cuda/kernels/optimizer.cuh"
#include "cuda/runtime/buffer.hpp"
#include "cuda/runtime/check.hpp"
#include "cuda/runtime/runtime.hpp"
#include "data/batch.hpp"
#include "layers/reference_cpu.hpp"
#include "layers/sgd_cpu.hpp"

namespace lenet5 {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (lenet5::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU tests need one"

constexpr int kBatch = 64;
constexpr int kClassCount = 10;

// ---- host data --------------------------------------------------------------------------------

std::vector<float> uniform(std::size_t count, float low, float high, std::uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<float> values(count);
  for (float& v : values) v = float(low + (high - low) * rng.uniform());
  return values;
}

// Integers in [-limit, limit], stored as floats.
std::vector<float> small_integers(std::size_t count, int limit, std::uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<float> values(count);
  for (float& v : values) v = float(int(rng.below(2 * limit + 1)) - limit);
  return values;
}

std::vector<double> to_double(const std::vector<float>& v) {
  return {v.begin(), v.end()};
}
std::vector<double> absolute(const std::vector<float>& v) {
  std::vector<double> result(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) result[i] = std::fabs(double(v[i]));
  return result;
}

std::uint32_t bits(float value) {
  std::uint32_t b;
  std::memcpy(&b, &value, sizeof b);
  return b;
}

// Distance in units in the last place between two finite floats of the same sign.
std::int64_t ulp_distance(float a, float b) {
  if (a == b) return 0;
  if ((a < 0) != (b < 0)) return std::int64_t(1) << 32;  // treat a sign change as far apart
  return std::llabs(std::int64_t(bits(a)) - std::int64_t(bits(b)));
}

// ---- device buffers ---------------------------------------------------------------------------

template <class T>
Buffer<T> to_device(const std::vector<T>& host) {
  Buffer<T> buffer(Device::gpu, host.size());
  buffer.copy_from_host(host.data());
  return buffer;
}

// All-ones bytes: a NaN in every float, -1 in every int.
template <class T>
Buffer<T> poisoned(std::size_t count) {
  Buffer<T> buffer(Device::gpu, count);
  CUDA_CHECK(cudaMemset(buffer.data(), 0xFF, buffer.bytes()));
  return buffer;
}

// The copy waits for the kernels and reports any of their errors.
std::vector<float> downloaded(const Buffer<float>& buffer) {
  std::vector<float> host = buffer.to_vector();
  const auto nans = std::count_if(host.begin(), host.end(), [](float v) { return std::isnan(v); });
  EXPECT_EQ(nans, 0) << "elements left unwritten (NaN poison) or computed as NaN";
  return host;
}

// ---- comparisons ------------------------------------------------------------------------------

void expect_identical(const std::vector<float>& gpu, const std::vector<float>& cpu,
                      const std::string& what) {
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  std::size_t mismatches = 0, first = 0;
  for (std::size_t i = 0; i < gpu.size(); ++i)
    if (bits(gpu[i]) != bits(cpu[i]) && !(gpu[i] == 0 && cpu[i] == 0) && mismatches++ == 0)
      first = i;
  EXPECT_EQ(mismatches, 0u) << what << ": first difference at " << first << ": gpu " << gpu[first]
                            << ", cpu " << cpu[first];
}

// |gpu - cpu| <= bound[i] for every element.
void expect_within(const std::vector<float>& gpu, const std::vector<float>& cpu,
                   const std::vector<double>& bound, const std::string& what) {
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  std::size_t failures = 0, first = 0;
  for (std::size_t i = 0; i < gpu.size(); ++i)
    if (!(std::fabs(double(gpu[i]) - double(cpu[i])) <= bound[i]) && failures++ == 0) first = i;
  EXPECT_EQ(failures, 0u) << what << ": first at " << first << ": gpu " << gpu[first] << ", cpu "
                          << cpu[first] << ", allowed " << bound[first];
}

// Any summation order of k floats, FMA or not, lies within gamma_k * sum|terms| of the exact sum
// (Higham, Accuracy and Stability of Numerical Algorithms, §3.1, gamma_k = k u / (1 - k u),
// u = 2^-24). The GPU and the CPU sum in different orders, so they can differ by twice that.
std::vector<double> reorder_bound(const std::vector<double>& sum_of_abs_terms, int k) {
  const double u = std::ldexp(1.0, -24), gamma = k * u / (1 - k * u);
  std::vector<double> bound(sum_of_abs_terms.size());
  for (std::size_t i = 0; i < bound.size(); ++i) bound[i] = 2 * gamma * sum_of_abs_terms[i];
  return bound;
}

// ---- activation -------------------------------------------------------------------------------

// The device's tanhf and expf are within 2 ulp of the true value (CUDA Programming Guide, math
// functions appendix), glibc's within 1-2 ulp; the forms around them (1/(1+e), A*tanh(S*x)) add
// one or two roundings. 8 ulp of the result covers the sum with room; ReLU must be exact.
// The backward pass is fed the CPU's y so that only the backward kernel is tested: its slope,
// e.g. 1 - y*y, may be contracted into an FMA on the device, which changes it by at most half an
// ulp of y*y (< 2^-24 * 3 for |y| <= 1.7159) before the multiplication by |dL/dy| <= 1: 1e-6
// absolute covers that and the final rounding.
TEST(ActivationKernels, MatchCpuForEveryKindOnA2) {
  SKIP_WITHOUT_GPU();
  const std::size_t count = std::size_t(kBatch) * 6 * 14 * 14;  // a2: (64, 6, 14, 14)
  const std::vector<float> x = uniform(count, -6, 6, 1), dL_dy = uniform(count, -1, 1, 2);
  const Buffer<float> d_x = to_device(x), d_dL_dy = to_device(dL_dy);
  for (const Activation kind :
       {Activation::tanh, Activation::sigmoid, Activation::scaled_tanh, Activation::relu}) {
    SCOPED_TRACE(to_string(kind));
    std::vector<float> y(count), dL_dx(count);
    activation_forward_cpu(kind, x.data(), y.data(), count);
    activation_backward_cpu(kind, y.data(), dL_dy.data(), dL_dx.data(), count);

    Buffer<float> d_y = poisoned<float>(count), d_dL_dx = poisoned<float>(count);
    const Buffer<float> d_y_cpu = to_device(y);
    cuda::activation_forward(kind, d_x.data(), d_y.data(), count, cuda::kDefaultStream);
    cuda::activation_backward(kind, d_y_cpu.data(), d_dL_dy.data(), d_dL_dx.data(), count,
                              cuda::kDefaultStream);
    const std::vector<float> y_gpu = downloaded(d_y), dL_dx_gpu = downloaded(d_dL_dx);

    if (kind == Activation::relu) {
      expect_identical(y_gpu, y, "forward");
      expect_identical(dL_dx_gpu, dL_dx, "backward");
      continue;
    }
    std::vector<double> forward_bound(count), backward_bound(count, 1e-6);
    for (std::size_t i = 0; i < count; ++i)
      forward_bound[i] = 8 * double(FLT_EPSILON) * std::fabs(double(y[i])) + double(FLT_MIN);
    expect_within(y_gpu, y, forward_bound, "forward");
    expect_within(dL_dx_gpu, dL_dx, backward_bound, "backward");
  }
}

// ---- fully connected --------------------------------------------------------------------------

struct FcCase {
  const char* name;
  FcShape shape;
};
const FcCase kFcCases[] = {{"f6 (64, 120 -> 84)", {kBatch, 120, 84}},
                           {"output (64, 84 -> 10)", {kBatch, 84, 10}}};

struct FcResults {
  std::vector<float> y, dL_dx, dL_dweight, dL_dbias;
};

FcResults fc_on_gpu(const FcShape& s, const std::vector<float>& x, const std::vector<float>& weight,
                    const std::vector<float>& bias, const std::vector<float>& dL_dy) {
  const Buffer<float> d_x = to_device(x), d_w = to_device(weight), d_b = to_device(bias),
                      d_dy = to_device(dL_dy);
  Buffer<float> d_y = poisoned<float>(std::size_t(s.n) * s.out),
                d_dx = poisoned<float>(std::size_t(s.n) * s.in),
                d_dw = poisoned<float>(std::size_t(s.out) * s.in),
                d_db = poisoned<float>(std::size_t(s.out));
  const cuda::CublasHandle& cublas = cuda::default_cublas_handle();
  cuda::fc_forward(cublas, s, d_x.data(), d_w.data(), d_b.data(), d_y.data());
  cuda::fc_backward_input(cublas, s, d_dy.data(), d_w.data(), d_dx.data());
  cuda::fc_backward_weights(cublas, s, d_x.data(), d_dy.data(), d_dw.data(), d_db.data());
  return {downloaded(d_y), downloaded(d_dx), downloaded(d_dw), downloaded(d_db)};
}

FcResults fc_on_cpu(const FcShape& s, const std::vector<float>& x, const std::vector<float>& weight,
                    const std::vector<float>& bias, const std::vector<float>& dL_dy) {
  FcResults r{std::vector<float>(std::size_t(s.n) * s.out),
              std::vector<float>(std::size_t(s.n) * s.in),
              std::vector<float>(std::size_t(s.out) * s.in), std::vector<float>(s.out)};
  fc_forward_cpu(s, x.data(), weight.data(), bias.data(), r.y.data());
  fc_backward_input_cpu(s, dL_dy.data(), weight.data(), r.dL_dx.data());
  fc_backward_weights_cpu(s, x.data(), dL_dy.data(), r.dL_dweight.data(), r.dL_dbias.data());
  return r;
}

// Small integers make every product and every partial sum an integer below 2^24 in magnitude
// (at most 120 * 3 * 3 + 3 = 1,083 here), and such sums are exact in FP32 in any order. So the
// GEMMs must match the sequential CPU loops bit for bit, provided cuBLAS keeps FP32 (no TF32,
// whose 10-bit mantissa would still hold these integers but not the general case the next test
// covers; pedantic math is set in dense.cu).
TEST(FullyConnectedKernels, SmallIntegersMatchCpuExactly) {
  SKIP_WITHOUT_GPU();
  for (const FcCase& c : kFcCases) {
    SCOPED_TRACE(c.name);
    const FcShape& s = c.shape;
    const auto x = small_integers(std::size_t(s.n) * s.in, 3, 11);
    const auto w = small_integers(std::size_t(s.out) * s.in, 3, 12);
    const auto b = small_integers(s.out, 3, 13);
    const auto dy = small_integers(std::size_t(s.n) * s.out, 3, 14);
    const FcResults gpu = fc_on_gpu(s, x, w, b, dy), cpu = fc_on_cpu(s, x, w, b, dy);
    expect_identical(gpu.y, cpu.y, "forward");
    expect_identical(gpu.dL_dx, cpu.dL_dx, "backward input");
    expect_identical(gpu.dL_dweight, cpu.dL_dweight, "backward weights");
    expect_identical(gpu.dL_dbias, cpu.dL_dbias, "backward bias");
  }
}

// Random floats: the results may differ only by summation order, bounded per element by
// reorder_bound (the sums of |terms| come from the double-precision reference on |inputs|).
TEST(FullyConnectedKernels, RandomFloatsWithinSummationOrderBound) {
  SKIP_WITHOUT_GPU();
  for (const FcCase& c : kFcCases) {
    SCOPED_TRACE(c.name);
    const FcShape& s = c.shape;
    const auto x = uniform(std::size_t(s.n) * s.in, -1, 1, 21);
    const auto w = uniform(std::size_t(s.out) * s.in, -0.3f, 0.3f, 22);
    const auto b = uniform(s.out, -0.5f, 0.5f, 23);
    const auto dy = uniform(std::size_t(s.n) * s.out, -0.05f, 0.05f, 24);
    const FcResults gpu = fc_on_gpu(s, x, w, b, dy), cpu = fc_on_cpu(s, x, w, b, dy);

    const auto ax = absolute(x), aw = absolute(w), ab = absolute(b), ady = absolute(dy);
    std::vector<double> y_abs(gpu.y.size()), dx_abs(gpu.dL_dx.size()),
        dw_abs(gpu.dL_dweight.size()), db_abs(gpu.dL_dbias.size());
    fc_forward_cpu(s, ax.data(), aw.data(), ab.data(), y_abs.data());
    fc_backward_input_cpu(s, ady.data(), aw.data(), dx_abs.data());
    fc_backward_weights_cpu(s, ax.data(), ady.data(), dw_abs.data(), db_abs.data());
    expect_within(gpu.y, cpu.y, reorder_bound(y_abs, s.in + 1), "forward");  // + the bias
    expect_within(gpu.dL_dx, cpu.dL_dx, reorder_bound(dx_abs, s.out), "backward input");
    expect_within(gpu.dL_dweight, cpu.dL_dweight, reorder_bound(dw_abs, s.n), "backward weights");
    expect_within(gpu.dL_dbias, cpu.dL_dbias, reorder_bound(db_abs, s.n), "backward bias");
  }
}

// ---- softmax cross-entropy --------------------------------------------------------------------

struct LossInputs {
  std::vector<float> logits;
  std::vector<std::uint8_t> labels;
};

// Random logits in [-8, 8], plus ties that exercise the "first maximum" rule: sample 0 has ten
// equal logits (prediction 0), sample 1 a tie for the top between classes 3 and 7 (prediction 3).
LossInputs loss_inputs(int n) {
  LossInputs in{uniform(std::size_t(n) * kClassCount, -8, 8, 31), std::vector<std::uint8_t>(n)};
  SplitMix64 rng(32);
  for (auto& label : in.labels) label = std::uint8_t(rng.below(kClassCount));
  std::fill(in.logits.begin(), in.logits.begin() + kClassCount, 1.5f);
  in.logits[kClassCount + 3] = in.logits[kClassCount + 7] = 9.0f;
  return in;
}

// The kernel evaluates the reference's double-precision formula; the device's exp/log and glibc's
// are each within an ulp of a double, so the float gradients agree except when a value lies
// within ~1e-16 of a float rounding boundary: at most 1 float ulp. The loss is a sum of 64
// positive doubles in another order (a tree): relative 1e-12 is far above that rounding
// (~64 * 2^-53) and far below any real error. Counts and predictions are exact.
TEST(LossKernels, SoftmaxCrossEntropyMatchesCpu) {
  SKIP_WITHOUT_GPU();
  const LossInputs in = loss_inputs(kBatch);
  std::vector<float> dL_dlogits(in.logits.size());
  std::vector<int> predictions(kBatch);
  const LossStats cpu =
      softmax_cross_entropy_cpu(in.logits.data(), in.labels.data(), kBatch, kClassCount,
                                dL_dlogits.data(), predictions.data());
  ASSERT_EQ(predictions[0], 0);
  ASSERT_EQ(predictions[1], 3);

  const Buffer<float> d_logits = to_device(in.logits);
  const Buffer<std::uint8_t> d_labels = to_device(in.labels);
  Buffer<float> d_dL_dlogits = poisoned<float>(in.logits.size());
  Buffer<std::int32_t> d_predictions = poisoned<std::int32_t>(kBatch);
  Buffer<cuda::StepStats> d_stats(Device::gpu, 2);  // zeroed, as begin_epoch leaves them
  cuda::softmax_cross_entropy(d_logits.data(), d_labels.data(), kBatch, d_dL_dlogits.data(),
                              d_predictions.data(), d_stats.data() + 1, cuda::kDefaultStream);
  const std::vector<float> gpu_gradient = downloaded(d_dL_dlogits);
  const std::vector<std::int32_t> gpu_predictions = d_predictions.to_vector();
  const std::vector<cuda::StepStats> stats = d_stats.to_vector();

  for (std::size_t i = 0; i < dL_dlogits.size(); ++i)
    ASSERT_LE(ulp_distance(gpu_gradient[i], dL_dlogits[i]), 1)
        << "dL/dlogits[" << i << "]: gpu " << gpu_gradient[i] << ", cpu " << dL_dlogits[i];
  for (int s = 0; s < kBatch; ++s) EXPECT_EQ(gpu_predictions[s], predictions[s]) << "sample " << s;
  EXPECT_EQ(stats[0].loss_sum, 0.0) << "a neighbouring slot was written";
  EXPECT_EQ(stats[0].correct, 0);
  EXPECT_NEAR(stats[1].loss_sum, cpu.loss_sum, 1e-12 * cpu.loss_sum);
  EXPECT_EQ(stats[1].correct, cpu.correct);
}

// Evaluation mode (no gradient) adds to the slot: two batches into one slot give twice the
// statistics, bit for bit, since the same batch gives the same tree sum.
TEST(LossKernels, EvaluationModeAccumulatesIntoItsSlot) {
  SKIP_WITHOUT_GPU();
  const LossInputs in = loss_inputs(200);  // not a multiple of the block: threads take 0-2 samples
  std::vector<int> predictions(200);
  const LossStats cpu = softmax_cross_entropy_cpu(in.logits.data(), in.labels.data(), 200,
                                                  kClassCount, (float*)nullptr, predictions.data());
  const Buffer<float> d_logits = to_device(in.logits);
  const Buffer<std::uint8_t> d_labels = to_device(in.labels);
  Buffer<std::int32_t> d_predictions = poisoned<std::int32_t>(200);
  Buffer<cuda::StepStats> d_stats(Device::gpu, 1);
  for (int repeat = 0; repeat < 2; ++repeat)
    cuda::softmax_cross_entropy(d_logits.data(), d_labels.data(), 200, nullptr,
                                d_predictions.data(), d_stats.data(), cuda::kDefaultStream);
  const std::vector<std::int32_t> gpu_predictions = d_predictions.to_vector();
  const cuda::StepStats stats = d_stats.to_vector()[0];
  EXPECT_TRUE(std::equal(predictions.begin(), predictions.end(), gpu_predictions.begin()));
  EXPECT_EQ(stats.correct, 2 * cpu.correct);
  EXPECT_NEAR(stats.loss_sum, 2 * cpu.loss_sum, 2e-12 * cpu.loss_sum);
}

// Probabilities as the CPU engine computes them (cpu_engine.cpp, softmax_rows): same double
// formula, so at most 1 float ulp apart for the reason given above the cross-entropy test.
TEST(LossKernels, SoftmaxProbabilitiesMatchCpuFormula) {
  SKIP_WITHOUT_GPU();
  const int n = 300;
  const LossInputs in = loss_inputs(n);
  std::vector<float> expected(in.logits.size());
  for (int s = 0; s < n; ++s) {
    const float* z = in.logits.data() + s * kClassCount;
    const float top = *std::max_element(z, z + kClassCount);
    double sum = 0;
    for (int k = 0; k < kClassCount; ++k) sum += std::exp(double(z[k] - top));
    for (int k = 0; k < kClassCount; ++k)
      expected[s * kClassCount + k] = float(std::exp(double(z[k] - top)) / sum);
  }
  const Buffer<float> d_logits = to_device(in.logits);
  Buffer<float> d_probabilities = poisoned<float>(in.logits.size());
  cuda::softmax_probabilities(d_logits.data(), n, d_probabilities.data(), cuda::kDefaultStream);
  const std::vector<float> gpu = downloaded(d_probabilities);
  for (std::size_t i = 0; i < gpu.size(); ++i)
    ASSERT_LE(ulp_distance(gpu[i], expected[i]), 1)
        << "p[" << i << "]: gpu " << gpu[i] << ", cpu " << expected[i];
}

// ---- SGD --------------------------------------------------------------------------------------

// Bit-identical: the kernel spells out every rounding of sgd_step_cpu's expression with _rn
// intrinsics (optimizer.cu explains why), so there is nothing left to differ.
TEST(SgdKernel, MatchesCpuBitForBit) {
  SKIP_WITHOUT_GPU();
  const std::size_t count = lenet5_layout(NetConfig{}).buffer_floats;
  const SgdSettings settings[] = {
      {0.0, false, 0.0}, {0.0, false, 1e-4}, {0.9, false, 0.0}, {0.9, true, 5e-4}};
  for (const SgdSettings& sgd : settings) {
    SCOPED_TRACE("momentum " + std::to_string(sgd.momentum) + (sgd.nesterov ? " nesterov" : "") +
                 ", weight decay " + std::to_string(sgd.weight_decay));
    std::vector<float> params = uniform(count, -0.5f, 0.5f, 41);
    std::vector<float> velocity = uniform(count, -0.1f, 0.1f, 42);
    Buffer<float> d_params = to_device(params), d_velocity = to_device(velocity);
    for (int step = 0; step < 3; ++step) {
      const std::vector<float> grads = uniform(count, -0.2f, 0.2f, 43 + step);
      const float lr = 0.05f / float(step + 1);
      sgd_step_cpu(sgd, lr, grads.data(), params.data(), velocity.data(), count);
      const Buffer<float> d_grads = to_device(grads);
      cuda::sgd_step(sgd, lr, d_grads.data(), d_params.data(), d_velocity.data(), count,
                     cuda::kDefaultStream);
    }
    expect_identical(downloaded(d_params), params, "parameters");
    expect_identical(downloaded(d_velocity), velocity, "velocity");
  }
}

// ---- batch gather -----------------------------------------------------------------------------

// Bit-identical to gather_batch_cpu: batch.cu rounds each step of normalise_pixel as the host does,
// under every input scaling.
TEST(GatherKernel, MatchesCpuThroughThePermutation) {
  SKIP_WITHOUT_GPU();
  for (const InputScalingInfo& info : input_scalings()) {
    SCOPED_TRACE(info.name);
    const PixelScaling scaling = info.pixels;
    constexpr int kImages = 100, kFirst = 10;
    constexpr std::size_t kField = kInputFloats;
    SplitMix64 rng(51);
    std::vector<std::uint8_t> images(std::size_t(kImages) * kImageBytes), labels(kImages);
    for (auto& pixel : images) pixel = std::uint8_t(rng.below(256));
    std::fill(images.begin(), images.begin() + kImageBytes, 0);                      // all black
    std::fill(images.begin() + kImageBytes, images.begin() + 2 * kImageBytes, 255);  // all white
    for (auto& label : labels) label = std::uint8_t(rng.below(10));
    const std::vector<std::int32_t> permutation = epoch_permutation(52, 0, kImages);

    std::vector<float> expected(std::size_t(kBatch) * kField);
    gather_batch_cpu(images.data(), permutation.data() + kFirst, kBatch, scaling, expected.data());
    const Buffer<std::uint8_t> d_images = to_device(images), d_labels = to_device(labels);
    const Buffer<std::int32_t> d_permutation = to_device(permutation);
    Buffer<float> d_out = poisoned<float>(expected.size());
    Buffer<std::uint8_t> d_labels_out = poisoned<std::uint8_t>(kBatch);
    cuda::gather_batch(d_images.data(), d_labels.data(), d_permutation.data() + kFirst, kBatch,
                       scaling, d_out.data(), d_labels_out.data(), cuda::kDefaultStream);
    expect_identical(downloaded(d_out), expected, "batch");
    const std::vector<std::uint8_t> gathered_labels = d_labels_out.to_vector();
    for (int i = 0; i < kBatch; ++i)
      EXPECT_EQ(int(gathered_labels[i]), int(labels[permutation[kFirst + i]])) << "label " << i;

    // Without indices: the first n images in order (evaluation and classify).
    std::vector<float> in_order(std::size_t(kImages) * kField);
    gather_batch_cpu(images.data(), nullptr, kImages, scaling, in_order.data());
    Buffer<float> d_in_order = poisoned<float>(in_order.size());
    cuda::gather_batch(d_images.data(), nullptr, nullptr, kImages, scaling, d_in_order.data(),
                       nullptr, cuda::kDefaultStream);
    expect_identical(downloaded(d_in_order), in_order, "batch without indices");
  }
}

}  // namespace
}  // namespace lenet5
