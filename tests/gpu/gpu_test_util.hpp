// Shared helpers of the GPU suite: skip without a device, move vectors to and from the GPU, poison
// outputs with NaN before a launch, make integer and float test data, and compare results with
// messages that count NaNs (unwritten outputs) and mismatches, or trained weights by how far
// training moved them.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/device.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"
#include "core/net_config.hpp"
#include "cuda/engine/whole_step.cuh"
#include "cuda/runtime/buffer.hpp"
#include "cuda/runtime/check.hpp"
#include "cuda/runtime/runtime.hpp"

namespace lenet5::test {

// Why there is no usable GPU ("" when there is one): the runtime's own words for the failure.
inline std::string gpu_absence_reason() {
  if (cuda::device_count() > 0) return "";
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  (void)cudaGetLastError();  // clear the sticky error, as cuda::device_count() does
  if (status != cudaSuccess)
    return std::string(cudaGetErrorName(status)) + " (" + cudaGetErrorString(status) + ")";
  return "cudaGetDeviceCount reports 0 devices";
}

}  // namespace lenet5::test

namespace lenet5::test {

// Whether this GPU runs the whole-step kernels' tf32 stages: only where the build holds kernels
// with the tensor-core instructions for it (the default build's sm_90); elsewhere WholeStep
// refuses --precision tf32 with a usage error, which the tests of tf32 report as a skip.
inline bool tf32_runs_here() {
  static const bool runs = [] {
    NetConfig config;
    config.kernels = GpuKernels::whole_step;
    config.precision = Precision::tf32;
    try {
      const cuda::WholeStep step(config, lenet5_layout(config), 1);
      return true;
    } catch (const UsageError&) {
      return false;
    }
  }();
  return runs;
}

}  // namespace lenet5::test

#define LENET5_REQUIRE_TF32()                                                                  \
  do {                                                                                         \
    if (!::lenet5::test::tf32_runs_here())                                                     \
      GTEST_SKIP() << "this build has no tensor-core (tf32) kernels for this GPU: --precision " \
                      "tf32 is refused here (rebuild with CMAKE_CUDA_ARCHITECTURES naming it)"; \
  } while (0)

// First statement of every GPU test: without a device the test is reported as skipped, with the
// reason, instead of failing (CTest treats "[  SKIPPED ]" as a skip, see tests/CMakeLists.txt).
#define LENET5_REQUIRE_GPU()                                                      \
  do {                                                                            \
    if (::lenet5::cuda::device_count() == 0)                                      \
      GTEST_SKIP() << "no CUDA device: " << ::lenet5::test::gpu_absence_reason(); \
  } while (0)

namespace lenet5::test {

// host's values in a device buffer; float where the values are a braced list of floats.
template <class T = float>
Buffer<T> upload(const std::vector<T>& host) {
  Buffer<T> device(Device::gpu, host.size());
  device.copy_from_host(host.data());
  return device;
}

// Waits for the launches before it (and reports their errors as lenet5::Error), then copies.
inline std::vector<float> download(const Buffer<float>& device) {
  cuda::synchronize();
  return device.to_vector();
}

// Fills a device buffer with NaN (all bytes 0xFF is a quiet NaN in float32), so that any output a
// kernel forgets to write shows up as NaN.
inline void poison(Buffer<float>& device) {
  if (device.bytes() > 0) CUDA_CHECK(cudaMemset(device.data(), 0xFF, device.bytes()));
}

// A device buffer of `count` floats, all NaN: an output about to be written.
inline Buffer<float> poisoned(std::size_t count) {
  Buffer<float> device(Device::gpu, count);
  poison(device);
  return device;
}

// The `count` floats that `compute(out)` writes on the host: a CPU reference's output.
template <class Compute>
std::vector<float> cpu_output(std::size_t count, Compute compute) {
  std::vector<float> out(count);
  compute(out.data());
  return out;
}

// The `count` floats that `launch(out)` writes into a poisoned device buffer, brought back: an
// element the kernels leave unwritten stays NaN, and the comparisons count NaNs.
template <class Launch>
std::vector<float> gpu_output(std::size_t count, Launch launch) {
  Buffer<float> out = poisoned(count);
  launch(out.data());
  return download(out);
}

// Integers in [lo, hi] stored as float: products and sums of a few thousand of them stay far below
// 2^24, so every partial sum is exact in float32 and any summation order gives the same bits.
inline std::vector<float> random_integers(std::size_t count, int lo, int hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(lo, hi);
  std::vector<float> values(count);
  for (float& v : values) v = float(dist(rng));
  return values;
}

inline std::vector<float> random_floats(std::size_t count, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float& v : values) v = dist(rng);
  return values;
}

