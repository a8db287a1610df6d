// The packed group of GPU engines (gpu_engine.hpp's make_gpu_engine_group): K models of the
// whole-step kernel set trained by the same launches, the model index as the grid's second
// dimension (cuda/engine/whole_step.cuh's ModelGroup).
//
// The group keeps every per-model array as one buffer of K equal slices: the parameters, SGD's
// velocity, the epoch's permutations, learning rates and statistics slots, and the augmentation
// seeds. The training data is uploaded once. Each model is an Engine (GroupMember) whose steps are
// queued once every member asked for the same range (engine.hpp's EngineGroup); a whole epoch is
// captured once into a CUDA graph and replayed, as the lone engine does. Evaluation is packed too:
// the first member to ask for its evaluation at an epoch's end gets every member evaluated in one
// launch (WholeStep::evaluate, or with --kernels tensor TensorForward::evaluate), and the others'
// results wait for them, each until its weights change. Probabilities and activations of a member
// run on one shared lone engine that is handed the member's weights first: a copy of 62k floats
// each, for single images.
#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "cuda/engine/engine_parts.hpp"
#include "cuda/engine/gpu_engine.hpp"
#include "cuda/engine/tensor_forward.cuh"
#include "cuda/engine/whole_step.cuh"
#include "cuda/kernels/dense.cuh"
#include "cuda/runtime/buffer.hpp"
#include "cuda/runtime/check.hpp"
#include "engine/network.hpp"

namespace lenet5 {
namespace {

class GpuEngineGroup;

// One model of the group: its slices of the group's buffers.
class GroupMember final : public Engine {
 public:
  GroupMember(GpuEngineGroup& group, int index) : m_group(group), m_index(index) {}

  Device device() const override { return Device::gpu; }
  const ParamLayout& layout() const override;
  void initialise(std::uint64_t seed) override;
  std::vector<float> parameters() const override;
  OptimizerState optimizer_state() const override;
  void set_state(const std::vector<float>& parameters, const OptimizerState& state) override;
  void set_training_data(const Dataset& train, const Augmentation& augmentation) override;
  void begin_epoch(int epoch, const std::vector<std::int32_t>& permutation,
                   const std::vector<float>& learning_rates) override;
  void train_steps(int first_step, int end_step) override;
  int preferred_steps_per_call(int steps_in_epoch) const override { return steps_in_epoch; }
  EpochTotals take_epoch_totals() override;
  Evaluation evaluate(const Dataset& data) override;
  std::vector<float> classify(const std::uint8_t* images, int n,
                              std::vector<std::int32_t>& predicted) override;
  Activations activations(const std::uint8_t* image) override;

 private:
  Engine& evaluator_with_my_weights() const;

  GpuEngineGroup& m_group;
  int m_index;
};

class GpuEngineGroup final : public EngineGroup {
 public:
  GpuEngineGroup(const NetConfig& net, const SgdSettings& sgd, int batch_size, int models)
      : m_net(net),
        m_sgd(sgd),
        m_batch(batch_size),
        m_models(models),
        m_evaluator(make_gpu_engine(net, sgd, batch_size)),
        m_layout(m_evaluator->layout()),
        m_floats(m_layout.buffer_floats),
        m_stride(slice_stride(m_floats)),
        m_whole_step(net, m_layout, batch_size, models),
        m_params(Device::gpu, m_stride * models),
        m_augment_seeds(Device::gpu, std::size_t(models)),
        m_seeds(std::size_t(models), 0) {
    if (!gpu_kernel_set(net.kernels).whole_step)
      throw Error("internal: only the whole-step kernel set packs models into one launch");
    if (gpu_kernel_set(net.kernels).tensor_evaluation)
      m_tensor_forward = std::make_unique<cuda::TensorForward>(net, m_layout);
    if (sgd.momentum != 0) m_velocity = Buffer<float>(Device::gpu, m_stride * models);
    m_params.zero();
    if (m_velocity.size()) m_velocity.zero();
    for (int i = 0; i < models; ++i) m_members.push_back(std::make_unique<GroupMember>(*this, i));
    m_pending.assign(std::size_t(models), Range{});
    m_seen.assign(std::size_t(models), 0);
    m_model_epoch.assign(std::size_t(models), 0);
  }

