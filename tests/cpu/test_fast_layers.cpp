// The fast CPU layers (src/layers/fast_cpu.hpp) against the sequential reference: the same
// network built with --kernels book (the reference layers, plain topology) and --kernels fast (the
// fast layers, fused topology), the same weights and inputs, compared on the logits and on every
// parameter's gradient, for every option (activation, subsampling, C3 table, C1 and C3 units) and
// for batches of 1, 64 and 67 (eight full chunks and a ragged one of 3). Then: the fast tanh's
// accuracy, and the CPU engine's results for 1, 2 and 3 threads, which must be identical to the
// bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "common/golden_trajectory.hpp"
#include "core/cpu_threads.hpp"
#include "core/error.hpp"
#include "core/net_config.hpp"
#include "core/rng.hpp"
#include "engine/network.hpp"
#include "layers/fast_cpu.hpp"

namespace lenet5 {
namespace {

template <class T>
std::vector<T> random_values(std::size_t count, std::uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<T> out(count);
  for (T& v : out) v = T(2 * rng.uniform() - 1);
  return out;
}

// The largest |a - b| over a tensor, relative to the largest |b|: the network's values and
// gradients span several orders of magnitude, and an error in one index or term is of the order
// of the tensor's own scale.
template <class T>
double relative_difference(const T* a, const T* b, std::size_t count) {
  double difference = 0, scale = 0;
  for (std::size_t i = 0; i < count; ++i) {
    difference = std::max(difference, std::fabs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::fabs(double(b[i])));
  }
  return scale > 0 ? difference / scale : difference;
}

struct Outputs {
  std::vector<double> logits, gradients;
};

// One forward and backward pass of a batch of n random inputs through a freshly initialised
// network of `config`.
template <class T>
Outputs forward_backward(NetConfig config, GpuKernels kernels, int n) {
  config.kernels = kernels;
  Network<T> network(config, Device::cpu, n);
  network.initialise(5);
  // The C1 and C3 biases of --conv-units squashed start at 0: values of either sign make the
  // forward pass add them.
  for (const ParamSpec& tensor : network.layout().tensors)
    if (tensor.name == "c1.bias" || tensor.name == "c3.bias")
      for (std::size_t i = 0; i < tensor.count; ++i)
        network.parameters().data()[tensor.offset + i] = T(0.05 * (int(i % 5) - 2));
  const std::vector<T> input = random_values<T>(kInputFloats * n, 11);
  const std::vector<T> dL_dlogits = random_values<T>(std::size_t(kClasses) * n, 13);
  network.forward(input.data(), n);
  network.backward(dL_dlogits.data(), n);
  Outputs out;
  out.logits.assign(network.logits(), network.logits() + std::size_t(kClasses) * n);
  const std::vector<T> gradients = network.gradients().to_vector();
  out.gradients.assign(gradients.begin(), gradients.end());
  return out;
}

std::string describe(const NetConfig& c, int n) {
  return std::string(to_string(c.activation)) + ", " + to_string(c.subsampling) + ", C3 " +
         to_string(c.c3_table) + ", " + to_string(c.conv_units) + " C1 and C3, batch " +
         std::to_string(n);
}

template <class T>
void expect_fast_matches_reference(const NetConfig& config, int n, double tolerance) {
  SCOPED_TRACE(describe(config, n));
  const Outputs reference = forward_backward<T>(config, GpuKernels::book, n);
  const Outputs fast = forward_backward<T>(config, GpuKernels::fast, n);
  EXPECT_LE(relative_difference(fast.logits.data(), reference.logits.data(), fast.logits.size()),
            tolerance);
  const ParamLayout layout = lenet5_layout(config);
  for (const ParamSpec& tensor : layout.tensors)
    EXPECT_LE(relative_difference(fast.gradients.data() + tensor.offset,
                                  reference.gradients.data() + tensor.offset, tensor.count),
              tolerance)
        << "gradient of " << tensor.name;
}

std::vector<NetConfig> every_option() {
  std::vector<NetConfig> configs;
  for (Activation activation :
       {Activation::tanh, Activation::sigmoid, Activation::scaled_tanh, Activation::relu})
    for (Subsampling subsampling : {Subsampling::average, Subsampling::max, Subsampling::trainable})
      for (C3Table table : {C3Table::full, C3Table::lecun}) {
        NetConfig config;
        config.activation = activation;
        config.subsampling = subsampling;
        config.c3_table = table;
        configs.push_back(config);
        // LeCun 1998's C1 and C3 units (their biases, and a1 and a3 as layers of their own in the
        // fused topology) with every activation and subsampling; one table is enough, the table
        // touching C3's weights only.
        if (table == C3Table::full) {
          config.conv_units = ConvUnits::squashed;
          configs.push_back(config);
        }
      }
  return configs;
}

// The batch sizes each option is checked at: one sample (a single chunk, no threads started), two
// whole chunks of kCpuChunkSamples (their partial gradients summed in chunk order) and two chunks
// and three samples (a short last chunk). Each path of the chunking, at a quarter of the work that
// 1, 64 and 67 cost: the sanitized stage of .ci/run runs these tests too.
constexpr int kBatchSizes[] = {1, 2 * kCpuChunkSamples, 2 * kCpuChunkSamples + 3};
static_assert(kCpuChunkSamples > 3, "the last size's last chunk is short");

// In double both compute the same function by the same formulas (std::tanh included); only the
// order of the sums differs (GEMM blocking, the chunks' partial gradients), which moves a double
// result by a few units of 1e-16 per term: 1e-12 leaves three orders of magnitude for sums over
// 400 terms and five layers, while a wrong index, a missing term or a wrong factor is of order 1.
// Double also keeps max subsampling's choices identical: no two window values are within the
// rounding difference.
TEST(FastCpuLayers, MatchTheReferenceForEveryOptionInDouble) {
  for (const NetConfig& config : every_option())
    for (int n : kBatchSizes) expect_fast_matches_reference<double>(config, n, 1e-12);
}

// In float the fast tanh (tanh_fast_cpu, a few units in the last place from std::tanh) adds to the
// reordered sums: float's 6e-8 relative rounding, accumulated over sums of up to 400 terms and
// five layers, reaches about 1e-5 of a tensor's scale (measured: below 3e-6). 1e-4 keeps a margin
// and is still four orders of magnitude below what any real mistake gives. Max subsampling is left
// to the double test: a rounding difference may flip which of two nearly equal inputs is the
// window's maximum, and then the gradient legitimately goes elsewhere.
TEST(FastCpuLayers, MatchTheReferenceForEveryActivationInFloat) {
  for (const NetConfig& config : every_option())
    if (config.subsampling != Subsampling::max)
      for (int n : kBatchSizes) expect_fast_matches_reference<float>(config, n, 1e-4);
}

// Over tanh's whole range, every float step near 0 and a grid beyond: Eigen's approximation is
// within a few float units in the last place of tanh (measured: 2.4e-7 absolute at most); 1e-6
// absolute is then a loose bound that still fails for any wrong coefficient (errors of 1e-3 or
// more) or a missing clamp (NaN beyond 9).
TEST(FastCpuLayers, TanhIsWithinAFewUnitsOfTheLibrarys) {
  double worst = 0;
  for (float x = -20.0f; x <= 20.0f; x += 1.0f / 1024)
    worst = std::max(worst, std::fabs(double(tanh_fast_cpu(x)) - std::tanh(double(x))));
  for (float x = -1e-3f; x <= 1e-3f; x += 1e-7f)
    worst = std::max(worst, std::fabs(double(tanh_fast_cpu(x)) - std::tanh(double(x))));
  EXPECT_LE(worst, 1e-6);
  EXPECT_EQ(tanh_fast_cpu(0.0f), 0.0f);
  // Within the bound above, not exactly 1: clang folds a constant argument's polynomial with fused
  // multiply-adds (fewer roundings than the code computed at run time, which gives exactly 1) and
  // gets 0.99999976. Without the clamp these would be NaN.
  EXPECT_NEAR(tanh_fast_cpu(100.0f), 1.0f, 1e-6);
  EXPECT_NEAR(tanh_fast_cpu(-100.0f), -1.0f, 1e-6);
}

// Sets the thread count for one scope, then back to what the process may use.
class ThreadsForTheTest {
 public:
  explicit ThreadsForTheTest(int threads) { use_cpu_threads(threads); }
  ~ThreadsForTheTest() { use_cpu_threads(available_cpu_threads()); }
};

// Eight steps of the golden trajectory's training (tests/common), then the parameters.
std::vector<float> parameters_after_training(const NetConfig& config, int batch, int threads) {
  ThreadsForTheTest scope(threads);
  const auto engine = make_engine(Device::cpu, config, testing::golden_sgd(), batch);
  testing::golden_trajectory(*engine);
  return engine->parameters();
}

// Both CPU kernel sets take the network's input scaling for what they show (the input's border is
// its black, an ink pixel its white) and for what they train on (the weights after the same steps
// differ).
TEST(CpuEngine, ScalesTheInputAsTheNetworkSays) {
  std::vector<std::uint8_t> image(kImageBytes, 0);
  image[14 * kImageSide + 14] = 255;
  const int centre = (14 + kPad) * kInputSide + 14 + kPad;
  for (const GpuKernels kernels : {GpuKernels::book, GpuKernels::fast}) {
    std::vector<std::vector<float>> trained;
    for (const InputScaling scaling : {InputScaling::mnist, InputScaling::lecun1998}) {
      SCOPED_TRACE(std::string(to_string(kernels)) + " " + to_string(scaling));
      NetConfig config;
      config.kernels = kernels;
      config.input_scaling = scaling;
      const auto engine = make_engine(Device::cpu, config, testing::golden_sgd(), 8);
      engine->initialise(3);
      const Activations shown = engine->activations(image.data());
      EXPECT_EQ(shown.input[0], normalise_pixel(0, pixel_scaling(scaling)));
      EXPECT_EQ(shown.input[centre], normalise_pixel(255, pixel_scaling(scaling)));
      testing::golden_trajectory(*engine);
      trained.push_back(engine->parameters());
    }
    EXPECT_NE(trained[0], trained[1]) << to_string(kernels);
  }
}

// The chunks of a batch are fixed by its size, and their gradients are summed in chunk order:
// the thread count changes only who computes which chunk, so the weights are the same to the bit
// (== on every float). Batches of 32 (four chunks) and 27 (three full chunks and a ragged one of
// 3).
TEST(FastCpuLayers, TrainingGivesTheSameBitsWithOneTwoOrThreeThreads) {
  for (int batch : {32, 27}) {
    const std::vector<float> one = parameters_after_training(NetConfig{}, batch, 1);
    for (int threads : {2, 3})
      EXPECT_EQ(parameters_after_training(NetConfig{}, batch, threads), one)
          << "batch " << batch << ", " << threads << " threads";
  }
}

// The same with trainable subsampling, whose coefficients' gradients are summed chunk by chunk
// too.
TEST(FastCpuLayers, TrainableSubsamplingTrainsToTheSameBitsWithOneOrThreeThreads) {
  NetConfig config;
  config.subsampling = Subsampling::trainable;
  EXPECT_EQ(parameters_after_training(config, 27, 3), parameters_after_training(config, 27, 1));
}

// And with LeCun 1998's C1 and C3 units, whose biases' gradients are summed chunk by chunk.
TEST(FastCpuLayers, SquashedConvUnitsTrainToTheSameBitsWithOneOrThreeThreads) {
  NetConfig config;
  config.conv_units = ConvUnits::squashed;
  EXPECT_EQ(parameters_after_training(config, 27, 3), parameters_after_training(config, 27, 1));
}

TEST(CpuThreads, RefusesFewerThanOne) {
  EXPECT_THROW(use_cpu_threads(0), UsageError);
  EXPECT_GE(available_cpu_threads(), 1);
}

}  // namespace
}  // namespace lenet5
