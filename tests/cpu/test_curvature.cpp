// SDLM's curvature (engine/curvature.hpp): the Gauss-Newton diagonal back-propagated as LeCun
// 1998's Appendix C does it, checked in double against two computations that share none of its code
// (neither squared weights nor the backward functions):
// - the exact Gauss-Newton diagonal sum_k (dz_k/dw)^2 p_k (1 - p_k) from the per-output Jacobians
//   of the whole network by finite differences, for the parameters where Appendix C's recursion is
//   exact (output and F6: each reaches the logits through a single unit, so no cross term is
//   dropped);
// - for every layer, the recursion itself, d2E/dx_j^2 = sum_i (da_i/dx_j)^2 d2E/da_i^2 and
//   h_w = sum_i (da_i/dw)^2 d2E/da_i^2, with each layer's Jacobian taken by finite differences of
//   its forward function alone (which covers f'^2, the 1/K^4 of averaging, max routing, and the
//   sums over shared weights).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/backend.hpp"
#include "common/golden_trajectory.hpp"
#include "core/cpu_threads.hpp"
#include "core/layout.hpp"
#include "core/rbf_prototypes.hpp"
#include "core/sdlm.hpp"
#include "core/topology.hpp"
#include "engine/curvature.hpp"
#include "engine/network.hpp"
#include "layers/reference_cpu.hpp"

namespace lenet5 {
namespace {

// Central differences. Every layer but the activation is linear in the perturbed value, so its
// difference quotient is exact but for rounding, about 1e-16 * |y| / kStep = 1e-10 absolute on
// values near 1; for tanh the truncation error is f''' kStep^2 / 6, about 1e-11 relative.
constexpr double kStep = 1e-5;
// Both errors above, squared into h and carried through at most thirteen layers, stay below 1e-8
// relative; 1e-6 leaves room and still catches a wrong factor (K^2 instead of K^4, f' for f'^2, a
// weight not squared), each of which is off by far more.
constexpr double kRelative = 1e-6;

// A network in double with random weights and biases (biases too, so no unit sits at 0) and a
// random input: random values have no ties, so max subsampling has one maximum per window, as
// finite differences need.
struct Probe {
  NetConfig net;
  std::vector<float> params;
  std::vector<double> input;  // (1, 1, 32, 32)

  explicit Probe(NetConfig config, std::uint64_t seed = 3) : net(config) {
    net.kernels = GpuKernels::book;
    const ParamLayout layout = lenet5_layout(net);
    params.assign(layout.buffer_floats, 0.0f);
    initialise_parameters(layout, net, seed, params.data());
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> uniform(-1.0, 1.0);
    for (const ParamSpec& spec : layout.tensors)
      if (spec.fan_in == 0)  // a bias
        for (std::size_t i = 0; i < spec.count; ++i)
          params[spec.offset + i] = float(0.1 * uniform(rng));
    input.resize(kInputFloats);
    for (double& x : input) x = uniform(rng);
  }
};

// The reference network, its forward pass kept layer by layer.
struct Forward {
  Network<double> network;
  std::vector<std::vector<double>> values;  // [0] input, [i + 1] layer i's output

