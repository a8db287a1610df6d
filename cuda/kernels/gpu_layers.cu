// GPU backend: Layer<float> objects around the CUDA launchers, one class per layer kind, the
// same constructor arguments as the CPU classes of layers/cpu_layers.cpp. Two kernel sets
// (NetConfig::kernels): "book" runs one layer per operation (cuBLAS for fully connected layers);
// "fast" runs the fused topology (core/topology.hpp) with the activation inside s2, s4, c5 and f6
// and the dense version 2 kernels. Either runs its convolutions with NetConfig::conv_algo. Every pointer is device
// memory (views into Network's flat parameter and gradient buffers); every launch goes on
// cuda::layer_stream() (cuda/runtime/streams.hpp): the engine's stream, or the side stream on which
// Network::backward runs the weight gradients.
#include "core/error.hpp"
#include "core/rbf_prototypes.hpp"
#include "cuda/kernels/conv/registry.hpp"
#include "cuda/kernels/dense.cuh"
#include "cuda/kernels/gpu_layers.hpp"
#include "cuda/kernels/rbf.cuh"
#include "cuda/kernels/subsample.cuh"
#include "cuda/runtime/buffer.hpp"
#include "cuda/runtime/streams.hpp"

namespace lenet5 {
namespace {

// C1 (N,1,32,32) -> (N,6,28,28), C3 (N,6,14,14) -> (N,16,10,10), and C5 with the book's kernel
// set: any version of the registry (cuda/kernels/conv/registry.hpp), which owns whatever scratch memory
// it needs, sized here for the largest batch.
class ConvolutionGpu final : public Layer<float> {
 public:
  ConvolutionGpu(const LayerSpec& spec, ConvAlgo algo, float* weight, float* weight_grad,
                 float* bias, float* bias_grad, const float* mask, int max_batch)
      : Layer<float>(spec.name, spec.in, spec.out),
        m_k(spec.kernel),
        m_weight(weight),
        m_weight_grad(weight_grad),
        m_bias(bias),
        m_bias_grad(bias_grad),
        m_mask(mask),
        m_kernels(cuda::make_conv_algorithm(algo, shape(max_batch))) {}

  void forward(const float* x, float* y, int n) override {
    m_kernels->forward(shape(n), x, m_weight, m_bias, y, cuda::layer_stream());
  }
  void backward_input(const float*, const float*, const float* dL_dy, float* dL_dx,
                      int n) override {
    m_kernels->backward_input(shape(n), dL_dy, m_weight, dL_dx, cuda::layer_stream());
  }
  void backward_weights(const float* x, const float*, const float* dL_dy, int n) override {
    m_kernels->backward_weights(shape(n), x, dL_dy, m_weight_grad, m_bias_grad, m_mask,
                                cuda::layer_stream());
  }

 private:
  ConvShape shape(int n) const { return {n, in().c, in().h, in().w, out().c, m_k}; }
  int m_k;
  float *m_weight, *m_weight_grad, *m_bias, *m_bias_grad;
  const float* m_mask;
  std::unique_ptr<cuda::ConvAlgorithm> m_kernels;
};

// S2 (N,6,28,28) -> (N,6,14,14), S4 (N,16,10,10) -> (N,16,5,5), with a per-map bias, and with
// trainable subsampling a per-map coefficient (6 or 16, the layer's weight).
class SubsamplingGpu final : public Layer<float> {
 public:
  SubsamplingGpu(const LayerSpec& spec, const NetConfig& config, float* coef, float* coef_grad,
                 float* bias, float* bias_grad)
      : Layer<float>(spec.name, spec.in, spec.out),
        m_kind(config.subsampling),
        m_activation{spec.activate, config.activation},
        m_k(spec.kernel),
        m_coef(coef),
        m_coef_grad(coef_grad),
        m_bias(bias),
        m_bias_grad(bias_grad) {}

  void forward(const float* x, float* y, int n) override {
    cuda::subsample_forward(shape(n), m_kind, x, m_bias, y, cuda::layer_stream(), m_activation,
                            m_coef);
  }
  void backward_input(const float* x, const float* y, const float* dL_dy, float* dL_dx,
                      int n) override {
    cuda::subsample_backward_input(shape(n), m_kind, x, dL_dy, dL_dx, cuda::layer_stream(),
                                   m_activation, y, m_coef);
  }
  void backward_weights(const float* x, const float* y, const float* dL_dy, int n) override {
    cuda::subsample_backward_bias(shape(n), dL_dy, m_bias_grad, cuda::layer_stream(),
                                  m_activation, y);
    if (m_coef_grad)
      cuda::subsample_backward_coef(shape(n), x, dL_dy, m_coef_grad, cuda::layer_stream(),
                                    m_activation, y);
  }

