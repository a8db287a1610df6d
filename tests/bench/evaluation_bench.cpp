// lenet5_evaluation_bench: the evaluation of a test set (forward pass, loss and predicted class of
// every image) by the whole-step kernels in FP32 (one sample per block, WholeStep::evaluate, what
// the engines evaluate with) and by the tensor-core forward pass (TF32, a tile of samples per
// block, cuda/engine/tensor_forward.cuh) at each of its tile sizes, in the same process on the
// same data, as JSON lines on stdout.
//
//   lenet5_evaluation_bench [--data DIR | --synthetic N] [--checkpoint F]... [--repeats R]
//                           [--rounds K]
//
// Each network is a checkpoint's (--checkpoint, repeatable), or, without one, the default config's
// (relu, max subsampling) and the book's (tanh, average) with their seed-1 initial weights. Every
// kernel is checked before any is timed: its accuracy, mean loss and the share of its predictions
// that agree with FP32's are printed, the tensor cores' tiles must give the same bits as each
// other, and a kernel whose predictions agree with FP32's on less than 95 % of the images stops the
// run (exit 1). Then K rounds time each kernel: the median of R evaluations of the whole set, each
// bracketed by CUDA events. Exit 77 without a GPU (CTest's skip), 2 on a bad argument.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/layout.hpp"
#include "core/net_config.hpp"
#include "core/rng.hpp"
#include "cuda/engine/engine_parts.hpp"
#include "cuda/engine/tensor_forward.cuh"
#include "cuda/engine/whole_step.cuh"
#include "cuda/runtime/buffer.hpp"
#include "cuda/runtime/runtime.hpp"
#include "data/datasets.hpp"
#include "data/mnist.hpp"
#include "gpu/network_test_util.hpp"
#include "train/checkpoint.hpp"

namespace lenet5 {
namespace {

struct Options {
  std::string data;
  int synthetic = 0;
  std::vector<std::string> checkpoints;
  int repeats = 20, rounds = 3;
};

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) throw UsageError(flag + " needs a value");
    const std::string value = argv[++i];
    if (flag == "--data")
      options.data = value;
    else if (flag == "--synthetic")
      options.synthetic = std::stoi(value);
    else if (flag == "--checkpoint")
      options.checkpoints.push_back(value);
    else if (flag == "--repeats")
      options.repeats = std::stoi(value);
    else if (flag == "--rounds")
      options.rounds = std::stoi(value);
    else
      throw UsageError("unknown option " + flag);
  }
  if (options.repeats < 1 || options.rounds < 1 || options.synthetic < 0)
    throw UsageError("--repeats and --rounds must be at least 1, --synthetic at least 0");
  return options;
}

// Digit-like images (tests/gpu/network_test_util.hpp's) with random labels.
Dataset synthetic_images(int n) {
  test::DigitImages images = test::digit_like_images(n, 7);
  Dataset data;
  data.count = n;
  data.images = std::move(images.pixels);
  data.labels = std::move(images.labels);
  return data;
}

struct Network {
  std::string name;
  NetConfig config;
  std::vector<float> params;
};

std::vector<Network> networks(const Options& options) {
  std::vector<Network> result;
  for (const std::string& file : options.checkpoints) {
    Checkpoint checkpoint = load_checkpoint(file);
    result.push_back({file, checkpoint.net, std::move(checkpoint.parameters)});
  }
  if (!result.empty()) return result;
  for (const auto& [activation, subsampling] :
       {std::pair{Activation::relu, Subsampling::max}, {Activation::tanh, Subsampling::average}}) {
    Network network;
    network.config.activation = activation;
    network.config.subsampling = subsampling;
    network.name = std::string(to_string(activation)) + "/" + to_string(subsampling) + " seed 1";
    const ParamLayout layout = lenet5_layout(network.config);
    network.params.resize(layout.buffer_floats);
    initialise_parameters(layout, network.config, 1, network.params.data());
    result.push_back(std::move(network));
  }
  return result;
}

// One evaluation's per-image results, on the device and brought back.
struct Outputs {
  Buffer<double> loss;
  Buffer<std::int32_t> predicted;
  explicit Outputs(int n)
      : loss(Device::gpu, std::size_t(n)), predicted(Device::gpu, std::size_t(n)) {}
};

struct Scored {
  std::vector<double> loss;
  std::vector<std::int32_t> predicted;
  double accuracy = 0, mean_loss = 0;
};

Scored score(const Outputs& outputs, const Dataset& data) {
  Scored result{outputs.loss.to_vector(), outputs.predicted.to_vector()};
  for (int i = 0; i < data.count; ++i) {
    result.accuracy += result.predicted[std::size_t(i)] == data.labels[std::size_t(i)];
    result.mean_loss += result.loss[std::size_t(i)];
  }
  result.accuracy /= data.count;
  result.mean_loss /= data.count;
  return result;
}