  int size() const override { return m_models; }
  Engine& model(int i) override { return *m_members.at(std::size_t(i)); }

  // ---- what the members ask of the group --------------------------------------------------------
  const ParamLayout& layout() const { return m_layout; }
  std::size_t floats() const { return m_floats; }
  float* params_of(int i) { return m_params.data() + std::size_t(i) * m_stride; }
  float* velocity_of(int i) {
    return m_velocity.size() ? m_velocity.data() + std::size_t(i) * m_stride : nullptr;
  }
  const NetConfig& net() const { return m_net; }
  Engine& evaluator() { return *m_evaluator; }

  // The data set is uploaded by the first member and must be the same for all; each member brings
  // its own augmentation seed, and the transform must be the same for all.
  void set_training_data(int i, const Dataset& train, const Augmentation& augmentation) {
    if (!m_train.holds(train)) {
      m_epoch_graph.reset();  // its launches point into the buffers replaced here
      m_train.upload(train);
      m_augmentation =
          cuda::DeviceAugmentation{augmentation.settings, augmentation.seed, m_epoch.data()};
      m_augmentation_set = false;
    }
    if (m_augmentation_set && !(same_transform(m_augmentation.settings, augmentation.settings)))
      throw Error("internal: the models of a packed group augment differently");
    m_augmentation.settings = augmentation.settings;
    m_augmentation_set = true;
    m_seeds[std::size_t(i)] = augmentation.seed;
    m_augment_seeds.copy_from_host(m_seeds.data());
  }

  void begin_epoch(int i, int epoch, const std::vector<std::int32_t>& permutation,
                   const std::vector<float>& learning_rates) {
    if (permutation.size() != std::size_t(m_train.count()))
      throw Error("internal: a packed model's permutation of " +
                  std::to_string(permutation.size()) + " indices for " +
                  std::to_string(m_train.count()) + " training images");
    const std::size_t steps =
        checked_epoch_steps(permutation, learning_rates, m_train.count(), m_batch);
    if (m_steps != steps) {
      m_epoch_graph.reset();  // its launches point into the buffers replaced here
      m_steps = steps;
      m_permutation = Buffer<std::int32_t>(Device::gpu, permutation.size() * m_models);
      m_learning_rates = Buffer<float>(Device::gpu, steps * m_models);
      m_step_stats = Buffer<cuda::StepStats>(Device::gpu, steps * m_models);
      m_step_stats.zero();
    }
    m_model_epoch[std::size_t(i)] = epoch;
    const std::uint32_t epoch_number = std::uint32_t(epoch);
    m_epoch.copy_from_host(&epoch_number);
    copy_slice(m_permutation, i, permutation);
    copy_slice(m_learning_rates, i, learning_rates);
    CUDA_CHECK(cudaMemset(m_step_stats.data() + std::size_t(i) * steps, 0,
                          steps * sizeof(cuda::StepStats)));
    m_seen[std::size_t(i)] = 0;
  }

  // Model i asks for steps [first, end): once every model asked for the same range, they run.
  void train_steps(int i, int first, int end) {
    if (first < 0 || std::size_t(end) > m_steps || first > end)
      throw Error("internal: steps [" + std::to_string(first) + ", " + std::to_string(end) +
                  ") outside an epoch of " + std::to_string(m_steps));
    for (const Range& pending : m_pending)
      if (pending.asked && (pending.first != first || pending.end != end))
        throw Error("internal: the models of a packed group asked for different steps");
    m_pending[std::size_t(i)] = Range{true, first, end};
    const int n = m_train.count();
    m_seen[std::size_t(i)] += std::min(n, end * m_batch) - first * m_batch;
    if (std::all_of(m_pending.begin(), m_pending.end(), [](const Range& r) { return r.asked; })) {
      // The augmentation reads one epoch number for all (uploaded by each begin_epoch).
      if (std::adjacent_find(m_model_epoch.begin(), m_model_epoch.end(), std::not_equal_to<>()) !=
          m_model_epoch.end())
        throw Error("internal: the models of a packed group are in different epochs");
      run_steps(first, end);
      m_pending.assign(std::size_t(m_models), Range{});
    }
  }

