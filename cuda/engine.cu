// The GPU engine: Network<float> on the device, the data set resident on the device as bytes, the
// loss statistics accumulated on the device. A training step is five launch sequences on one
// stream (gather, forward, loss, backward, SGD) with no host synchronisation and no copy; the
// host waits once per epoch, in take_epoch_totals().
#include <algorithm>
#include <string>
#include <vector>

#include "core/buffer.hpp"
#include "core/error.hpp"
#include "cuda/batch.cuh"
#include "cuda/dense.cuh"
#include "cuda/engine.hpp"
#include "cuda/loss.cuh"
#include "cuda/optimizer.cuh"
#include "net/network.hpp"
#include "net/topology.hpp"

namespace lenet5 {
namespace {

constexpr int kEvalBatch = 256;  // as the CPU engine
constexpr std::size_t kInputFloats = std::size_t(kInputSide) * kInputSide;
constexpr std::size_t kImageBytes = std::size_t(kImageSide) * kImageSide;

// A Dataset's images and labels in device memory, uploaded once.
struct DeviceDataset {
  const Dataset* source = nullptr;
  const std::uint8_t* host_images = nullptr;
  int count = 0;
  Buffer<std::uint8_t> images, labels;

  void upload(const Dataset& data) {
    if (data.count < 0 || data.images.size() < std::size_t(data.count) * kImageBytes ||
        data.labels.size() < std::size_t(data.count))
      throw Error("internal: data set of " + std::to_string(data.count) +
                  " images has too few image or label bytes");
    images = Buffer<std::uint8_t>(Device::gpu, std::size_t(data.count) * kImageBytes);
    images.copy_from_host(data.images.data());
    labels = Buffer<std::uint8_t>(Device::gpu, std::size_t(data.count));
    labels.copy_from_host(data.labels.data());
    source = &data;
    host_images = data.images.data();
    count = data.count;
  }
};

// Sums the slots in order on the host: the same order, hence the same double, every run.
EpochTotals sum_slots(const Buffer<cuda::StepStats>& slots) {
  EpochTotals totals;
  for (const cuda::StepStats& slot : slots.to_vector()) {
    totals.loss_sum += slot.loss_sum;
    totals.correct += slot.correct;
  }
  return totals;
}

class GpuEngine final : public Engine {
 public:
  GpuEngine(const NetConfig& net, const SgdSettings& sgd, int batch_size)
      : m_sgd(sgd),
        m_batch(batch_size),
        m_network(net, Device::gpu, std::max(batch_size, kEvalBatch)),
        m_velocity(Device::gpu, m_network.layout().buffer_floats),
        m_input(Device::gpu, kInputFloats * m_network.max_batch()),
        m_labels(Device::gpu, m_network.max_batch()),
        m_dL_dlogits(Device::gpu, std::size_t(kClasses) * m_network.max_batch()) {}

  Device device() const override { return Device::gpu; }
  const ParamLayout& layout() const override { return m_network.layout(); }

  void initialise(std::uint64_t seed) override {
    m_network.initialise(seed);
    m_velocity.zero();
  }
  std::vector<float> parameters() const override { return m_network.parameters().to_vector(); }
  std::vector<float> velocity() const override { return m_velocity.to_vector(); }
  void set_state(const std::vector<float>& parameters,
                 const std::vector<float>& velocity) override {
    const std::size_t floats = m_network.layout().buffer_floats;
    if (parameters.size() != floats || velocity.size() != floats)
      throw Error("internal: set_state needs " + std::to_string(floats) +
                  " parameters and velocities, got " + std::to_string(parameters.size()) + " and " +
                  std::to_string(velocity.size()));
    m_network.parameters().copy_from_host(parameters.data());
    m_velocity.copy_from_host(velocity.data());
  }

  void set_training_data(const Dataset& train) override { m_train.upload(train); }

  // The epoch's one upload: the permutation; and fresh statistics slots, one per step.
  void begin_epoch(const std::vector<std::int32_t>& permutation) override {
    for (const std::int32_t index : permutation)
      if (index < 0 || index >= m_train.count)
        throw Error("internal: permutation index " + std::to_string(index) + " outside the " +
                    std::to_string(m_train.count) + " training images");
    if (m_permutation.size() != permutation.size())
      m_permutation = Buffer<std::int32_t>(Device::gpu, permutation.size());
    m_permutation.copy_from_host(permutation.data());
    const std::size_t steps = (permutation.size() + m_batch - 1) / m_batch;
    if (m_step_stats.size() != steps)
      m_step_stats = Buffer<cuda::StepStats>(Device::gpu, steps);
    else
      m_step_stats.zero();
    m_seen = 0;
  }

