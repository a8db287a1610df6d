// What the GPU engine and its packed group (gpu_engine.cu, gpu_engine_group.cu) share: the data
// set's device copy, the epoch's checks, the sum of the statistics slots, an instantiated CUDA
// graph, and the evaluation of whole-step models. The Dataset type comes with the Engine contract
// (engine/engine.hpp) these serve.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "core/shapes.hpp"
#include "cuda/engine/whole_step.cuh"
#include "cuda/kernels/dense.cuh"
#include "cuda/kernels/loss.cuh"
#include "cuda/runtime/buffer.hpp"
#include "cuda/runtime/check.hpp"
#include "engine/engine.hpp"

namespace lenet5 {

// Which Dataset something was made from: its address, storage and size (a different set that
// happens to reuse an address is not mistaken for it).
struct DatasetKey {
  const Dataset* source = nullptr;
  const std::uint8_t* host_images = nullptr;
  int count = 0;

  static DatasetKey of(const Dataset& data) { return {&data, data.images.data(), data.count}; }
  bool is(const Dataset& data) const {
    return source == &data && host_images == data.images.data() && count == data.count;
  }
};

// A Dataset's images and labels in device memory, uploaded once.
struct DeviceDataset {
  DatasetKey key;
  Buffer<std::uint8_t> images, labels;

  // Whether this is the copy of `data`.
  bool holds(const Dataset& data) const { return key.is(data); }
  int count() const { return key.count; }

  void upload(const Dataset& data) {
    if (data.count < 0 || data.images.size() < std::size_t(data.count) * kImageBytes ||
        data.labels.size() < std::size_t(data.count))
      throw Error("internal: data set of " + std::to_string(data.count) +
                  " images has too few image or label bytes");
    images = Buffer<std::uint8_t>(Device::gpu, std::size_t(data.count) * kImageBytes);
    images.copy_from_host(data.images.data());
    labels = Buffer<std::uint8_t>(Device::gpu, std::size_t(data.count));
    labels.copy_from_host(data.labels.data());
    key = DatasetKey::of(data);
  }
};

// The device copies of the sets evaluated after each epoch besides the training set: the
// validation set and the test set, each uploaded the first time it is seen and kept for later
// epochs. A third set replaces the one used least recently.
struct EvaluationCopies {
  DeviceDataset sets[2];
  int least_recent = 0;
};

// The device copy of an evaluated set: the training set's own copy when that is what is evaluated,
// else one of `eval`'s.
inline const DeviceDataset& evaluation_copy(const Dataset& data, const DeviceDataset& train,
                                            EvaluationCopies& eval) {
  if (train.holds(data)) return train;
  for (int i = 0; i < 2; ++i) {
    if (!eval.sets[i].holds(data)) continue;
    eval.least_recent = 1 - i;
    return eval.sets[i];
  }
  DeviceDataset& copy = eval.sets[eval.least_recent];
  copy.upload(data);
  eval.least_recent = 1 - eval.least_recent;
  return copy;
}

// An epoch's permutation and rates, checked against the training set's `count` images and the
// batch size: the number of steps (an internal Error for an index outside the set or a rate count
// that is not one per step).
inline std::size_t checked_epoch_steps(const std::vector<std::int32_t>& permutation,
                                       const std::vector<float>& learning_rates, int count,
                                       int batch) {
  for (const std::int32_t index : permutation)
    if (index < 0 || index >= count)
      throw Error("internal: permutation index " + std::to_string(index) + " outside the " +
                  std::to_string(count) + " training images");
  const std::size_t steps = (permutation.size() + batch - 1) / batch;
  if (learning_rates.size() != steps)
    throw Error("internal: " + std::to_string(learning_rates.size()) + " learning rates for " +
                std::to_string(steps) + " steps");
  return steps;
}

// Sums the slots in order on the host: the same order, hence the same double, every run.
inline EpochTotals sum_slots(const Buffer<cuda::StepStats>& slots) {
  EpochTotals totals;
  for (const cuda::StepStats& slot : slots.to_vector()) {
    totals.loss_sum += slot.loss_sum;
    totals.correct += slot.correct;
  }
  return totals;
}

// Per-sample results of whole-step evaluations (WholeStep::evaluate), kept from one evaluation to
// the next and grown when a larger set or group comes.
class EvaluationSlots {
 public:
  void reserve(std::size_t samples) {
    if (m_loss.size() >= samples) return;
    m_loss = Buffer<double>(Device::gpu, samples);
    m_predicted = Buffer<std::int32_t>(Device::gpu, samples);
  }
  double* loss() { return m_loss.data(); }
  std::int32_t* predicted() { return m_predicted.data(); }