  // Model i's statistics since its begin_epoch; the copy waits for the steps queued so far.
  EpochTotals take_epoch_totals(int i) {
    require_no_pending("its statistics");
    std::vector<cuda::StepStats> slots(m_steps);
    CUDA_CHECK(cudaMemcpy(slots.data(), m_step_stats.data() + std::size_t(i) * m_steps,
                          m_steps * sizeof(cuda::StepStats), cudaMemcpyDeviceToHost));
    EpochTotals totals;
    for (const cuda::StepStats& slot : slots) {  // in order: the same double every run
      totals.loss_sum += slot.loss_sum;
      totals.correct += slot.correct;
    }
    totals.seen = m_seen[std::size_t(i)];
    return totals;
  }

  // Model i's evaluation on `data`. The models are evaluated together, in one launch, and each
  // result is kept until that model's weights change: the trainer asks for them one model after
  // the other at each epoch's end, and only the first ask launches. A model that alone has new
  // weights (a best checkpoint loaded by set_state) is evaluated alone.
  Evaluation evaluate(int i, const Dataset& data) {
    require_no_pending("evaluation");
    KeptEvaluations& kept = kept_for(data);
    if (!kept.results[std::size_t(i)]) {
      const auto stale = std::count_if(kept.results.begin(), kept.results.end(),
                                       [](const std::optional<Evaluation>& r) { return !r; });
      const DeviceDataset& set = evaluation_copy(data, m_train, m_eval);
      const auto evaluated = [&](const float* params, std::size_t stride, int models) {
        if (m_tensor_forward)
          return evaluate_models(*m_tensor_forward, set, data, params, stride, models,
                                 m_evaluation_slots);
        return evaluate_whole_step_models(m_whole_step, set, data, params, stride, models,
                                          m_evaluation_slots);
      };
      if (stale == 1) {
        kept.results[std::size_t(i)] = evaluated(params_of(i), 0, 1)[0];
      } else {
        std::vector<Evaluation> all = evaluated(m_params.data(), m_stride, m_models);
        for (int m = 0; m < m_models; ++m) kept.results[std::size_t(m)] = all[std::size_t(m)];
      }
    }
    return *kept.results[std::size_t(i)];
  }

  // Model i's weights changed (every model's, i < 0): its kept evaluations no longer hold.
  void forget_evaluations(int i) {
    for (KeptEvaluations& kept : m_kept)
      for (int m = 0; m < m_models; ++m)
        if (i < 0 || m == i) kept.results[std::size_t(m)].reset();
  }

  void require_no_pending(const char* what) const {
    if (std::any_of(m_pending.begin(), m_pending.end(), [](const Range& r) { return r.asked; }))
      throw Error(std::string("internal: a packed model's ") + what +
                  " were asked for before every model of its group had asked for its steps");
  }

 private:
  struct Range {
    bool asked = false;
    int first = 0, end = 0;
  };

  // The models' evaluations on one data set, per model (none: not evaluated since its weights
  // last changed).
  struct KeptEvaluations {
    DatasetKey set;
    std::vector<std::optional<Evaluation>> results;
  };

  // The kept evaluations on `data`, made empty the first time it is seen. A run evaluates the
  // test set and, with --evaluate-training-set, the training set: a few sets at most.
  KeptEvaluations& kept_for(const Dataset& data) {
    for (KeptEvaluations& kept : m_kept)
      if (kept.set.is(data)) return kept;
    constexpr std::size_t kSets = 4;
    if (m_kept.size() == kSets) m_kept.erase(m_kept.begin());
    m_kept.push_back(
        KeptEvaluations{DatasetKey::of(data), std::vector<std::optional<Evaluation>>(m_models)});
    return m_kept.back();
  }

  // Each model's slice starts 128-byte aligned, as a lone buffer does: the kernels read the
  // parameter tensors as float4, and the layout aligns them relative to the slice's start.
  static std::size_t slice_stride(std::size_t floats) { return (floats + 31) / 32 * 32; }

