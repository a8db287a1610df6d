#include "figures/phase_timing.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <utility>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "core/topology.hpp"
#include "cuda/kernels/batch.cuh"
#include "cuda/kernels/dense.cuh"
#include "cuda/kernels/loss.cuh"
#include "cuda/kernels/optimizer.cuh"
#include "cuda/runtime/check.hpp"

namespace lenet5::figures {
namespace {


// One CUDA event with timing, destroyed with its owner.
class Event {
 public:
  Event() { CUDA_CHECK(cudaEventCreate(&m_event)); }
  ~Event() {
    if (m_event) (void)cudaEventDestroy(m_event);  // never throws from a destructor
  }
  Event(Event&& other) noexcept : m_event(std::exchange(other.m_event, nullptr)) {}
  Event& operator=(Event&&) = delete;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return m_event; }

 private:
  cudaEvent_t m_event = nullptr;
};

// Events recorded one after the other on one stream: the intervals between consecutive marks
// tile the time from the first mark to the last, without gap or overlap. All events are created
// up front, so that marking is only a cudaEventRecord; nothing is read before the last mark.
class EventChain {
 public:
  explicit EventChain(std::size_t capacity) {
    m_events.reserve(capacity);
    for (std::size_t i = 0; i < capacity; ++i) m_events.emplace_back();
  }

  void mark(cudaStream_t stream) {
    if (m_marked == m_events.size())
      throw Error("internal: more than " + std::to_string(m_events.size()) + " timing marks");
    CUDA_CHECK(cudaEventRecord(m_events[m_marked++].get(), stream));
  }

  // Waits for the last mark; then the milliseconds between marks i and i + 1, for every i.
  std::vector<float> intervals_ms() const {
    wait_for_last();
    std::vector<float> intervals(m_marked - 1);
    for (std::size_t i = 0; i + 1 < m_marked; ++i)
      CUDA_CHECK(cudaEventElapsedTime(&intervals[i], m_events[i].get(), m_events[i + 1].get()));
    return intervals;
  }

  // Milliseconds from the first mark to the last: one reading of its own.
  float total_ms() const {
    wait_for_last();
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, m_events.front().get(), m_events[m_marked - 1].get()));
    return ms;
  }

 private:
  void wait_for_last() const {
    if (m_marked < 2) throw Error("internal: timing needs at least two marks");
    CUDA_CHECK(cudaEventSynchronize(m_events[m_marked - 1].get()));
  }

  std::vector<Event> m_events;
  std::size_t m_marked = 0;
};

// Each slot's loss sum divided by its sample count: the mean loss per batch.
std::vector<double> mean_losses(const Buffer<cuda::StepStats>& slots, int batch, int total) {
  std::vector<double> means;
  const std::vector<cuda::StepStats> host = slots.to_vector();
  for (std::size_t i = 0; i < host.size(); ++i) {
    const int n = std::min(batch, total - int(i) * batch);
    means.push_back(host[i].loss_sum / n);
  }
  return means;
}

// Before anything is sized from it.
const PhaseRunSetup& validated(const PhaseRunSetup& setup) {
  if (setup.iterations < 1 || setup.batch < 1 || setup.test_batch < 1)
    throw Error("internal: phase timing needs at least one iteration and batches of one or more");
  return setup;
}

}  // namespace

Dataset random_dataset(int count, std::uint64_t seed) {
  if (count < 0) throw Error("internal: a data set of " + std::to_string(count) + " images");
  Dataset data;
  data.count = count;
  data.images.resize(std::size_t(count) * kImageBytes);
  data.labels.resize(std::size_t(count));
  SplitMix64 rng(seed);
  for (std::uint8_t& pixel : data.images) pixel = std::uint8_t(rng.next() >> 56);  // top 8 bits
  for (std::uint8_t& label : data.labels) label = std::uint8_t(rng.below(kClasses));
  return data;
}

