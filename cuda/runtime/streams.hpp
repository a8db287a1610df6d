// Streams for the GPU layers. Layers launch on layer_stream(): the per-thread default stream,
// except while the network has moved work to a side stream. Within one training step, each
// layer's weight gradient does not depend on its input gradient, so Network::backward runs the
// weight gradients on a SideStream, branching from and joining the main stream with events; in a
// captured CUDA graph these become parallel branches, and the step's critical path shortens.
#pragma once

#include "cuda/runtime/stream_handle.hpp"

namespace lenet5::cuda {

cudaStream_t layer_stream();

// Makes `stream` the layer stream of this thread until the object is destroyed.
class ScopedLayerStream {
 public:
  explicit ScopedLayerStream(cudaStream_t stream);
  ~ScopedLayerStream();
  ScopedLayerStream(const ScopedLayerStream&) = delete;
  ScopedLayerStream& operator=(const ScopedLayerStream&) = delete;

 private:
  cudaStream_t m_previous;
};

// An owned stream with the two events that fork work off another stream and join it back.
class SideStream {
 public:
  SideStream();
  ~SideStream();
  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;

  cudaStream_t get() const { return m_stream; }
  // Work queued on the side stream from now on waits for everything queued on `main` so far.
  void branch_from(cudaStream_t main);
  // Work queued on `main` from now on waits for everything queued on the side stream so far.
  void join_into(cudaStream_t main);

 private:
  cudaStream_t m_stream = nullptr;
  cudaEvent_t m_branch = nullptr, m_join = nullptr;
};

}  // namespace lenet5::cuda