inline std::vector<float> absolute(std::vector<float> values) {
  for (float& v : values) v = std::fabs(v);
  return values;
}

inline std::size_t count_nans(const std::vector<float>& values) {
  std::size_t nans = 0;
  for (float v : values) nans += std::isnan(v) ? 1 : 0;
  return nans;
}

// Exact equality, element by element, and no NaN. The message gives the NaN count, the mismatch
// count and the first mismatch.
inline ::testing::AssertionResult all_equal(const std::vector<float>& actual,
                                          const std::vector<float>& expected) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure()
           << "size " << actual.size() << ", expected " << expected.size();
  const std::size_t nans = count_nans(actual);
  std::size_t mismatches = 0, first = 0;
  for (std::size_t i = 0; i < actual.size(); ++i)
    if (!(actual[i] == expected[i]) && mismatches++ == 0) first = i;
  if (nans == 0 && mismatches == 0) return ::testing::AssertionSuccess();
  std::ostringstream message;
  message << nans << " NaN (unwritten) and " << mismatches << " of " << actual.size()
          << " elements differ";
  if (mismatches > 0)
    message << "; first at [" << first << "]: " << actual[first] << ", expected "
            << expected[first];
  return ::testing::AssertionFailure() << message.str();
}

// |actual - expected| <= rel * scale for every element, and no NaN. `scale` is the sum of the
// absolute values of the terms that make each element (the same computation on |inputs|): the
// rounding error of a float sum in any order is bounded by a small multiple of it, whatever the
// cancellation, so a fixed `rel` works for every element.
inline ::testing::AssertionResult all_close(const std::vector<float>& actual,
                                          const std::vector<float>& expected,
                                          const std::vector<float>& scale, double rel) {
  if (actual.size() != expected.size() || scale.size() != expected.size())
    return ::testing::AssertionFailure() << "size " << actual.size() << ", expected "
                                       << expected.size() << ", scale " << scale.size();
  const std::size_t nans = count_nans(actual);
  std::size_t mismatches = 0, first = 0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double error = std::fabs(double(actual[i]) - double(expected[i]));
    if (!(error <= rel * double(scale[i])) && mismatches++ == 0) first = i;
  }
  if (nans == 0 && mismatches == 0) return ::testing::AssertionSuccess();
  std::ostringstream message;
  message << nans << " NaN (unwritten) and " << mismatches << " of " << actual.size()
          << " elements outside rel " << rel << " x scale";
  if (mismatches > 0)
    message << "; first at [" << first << "]: " << actual[first] << ", expected " << expected[first]
            << ", scale " << scale[first];
  return ::testing::AssertionFailure() << message.str();
}

// Each tensor's displacement from `initial` (what training moved it by) in `got` agrees with the
// one in `want` within `tolerance` of the latter's norm, and training moved every tensor.
inline void expect_same_displacement(const ParamLayout& layout, const std::vector<float>& initial,
                                     const std::vector<float>& got, const std::vector<float>& want,
                                     double tolerance, const std::string& what) {
  for (const ParamSpec& tensor : layout.tensors) {
    double diff2 = 0, norm2 = 0;
    for (std::size_t i = tensor.offset; i < tensor.offset + tensor.count; ++i) {
      const double dw_want = double(want[i]) - double(initial[i]);
      const double dw_got = double(got[i]) - double(initial[i]);
      diff2 += (dw_got - dw_want) * (dw_got - dw_want);
      norm2 += dw_want * dw_want;
    }
    EXPECT_GT(norm2, 0.0) << what << " " << tensor.name << ": training did not move it";
    EXPECT_LE(std::sqrt(diff2), tolerance * std::sqrt(norm2)) << what << " " << tensor.name;
  }
}

}  // namespace lenet5::test
