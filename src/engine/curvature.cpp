// SDLM's Gauss-Newton diagonal (engine/curvature.hpp has the formulas and why they are exact).
#include "engine/curvature.hpp"

#include <algorithm>

#include "core/device.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"
#include "core/rbf_math.hpp"
#include "core/rbf_prototypes.hpp"
#include "core/topology.hpp"
#include "data/batch.hpp"
#include "engine/network.hpp"
#include "layers/reference_cpu.hpp"

namespace lenet5 {
namespace {

// Samples per forward and backward pass: memory, not results (every function sums over the
// samples of its batch in a fixed order, and the chunks are added in order).
constexpr int kCurvatureChunk = 100;

std::vector<double> squares(const double* values, std::size_t count) {
  std::vector<double> out(values, values + count);
  for (double& v : out) v *= v;
  return out;
}

// One layer's share of the Gauss-Newton back-propagation over a batch of n: the second
// derivatives of its parameters (summed over the batch, written into `sums` at their offsets)
// and, unless `d2_dx` is null, those of its input. squared_params holds w^2 at every offset.
// x and y are the layer's forward input and output, d2_dy the second derivatives of y.
class GaussNewtonLayer {
 public:
  GaussNewtonLayer(const NetConfig& net, const ParamLayout& layout,
                   const std::vector<double>& squared_params, std::vector<double>& sums)
      : m_net(net), m_layout(layout), m_squared(squared_params), m_sums(sums) {}

  void backward(const LayerSpec& spec, int n, const double* x, const double* y, const double* d2_dy,
                double* d2_dx) {
    switch (spec.kind) {
      case LayerKind::convolution:
        return convolution(spec, n, x, d2_dy, d2_dx);
      case LayerKind::subsampling:
        return subsampling(spec, n, x, d2_dy, d2_dx);
      case LayerKind::activation:
        return activation(spec, n, y, d2_dy, d2_dx);
      case LayerKind::fully_connected:
        return fully_connected(spec, n, x, d2_dy, d2_dx);
      case LayerKind::rbf:
        return rbf(spec, n, x, d2_dy, d2_dx);
    }
    throw Error("internal: no Gauss-Newton rule for layer " + spec.name);
  }

 private:
  double* sum_of(const std::string& tensor) {
    return tensor.empty() ? nullptr : m_sums.data() + m_layout.find(tensor).offset;
  }
  const double* squared(const std::string& tensor) const {
    return m_squared.data() + m_layout.find(tensor).offset;
  }

  void convolution(const LayerSpec& spec, int n, const double* x, const double* d2_dy,
                   double* d2_dx) {
    const ConvShape s{n, spec.in.c, spec.in.h, spec.in.w, spec.out.c, spec.kernel};
    const std::vector<double> x2 = squares(x, x_count(s));
    double* h_weight = sum_of(spec.weight);
    conv_backward_weights_cpu(s, x2.data(), d2_dy, h_weight, sum_of(spec.bias));
    if (spec.name == "c3") {  // connections the table removes have no curvature (nor gradient)
      const std::vector<float> mask = c3_weight_mask(m_net);
      for (std::size_t i = 0; i < mask.size(); ++i) h_weight[i] *= double(mask[i]);
    }
    if (d2_dx) conv_backward_input_cpu(s, d2_dy, squared(spec.weight), d2_dx);
  }

  void subsampling(const LayerSpec& spec, int n, const double* x, const double* d2_dy,
                   double* d2_dx) {
    const PoolShape s{n, spec.in.c, spec.in.h, spec.in.w, spec.kernel};
    const std::size_t outputs = std::size_t(n) * spec.out.size();
    subsample_backward_bias_cpu(s, d2_dy, sum_of(spec.bias));
    if (m_net.subsampling == Subsampling::trainable)
      return trainable_subsampling(spec, s, x, d2_dy, d2_dx);
    if (!d2_dx) return;
    if (m_net.subsampling == Subsampling::max) {
      subsample_backward_input_cpu(s, Subsampling::max, x, d2_dy, d2_dx);
      return;
    }
    // The average's backward divides by K^2 once; the square of that factor needs it twice.
    std::vector<double> scaled(d2_dy, d2_dy + outputs);
    for (double& v : scaled) v /= double(s.k * s.k);
    subsample_backward_input_cpu(s, Subsampling::average, x, scaled.data(), d2_dx);
  }

