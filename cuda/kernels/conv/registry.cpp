// make_conv_algorithm, and the adapters of versions 1 (direct) and 5 (staged), whose kernels
// predate the interface and keep their free-function launchers in cuda/kernels/conv/conv.cuh.
#include "cuda/kernels/conv/registry.hpp"

#include <string>

#include "core/error.hpp"
#include "cuda/kernels/conv/conv.cuh"
#include "cuda/runtime/buffer.hpp"

namespace lenet5::cuda {
namespace {

class DirectConvolution final : public ConvAlgorithm {
 public:
  void forward(const ConvShape& s, const float* x, const float* weight, const float* bias,
               float* y, cudaStream_t stream) override {
    conv_forward1(s, x, weight, bias, y, stream);
  }
  void backward_input(const ConvShape& s, const float* dL_dy, const float* weight, float* dL_dx,
                      cudaStream_t stream) override {
    conv_backward_input1(s, dL_dy, weight, dL_dx, stream);
  }
  void backward_weights(const ConvShape& s, const float* x, const float* dL_dy, float* dL_dweight,
                        float* dL_dbias, const float* mask, cudaStream_t stream) override {
    conv_backward_weights1(s, x, dL_dy, dL_dweight, dL_dbias, mask, stream);
  }
};

// The weight gradient's per-sample partial sums go to a scratch buffer sized for the largest batch.
class StagedConvolution final : public ConvAlgorithm {
 public:
  explicit StagedConvolution(const ConvShape& largest)
      : m_max_batch(largest.n),
        m_scratch(Device::gpu, conv_backward_weights5_scratch_floats(largest)) {}

  void forward(const ConvShape& s, const float* x, const float* weight, const float* bias,
               float* y, cudaStream_t stream) override {
    conv_forward5(s, x, weight, bias, y, stream);
  }
  void backward_input(const ConvShape& s, const float* dL_dy, const float* weight, float* dL_dx,
                      cudaStream_t stream) override {
    conv_backward_input5(s, dL_dy, weight, dL_dx, stream);
  }
  void backward_weights(const ConvShape& s, const float* x, const float* dL_dy, float* dL_dweight,
                        float* dL_dbias, const float* mask, cudaStream_t stream) override {
    if (s.n > m_max_batch || conv_backward_weights5_scratch_floats(s) > m_scratch.size())
      throw Error("internal: convolution shape larger than the one its scratch was sized for");
    conv_backward_weights5(s, x, dL_dy, dL_dweight, dL_dbias, mask, m_scratch.data(), stream);
  }

 private:
  int m_max_batch;
  Buffer<float> m_scratch;
};

}  // namespace

std::unique_ptr<ConvAlgorithm> make_direct_convolution(const ConvShape&) {
  return std::make_unique<DirectConvolution>();
}

std::unique_ptr<ConvAlgorithm> make_staged_convolution(const ConvShape& largest) {
  return std::make_unique<StagedConvolution>(largest);
}

std::unique_ptr<ConvAlgorithm> make_conv_algorithm(ConvAlgo algo, const ConvShape& largest) {
  if (largest.n < 1 || largest.k < 1 || largest.h_out() < 1 || largest.w_out() < 1)
    throw Error("internal: invalid convolution shape for version " +
                std::string(to_string(algo)));
  switch (algo) {
    case ConvAlgo::direct:
      return make_direct_convolution(largest);
    case ConvAlgo::tiled:
      return make_tiled_convolution(largest);
    case ConvAlgo::unroll_gemm:
      return make_unroll_gemm_convolution(largest);
    case ConvAlgo::implicit_gemm:
      return make_implicit_gemm_convolution(largest);
    case ConvAlgo::staged:
      return make_staged_convolution(largest);
  }
  throw Error("internal: unknown convolution version " + std::to_string(int(algo)));
}

}  // namespace lenet5::cuda
