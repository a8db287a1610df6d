// What the GPU figure targets share: device data in and out, NaN poisoning, comparisons, test
// data and timing.
#include "figures/gpu_common.hpp"

#include <cuda_runtime.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/error.hpp"
#include "cuda/kernels/conv/registry.hpp"
#include "cuda/runtime/check.hpp"
#include "cuda/runtime/runtime.hpp"

namespace lenet5::figures {

double conv_macs(const ConvShape& s) { return double(y_count(s)) * s.c * s.k * s.k; }

std::string shape_text(const ConvShape& s) {
  return "N=" + std::to_string(s.n) + " C=" + std::to_string(s.c) + " " + std::to_string(s.h) +
         "x" + std::to_string(s.w) + " -> M=" + std::to_string(s.m) + " " +
         std::to_string(s.h_out()) + "x" + std::to_string(s.w_out()) + ", K=" + std::to_string(s.k);
}

Buffer<float> upload(const std::vector<float>& host) {
  Buffer<float> device(Device::gpu, host.size());
  device.copy_from_host(host.data());
  return device;
}

std::vector<float> download(const Buffer<float>& device) {
  cuda::synchronize();
  return device.to_vector();
}

void poison(Buffer<float>& device) {
  if (device.bytes() > 0) CUDA_CHECK(cudaMemset(device.data(), 0xFF, device.bytes()));
}

Buffer<float> poisoned(std::size_t count) {
  Buffer<float> device(Device::gpu, count);
  poison(device);
  return device;
}

namespace {

// splitmix64: a fast, well-mixed sequence (the big cuDNN layers need ~10^8 values; mt19937
// would take seconds). Not for anything but test data.
std::uint64_t next_random(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

std::vector<float> random_integers(std::size_t count, int lo, int hi, std::uint64_t seed) {
  std::vector<float> values(count);
  const std::uint64_t span = std::uint64_t(hi - lo + 1);
  for (float& v : values) v = float(lo + int(next_random(seed) % span));
  return values;
}

std::vector<float> random_floats(std::size_t count, std::uint64_t seed) {
  std::vector<float> values(count);
  for (float& v : values) v = float(double(next_random(seed) >> 11) * 0x1.0p-52 - 1.0);
  return values;
}


std::vector<double> absolute(const std::vector<double>& values) {
  std::vector<double> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = std::fabs(values[i]);
  return out;
}

std::string Mismatch::text() const {
  std::string out = grouped((long long)unwritten) + " unwritten, " + grouped((long long)wrong) + " wrong";
  if (!ok()) out += " (first at [" + std::to_string(first) + "])";
  return out;
}

Mismatch compare_exact(const std::vector<float>& actual, const std::vector<float>& expected) {
  if (actual.size() != expected.size()) throw Error("internal: compared vectors differ in size");
  Mismatch m;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const bool nan = std::isnan(actual[i]);
    if (!nan && actual[i] == expected[i]) continue;
    if (m.ok()) m.first = i;
    ++(nan ? m.unwritten : m.wrong);
  }
  return m;
}

Mismatch compare_close(const std::vector<float>& actual, const std::vector<double>& expected,
                       const std::vector<double>& scale, double rel) {
  if (actual.size() != expected.size() || scale.size() != expected.size())
    throw Error("internal: compared vectors differ in size");
  Mismatch m;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const bool nan = std::isnan(actual[i]);
    if (!nan && std::fabs(double(actual[i]) - expected[i]) <= rel * scale[i]) continue;
    if (m.ok()) m.first = i;
    ++(nan ? m.unwritten : m.wrong);
  }
  return m;
}

std::unique_ptr<cuda::ConvAlgorithm> try_make_version(ConvAlgo algo, const ConvShape& largest,
                                                      std::string& why) {
  try {
    return cuda::make_conv_algorithm(algo, largest);
  } catch (const std::exception& e) {  // not built yet, or cannot run this shape
    why = e.what();
    return nullptr;
  }
}

std::string version_label(ConvAlgo algo) {
  const ConvAlgoInfo& info = conv_algorithm_info(algo);
  return std::to_string(info.number) + " " + info.name;
}

double gpu_median_us(int repetitions, const std::function<void()>& work) {
  return cuda::median_microseconds(repetitions, [&work] { work(); });
}

double host_median_us(int repetitions, const std::function<void()>& work, bool warm_up) {
  using clock = std::chrono::steady_clock;
  if (warm_up) work();  // caches, page faults, OpenMP's thread pool
  std::vector<double> times;
  for (int i = 0; i < repetitions; ++i) {
    const auto start = clock::now();
    work();
    times.push_back(std::chrono::duration<double, std::micro>(clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

double gpu_median_us_budget(double budget_ms, const std::function<void()>& work, int& used) {
  auto trampoline = [](void* context) { (*static_cast<const std::function<void()>*>(context))(); };
  void* context = const_cast<std::function<void()>*>(&work);
  const double warm_us = cuda::elapsed_microseconds_of(trampoline, context);
  used = std::clamp(int(budget_ms * 1000.0 / std::max(warm_us, 1.0)), 3, 10);
  std::vector<double> times;
  for (int i = 0; i < used; ++i) times.push_back(cuda::elapsed_microseconds_of(trampoline, context));
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

SerialCpu::SerialCpu() : m_threads(omp_get_max_threads()) { omp_set_num_threads(1); }
SerialCpu::~SerialCpu() { omp_set_num_threads(m_threads); }

namespace {

// FP32 lanes (CUDA cores) per SM, from the CUDA C++ Programming Guide's throughput table
// ("32-bit floating-point add, multiply, multiply-add" per clock per SM). 0: not in the table.
int fp32_lanes(int major, int minor) {
  if (major == 6) return minor == 0 ? 64 : 128;
  if (major == 7) return 64;
  if (major == 8) return minor == 0 ? 64 : 128;
  if (major == 5 || major == 9 || major == 10 || major == 12) return 128;
  return 0;
}

int device_attribute(cudaDeviceAttr attribute) {
  int value = 0, device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&value, attribute, device));
  return value;
}

}  // namespace

double GpuInfo::fp32_peak_tflops() const {
  return double(sm_count) * fp32_lanes_per_sm * 2.0 * sm_clock_khz * 1e3 / 1e12;
}

std::string GpuInfo::text() const {
  return description + ", " + std::to_string(sm_count) + " SMs, SM clock " +
         fixed(sm_clock_khz / 1e3, 0) + " MHz, memory clock " + fixed(memory_clock_khz / 1e3, 0) +
         " MHz, FP32 peak " + fixed(fp32_peak_tflops(), 1) + " TFLOP/s (" +
         std::to_string(sm_count) + " SMs x " + std::to_string(fp32_lanes_per_sm) +
         " lanes x 2 x clock" + (lanes_known ? "" : "; lanes per SM assumed") + ")";
}

GpuInfo gpu_info() {
  GpuInfo info;
  info.description = cuda::device_description();
  info.sm_count = device_attribute(cudaDevAttrMultiProcessorCount);
  info.sm_clock_khz = device_attribute(cudaDevAttrClockRate);
  info.memory_clock_khz = device_attribute(cudaDevAttrMemoryClockRate);
  const int lanes = fp32_lanes(device_attribute(cudaDevAttrComputeCapabilityMajor),
                               device_attribute(cudaDevAttrComputeCapabilityMinor));
  info.lanes_known = lanes > 0;
  info.fp32_lanes_per_sm = lanes > 0 ? lanes : 128;
  return info;
}

}  // namespace lenet5::figures
