// The CPU engine: Network<float> with the CPU layers the kernel set picks (layers/cpu_layers.hpp),
// the optimizer's host update.
#include "cpu/cpu_engine.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/rbf_math.hpp"
#include "core/topology.hpp"
#include "data/batch.hpp"
#include "engine/engine.hpp"
#include "engine/network.hpp"
#include "engine/network_engine.hpp"
#include "engine/optimizers.hpp"
#include "layers/reference_cpu.hpp"

namespace lenet5 {
namespace {

class CpuEngine final : public NetworkEngine {
 public:
  CpuEngine(const NetConfig& net, const SgdSettings& sgd, int batch_size)
      : NetworkEngine(net, Device::cpu, batch_size, sgd),
        m_input(kInputFloats * m_network.max_batch()),
        m_dL_dlogits(std::size_t(kClasses) * m_network.max_batch()),
        m_labels(m_network.max_batch()),
        m_reference_augmentation(net.kernels == GpuKernels::book) {}

  Device device() const override { return Device::cpu; }

  void set_training_data(const Dataset& train, const Augmentation& augmentation) override {
    m_train = &train;
    m_augmentation = augmentation;
    curvature_data(train, augmentation);
  }
  void begin_epoch(int epoch, const std::vector<std::int32_t>& permutation,
                   const std::vector<float>& learning_rates) override {
    m_epoch = std::uint32_t(epoch);
    m_permutation = permutation;
    m_learning_rates = learning_rates;
    m_totals = {};
    curvature_pass(epoch, permutation);
  }

  void train_steps(int first_step, int end_step) override {
    const int n = int(m_permutation.size());
    estimate_curvature_before(first_step);
    for (int step = first_step; step < end_step; ++step)
      train_step(step * m_batch, std::min(m_batch, n - step * m_batch), m_learning_rates.at(step));
  }
  int preferred_steps_per_call(int) const override { return 1; }
  EpochTotals take_epoch_totals() override { return m_totals; }

  Evaluation evaluate(const Dataset& data) override {
    Evaluation result;
    result.output = m_network.config().output;
    std::vector<int> predictions(kEvalBatch);
    for (int first = 0; first < data.count; first += kEvalBatch) {
      const int n = std::min(kEvalBatch, data.count - first);
      gather_batch_cpu<float>(data.images.data() + first * kImageBytes, nullptr, n, scaling(),
                              m_input.data());
      m_network.forward(m_input.data(), n);
      const std::uint8_t* labels = data.labels.data() + first;
      const LossStats stats = output_loss_cpu(m_network.config().output, m_network.logits(), labels,
                                              n, kClasses, (float*)nullptr, predictions.data());
      result.loss_sum += stats.loss_sum;
      result.correct += stats.correct;
      for (int i = 0; i < n; ++i) ++result.confusion[labels[i]][predictions[i]];
    }
    result.count = data.count;
    return result;
  }

  std::vector<float> classify(const std::uint8_t* images, int n,
                              std::vector<std::int32_t>& predicted) override {
    std::vector<float> result(std::size_t(n) * kClasses);
    predicted.assign(std::size_t(n), 0);
    for (int first = 0; first < n; first += kEvalBatch) {
      const int count = std::min(kEvalBatch, n - first);
      gather_batch_cpu<float>(images + first * kImageBytes, nullptr, count, scaling(),
                              m_input.data());
      m_network.forward(m_input.data(), count);
      float* p = result.data() + std::size_t(first) * kClasses;
      const float* outputs = m_network.logits();
      if (m_network.config().output == OutputLayer::rbf) {
        map_probabilities_cpu(outputs, count, kClasses, p);
        for (int i = 0; i < count; ++i)
          predicted[std::size_t(first + i)] = nearest_class(outputs + i * kClasses, kClasses);
      } else {
        softmax_rows(outputs, count, p);
        for (int i = 0; i < count; ++i)
          predicted[std::size_t(first + i)] = std::int32_t(
              std::max_element(p + i * kClasses, p + (i + 1) * kClasses) - (p + i * kClasses));
      }
    }
    return result;
  }

 private:
  void train_step(int first, int count, float lr) {
    const std::int32_t* indices = m_permutation.data() + first;
    // The book's kernel set is the reference throughout; the others augment in float.
    const auto gather =
        m_reference_augmentation ? gather_augmented_batch_reference : gather_augmented_batch_fast;
    gather(m_train->images.data(), indices, count, m_augmentation, m_epoch, scaling(),
           m_input.data());
    for (int i = 0; i < count; ++i) m_labels[i] = m_train->labels[indices[i]];
    m_network.forward(m_input.data(), count);
    const LossStats stats =
        output_loss_cpu(m_network.config().output, m_network.logits(), m_labels.data(), count,
                        kClasses, m_dL_dlogits.data(), nullptr);
    m_network.backward(m_dL_dlogits.data(), count);
    m_optimizer.description.update_cpu(m_sgd, lr, m_network.gradients().data(), m_network.parameters().data(),
                           m_state.pointers(), m_network.layout().buffer_floats);
    m_totals.loss_sum += stats.loss_sum;
    m_totals.correct += stats.correct;
    m_totals.seen += count;
  }

  static void softmax_rows(const float* logits, int n, float* out) {
    for (int s = 0; s < n; ++s) {
      const float* z = logits + s * kClasses;
      const float top = *std::max_element(z, z + kClasses);
      double sum = 0;
      for (int k = 0; k < kClasses; ++k) sum += std::exp(double(z[k] - top));
      for (int k = 0; k < kClasses; ++k) out[s * kClasses + k] = float(std::exp(double(z[k] - top)) / sum);
    }
  }

  std::vector<float> m_input, m_dL_dlogits;
  std::vector<std::uint8_t> m_labels;
  bool m_reference_augmentation;  // double (the book's set) or float (the fast sets)
  const Dataset* m_train = nullptr;
  Augmentation m_augmentation;
  std::uint32_t m_epoch = 0;
  std::vector<std::int32_t> m_permutation;
  std::vector<float> m_learning_rates;
  EpochTotals m_totals;
};

}  // namespace

std::unique_ptr<Engine> make_cpu_engine(const NetConfig& net, const SgdSettings& sgd,
                                        int batch_size) {
  if (batch_size < 1) throw UsageError("batch size must be at least 1");
  return std::make_unique<CpuEngine>(net, sgd, batch_size);
}

}  // namespace lenet5
