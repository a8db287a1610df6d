// The GPU engine: Network<float> on the device, the data set resident on the device as bytes, the
// loss statistics accumulated on the device. A training step is five launch sequences on one
// stream (gather, forward, loss, backward, update) with no host synchronisation and no copy; the
// host waits once per epoch, in take_epoch_totals().
//
// A whole epoch of steps is captured once into a CUDA graph and replayed every epoch: launching
// ~30 small kernels per step costs more host time than the GPU needs to run them, and a graph
// removes that overhead. The whole-step and tensor sets, whose steps are a few launches, run their
// first epoch's steps directly and capture them while the GPU runs them (GraphExec::run), so that
// the GPU does not wait for the capture. Replaying is valid because every argument of every launch
// is the same each epoch: the buffers keep their addresses, the permutation and the per-step
// learning rates are uploaded into the same buffers at the start of each epoch, and each step's
// rate is read from memory by the update kernel. A partial epoch (a run resumed mid-epoch) runs
// step by step.
//
// With the whole-step kernel set a step is two launches instead (cuda/engine/whole_step.cuh): the
// gather, forward, loss, backward and SGD all happen inside them, and evaluation runs their forward
// stages; with --kernels tensor, the steps enqueued together (an epoch's, in its graph) have each
// batch gathered in a launch on a side stream beside the step before (tensor_steps), and a step is
// TensorBackward::train_step's five launches over its batch (four at batches larger than the GPU's
// SMs; cuda/engine/tensor_backward.cuh: each sample's loss in the dense forward kernel, their sum
// and SGD's update in the last two), and evaluation runs the tensor cores' forward pass
// (cuda/engine/tensor_forward.cuh).
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/topology.hpp"
#include "cuda/engine/engine_parts.hpp"
#include "cuda/engine/gpu_engine.hpp"
#include "cuda/engine/tensor_backward.cuh"
#include "cuda/engine/tensor_forward.cuh"
#include "cuda/engine/whole_step.cuh"
#include "cuda/kernels/batch.cuh"
#include "cuda/kernels/dense.cuh"
#include "cuda/kernels/loss.cuh"
#include "cuda/kernels/rbf.cuh"
#include "cuda/runtime/buffer.hpp"
#include "cuda/runtime/check.hpp"
#include "cuda/runtime/streams.hpp"
#include "engine/network.hpp"
#include "engine/network_engine.hpp"
#include "engine/optimizers.hpp"

namespace lenet5 {
namespace {

// --kernels tensor's gathered batches: step k of the steps enqueued together takes slot k % 2,
// which step k + 2's gather writes again only after step k's launches (it is branched from the main
// stream after them).
constexpr int kGatherSlots = 2;
// The threads that enqueue an epoch's steps at once (GraphExec::run: the one that launches a first
// epoch and the one that captures it), each with a gather stream of its own.
constexpr int kEnqueuingThreads = 2;

class GpuEngine final : public NetworkEngine {
 public:
  GpuEngine(const NetConfig& net, const SgdSettings& sgd, int batch_size, bool use_graphs,
            PhaseMarks* marks = nullptr)
      : NetworkEngine(net, Device::gpu, batch_size, sgd),
        m_use_graphs(use_graphs),
        m_marks(marks),
        m_input(Device::gpu, kInputFloats * m_network.max_batch()),
        m_labels(Device::gpu, m_network.max_batch()),
        m_dL_dlogits(Device::gpu, std::size_t(kClasses) * m_network.max_batch()) {
    if (gpu_kernel_set(net.kernels).whole_step && net.output != OutputLayer::softmax)
      throw Error(
          "internal: the whole-step kernels compute only the softmax output (the settings "
          "refuse --output rbf with them)");
    if (gpu_kernel_set(net.kernels).whole_step) {
      // The whole-step kernels fold SGD's update into their own last kernel.
      if (m_optimizer.description.name != kSgdName)
        throw UsageError("the optimizer " + m_optimizer.description.name +
                         " does not run in the whole-step kernel set, whose kernels apply SGD "
                         "themselves: choose --kernels fast or book");
      // A lone model of the tensor-core set trains with TensorBackward's kernels instead.
      if (!gpu_kernel_set(net.kernels).tensor_gradient)
        m_whole_step = std::make_unique<cuda::WholeStep>(net, m_network.layout(), batch_size);
    }
    if (gpu_kernel_set(net.kernels).tensor_evaluation)
      m_tensor_forward = std::make_unique<cuda::TensorForward>(net, m_network.layout());
    if (gpu_kernel_set(net.kernels).tensor_gradient) {
      m_tensor_backward =
          std::make_unique<cuda::TensorBackward>(net, m_network.layout(), batch_size);
      for (auto& stream : m_gather_streams) stream = std::make_unique<cuda::SideStream>();
      const std::size_t samples = std::size_t(kGatherSlots) * batch_size;
      m_gathered_field = Buffer<float>(Device::gpu, kInputFloats * samples);
      m_gathered_labels = Buffer<std::uint8_t>(Device::gpu, samples);
      // The padding between tensors, which the tensor cores never write and the update reads
      // (between the dense layers' tensors).
      m_network.gradients().zero();
    }
  }