 private:
  Buffer<double> m_loss;
  Buffer<std::int32_t> m_predicted;
};

// The evaluations of `models` models on `data` (set: its device copy), whose parameters start at
// `params`, `stride` floats apart, by `kernels`: a kernel set whose evaluate() keeps
// WholeStep::evaluate's contract (cuda::WholeStep, or cuda::TensorForward, the tensor cores'). One
// launch of it, then per model the loss summed in sample order on the host (the same double every
// run, however many models shared the launch), the correct count and the confusion matrix of the
// predictions.
template <class Kernels>
std::vector<Evaluation> evaluate_models(const Kernels& kernels, const DeviceDataset& set,
                                        const Dataset& data, const float* params,
                                        std::size_t stride, int models, EvaluationSlots& slots) {
  std::vector<Evaluation> results(static_cast<std::size_t>(models));
  for (Evaluation& result : results) result.count = data.count;
  if (data.count == 0) return results;
  const std::size_t n = std::size_t(data.count), samples = n * std::size_t(models);
  slots.reserve(samples);
  cuda::ModelGroup group;
  group.models = models;
  group.params_stride = stride;
  kernels.evaluate(set.images.data(), set.labels.data(), data.count, params, group, slots.loss(),
                   slots.predicted(), cuda::kDefaultStream);
  std::vector<double> loss(samples);
  std::vector<std::int32_t> predicted(samples);
  // Synchronous copies on the legacy default stream, which waits for kDefaultStream's launch (the
  // per-thread default stream is a blocking stream).
  CUDA_CHECK(
      cudaMemcpy(loss.data(), slots.loss(), samples * sizeof(double), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(predicted.data(), slots.predicted(), samples * sizeof(std::int32_t),
                        cudaMemcpyDeviceToHost));
  for (int m = 0; m < models; ++m) {
    Evaluation& result = results[std::size_t(m)];
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t at = std::size_t(m) * n + i;
      const int truth = data.labels[i], guess = predicted[at];
      result.loss_sum += loss[at];
      result.correct += truth == guess;
      ++result.confusion[std::size_t(truth)][std::size_t(guess)];
    }
  }
  return results;
}

// The same by the whole-step kernels' own forward stages.
inline std::vector<Evaluation> evaluate_whole_step_models(const cuda::WholeStep& step,
                                                          const DeviceDataset& set,
                                                          const Dataset& data, const float* params,
                                                          std::size_t stride, int models,
                                                          EvaluationSlots& slots) {
  return evaluate_models(step, set, data, params, stride, models, slots);
}

struct GraphDeleter {
  void operator()(cudaGraph_t graph) const noexcept { (void)cudaGraphDestroy(graph); }
};
using OwnedGraph = std::unique_ptr<CUgraph_st, GraphDeleter>;

// Records everything `enqueue` launches on `stream` into a graph (nothing runs); where `enqueue`
// throws, the capture is ended and its partial graph destroyed first, so the stream is left
// usable.
template <class Enqueue>
OwnedGraph capture_graph(cudaStream_t stream, Enqueue&& enqueue) {
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    enqueue();
  } catch (...) {
    cudaGraph_t partial = nullptr;
    (void)cudaStreamEndCapture(stream, &partial);
    if (partial) (void)cudaGraphDestroy(partial);
    throw;
  }
  cudaGraph_t graph = nullptr;
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  return OwnedGraph{graph};
}

// An instantiated CUDA graph, destroyed with its owner.
class GraphExec {
 public:
  GraphExec() = default;
  ~GraphExec() { reset(); }
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;
  explicit operator bool() const { return m_exec != nullptr; }
  void reset() {
    if (m_exec) (void)cudaGraphExecDestroy(m_exec);  // never throws from a destructor
    m_exec = nullptr;
  }
  // Records everything `enqueue` launches on `stream` (capture_graph) and instantiates it.
  template <class Enqueue>
  void capture(cudaStream_t stream, Enqueue&& enqueue) {
    reset();
    const OwnedGraph graph = capture_graph(stream, enqueue);
    CUDA_CHECK(cudaGraphInstantiate(&m_exec, graph.get(), 0));
  }
  void launch(cudaStream_t stream) { CUDA_CHECK(cudaGraphLaunch(m_exec, stream)); }
  // Runs what `enqueue` launches on `stream` by replaying the graph, captured the first time.
  // With `launch_first`, that first time launches it directly while a second thread captures and
  // instantiates it: where a step is a few launches, fewer host microseconds than the GPU's, the
  // GPU no longer waits through the capture and the instantiation, which a run's first epoch, and
  // so its time to an accuracy, paid in full (docs/performance.md); on one thread, a host slower
  // over the launches, the capture and the instantiation in a row than the GPU over the epoch
  // still kept it waiting. Where a step's launches take the host longer than the GPU, launching
  // them directly would cost more than that. With `launch_first`, `enqueue` must launch on the
  // calling thread's per-thread stream (cudaStreamPerThread, the kernels' kDefaultStream), which
  // `stream` must then be, and two threads call it at once.
  template <class Enqueue>
  void run(cudaStream_t stream, bool launch_first, Enqueue&& enqueue) {
    if (!m_exec) {
      if (launch_first) {
        if (stream != cudaStreamPerThread)
          throw Error(
              "internal: an epoch launched while it is captured runs on the per-thread stream");
        launch_while_capturing(enqueue);
        return;
      }
      capture(stream, enqueue);
    }
    launch(stream);
  }

 private:
  template <class Enqueue>
  void launch_while_capturing(Enqueue& enqueue) {
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    std::exception_ptr failed;
    std::thread capturer([&] {
      try {
        CUDA_CHECK(cudaSetDevice(device));
        capture(cudaStreamPerThread, enqueue);
      } catch (...) {
        failed = std::current_exception();
      }
    });
    try {
      enqueue();
    } catch (...) {
      capturer.join();
      throw;
    }
    capturer.join();
    if (failed) std::rethrow_exception(failed);
  }

  cudaGraphExec_t m_exec = nullptr;
};

}  // namespace lenet5