 private:
  PoolShape shape(int n) const { return {n, in().c, in().h, in().w, m_k}; }
  Subsampling m_kind;
  FusedActivation m_activation;  // the fast kernels' s2 and s4 apply the activation themselves
  int m_k;
  float *m_coef, *m_coef_grad, *m_bias, *m_bias_grad;
};

class ActivationGpu final : public Layer<float> {
 public:
  ActivationGpu(const LayerSpec& spec, Activation kind)
      : Layer<float>(spec.name, spec.in, spec.out), m_kind(kind) {}

  void forward(const float* x, float* y, int n) override {
    cuda::activation_forward(m_kind, x, y, in().size() * n, cuda::layer_stream());
  }
  void backward_input(const float*, const float* y, const float* dL_dy, float* dL_dx,
                      int n) override {
    cuda::activation_backward(m_kind, y, dL_dy, dL_dx, in().size() * n, cuda::layer_stream());
  }

 private:
  Activation m_kind;
};

// F6 (N,120) -> (N,84) and output (N,84) -> (N,10) on cuBLAS, through the process's handle
// (bound to kDefaultStream).
class FullyConnectedGpu final : public Layer<float> {
 public:
  FullyConnectedGpu(const LayerSpec& spec, float* weight, float* weight_grad, float* bias,
                    float* bias_grad)
      : Layer<float>(spec.name, spec.in, spec.out),
        m_cublas(cuda::default_cublas_handle()),
        m_weight(weight),
        m_weight_grad(weight_grad),
        m_bias(bias),
        m_bias_grad(bias_grad) {}

  void forward(const float* x, float* y, int n) override {
    m_cublas.use_stream(cuda::layer_stream());
    cuda::fc_forward(m_cublas, shape(n), x, m_weight, m_bias, y);
  }
  void backward_input(const float*, const float*, const float* dL_dy, float* dL_dx,
                      int n) override {
    m_cublas.use_stream(cuda::layer_stream());
    cuda::fc_backward_input(m_cublas, shape(n), dL_dy, m_weight, dL_dx);
  }
  void backward_weights(const float* x, const float*, const float* dL_dy, int n) override {
    m_cublas.use_stream(cuda::layer_stream());
    cuda::fc_backward_weights(m_cublas, shape(n), x, dL_dy, m_weight_grad, m_bias_grad);
  }

 private:
  FcShape shape(int n) const { return {n, int(in().size()), int(out().size())}; }
  cuda::CublasHandle& m_cublas;
  float *m_weight, *m_weight_grad, *m_bias, *m_bias_grad;
};

// Fully connected version 2 (dense.cuh) with the activation fused in: F6 (N,120) -> (N,84),
// output (N,84) -> (N,10), and C5 (N,16,5,5) -> (N,120,1,1), which is a dense layer: a 5x5
// convolution of a 5x5 input has a 1x1 output, and x (N,16,5,5), W (120,16,5,5) and y (N,120,1,1)
// are exactly x (N,400), W (120,400) and y (N,120) in memory.
class DenseGpu final : public Layer<float> {
 public:
  DenseGpu(const LayerSpec& spec, Activation activation, float* weight, float* weight_grad,
           float* bias, float* bias_grad)
      : Layer<float>(spec.name, spec.in, spec.out),
        m_activation{spec.activate, activation},
        m_weight(weight),
        m_weight_grad(weight_grad),
        m_bias(bias),
        m_bias_grad(bias_grad) {}

  void forward(const float* x, float* y, int n) override {
    cuda::dense_forward2(shape(n), x, m_weight, m_bias, m_activation, y, cuda::layer_stream());
  }
  void backward_input(const float*, const float* y, const float* dL_dy, float* dL_dx,
                      int n) override {
    cuda::dense_backward_input2(shape(n), dL_dy, y, m_activation, m_weight, dL_dx,
                                cuda::layer_stream());
  }
  void backward_weights(const float* x, const float* y, const float* dL_dy, int n) override {
    cuda::dense_backward_weights2(shape(n), x, dL_dy, y, m_activation, m_weight_grad, m_bias_grad,
                                  cuda::layer_stream());
  }