  Device device() const override { return Device::gpu; }

  void set_training_data(const Dataset& train, const Augmentation& augmentation) override {
    m_epoch_graph.reset();  // its launches point into the buffers replaced here
    m_train.upload(train);
    curvature_data(train, augmentation);
    m_augmentation =
        cuda::DeviceAugmentation{augmentation.settings, augmentation.seed, m_epoch.data()};
  }

  // The epoch's uploads: its number, the permutation and the rates; and fresh statistics slots,
  // one per step.
  void begin_epoch(int epoch, const std::vector<std::int32_t>& permutation,
                   const std::vector<float>& learning_rates) override {
    const std::size_t steps =
        checked_epoch_steps(permutation, learning_rates, m_train.count(), m_batch);
    if (m_permutation.size() != permutation.size() || m_step_stats.size() != steps) {
      m_epoch_graph.reset();  // its launches point into the buffers replaced here
      m_permutation = Buffer<std::int32_t>(Device::gpu, permutation.size());
      m_learning_rates = Buffer<float>(Device::gpu, steps);
      m_step_stats = Buffer<cuda::StepStats>(Device::gpu, steps);
    } else {
      m_step_stats.zero();
    }
    const std::uint32_t epoch_number = std::uint32_t(epoch);
    m_epoch.copy_from_host(&epoch_number);
    m_permutation.copy_from_host(permutation.data());
    m_learning_rates.copy_from_host(learning_rates.data());
    m_seen = 0;
    curvature_pass(epoch, permutation);
  }

  void train_steps(int first_step, int end_step) override {
    const int steps = int(m_step_stats.size());
    if (first_step < 0 || end_step > steps || first_step > end_step)
      throw Error("internal: steps [" + std::to_string(first_step) + ", " +
                  std::to_string(end_step) + ") outside an epoch of " + std::to_string(steps));
    // SDLM: the host estimates the curvature from the parameters (a copy that waits for the
    // steps queued before) and copies it into the state buffer the update kernels read.
    estimate_curvature_before(first_step);
    if (m_use_graphs && first_step == 0 && end_step == steps) {
      m_epoch_graph.run(cuda::kDefaultStream, m_whole_step || m_tensor_backward,
                        [&] { enqueue_steps(0, steps); });
    } else {
      enqueue_steps(first_step, end_step);
    }
    const int n = int(m_permutation.size());
    m_seen += std::min(n, end_step * m_batch) - first_step * m_batch;
  }

  int preferred_steps_per_call(int steps_in_epoch) const override {
    return m_use_graphs ? steps_in_epoch : 1;
  }