  // LeCun 1998's S = c * (window sum) + b: d2E/dc^2 = sum of (window sum)^2 d2E/dS^2 over the
  // map's outputs, and each input of a window gets c^2 d2E/dS^2 (the gradient's backward with the
  // squared coefficients).
  void trainable_subsampling(const LayerSpec& spec, const PoolShape& s, const double* x,
                             const double* d2_dy, double* d2_dx) {
    const std::size_t outputs = std::size_t(s.n) * spec.out.size();
    const std::vector<double> ones(std::size_t(s.c), 1.0), zeros(std::size_t(s.c), 0.0);
    std::vector<double> window_sums(outputs);
    subsample_forward_cpu(s, Subsampling::trainable, x, zeros.data(), window_sums.data(),
                          ones.data());
    const std::vector<double> sums_squared = squares(window_sums.data(), outputs);
    // subsample_backward_coef_cpu sums dE/dS times the window's sum; here the "input" is the
    // squared sum, read through a 1x1 window of stride 1.
    const PoolShape per_output{s.n, s.c, s.h_out(), s.w_out(), 1};
    const std::string coefficients = weight_tensor(spec, m_net);
    subsample_backward_coef_cpu(per_output, sums_squared.data(), d2_dy, sum_of(coefficients));
    if (d2_dx)
      subsample_backward_input_cpu(s, Subsampling::trainable, x, d2_dy, d2_dx,
                                   squared(coefficients));
  }

  // The RBF units y_i = sum_j (x_j - w_ij)^2 have no trained parameters; dy_i/dx_j = 2 (x_j - w_ij)
  // gives the Gauss-Newton term sum_i 4 (x_j - w_ij)^2 d2E/dy_i^2. To it is added the curvature of
  // the criterion's first term, y_label, in x: 2 whatever the label (the whole curvature of the
  // paper's other criterion, the mean squared distance to the right prototype, equation (8)). The
  // Gauss-Newton term alone vanishes both while every prototype is far (q near 0) and once the
  // network is sure (q_label near 1): each parameter below then steps by lr / mu, fifty times lr,
  // which saturated the units after one pass (measured: 97 % after pass 1, 54 % after pass 2).
  void rbf(const LayerSpec& spec, int n, const double* x, const double* d2_dy, double* d2_dx) {
    if (!d2_dx) return;
    const int units = int(spec.in.size()), classes = int(spec.out.size());
    const auto& w = rbf_prototypes();
    for (int sample = 0; sample < n; ++sample)
      for (int j = 0; j < units; ++j) {
        const double xj = x[std::size_t(sample) * units + j];
        double sum = 2;
        for (int i = 0; i < classes; ++i) {
          const double slope = 2 * (xj - double(w[std::size_t(i) * units + j]));
          sum += slope * slope * d2_dy[std::size_t(sample) * classes + i];
        }
        d2_dx[std::size_t(sample) * units + j] = sum;
      }
  }

  // f'(a)^2 d2E/dy^2: the gradient's backward, f'(a) times its argument, applied twice.
  void activation(const LayerSpec& spec, int n, const double* y, const double* d2_dy,
                  double* d2_dx) {
    const std::size_t count = std::size_t(n) * spec.out.size();
    std::vector<double> once(count);
    activation_backward_cpu(m_net.activation, y, d2_dy, once.data(), count);
    activation_backward_cpu(m_net.activation, y, once.data(), d2_dx, count);
  }

  void fully_connected(const LayerSpec& spec, int n, const double* x, const double* d2_dy,
                       double* d2_dx) {
    const FcShape s{n, int(spec.in.size()), int(spec.out.size())};
    const std::vector<double> x2 = squares(x, std::size_t(n) * spec.in.size());
    fc_backward_weights_cpu(s, x2.data(), d2_dy, sum_of(spec.weight), sum_of(spec.bias));
    if (d2_dx) fc_backward_input_cpu(s, d2_dy, squared(spec.weight), d2_dx);
  }

