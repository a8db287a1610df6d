// The layers' current stream (per thread) and the side streams that work branches onto
// (streams.hpp): Network::backward's weight gradients, the tensor-core engine's gathers.
#include "cuda/runtime/streams.hpp"

#include "cuda/runtime/check.hpp"

namespace lenet5::cuda {
namespace {

thread_local cudaStream_t t_layer_stream = cudaStreamPerThread;

}  // namespace

cudaStream_t layer_stream() { return t_layer_stream; }

ScopedLayerStream::ScopedLayerStream(cudaStream_t stream) : m_previous(t_layer_stream) {
  t_layer_stream = stream;
}

ScopedLayerStream::~ScopedLayerStream() { t_layer_stream = m_previous; }

SideStream::SideStream() {
  // Non-blocking: it never waits implicitly for the legacy stream; every dependency is an
  // explicit branch_from / join_into, which is also what graph capture records.
  CUDA_CHECK(cudaStreamCreateWithFlags(&m_stream, cudaStreamNonBlocking));
  try {
    CUDA_CHECK(cudaEventCreateWithFlags(&m_branch, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&m_join, cudaEventDisableTiming));
  } catch (...) {
    if (m_branch) (void)cudaEventDestroy(m_branch);
    (void)cudaStreamDestroy(m_stream);
    throw;
  }
}

SideStream::~SideStream() {
  // Destructors must not throw; the stream's work is joined before any owner goes away.
  (void)cudaEventDestroy(m_branch);
  (void)cudaEventDestroy(m_join);
  (void)cudaStreamDestroy(m_stream);
}

void SideStream::branch_from(cudaStream_t main) {
  CUDA_CHECK(cudaEventRecord(m_branch, main));
  CUDA_CHECK(cudaStreamWaitEvent(m_stream, m_branch, 0));
}

void SideStream::join_into(cudaStream_t main) {
  CUDA_CHECK(cudaEventRecord(m_join, m_stream));
  CUDA_CHECK(cudaStreamWaitEvent(main, m_join, 0));
}

}  // namespace lenet5::cuda