 private:
  // Step s: gather -> forward -> loss (gradient and statistics slot s) -> backward -> the
  // optimizer's update with the rate learning_rates[s], all queued on kDefaultStream. Nothing
  // waits for the device. The whole-step kernels take SGD's velocity (null without momentum).
  void enqueue_steps(int first_step, int end_step) {
    if (m_tensor_backward) {
      tensor_steps(first_step, end_step);
      return;
    }
    const int n = int(m_permutation.size());
    for (int step = first_step; step < end_step; ++step) {
      const int first = step * m_batch, count = std::min(m_batch, n - first);
      if (m_whole_step) {
        m_whole_step->train_step(
            m_train.images.data(), m_train.labels.data(), m_permutation.data() + first, count,
            m_augmentation, m_sgd, m_learning_rates.data() + step, m_network.parameters().data(),
            m_state.find(kMomentumState), m_step_stats.data() + step, cuda::kDefaultStream);
        continue;
      }
      mark(EnginePhase::forward);
      gather(first, count);
      m_network.forward(m_input.data(), count);
      mark(EnginePhase::backward);
      output_loss(m_labels.data(), count, m_dL_dlogits.data(), nullptr, m_step_stats.data() + step);
      m_network.backward(m_dL_dlogits.data(), count);
      mark(EnginePhase::update);
      m_optimizer.update_gpu(m_sgd, m_learning_rates.data() + step, m_network.gradients().data(),
                             m_network.parameters().data(), m_state.pointers(),
                             m_network.layout().buffer_floats, cuda::kDefaultStream);
    }
  }

  // The samples from `first` of the permutation, augmented where the run asks, into field and
  // labels.
  cuda::BatchGather batch_from(int first, float* field, std::uint8_t* labels) {
    return {m_train.images.data(),
            m_train.labels.data(),
            m_permutation.data() + first,
            m_augmentation,
            scaling(),
            field,
            labels};
  }

  void gather(int first, int count) {
    cuda::gather_training_batch(batch_from(first, m_input.data(), m_labels.data()), count,
                                cuda::kDefaultStream);
  }

  // --kernels tensor's steps [first_step, end_step): each step's samples gathered in one launch
  // into its slot of m_gathered_field and m_gathered_labels, the first step's before it, each later
  // one's on a side stream branched from the main stream once the step before has launched its
  // convolutions' forward kernel (in an epoch's graph, a parallel branch), so that the gather runs
  // on the SMs the rest of that step leaves idle rather than beside the one kernel that takes them
  // all (docs/tensor-cores.md, "The next batch's gather behind the convolutions' forward kernel");
  // then each step's batch-mean gradient on the tensor cores over its batch so gathered, with the
  // step's loss statistics (counted from the same forward pass), and SGD's update in the
  // gradient's last two launches (the whole-step set's rule: SGD only, which the constructor
  // checked).
  void tensor_steps(int first_step, int end_step) {
    if (first_step >= end_step) return;  // no steps, no batch to gather
    const int n = int(m_permutation.size());
    const auto samples_of = [&](int step) { return std::min(m_batch, n - step * m_batch); };
    const auto batch_of = [&](int step) {
      const std::size_t sample = std::size_t((step - first_step) % kGatherSlots) * m_batch;
      return batch_from(step * m_batch, m_gathered_field.data() + sample * kInputFloats,
                        m_gathered_labels.data() + sample);
    };
    cuda::SideStream& side = gather_stream();
    cuda::gather_training_batch(batch_of(first_step), samples_of(first_step), cuda::kDefaultStream);
    for (int step = first_step; step < end_step; ++step) {
      const int next = step + 1;
      const auto gather_next = [&] {
        side.branch_from(cuda::kDefaultStream);
        cuda::gather_training_batch(batch_of(next), samples_of(next), side.get());
      };
      const cuda::BatchGather batch = batch_of(step);
      const cuda::SgdStep sgd{m_sgd, m_learning_rates.data() + step, m_network.parameters().data(),
                              m_state.find(kMomentumState)};
      m_tensor_backward->train_step(batch.field, batch.labels_out, samples_of(step), sgd,
                                    m_network.gradients().data(), cuda::kDefaultStream,
                                    m_step_stats.data() + step,
                                    next < end_step ? gather_next : std::function<void()>{});
      if (next < end_step) side.join_into(cuda::kDefaultStream);
    }
  }

  // The calling thread's gather stream: GraphExec::run has one thread launch a first epoch while
  // another captures it, each on its own per-thread stream, so each takes a side stream of its own.
  cuda::SideStream& gather_stream() {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    CUDA_CHECK(cudaStreamIsCapturing(cuda::kDefaultStream, &status));
    return *m_gather_streams[status == cudaStreamCaptureStatusActive ? 1 : 0];
  }