  // gather -> forward -> loss (gradient and slot first / batch) -> backward -> SGD, all queued on
  // kDefaultStream. The checks are on host values only; nothing waits for the device.
  void train_step(int first, int count, float lr) override {
    if (count < 1 || count > m_batch || first < 0 || first % m_batch != 0 ||
        std::size_t(first) + count > m_permutation.size())
      throw Error("internal: train_step(" + std::to_string(first) + ", " + std::to_string(count) +
                  ") does not fit batch " + std::to_string(m_batch) + " and a permutation of " +
                  std::to_string(m_permutation.size()));
    cuda::gather_batch(m_train.images.data(), m_train.labels.data(), m_permutation.data() + first,
                       count, m_input.data(), m_labels.data(), cuda::kDefaultStream);
    m_network.forward(m_input.data(), count);
    cuda::softmax_cross_entropy(m_network.logits(), m_labels.data(), count, m_dL_dlogits.data(),
                                nullptr, m_step_stats.data() + first / m_batch,
                                cuda::kDefaultStream);
    m_network.backward(m_dL_dlogits.data(), count);
    cuda::sgd_step(m_sgd, lr, m_network.gradients().data(), m_network.parameters().data(),
                   m_velocity.data(), m_velocity.size(), cuda::kDefaultStream);
    m_seen += count;
  }

  // The epoch's one synchronisation: the copy of the slots waits for the last step.
  EpochTotals take_epoch_totals() override {
    EpochTotals totals = sum_slots(m_step_stats);
    totals.seen = m_seen;
    return totals;
  }

  Evaluation evaluate(const Dataset& data) override;
  std::vector<float> probabilities(const std::uint8_t* images, int n) override;

 private:
  const DeviceDataset& device_copy(const Dataset& data);

  SgdSettings m_sgd;
  int m_batch;
  Network<float> m_network;
  Buffer<float> m_velocity, m_input;
  Buffer<std::uint8_t> m_labels;
  Buffer<float> m_dL_dlogits;
  DeviceDataset m_train;
  Buffer<std::int32_t> m_permutation;
  Buffer<cuda::StepStats> m_step_stats;  // (steps per epoch)
  std::int64_t m_seen = 0;
  DeviceDataset m_eval;  // the last evaluated data set (the test set, in practice)
};

// Uploads an evaluation set the first time it is seen; later epochs reuse the device copy (the
// training set's copy too, if that is what is evaluated). The key is the Dataset's address plus
// its storage and size, so a different set that happens to reuse an address is not mistaken for
// the cached one.
const DeviceDataset& GpuEngine::device_copy(const Dataset& data) {
  const auto holds = [&data](const DeviceDataset& set) {
    return set.source == &data && set.host_images == data.images.data() && set.count == data.count;
  };
  if (holds(m_train)) return m_train;
  if (!holds(m_eval)) m_eval.upload(data);
  return m_eval;
}

// Forward in batches of 256 on the device; one StepStats slot per batch (summed on the host in
// order, so the loss is the same every time) and the predictions come back in one copy for the
// confusion matrix. Evaluation is outside the timed epoch, so its synchronisation is harmless.
Evaluation GpuEngine::evaluate(const Dataset& data) {
  Evaluation result;
  result.count = data.count;
  if (data.count == 0) return result;
  const DeviceDataset& set = device_copy(data);
  const int batches = (data.count + kEvalBatch - 1) / kEvalBatch;
  Buffer<cuda::StepStats> slots(Device::gpu, batches);
  Buffer<std::int32_t> predictions(Device::gpu, data.count);
  for (int b = 0; b < batches; ++b) {
    const int first = b * kEvalBatch, n = std::min(kEvalBatch, data.count - first);
    cuda::gather_batch(set.images.data() + first * kImageBytes, nullptr, nullptr, n, m_input.data(),
                       nullptr, cuda::kDefaultStream);
    m_network.forward(m_input.data(), n);
    cuda::softmax_cross_entropy(m_network.logits(), set.labels.data() + first, n, nullptr,
                                predictions.data() + first, slots.data() + b, cuda::kDefaultStream);
  }
  const std::vector<std::int32_t> predicted = predictions.to_vector();
  const EpochTotals totals = sum_slots(slots);
  result.loss_sum = totals.loss_sum;
  result.correct = totals.correct;
  for (int i = 0; i < data.count; ++i) ++result.confusion[data.labels[i]][predicted[i]];
  return result;
}

std::vector<float> GpuEngine::probabilities(const std::uint8_t* images, int n) {
  if (n <= 0) return {};
  Buffer<std::uint8_t> device_images(Device::gpu, std::size_t(n) * kImageBytes);
  device_images.copy_from_host(images);
  Buffer<float> device_probabilities(Device::gpu, std::size_t(n) * kClasses);
  for (int first = 0; first < n; first += kEvalBatch) {
    const int count = std::min(kEvalBatch, n - first);
    cuda::gather_batch(device_images.data() + first * kImageBytes, nullptr, nullptr, count,
                       m_input.data(), nullptr, cuda::kDefaultStream);
    m_network.forward(m_input.data(), count);
    cuda::softmax_probabilities(m_network.logits(), count,
                                device_probabilities.data() + std::size_t(first) * kClasses,
                                cuda::kDefaultStream);
  }
  return device_probabilities.to_vector();
}

}  // namespace

std::unique_ptr<Engine> make_gpu_engine(const NetConfig& net, const SgdSettings& sgd,
                                        int batch_size) {
  if (batch_size < 1) throw UsageError("batch size must be at least 1");
  return std::make_unique<GpuEngine>(net, sgd, batch_size);
}

}  // namespace lenet5