  const NetConfig& m_net;
  const ParamLayout& m_layout;
  const std::vector<double>& m_squared;
  std::vector<double>& m_sums;
};

// The loss's second derivatives with respect to the network's outputs (n, 10), per sample: where
// Gauss-Newton back-propagation starts. Softmax cross-entropy: p_i (1 - p_i). LeCun 1998's MAP
// criterion on RBF outputs, E = y_label + log(e^-j + sum_i e^-y_i): dE/dy_i = [i = label] - q_i
// with q_i = e^-y_i / (e^-j + sum_k e^-y_k), so d2E/dy_i^2 = q_i (1 - q_i).
void output_curvature(const NetConfig& net, const double* outputs, int n, double* d2_dy) {
  if (net.output == OutputLayer::softmax)
    return softmax_cross_entropy_curvature_cpu(outputs, n, kClasses, d2_dy);
  for (int sample = 0; sample < n; ++sample) {
    const double* y = outputs + std::size_t(sample) * kClasses;
    const double log_denominator = map_log_denominator(y, kClasses, kMapRejectionConstant);
    for (int i = 0; i < kClasses; ++i) {
      const double q = map_probability(y[i], log_denominator);
      d2_dy[std::size_t(sample) * kClasses + i] = q * (1 - q);
    }
  }
}

// Adds the chunk's sums over its n samples to `total`.
void add_chunk(const NetConfig& net, Network<double>& network,
               const std::vector<double>& squared_params, const double* inputs, int n,
               std::vector<double>& total) {
  const std::vector<LayerSpec>& specs = lenet5_topology(net);
  network.forward(inputs, n);
  std::vector<double> d2_dy(std::size_t(n) * kClasses), d2_dx;
  output_curvature(net, network.logits(), n, d2_dy.data());
  std::vector<double> sums(total.size(), 0.0);
  GaussNewtonLayer layers(net, network.layout(), squared_params, sums);
  for (std::size_t i = specs.size(); i-- > 0;) {
    const double* x = i == 0 ? network.input() : network.output(i - 1);
    d2_dx.assign(i == 0 ? 0 : std::size_t(n) * specs[i].in.size(), 0.0);
    layers.backward(specs[i], n, x, network.output(i), d2_dy.data(),
                    i == 0 ? nullptr : d2_dx.data());
    d2_dy.swap(d2_dx);
  }
  for (std::size_t i = 0; i < total.size(); ++i) total[i] += sums[i];
}

}  // namespace

std::vector<double> gauss_newton_diagonal(const NetConfig& net, const std::vector<float>& params,
                                          const double* inputs, int n) {
  NetConfig reference = net;
  reference.kernels = GpuKernels::book;  // the plain topology of the CPU reference layers
  Network<double> network(reference, Device::cpu, std::max(1, std::min(n, kCurvatureChunk)));
  if (params.size() != network.layout().buffer_floats)
    throw Error("internal: " + std::to_string(params.size()) + " parameters for a network of " +
                std::to_string(network.layout().buffer_floats));
  const std::vector<double> weights(params.begin(), params.end());
  network.parameters().copy_from_host(weights.data());
  const std::vector<double> squared_params = squares(weights.data(), weights.size());
  std::vector<double> total(params.size(), 0.0);
  for (int first = 0; first < n; first += kCurvatureChunk) {
    const int count = std::min(kCurvatureChunk, n - first);
    add_chunk(reference, network, squared_params, inputs + std::size_t(first) * kInputFloats, count,
              total);
  }
  if (n > 0)
    for (double& h : total) h /= n;
  return total;
}

std::vector<float> estimate_curvature(const NetConfig& net, const std::vector<float>& params,
                                      const Dataset& train, const Augmentation& augmentation,
                                      std::uint32_t epoch,
                                      const std::vector<std::int32_t>& permutation, int samples) {
  const int n = std::min(samples, int(permutation.size()));
  std::vector<float> gathered(std::size_t(n) * kInputFloats);
  if (n > 0)
    gather_augmented_batch_reference(train.images.data(), permutation.data(), n, augmentation,
                                     epoch, pixel_scaling(net.input_scaling), gathered.data());
  const std::vector<double> inputs(gathered.begin(), gathered.end());
  const std::vector<double> mean = gauss_newton_diagonal(net, params, inputs.data(), n);
  return std::vector<float>(mean.begin(), mean.end());
}

}  // namespace lenet5
