// The CPU layers: Layer<T> objects around the reference or fast functions, chosen by kernel set.
#include "layers/cpu_layers.hpp"

#include "core/error.hpp"
#include "core/rbf_prototypes.hpp"
#include "layers/reference_cpu.hpp"

namespace lenet5 {
namespace {

template <class T>
class ConvolutionCpu final : public Layer<T> {
 public:
  ConvolutionCpu(const LayerSpec& spec, T* weight, T* weight_grad, T* bias, T* bias_grad,
                 const float* mask)
      : Layer<T>(spec.name, spec.in, spec.out), m_k(spec.kernel), m_weight(weight),
        m_weight_grad(weight_grad), m_bias(bias), m_bias_grad(bias_grad), m_mask(mask) {}

  void forward(const T* x, T* y, int n) override {
    conv_forward_cpu(shape(n), x, m_weight, m_bias, y);
  }
  void backward_input(const T*, const T*, const T* dL_dy, T* dL_dx, int n) override {
    conv_backward_input_cpu(shape(n), dL_dy, m_weight, dL_dx);
  }
  void backward_weights(const T* x, const T*, const T* dL_dy, int n) override {
    const ConvShape s = shape(n);
    conv_backward_weights_cpu(s, x, dL_dy, m_weight_grad, m_bias_grad);
    if (m_mask)
      for (int i = 0; i < s.m * s.c * s.k * s.k; ++i) m_weight_grad[i] *= T(m_mask[i]);
  }

 private:
  ConvShape shape(int n) const {
    return {n, this->in().c, this->in().h, this->in().w, this->out().c, m_k};
  }
  int m_k;
  T *m_weight, *m_weight_grad, *m_bias, *m_bias_grad;
  const float* m_mask;
};

// S2, S4: a per-map bias, and with trainable subsampling a per-map coefficient (weight).
template <class T>
class SubsamplingCpu final : public Layer<T> {
 public:
  SubsamplingCpu(const LayerSpec& spec, Subsampling kind, T* coef, T* coef_grad, T* bias,
                 T* bias_grad)
      : Layer<T>(spec.name, spec.in, spec.out),
        m_kind(kind),
        m_k(spec.kernel),
        m_coef(coef),
        m_coef_grad(coef_grad),
        m_bias(bias),
        m_bias_grad(bias_grad) {}

  void forward(const T* x, T* y, int n) override {
    subsample_forward_cpu(shape(n), m_kind, x, m_bias, y, m_coef);
  }
  void backward_input(const T* x, const T*, const T* dL_dy, T* dL_dx, int n) override {
    subsample_backward_input_cpu(shape(n), m_kind, x, dL_dy, dL_dx, m_coef);
  }
  void backward_weights(const T* x, const T*, const T* dL_dy, int n) override {
    subsample_backward_bias_cpu(shape(n), dL_dy, m_bias_grad);
    if (m_coef_grad) subsample_backward_coef_cpu(shape(n), x, dL_dy, m_coef_grad);
  }

 private:
  PoolShape shape(int n) const {
    return {n, this->in().c, this->in().h, this->in().w, m_k};
  }
  Subsampling m_kind;
  int m_k;
  T *m_coef, *m_coef_grad, *m_bias, *m_bias_grad;
};

template <class T>
class ActivationCpu final : public Layer<T> {
 public:
  ActivationCpu(const LayerSpec& spec, Activation kind)
      : Layer<T>(spec.name, spec.in, spec.out), m_kind(kind) {}
  void forward(const T* x, T* y, int n) override {
    activation_forward_cpu(m_kind, x, y, this->in().size() * n);
  }
  void backward_input(const T*, const T* y, const T* dL_dy, T* dL_dx, int n) override {
    activation_backward_cpu(m_kind, y, dL_dy, dL_dx, this->in().size() * n);
  }

