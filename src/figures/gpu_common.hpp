// Shared by the GPU targets of `lenet5 figures` (gpu_targets.cpp, gpu_unroll_targets.cpp,
// gpu_fft_targets.cpp, layout_targets.cpp, timing_targets.cpp, cudnn_targets.cpp,
// phase_timing_targets.cpp): device data in and out, NaN poisoning, comparisons that count
// unwritten and wrong elements, test data, timing, and what the GPU is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/conv_algo.hpp"
#include "cuda/runtime/buffer.hpp"
#include "figures/figures.hpp"
#include "layers/reference_cpu.hpp"

namespace lenet5::cuda {
class ConvAlgorithm;
}

namespace lenet5::figures {

// The parts of gpu_targets(), one per source file, in the specification's order.
std::vector<Target> gpu_errata_targets();  // fig16.12, fig16.13 (gpu_targets.cpp)
std::vector<Target> gpu_unroll_targets();  // fig16.14.gpu, fig16.17 (gpu_unroll_targets.cpp)
std::vector<Target> layout_targets();      // ex2 (layout_targets.cpp)
std::vector<Target> gpu_fft_targets();     // ex3 (gpu_fft_targets.cpp)
std::vector<Target> timing_targets();      // lenet.timing, zf.timing (timing_targets.cpp)
std::vector<Target> cudnn_targets();       // cudnn.tab3 (cudnn_targets.cpp)
std::vector<Target> phase_timing_targets();  // cudnn.tab4 (phase_timing_targets.cpp)

// ---- sizes --------------------------------------------------------------------------------------
double conv_macs(const ConvShape& s);          // N*M*H_out*W_out*C*K*K
std::string shape_text(const ConvShape& s);    // "N=2 C=1 32x32 -> M=6 28x28, K=5"

// ---- device data --------------------------------------------------------------------------------
Buffer<float> upload(const std::vector<float>& host);
// Waits for the work before it (its errors become lenet5::Error), then copies.
std::vector<float> download(const Buffer<float>& device);
// All bytes 0xFF: a quiet NaN in every float, so that what a kernel does not write stays NaN.
void poison(Buffer<float>& device);
Buffer<float> poisoned(std::size_t count);

// ---- test data ----------------------------------------------------------------------------------
// Integers in [lo, hi] as floats: sums of a few thousand products stay exact in float32, so any
// summation order gives the same bits and results compare with ==.
std::vector<float> random_integers(std::size_t count, int lo, int hi, std::uint64_t seed);
// Uniform in [-1, 1): no two results of different sums coincide (used to count wrong outputs).
std::vector<float> random_floats(std::size_t count, std::uint64_t seed);
std::vector<double> absolute(const std::vector<double>& values);

// ---- comparisons --------------------------------------------------------------------------------
struct Mismatch {
  std::size_t unwritten = 0;  // still NaN
  std::size_t wrong = 0;      // written, but not the expected value
  std::size_t first = 0;      // index of the first problem (valid when any)
  bool ok() const { return unwritten == 0 && wrong == 0; }
  std::string text() const;  // "0 unwritten, 3 wrong (first at [17])"
};
// Exact: actual[i] == expected[i].
Mismatch compare_exact(const std::vector<float>& actual, const std::vector<float>& expected);
// |actual - expected| <= rel * scale[i], where scale[i] is the sum of the absolute values of the
// terms of element i (the same computation on |inputs|, in double): a float sum's rounding error
// in any order is bounded by a small multiple of it whatever the cancellation, while an indexing
// error moves an element by about scale / sqrt(terms). Each caller states its rel.
Mismatch compare_close(const std::vector<float>& actual, const std::vector<double>& expected,
                       const std::vector<double>& scale, double rel);

// ---- convolution versions -----------------------------------------------------------------------
// The registry's version, or nullptr with `why` set when it cannot be built here (e.g. "not
// built yet"): the caller reports it as a failed check.
std::unique_ptr<cuda::ConvAlgorithm> try_make_version(ConvAlgo algo, const ConvShape& largest,
                                                      std::string& why);
std::string version_label(ConvAlgo algo);  // "2 tiled"

// ---- timing -------------------------------------------------------------------------------------
// Median of `repetitions` CUDA-event timings of `work` (enqueued on the per-thread default
// stream), after one warm-up: cuda::median_microseconds.
double gpu_median_us(int repetitions, const std::function<void()>& work);
// Median wall time of `repetitions` runs of host code, after one warm-up unless warm_up is false.
double host_median_us(int repetitions, const std::function<void()>& work, bool warm_up = true);
// As gpu_median_us, with the count chosen from the warm-up's time: 10 runs, fewer (at least 3)
// when 10 would take more than `budget_ms`. Returns the median; `used` gets the count.
double gpu_median_us_budget(double budget_ms, const std::function<void()>& work, int& used);

// Runs the CPU references on one thread while alive (OpenMP's thread count restored after): the
// "serial" column of the timing tables.
class SerialCpu {
 public:
  SerialCpu();
  ~SerialCpu();
  SerialCpu(const SerialCpu&) = delete;
  SerialCpu& operator=(const SerialCpu&) = delete;

 private:
  int m_threads;
};

// ---- the device ---------------------------------------------------------------------------------
struct GpuInfo {
  std::string description;  // cuda::device_description()
  int sm_count = 0;
  int sm_clock_khz = 0;      // peak SM clock (cudaDevAttrClockRate)
  int memory_clock_khz = 0;  // peak memory clock
  int fp32_lanes_per_sm = 0;
  bool lanes_known = true;   // false: the architecture is not in the table, 128 assumed
  double fp32_peak_tflops() const;  // SMs x lanes x 2 (an FMA is 2 FLOP) x clock
  std::string text() const;         // one line for the blocks
};
GpuInfo gpu_info();

}  // namespace lenet5::figures