  static bool same_transform(const AugmentSettings& a, const AugmentSettings& b) {
    return a.kind == b.kind && a.rotation_degrees == b.rotation_degrees && a.scale == b.scale &&
           a.shear_degrees == b.shear_degrees && a.translation_pixels == b.translation_pixels &&
           a.elastic_alpha == b.elastic_alpha && a.elastic_sigma == b.elastic_sigma;
  }

  template <class T>
  void copy_slice(Buffer<T>& buffer, int i, const std::vector<T>& values) {
    CUDA_CHECK(cudaMemcpy(buffer.data() + std::size_t(i) * values.size(), values.data(),
                          values.size() * sizeof(T), cudaMemcpyHostToDevice));
  }

  // A whole epoch is replayed as one graph (the first time launched step by step, then captured
  // while the GPU runs it), as the lone engine does with the whole-step kernels;
  // a partial one (a group resumed mid-epoch) is launched step by step.
  void run_steps(int first, int end) {
    forget_evaluations(-1);
    if (first == 0 && std::size_t(end) == m_steps) {
      m_epoch_graph.run(cuda::kDefaultStream, /*launch_first=*/true,
                        [&] { enqueue_steps(0, end); });
    } else {
      enqueue_steps(first, end);
    }
  }

  void enqueue_steps(int first_step, int end_step) {
    const int n = m_train.count();
    cuda::ModelGroup group;
    group.models = m_models;
    group.indices_stride = std::size_t(n);
    group.params_stride = m_stride;
    group.slots_stride = m_steps;
    group.augment_seeds = m_augmentation.enabled() ? m_augment_seeds.data() : nullptr;
    for (int step = first_step; step < end_step; ++step) {
      const int first = step * m_batch, count = std::min(m_batch, n - first);
      m_whole_step.train_step(m_train.images.data(), m_train.labels.data(),
                              m_permutation.data() + first, count, m_augmentation, m_sgd,
                              m_learning_rates.data() + step, m_params.data(),
                              m_velocity.size() ? m_velocity.data() : nullptr,
                              m_step_stats.data() + step, cuda::kDefaultStream, group);
    }
  }