 private:
  Activation m_kind;
};

template <class T>
class FullyConnectedCpu final : public Layer<T> {
 public:
  FullyConnectedCpu(const LayerSpec& spec, T* weight, T* weight_grad, T* bias, T* bias_grad)
      : Layer<T>(spec.name, spec.in, spec.out), m_weight(weight), m_weight_grad(weight_grad),
        m_bias(bias), m_bias_grad(bias_grad) {}
  void forward(const T* x, T* y, int n) override {
    fc_forward_cpu(shape(n), x, m_weight, m_bias, y);
  }
  void backward_input(const T*, const T*, const T* dL_dy, T* dL_dx, int n) override {
    fc_backward_input_cpu(shape(n), dL_dy, m_weight, dL_dx);
  }
  void backward_weights(const T* x, const T*, const T* dL_dy, int n) override {
    fc_backward_weights_cpu(shape(n), x, dL_dy, m_weight_grad, m_bias_grad);
  }

 private:
  FcShape shape(int n) const { return {n, int(this->in().size()), int(this->out().size())}; }
  T *m_weight, *m_weight_grad, *m_bias, *m_bias_grad;
};

// The RBF output layer (reference_cpu.hpp's rbf_*_cpu) over the fixed prototypes: nothing trained,
// so no weight gradient.
template <class T>
class RbfCpu final : public Layer<T> {
 public:
  explicit RbfCpu(const LayerSpec& spec) : Layer<T>(spec.name, spec.in, spec.out) {
    if (int(spec.in.size()) != kRbfUnits || spec.out.size() != std::size_t(kClasses))
      throw Error("internal: the RBF layer takes " + std::to_string(kRbfUnits) + " inputs to " +
                  std::to_string(kClasses) + " outputs");
  }
  void forward(const T* x, T* y, int n) override {
    rbf_forward_cpu(n, kRbfUnits, kClasses, x, rbf_prototypes().data(), y);
  }
  void backward_input(const T* x, const T*, const T* dL_dy, T* dL_dx, int n) override {
    rbf_backward_input_cpu(n, kRbfUnits, kClasses, x, rbf_prototypes().data(), dL_dy, dL_dx);
  }
};

}  // namespace

template <class T>
std::unique_ptr<Layer<T>> make_rbf_cpu_layer(const LayerSpec& spec) {
  return std::make_unique<RbfCpu<T>>(spec);
}

template <class T>
std::unique_ptr<Layer<T>> make_cpu_layer(const LayerSpec& spec, const NetConfig& config, T* weight,
                                         T* weight_grad, T* bias, T* bias_grad,
                                         const float* c3_mask) {
  if (gpu_kernel_set(config.kernels).fused_layers)
    return make_fast_cpu_layer(spec, config, weight, weight_grad, bias, bias_grad, c3_mask);
  if (spec.activate)
    throw Error("internal: the CPU reference runs activations as layers of their own (" +
                spec.name + ")");
  switch (spec.kind) {
    case LayerKind::convolution:
      return std::make_unique<ConvolutionCpu<T>>(spec, weight, weight_grad, bias, bias_grad,
                                                 c3_mask);
    case LayerKind::subsampling:
      return std::make_unique<SubsamplingCpu<T>>(spec, config.subsampling, weight, weight_grad,
                                                 bias, bias_grad);
    case LayerKind::activation:
      return std::make_unique<ActivationCpu<T>>(spec, config.activation);
    case LayerKind::fully_connected:
      return std::make_unique<FullyConnectedCpu<T>>(spec, weight, weight_grad, bias, bias_grad);
    case LayerKind::rbf:
      return make_rbf_cpu_layer<T>(spec);
  }
  throw Error("internal: unknown layer kind for " + spec.name);
}

template std::unique_ptr<Layer<float>> make_rbf_cpu_layer<float>(const LayerSpec&);
template std::unique_ptr<Layer<double>> make_rbf_cpu_layer<double>(const LayerSpec&);
template std::unique_ptr<Layer<float>> make_cpu_layer<float>(const LayerSpec&, const NetConfig&,
                                                             float*, float*, float*, float*,
                                                             const float*);
template std::unique_ptr<Layer<double>> make_cpu_layer<double>(const LayerSpec&, const NetConfig&,
                                                               double*, double*, double*, double*,
                                                               const float*);

}  // namespace lenet5
