// What the GPU engine and its packed group (gpu_engine.cu, gpu_engine_group.cu) share: the data
// set's device copy, the epoch's checks, the sum of the statistics slots, and an instantiated CUDA
// graph. The Dataset type comes with the Engine contract (engine/engine.hpp) these serve.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/shapes.hpp"
#include "cuda/kernels/loss.cuh"
#include "cuda/runtime/buffer.hpp"
#include "cuda/runtime/check.hpp"
#include "engine/engine.hpp"

namespace lenet5 {

// A Dataset's images and labels in device memory, uploaded once.
struct DeviceDataset {
  const Dataset* source = nullptr;
  const std::uint8_t* host_images = nullptr;
  int count = 0;
  Buffer<std::uint8_t> images, labels;

  // Whether this is the copy of `data`: the same address, storage and size (a different set that
  // happens to reuse an address is not mistaken for it).
  bool holds(const Dataset& data) const {
    return source == &data && host_images == data.images.data() && count == data.count;
  }

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
  // Records everything `enqueue` launches on `stream` (nothing runs) and instantiates it.
  template <class Enqueue>
  void capture(cudaStream_t stream, Enqueue&& enqueue) {
    reset();
    CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    cudaGraph_t graph = nullptr;
    try {
      enqueue();
    } catch (...) {
      (void)cudaStreamEndCapture(stream, &graph);
      if (graph) (void)cudaGraphDestroy(graph);
      throw;
    }
    CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    const cudaError_t status = cudaGraphInstantiate(&m_exec, graph, 0);
    (void)cudaGraphDestroy(graph);
    CUDA_CHECK(status);
  }
  void launch(cudaStream_t stream) { CUDA_CHECK(cudaGraphLaunch(m_exec, stream)); }

 private:
  cudaGraphExec_t m_exec = nullptr;
};

}  // namespace lenet5