  NetConfig m_net;
  SgdSettings m_sgd;
  int m_batch;
  int m_models;
  // A lone engine, handed a member's weights for its probabilities and activations.
  std::unique_ptr<Engine> m_evaluator;
  ParamLayout m_layout;
  std::size_t m_floats;
  std::size_t m_stride;  // floats from one model's parameters (or velocity) to the next's
  cuda::WholeStep m_whole_step;
  std::unique_ptr<cuda::TensorForward> m_tensor_forward;  // --kernels tensor only
  Buffer<float> m_params;    // (models, floats)
  Buffer<float> m_velocity;  // (models, floats); empty without momentum
  Buffer<std::uint64_t> m_augment_seeds;
  std::vector<std::uint64_t> m_seeds;
  std::vector<std::unique_ptr<GroupMember>> m_members;
  DeviceDataset m_train;
  Buffer<std::uint32_t> m_epoch{Device::gpu, 1};
  cuda::DeviceAugmentation m_augmentation;
  bool m_augmentation_set = false;
  std::vector<int> m_model_epoch;  // each model's epoch, as its begin_epoch gave it
  std::size_t m_steps = 0;
  Buffer<std::int32_t> m_permutation;    // (models, training images)
  Buffer<float> m_learning_rates;        // (models, steps)
  Buffer<cuda::StepStats> m_step_stats;  // (models, steps)
  GraphExec m_epoch_graph;
  std::vector<Range> m_pending;
  std::vector<std::int64_t> m_seen;
  EvaluationCopies m_eval;  // the evaluated sets that are not the training set (validation, test)
  EvaluationSlots m_evaluation_slots;
  std::vector<KeptEvaluations> m_kept;
};

// ---- GroupMember --------------------------------------------------------------------------------
const ParamLayout& GroupMember::layout() const {
  return m_group.layout();
}

// The same host initialisation as Network::initialise, into this model's slice.
void GroupMember::initialise(std::uint64_t seed) {
  std::vector<float> host(m_group.floats());
  initialise_parameters(m_group.layout(), m_group.net(), seed, host.data());
  set_state(host, {});
}

std::vector<float> GroupMember::parameters() const {
  m_group.require_no_pending("parameters");
  std::vector<float> host(m_group.floats());
  CUDA_CHECK(cudaMemcpy(host.data(), m_group.params_of(m_index), host.size() * sizeof(float),
                        cudaMemcpyDeviceToHost));
  return host;
}

// SGD's one state buffer, kept only with momentum (as OptimizerBuffers keeps it).
OptimizerState GroupMember::optimizer_state() const {
  m_group.require_no_pending("optimizer state");
  const float* velocity = m_group.velocity_of(m_index);
  if (!velocity) return {};
  StateBuffer buffer{kMomentumState, std::vector<float>(m_group.floats())};
  CUDA_CHECK(cudaMemcpy(buffer.values.data(), velocity, buffer.values.size() * sizeof(float),
                        cudaMemcpyDeviceToHost));
  return {buffer};
}

void GroupMember::set_state(const std::vector<float>& parameters, const OptimizerState& state) {
  check_parameter_count(m_group.layout(), parameters);
  m_group.forget_evaluations(m_index);
  CUDA_CHECK(cudaMemcpy(m_group.params_of(m_index), parameters.data(),
                        parameters.size() * sizeof(float), cudaMemcpyHostToDevice));
  float* velocity = m_group.velocity_of(m_index);
  if (!velocity) return;
  const StateBuffer* kept = find_state(state, kMomentumState);
  if (kept && kept->values.size() != m_group.floats())
    throw Error("internal: a momentum buffer of " + std::to_string(kept->values.size()) +
                " floats for " + std::to_string(m_group.floats()) + " parameters");
  if (kept)
    CUDA_CHECK(cudaMemcpy(velocity, kept->values.data(), m_group.floats() * sizeof(float),
                          cudaMemcpyHostToDevice));
  else
    CUDA_CHECK(cudaMemset(velocity, 0, m_group.floats() * sizeof(float)));
}

void GroupMember::set_training_data(const Dataset& train, const Augmentation& augmentation) {
  m_group.set_training_data(m_index, train, augmentation);
}

void GroupMember::begin_epoch(int epoch, const std::vector<std::int32_t>& permutation,
                              const std::vector<float>& learning_rates) {
  m_group.begin_epoch(m_index, epoch, permutation, learning_rates);
}

void GroupMember::train_steps(int first_step, int end_step) {
  m_group.train_steps(m_index, first_step, end_step);
}

EpochTotals GroupMember::take_epoch_totals() {
  return m_group.take_epoch_totals(m_index);
}

Engine& GroupMember::evaluator_with_my_weights() const {
  Engine& evaluator = m_group.evaluator();
  evaluator.set_state(parameters(), {});
  return evaluator;
}

Evaluation GroupMember::evaluate(const Dataset& data) {
  return m_group.evaluate(m_index, data);
}

std::vector<float> GroupMember::classify(const std::uint8_t* images, int n,
                                         std::vector<std::int32_t>& predicted) {
  return evaluator_with_my_weights().classify(images, n, predicted);
}

Activations GroupMember::activations(const std::uint8_t* image) {
  return evaluator_with_my_weights().activations(image);
}

}  // namespace

std::unique_ptr<EngineGroup> make_gpu_engine_group(const NetConfig& net, const SgdSettings& sgd,
                                                   int batch_size, int models) {
  if (batch_size < 1) throw UsageError("batch size must be at least 1");
  if (models < 1) throw Error("internal: a packed group of no models");
  // The whole-step kernels apply SGD themselves (settings refuse another optimizer with them).
  if (sgd.optimizer != kSgdName)
    throw Error("internal: a packed group trains with SGD only, not " + sgd.optimizer);
  return std::make_unique<GpuEngineGroup>(net, sgd, batch_size, models);
}

}  // namespace lenet5