 private:
  FcShape shape(int n) const { return {n, int(in().size()), int(out().size())}; }
  FusedActivation m_activation;
  float *m_weight, *m_weight_grad, *m_bias, *m_bias_grad;
};

// LeCun 1998's RBF output (N,84) -> (N,10) over the fixed prototypes, which each layer uploads
// once when it is made (never while a step is captured); nothing trained, no weight gradient.
class RbfGpu final : public Layer<float> {
 public:
  explicit RbfGpu(const LayerSpec& spec)
      : Layer<float>(spec.name, spec.in, spec.out),
        m_prototypes(Device::gpu, rbf_prototypes().size()) {
    if (int(spec.in.size()) != kRbfUnits || spec.out.size() != std::size_t(kClasses))
      throw Error("internal: the RBF layer takes " + std::to_string(kRbfUnits) + " inputs to " +
                  std::to_string(kClasses) + " outputs");
    m_prototypes.copy_from_host(rbf_prototypes().data());
  }

  void forward(const float* x, float* y, int n) override {
    cuda::rbf_forward(x, m_prototypes.data(), n, y, cuda::layer_stream());
  }
  void backward_input(const float* x, const float*, const float* dL_dy, float* dL_dx,
                      int n) override {
    cuda::rbf_backward_input(x, m_prototypes.data(), dL_dy, n, dL_dx, cuda::layer_stream());
  }

 private:
  Buffer<float> m_prototypes;  // (10, 84)
};

bool whole_input_convolution(const LayerSpec& spec) {
  return spec.kind == LayerKind::convolution && spec.in.h == spec.kernel &&
         spec.in.w == spec.kernel;
}

std::unique_ptr<Layer<float>> make_fast_layer(const LayerSpec& spec, const NetConfig& config,
                                              float* weight, float* weight_grad, float* bias,
                                              float* bias_grad, const float* c3_mask,
                                              int max_batch) {
  if (spec.kind == LayerKind::rbf) return std::make_unique<RbfGpu>(spec);
  if (spec.kind == LayerKind::fully_connected || (whole_input_convolution(spec) && !c3_mask))
    return std::make_unique<DenseGpu>(spec, config.activation, weight, weight_grad, bias,
                                      bias_grad);
  if (spec.kind == LayerKind::convolution && !spec.activate)
    return std::make_unique<ConvolutionGpu>(spec, config.conv_algo, weight, weight_grad, bias,
                                            bias_grad, c3_mask, max_batch);
  if (spec.kind == LayerKind::subsampling)
    return std::make_unique<SubsamplingGpu>(spec, config, weight, weight_grad, bias, bias_grad);
  // a1, a3 (--conv-units squashed): the convolutions before them fuse no activation.
  if (spec.kind == LayerKind::activation && !spec.activate)
    return std::make_unique<ActivationGpu>(spec, config.activation);
  throw Error("internal: no fast GPU layer for " + spec.name);
}

}  // namespace

std::unique_ptr<Layer<float>> make_gpu_layer(const LayerSpec& spec, const NetConfig& config,
                                             float* weight, float* weight_grad, float* bias,
                                             float* bias_grad, const float* c3_mask,
                                             int max_batch) {
  if (gpu_kernel_set(config.kernels).fused_layers)  // whole-step evaluates with them too
    return make_fast_layer(spec, config, weight, weight_grad, bias, bias_grad, c3_mask,
                           max_batch);
  if (spec.activate) throw Error("internal: the book's kernels run activations as layers");
  switch (spec.kind) {
    case LayerKind::convolution:
      return std::make_unique<ConvolutionGpu>(spec, config.conv_algo, weight, weight_grad, bias,
                                              bias_grad, c3_mask, max_batch);
    case LayerKind::subsampling:
      return std::make_unique<SubsamplingGpu>(spec, config, weight, weight_grad, bias, bias_grad);
    case LayerKind::activation:
      return std::make_unique<ActivationGpu>(spec, config.activation);
    case LayerKind::fully_connected:
      return std::make_unique<FullyConnectedGpu>(spec, weight, weight_grad, bias, bias_grad);
    case LayerKind::rbf:
      return std::make_unique<RbfGpu>(spec);
  }
  throw Error("internal: unknown layer kind for " + spec.name);
}

}  // namespace lenet5
