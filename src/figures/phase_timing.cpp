// cudnn.tab4's measurement: the GPU engine trained and tested with a CUDA event at each phase's
// start.
#include "figures/phase_timing.hpp"

#include <cuda_runtime.h>

#include <numeric>
#include <string>
#include <utility>

#include "core/error.hpp"
#include "core/topology.hpp"
#include "cuda/engine/gpu_engine.hpp"
#include "cuda/kernels/dense.cuh"
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

// Before anything is sized from it.
const PhaseRunSetup& validated(const PhaseRunSetup& setup) {
  if (setup.iterations < 1 || setup.batch < 1)
    throw Error("internal: phase timing needs at least one iteration and batches of one or more");
  return setup;
}

// The first `count` indices in order: consecutive batches.
std::vector<std::int32_t> in_order(int count) {
  std::vector<std::int32_t> indices(static_cast<std::size_t>(count));
  std::iota(indices.begin(), indices.end(), 0);
  return indices;
}

}  // namespace

// Events recorded one after the other on kDefaultStream at the engine's marks: the intervals
// between consecutive marks tile the time from the first mark to the last, without gap or
// overlap. All events are created up front, so that marking is only a cudaEventRecord; nothing is
// read before the last mark. Each mark must be the phase a run of `steps` steps makes next (three
// per step, then testing and the end), the order sum_phase_intervals reads them in.
class PhaseEvents final : public PhaseMarks {
 public:
  explicit PhaseEvents(int steps) : m_steps(steps) {
    const std::size_t capacity = std::size_t(interval_count(steps)) + 1;
    m_events.reserve(capacity);
    for (std::size_t i = 0; i < capacity; ++i) m_events.emplace_back();
  }

  void restart() { m_marked = 0; }

  void mark(EnginePhase phase) override {
    if (m_marked == m_events.size())
      throw Error("internal: more than " + std::to_string(m_events.size()) + " timing marks");
    if (phase != expected(m_marked))
      throw Error("internal: timing mark " + std::to_string(m_marked) + " out of order");
    CUDA_CHECK(cudaEventRecord(m_events[m_marked++].get(), cuda::kDefaultStream));
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
  EnginePhase expected(std::size_t mark) const {
    const std::size_t step_marks = 3 * std::size_t(m_steps);
    const EnginePhase per_step[3] = {EnginePhase::forward, EnginePhase::backward,
                                     EnginePhase::update};
    if (mark < step_marks) return per_step[mark % 3];
    return mark == step_marks ? EnginePhase::testing : EnginePhase::end;
  }

  void wait_for_last() const {
    if (m_marked != m_events.size())
      throw Error("internal: " + std::to_string(m_marked) + " timing marks of " +
                  std::to_string(m_events.size()));
    CUDA_CHECK(cudaEventSynchronize(m_events[m_marked - 1].get()));
  }

  int m_steps;
  std::vector<Event> m_events;
  std::size_t m_marked = 0;
};

PhaseTrainer::PhaseTrainer(const NetConfig& config, const PhaseRunSetup& setup,
                           const Dataset& train)
    : m_setup(validated(setup)),
      m_events(std::make_unique<PhaseEvents>(setup.iterations)),
      m_engine(make_marked_gpu_engine(config, setup.sgd, setup.batch, *m_events)),
      m_in_order(in_order(setup.iterations * setup.batch)) {
  if (train.count < setup.iterations * setup.batch)
    throw Error("internal: " + std::to_string(setup.iterations) + " steps of " +
                std::to_string(setup.batch) + " need " + std::to_string(m_in_order.size()) +
                " training images, given " + std::to_string(train.count));
  m_engine->set_training_data(train, Augmentation{});
}

PhaseTrainer::~PhaseTrainer() = default;

PhaseRun PhaseTrainer::run(const Dataset& test) {
  if (test.count < 1) throw Error("internal: phase timing needs a test set");
  const int steps = m_setup.iterations;
  // Everything that allocates, copies or zeroes for the steps happens before the first mark.
  m_engine->initialise(m_setup.init_seed);
  m_engine->begin_epoch(0, m_in_order, std::vector<float>(std::size_t(steps), m_setup.lr));
  m_events->restart();
  m_engine->train_steps(0, steps);                     // marks forward, backward, update per step
  const Evaluation tested = m_engine->evaluate(test);  // marks testing and the end
  const EpochTotals totals = m_engine->take_epoch_totals();

  PhaseRun run;
  run.intervals = interval_count(steps);
  run.times = sum_phase_intervals(m_events->intervals_ms(), steps, m_events->total_ms());
  run.train_loss = totals.loss_sum / double(totals.seen);
  run.test_loss = tested.mean_loss();
  run.parameters = m_engine->parameters();
  return run;
}

}  // namespace lenet5::figures