  Forward(const Probe& s) : network(s.net, Device::cpu, 1) {
    const std::vector<double> weights(s.params.begin(), s.params.end());
    network.parameters().copy_from_host(weights.data());
    values.push_back(s.input);
    for (const auto& layer : network.layers()) {
      values.emplace_back(layer->out().size());
      layer->forward(values[values.size() - 2].data(), values.back().data(), 1);
    }
  }
  // Layer i's output for input x (the layer's weights as they are now).
  std::vector<double> layer_output(std::size_t i, const std::vector<double>& x) {
    std::vector<double> y(network.layers()[i]->out().size());
    network.layers()[i]->forward(x.data(), y.data(), 1);
    return y;
  }
  // The logits from layer `first` up, given that layer's input.
  std::vector<double> logits_from(std::size_t first, std::vector<double> x) {
    for (std::size_t i = first; i < network.layers().size(); ++i) x = layer_output(i, x);
    return x;
  }
};

// p_k (1 - p_k), computed here from the logits.
std::vector<double> softmax_curvature(const std::vector<double>& z) {
  double top = z[0], sum = 0;
  for (double v : z) top = std::max(top, v);
  for (double v : z) sum += std::exp(v - top);
  std::vector<double> d2(z.size());
  for (std::size_t k = 0; k < z.size(); ++k) {
    const double p = std::exp(z[k] - top) / sum;
    d2[k] = p * (1 - p);
  }
  return d2;
}

// The MAP criterion's q_k = e^-y_k / (e^-j + sum_i e^-y_i) from the RBF outputs y, computed here
// in plain double (the outputs of these probes are far from overflow).
std::vector<double> map_probabilities(const std::vector<double>& y) {
  double denominator = std::exp(-kMapRejectionConstant);
  for (double v : y) denominator += std::exp(-v);
  std::vector<double> q(y.size());
  for (std::size_t k = 0; k < y.size(); ++k) q[k] = std::exp(-y[k]) / denominator;
  return q;
}

// Its q_k (1 - q_k).
std::vector<double> map_curvature(const std::vector<double>& y) {
  std::vector<double> d2 = map_probabilities(y);
  for (double& q : d2) q *= 1 - q;
  return d2;
}

// The loss's own second derivatives at the network's outputs.
std::vector<double> loss_curvature(const NetConfig& net, const std::vector<double>& outputs) {
  return net.output == OutputLayer::rbf ? map_curvature(outputs) : softmax_curvature(outputs);
}

// sum_k ((y+ - y-) / 2 kStep)_k^2 d2_k for the central difference of `f` in one value.
template <class F>
double squared_column(double& value, F&& f, const std::vector<double>& d2) {
  const double saved = value;
  value = saved + kStep;
  const std::vector<double> up = f();
  value = saved - kStep;
  const std::vector<double> down = f();
  value = saved;
  double sum = 0;
  for (std::size_t k = 0; k < d2.size(); ++k) {
    const double column = (up[k] - down[k]) / (2 * kStep);
    sum += column * column * d2[k];
  }
  return sum;
}

// Every index of a tensor of `count`, or about 300 of them spread over it (the larger weights).
std::vector<std::size_t> probed(std::size_t count) {
  const std::size_t stride = std::max<std::size_t>(1, count / 300);
  std::vector<std::size_t> indices;
  for (std::size_t i = 0; i < count; i += stride) indices.push_back(i);
  return indices;
}

void expect_close(double actual, double expected, double scale, const std::string& what) {
  // Relative to the value, with a floor at 1e-12 of the tensor's largest (values that small are
  // rounding of sums whose terms are that much larger).
  EXPECT_NEAR(actual, expected, kRelative * std::abs(expected) + 1e-12 * scale) << what;
}

double largest(const std::vector<double>& h, const ParamSpec& spec) {
  double top = 0;
  for (std::size_t i = 0; i < spec.count; ++i) top = std::max(top, h[spec.offset + i]);
  return top;
}

// The whole-network check where the recursion is exact (see the top of the file).
void expect_exact_gauss_newton_on_top_layers(const Probe& s) {
  const std::vector<double> h = gauss_newton_diagonal(s.net, s.params, s.input.data(), 1);
  Forward forward(s);
  const std::vector<double> d2 = loss_curvature(s.net, forward.values.back());
  const ParamLayout& layout = forward.network.layout();
  double* params = forward.network.parameters().data();
  const std::vector<LayerSpec>& specs = lenet5_topology(s.net);
  for (std::size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].name != "f6" && specs[i].name != "output") continue;
    for (const std::string& tensor : {weight_tensor(specs[i], s.net), specs[i].bias}) {
      if (tensor.empty()) continue;  // the RBF output layer has no parameters
      const ParamSpec& spec = layout.find(tensor);
      for (std::size_t j : probed(spec.count)) {
        const double expected = squared_column(
            params[spec.offset + j], [&] { return forward.logits_from(i, forward.values[i]); }, d2);
        expect_close(h[spec.offset + j], expected, largest(h, spec),
                     tensor + "[" + std::to_string(j) + "]");
      }
    }
  }
}

// Appendix C's recursion with finite-difference Jacobians of each layer alone.
void expect_layerwise_recursion(const Probe& s) {
  const std::vector<double> h = gauss_newton_diagonal(s.net, s.params, s.input.data(), 1);
  Forward forward(s);
  const ParamLayout& layout = forward.network.layout();
  double* params = forward.network.parameters().data();
  const std::vector<LayerSpec>& specs = lenet5_topology(s.net);
  const std::vector<float> c3_mask = c3_weight_mask(s.net);
  std::vector<double> d2_dy = loss_curvature(s.net, forward.values.back());
  for (std::size_t i = specs.size(); i-- > 0;) {
    std::vector<double> x = forward.values[i];
    const auto output = [&] { return forward.layer_output(i, x); };
    for (const std::string& tensor : {weight_tensor(specs[i], s.net), specs[i].bias}) {
      if (tensor.empty()) continue;
      const ParamSpec& spec = layout.find(tensor);
      for (std::size_t j : probed(spec.count)) {
        double& value = params[spec.offset + j];
        if (tensor == "c3.weight" && c3_mask[j] == 0.0f) {  // a connection the table removes
          EXPECT_EQ(h[spec.offset + j], 0.0) << tensor << "[" << j << "]";
          continue;
        }
        expect_close(h[spec.offset + j], squared_column(value, output, d2_dy), largest(h, spec),
                     tensor + "[" + std::to_string(j) + "]");
      }
    }
    std::vector<double> d2_dx(x.size());
    for (std::size_t j = 0; j < x.size(); ++j) d2_dx[j] = squared_column(x[j], output, d2_dy);
    if (specs[i].kind == LayerKind::rbf)  // plus the curvature of y_label = |x - w_label|^2: 2
      for (double& v : d2_dx) v += 2;
    d2_dy = std::move(d2_dx);
  }
}