DeviceDataset upload_dataset(const Dataset& data) {
  if (data.count < 0 || data.images.size() != std::size_t(data.count) * kImageBytes ||
      data.labels.size() != std::size_t(data.count))
    throw Error("internal: data set of " + std::to_string(data.count) +
                " images has the wrong number of image or label bytes");
  DeviceDataset device;
  device.count = data.count;
  device.images = Buffer<std::uint8_t>(Device::gpu, data.images.size());
  device.images.copy_from_host(data.images.data());
  device.labels = Buffer<std::uint8_t>(Device::gpu, data.labels.size());
  device.labels.copy_from_host(data.labels.data());
  return device;
}

PhaseTrainer::PhaseTrainer(const NetConfig& config, const PhaseRunSetup& setup)
    : m_setup(validated(setup)),
      m_network(config, Device::gpu, std::max(setup.batch, setup.test_batch)),
      m_velocity(Device::gpu, m_network.parameters().size()),
      m_input(Device::gpu, kInputFloats * m_network.max_batch()),
      m_dL_dlogits(Device::gpu, std::size_t(kClasses) * setup.batch),
      m_labels(Device::gpu, std::size_t(setup.batch)) {}

PhaseRun PhaseTrainer::run(const DeviceDataset& train, const DeviceDataset& test) {
  const int steps = m_setup.iterations, batch = m_setup.batch, test_batch = m_setup.test_batch;
  if (train.count < steps * batch || test.count < 1)
    throw Error("internal: " + std::to_string(steps) + " steps of " + std::to_string(batch) +
                " need " + std::to_string(steps * batch) + " training images, given " +
                std::to_string(train.count) + ", and a test set (given " +
                std::to_string(test.count) + ")");
  const int test_batches = (test.count + test_batch - 1) / test_batch;
  // Everything that allocates, copies or zeroes happens before the first mark.
  m_network.initialise(m_setup.init_seed);
  m_velocity.zero();
  Buffer<cuda::StepStats> train_stats(Device::gpu, std::size_t(steps));
  Buffer<cuda::StepStats> test_stats(Device::gpu, std::size_t(test_batches));
  EventChain chain(std::size_t(interval_count(steps)) + 1);
  const cudaStream_t stream = cuda::kDefaultStream;  // the layers' stream (cuda/runtime/streams.hpp)

  for (int step = 0; step < steps; ++step) {
    const std::size_t first = std::size_t(step) * batch;
    chain.mark(stream);  // forward
    cuda::gather_batch(train.images.data() + first * kImageBytes, train.labels.data() + first,
                       nullptr, batch, m_input.data(), m_labels.data(), stream);
    m_network.forward(m_input.data(), batch);
    chain.mark(stream);  // backward
    cuda::softmax_cross_entropy(m_network.logits(), m_labels.data(), batch, m_dL_dlogits.data(),
                                nullptr, train_stats.data() + step, stream);
    m_network.backward(m_dL_dlogits.data(), batch);
    chain.mark(stream);  // update
    cuda::sgd_step(m_setup.sgd, m_setup.lr, m_network.gradients().data(),
                   m_network.parameters().data(), m_velocity.data(), m_velocity.size(), stream);
  }
  chain.mark(stream);  // testing
  for (int t = 0; t < test_batches; ++t) {
    const int first = t * test_batch, n = std::min(test_batch, test.count - first);
    cuda::gather_batch(test.images.data() + std::size_t(first) * kImageBytes, nullptr, nullptr, n,
                       m_input.data(), nullptr, stream);
    m_network.forward(m_input.data(), n);
    cuda::softmax_cross_entropy(m_network.logits(), test.labels.data() + first, n, nullptr, nullptr,
                                test_stats.data() + t, stream);
  }
  chain.mark(stream);  // the end

  PhaseRun run;
  run.intervals = interval_count(steps);
  run.times = sum_phase_intervals(chain.intervals_ms(), steps, chain.total_ms());
  run.step_losses = mean_losses(train_stats, batch, steps * batch);
  double test_sum = 0;
  for (const cuda::StepStats& slot : test_stats.to_vector()) test_sum += slot.loss_sum;  // in order
  run.test_loss = test_sum / test.count;
  run.parameters = m_network.parameters().to_vector();
  return run;
}

}  // namespace lenet5::figures