  // The output layer's loss over the network's last forward pass (softmax_cross_entropy or the
  // RBF output's map_loss), on kDefaultStream; loss.cuh's contract.
  void output_loss(const std::uint8_t* labels, int n, float* dL_doutputs, std::int32_t* predictions,
                   cuda::StepStats* stats) {
    if (m_network.config().output == OutputLayer::rbf)
      cuda::map_loss(m_network.logits(), labels, n, dL_doutputs, predictions, stats,
                     cuda::kDefaultStream);
    else
      cuda::softmax_cross_entropy(m_network.logits(), labels, n, dL_doutputs, predictions, stats,
                                  cuda::kDefaultStream);
  }

  void mark(EnginePhase phase) {
    if (m_marks) m_marks->mark(phase);
  }

 public:
  // The epoch's one synchronisation: the copy of the slots waits for the last step.
  EpochTotals take_epoch_totals() override {
    EpochTotals totals = sum_slots(m_step_stats);
    totals.seen = m_seen;
    return totals;
  }

  Evaluation evaluate(const Dataset& data) override;
  std::vector<float> classify(const std::uint8_t* images, int n,
                              std::vector<std::int32_t>& predicted) override;

 private:
  const DeviceDataset& device_copy(const Dataset& data);

  bool m_use_graphs;
  // Null unless made by make_marked_gpu_engine, which also turns graphs off: every step then
  // runs launch by launch, so that the marks fall between its phases.
  PhaseMarks* m_marks;
  Buffer<float> m_input;
  Buffer<std::uint8_t> m_labels;
  // --kernels tensor only: the gathered batches of kGatherSlots steps (tensor_steps), and the side
  // streams that gather them (gather_stream()).
  Buffer<float> m_gathered_field;
  Buffer<std::uint8_t> m_gathered_labels;
  std::unique_ptr<cuda::SideStream> m_gather_streams[kEnqueuingThreads];
  Buffer<float> m_dL_dlogits;
  std::unique_ptr<cuda::WholeStep> m_whole_step;            // the whole-step kernel set only
  std::unique_ptr<cuda::TensorForward> m_tensor_forward;    // --kernels tensor only
  std::unique_ptr<cuda::TensorBackward> m_tensor_backward;  // --kernels tensor only
  DeviceDataset m_train;
  Buffer<std::uint32_t> m_epoch{Device::gpu, 1};  // the current epoch, read by the augmentation
  cuda::DeviceAugmentation m_augmentation;        // kind none unless the run augments
  Buffer<std::int32_t> m_permutation;
  Buffer<float> m_learning_rates;  // (steps per epoch)
  GraphExec m_epoch_graph;
  Buffer<cuda::StepStats> m_step_stats;  // (steps per epoch)
  std::int64_t m_seen = 0;
  EvaluationCopies m_eval;             // the validation and test sets, in practice
  EvaluationSlots m_evaluation_slots;  // the whole-step and tensor kernel sets' evaluation only
};

// Uploads an evaluation set the first time it is seen; later epochs reuse the device copy (the
// training set's copy too, if that is what is evaluated). The key is the Dataset's address plus
// its storage and size, so a different set that happens to reuse an address is not mistaken for
// the cached one.
const DeviceDataset& GpuEngine::device_copy(const Dataset& data) {
  return evaluation_copy(data, m_train, m_eval);
}

// Forward in batches of 256 on the device; one StepStats slot per batch (summed on the host in
// order, so the loss is the same every time) and the predictions come back in one copy for the
// confusion matrix. Evaluation is outside the timed epoch, so its synchronisation is harmless.
Evaluation GpuEngine::evaluate(const Dataset& data) {
  // The whole-step kernel set evaluates with its own forward stages, as a packed group of its
  // models does (gpu_engine_group.cu): a model's figures are then the same bits alone or packed.
  // So does the tensor cores' forward pass, where the kernel set asks for it.
  if (m_tensor_forward)
    return evaluate_models(*m_tensor_forward, device_copy(data), data,
                           m_network.parameters().data(), 0, 1, m_evaluation_slots)
        .front();
  if (m_whole_step)
    return evaluate_whole_step_models(*m_whole_step, device_copy(data), data,
                                      m_network.parameters().data(), 0, 1, m_evaluation_slots)
        .front();
  Evaluation result;
  result.count = data.count;
  result.output = m_network.config().output;
  if (data.count == 0) return result;
  const DeviceDataset& set = device_copy(data);
  mark(EnginePhase::testing);
  const int batches = (data.count + kEvalBatch - 1) / kEvalBatch;
  Buffer<cuda::StepStats> slots(Device::gpu, batches);
  Buffer<std::int32_t> predictions(Device::gpu, data.count);
  for (int b = 0; b < batches; ++b) {
    const int first = b * kEvalBatch, n = std::min(kEvalBatch, data.count - first);
    cuda::gather_batch(set.images.data() + first * kImageBytes, nullptr, nullptr, n, scaling(),
                       m_input.data(), nullptr, cuda::kDefaultStream);
    m_network.forward(m_input.data(), n);
    output_loss(set.labels.data() + first, n, nullptr, predictions.data() + first,
                slots.data() + b);
  }
  mark(EnginePhase::end);
  const std::vector<std::int32_t> predicted = predictions.to_vector();
  const EpochTotals totals = sum_slots(slots);
  result.loss_sum = totals.loss_sum;
  result.correct = totals.correct;
  for (int i = 0; i < data.count; ++i) ++result.confusion[data.labels[i]][predicted[i]];
  return result;
}

// The softmax output's class is its largest probability's, found on the host as the CPU engine
// does; the RBF output's is the nearest prototype's, found on the device from the distances.
std::vector<float> GpuEngine::classify(const std::uint8_t* images, int n,
                                       std::vector<std::int32_t>& predicted) {
  predicted.clear();
  if (n <= 0) return {};
  const bool rbf = m_network.config().output == OutputLayer::rbf;
  Buffer<std::int32_t> device_predicted(Device::gpu, rbf ? std::size_t(n) : 0);
  Buffer<std::uint8_t> device_images(Device::gpu, std::size_t(n) * kImageBytes);
  device_images.copy_from_host(images);
  Buffer<float> device_probabilities(Device::gpu, std::size_t(n) * kClasses);
  for (int first = 0; first < n; first += kEvalBatch) {
    const int count = std::min(kEvalBatch, n - first);
    cuda::gather_batch(device_images.data() + first * kImageBytes, nullptr, nullptr, count,
                       scaling(), m_input.data(), nullptr, cuda::kDefaultStream);
    m_network.forward(m_input.data(), count);
    float* p = device_probabilities.data() + std::size_t(first) * kClasses;
    if (rbf)
      cuda::map_probabilities(m_network.logits(), count, p, device_predicted.data() + first,
                              cuda::kDefaultStream);
    else
      cuda::softmax_probabilities(m_network.logits(), count, p, cuda::kDefaultStream);
  }
  std::vector<float> probabilities = device_probabilities.to_vector();
  if (rbf) {
    predicted = device_predicted.to_vector();
  } else {
    predicted.resize(std::size_t(n));
    for (int i = 0; i < n; ++i) {
      const float* row = probabilities.data() + std::size_t(i) * kClasses;
      predicted[std::size_t(i)] = std::int32_t(std::max_element(row, row + kClasses) - row);
    }
  }
  return probabilities;
}

}  // namespace

std::unique_ptr<Engine> make_gpu_engine(const NetConfig& net, const SgdSettings& sgd,
                                        int batch_size, bool use_graphs) {
  if (batch_size < 1) throw UsageError("batch size must be at least 1");
  return std::make_unique<GpuEngine>(net, sgd, batch_size, use_graphs);
}

std::unique_ptr<Engine> make_marked_gpu_engine(const NetConfig& net, const SgdSettings& sgd,
                                               int batch_size, PhaseMarks& marks) {
  if (batch_size < 1) throw UsageError("batch size must be at least 1");
  if (gpu_kernel_set(net.kernels).whole_step)
    throw Error("internal: the whole-step kernels have no phases to mark (two launches a step)");
  return std::make_unique<GpuEngine>(net, sgd, batch_size, /*use_graphs=*/false, &marks);
}

}  // namespace lenet5