// The tests make thousands of single-sample layer calls: on one thread, because starting a
// parallel region for each costs more than the call (ten times the tests' time on a loaded 2-core
// machine). The results do not depend on the thread count.
class Curvature : public ::testing::Test {
 protected:
  void SetUp() override { use_cpu_threads(1); }
  void TearDown() override { use_cpu_threads(available_cpu_threads()); }
};

NetConfig paper_like() {  // LeCun 1998's choices that exist here: scaled tanh, average, its table
  NetConfig net;
  net.activation = Activation::scaled_tanh;
  net.subsampling = Subsampling::average;
  net.c3_table = C3Table::lecun;
  return net;
}

// LeCun 1998's network as these settings build it: trainable subsampling, the RBF output and
// squashed C1 and C3 units (their biases, and a1 and a3) too.
NetConfig lecun1998_network() {
  NetConfig net = paper_like();
  net.subsampling = Subsampling::trainable;
  net.output = OutputLayer::rbf;
  net.conv_units = ConvUnits::squashed;
  return net;
}

NetConfig with_max() {
  NetConfig net;
  net.activation = Activation::tanh;
  net.subsampling = Subsampling::max;
  return net;
}

TEST_F(Curvature, IsTheExactGaussNewtonDiagonalWhereTheRecursionIsExact) {
  expect_exact_gauss_newton_on_top_layers(Probe(paper_like()));
}

TEST_F(Curvature, FollowsAppendixCsRecursionThroughEveryLayerWithAverageSubsampling) {
  expect_layerwise_recursion(Probe(paper_like()));
}

TEST_F(Curvature, FollowsAppendixCsRecursionThroughEveryLayerWithMaxSubsampling) {
  expect_layerwise_recursion(Probe(with_max()));
}

TEST_F(Curvature, FollowsAppendixCsRecursionThroughSquashedConvUnitsTrainableSubsamplingAndRbf) {
  expect_layerwise_recursion(Probe(lecun1998_network()));
}

// The estimate over several samples is the mean of each one's (in any chunking).
TEST_F(Curvature, IsTheMeanOverTheSamples) {
  const Probe a(paper_like(), 3), b(paper_like(), 4);
  std::vector<double> both = a.input;
  both.insert(both.end(), b.input.begin(), b.input.end());
  const std::vector<double> mean = gauss_newton_diagonal(a.net, a.params, both.data(), 2);
  const std::vector<double> first = gauss_newton_diagonal(a.net, a.params, a.input.data(), 1);
  const std::vector<double> second = gauss_newton_diagonal(a.net, a.params, b.input.data(), 1);
  ASSERT_EQ(mean.size(), first.size());
  for (std::size_t i = 0; i < mean.size(); ++i) {
    // Only the order of the additions differs: rounding, 1e-16 relative per addition.
    EXPECT_NEAR(mean[i], (first[i] + second[i]) / 2, 1e-12 * (first[i] + second[i]) + 1e-300) << i;
    EXPECT_GE(mean[i], 0.0) << "a Gauss-Newton diagonal is never negative";
  }
}

// The engine re-estimates before the pass's first step, on the first sdlm_samples samples of the
// pass's order, from the parameters at that moment; a pass resumed after its first step keeps the
// estimate it was given.
TEST_F(Curvature, TheCpuEngineEstimatesOnThePassesFirstSamplesBeforeItsFirstStep) {
  const Dataset data = testing::golden_dataset();
  SgdSettings sdlm;
  sdlm.optimizer = kSdlmName;
  sdlm.sdlm_samples = 40;
  NetConfig net;
  auto engine = make_engine(Device::cpu, net, sdlm, testing::kGoldenBatch);
  engine->set_training_data(data, Augmentation{});
  engine->initialise(testing::kGoldenSeed);
  const std::vector<float> initial = engine->parameters();
  std::vector<std::int32_t> order(testing::kGoldenImages);
  for (int i = 0; i < testing::kGoldenImages; ++i) order[i] = (i * 37) % testing::kGoldenImages;
  const std::vector<float> rates(testing::kGoldenSteps, 1e-3f);

  engine->begin_epoch(0, order, rates);
  engine->train_steps(0, 1);
  const OptimizerState state = engine->optimizer_state();
  ASSERT_EQ(state.size(), 1u);
  EXPECT_EQ(state[0].name, kHessianState);
  EXPECT_EQ(state[0].values, estimate_curvature(net, initial, data, Augmentation{}, 0, order, 40));

  // The same pass begun again and resumed at step 1: the estimate stays.
  engine->begin_epoch(0, order, rates);
  engine->train_steps(1, 2);
  EXPECT_EQ(engine->optimizer_state()[0].values, state[0].values);
}

}  // namespace
}  // namespace lenet5