double agreement(const Scored& a, const Scored& b) {
  std::size_t same = 0;
  for (std::size_t i = 0; i < a.predicted.size(); ++i) same += a.predicted[i] == b.predicted[i];
  return double(same) / double(a.predicted.size());
}

// A kernel set under test: its name, its tile (1 for whole-step) and how it evaluates the set.
struct Contender {
  std::string kernels;
  int tile;
  std::function<void(Outputs&)> evaluate;
};

void bench_network(const Network& network, const DeviceDataset& set, const Dataset& data,
                   const Options& options) {
  const ParamLayout layout = lenet5_layout(network.config);
  Buffer<float> params(Device::gpu, network.params.size());
  params.copy_from_host(network.params.data());
  NetConfig fp32 = network.config;
  fp32.kernels = GpuKernels::whole_step;
  fp32.precision = Precision::fp32;
  const cuda::WholeStep whole_step(fp32, layout, 1);
  std::vector<std::unique_ptr<cuda::TensorForward>> tensor;
  for (const int tile : cuda::TensorForward::tiles())
    tensor.push_back(std::make_unique<cuda::TensorForward>(network.config, layout, tile));
  const cuda::ModelGroup group;
  std::vector<Contender> contenders{
      {"whole-step fp32", 1, [&](Outputs& out) {
         whole_step.evaluate(set.images.data(), set.labels.data(), data.count, params.data(), group,
                             out.loss.data(), out.predicted.data(), cudaStreamPerThread);
       }}};
  for (const auto& forward : tensor)
    contenders.push_back({"tensor tf32", forward->tile(), [&, f = forward.get()](Outputs& out) {
                            f->evaluate(set.images.data(), set.labels.data(), data.count,
                                        params.data(), group, out.loss.data(), out.predicted.data(),
                                        cudaStreamPerThread);
                          }});
  Outputs out(data.count);
  std::vector<Scored> scored;
  for (Contender& contender : contenders) {
    contender.evaluate(out);
    cuda::synchronize();
    scored.push_back(score(out, data));
    const Scored& s = scored.back();
    const bool same_as_first_tile =
        scored.size() <= 2 || (s.loss == scored[1].loss && s.predicted == scored[1].predicted);
    std::printf(
        "{\"check\":1,\"network\":\"%s\",\"kernels\":\"%s\",\"tile\":%d,\"images\":%d,"
        "\"accuracy\":%.4f,\"mean_loss\":%.6f,\"agree_with_fp32\":%.5f,"
        "\"same_bits_as_first_tile\":%s}\n",
        network.name.c_str(), contender.kernels.c_str(), contender.tile, data.count,
        100 * s.accuracy, s.mean_loss, agreement(s, scored[0]),
        same_as_first_tile ? "true" : "false");
    if (agreement(s, scored[0]) < 0.95 || !same_as_first_tile)
      throw Error(contender.kernels +
                  " disagrees with fp32 whole-step, or across tiles: not timed");
  }
  for (int round = 0; round < options.rounds; ++round)
    for (Contender& contender : contenders) {
      const double us =
          cuda::median_microseconds(options.repeats, [&] { contender.evaluate(out); });
      std::printf(
          "{\"time\":1,\"network\":\"%s\",\"kernels\":\"%s\",\"tile\":%d,\"images\":%d,"
          "\"round\":%d,\"repeats\":%d,\"median_ms\":%.4f,\"images_per_s\":%.0f}\n",
          network.name.c_str(), contender.kernels.c_str(), contender.tile, data.count, round,
          options.repeats, us / 1000, data.count / (us * 1e-6));
      std::fflush(stdout);
    }
}

int run(int argc, char** argv) {
  const Options options = parse(argc, argv);
  if (cuda::device_count() == 0) {
    std::fprintf(stderr, "skipped: no CUDA device\n");
    return 77;
  }
  const Dataset data =
      options.synthetic > 0
          ? synthetic_images(options.synthetic)
          : load_split(mnist_dataset(), resolve_data_dir(options.data), Split::test);
  DeviceDataset set;
  set.upload(data);
  cudaDeviceProp properties{};
  CUDA_CHECK(cudaGetDeviceProperties(&properties, 0));
  std::printf("{\"setup\":1,\"gpu\":\"%s\",\"images\":%d,\"data\":\"%s\"}\n", properties.name,
              data.count, options.synthetic > 0 ? "synthetic" : "mnist test");
  for (const Network& network : networks(options)) bench_network(network, set, data, options);
  return 0;
}

}  // namespace
}  // namespace lenet5

int main(int argc, char** argv) {
  try {
    return lenet5::run(argc, argv);
  } catch (const lenet5::UsageError& error) {
    std::fprintf(stderr, "lenet5_evaluation_bench: %s\n", error.what());
    return 2;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "lenet5_evaluation_bench: %s\n", error.what());
    return 1;
  }
}
