#include "backend/backend.hpp"
#include "train/bench.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/device.hpp"
#include "core/error.hpp"
#include "core/rng.hpp"
#include "cuda/runtime/buffer.hpp"
#include "cuda/runtime/runtime.hpp"
#include "engine/network.hpp"
#include "io/temporary_folder.hpp"
#include "train/trainer.hpp"

namespace lenet5 {
namespace fs = std::filesystem;
namespace {

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

// The first epoch pays one-time costs (cuBLAS start-up, first-touch allocations, clock ramp-up);
// later epochs show the steady state. With a single epoch there is nothing else to report.
std::vector<double> steady_epoch_seconds(const std::vector<EpochReport>& epochs) {
  std::vector<double> seconds;
  for (std::size_t i = epochs.size() > 1 ? 1 : 0; i < epochs.size(); ++i)
    seconds.push_back(epochs[i].seconds);
  return seconds;
}

nlohmann::json machine_description(const TrainSettings& settings) {
  nlohmann::json json{{"lenet5_version", LENET5_VERSION}, {"commit", LENET5_GIT_COMMIT}};
  const Device device = resolve_device(settings.device);
  json["device"] = to_string(device);
  if (device == Device::gpu) json["gpu"] = cuda::device_description();
  json["batch_size"] = settings.batch_size;
  json["epochs"] = settings.epochs;
  json["schedule"] = settings.schedule;
  json["lr"] = settings.lr;
  json["momentum"] = settings.momentum;
  json["train_images"] = settings.train_limit;
  return json;
}

// Random inputs and output gradients of the right sizes, so that every layer runs on real numbers.
Buffer<float> random_device_buffer(std::size_t count, std::uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<float> host(count);
  for (float& value : host) value = float(2 * rng.uniform() - 1);
  Buffer<float> buffer(Device::gpu, count);
  buffer.copy_from_host(host.data());
  return buffer;
}

}  // namespace

void run_layer_benchmark(const TrainSettings& settings, int repetitions, const JsonLineSink& emit) {
  if (resolve_device(settings.device) != Device::gpu)
    throw UsageError("bench --layers times CUDA kernels: it needs a GPU");
  const int n = settings.batch_size;
  Network<float> network(settings.net_config(), Device::gpu, n);
  network.initialise(settings.seed);
  for (const auto& layer : network.layers()) {
    const Buffer<float> x = random_device_buffer(layer->in().size() * n, 1);
    const Buffer<float> dy = random_device_buffer(layer->out().size() * n, 2);
    Buffer<float> y(Device::gpu, layer->out().size() * n), dx(Device::gpu, layer->in().size() * n);
    const double forward = cuda::median_microseconds(repetitions, [&] {
      layer->forward(x.data(), y.data(), n);
    });
    const double backward_input = cuda::median_microseconds(repetitions, [&] {
      layer->backward_input(x.data(), y.data(), dy.data(), dx.data(), n);
    });
    const double backward_weights = cuda::median_microseconds(repetitions, [&] {
      layer->backward_weights(x.data(), y.data(), dy.data(), n);
    });
    emit(nlohmann::json{{"event", "layer"}, {"layer", layer->name()}, {"batch", n},
                        {"forward_us", forward}, {"backward_input_us", backward_input},
                        {"backward_weights_us", backward_weights}}
             .dump());
  }
}

void run_benchmark(const TrainSettings& base, const std::vector<std::uint64_t>& seeds,
                   const JsonLineSink& emit) {
  nlohmann::json setup = machine_description(base);
  setup["event"] = "setup";
  emit(setup.dump());
  TemporaryFolder scratch("lenet5-bench");
  std::vector<double> accuracies, epoch_medians;
  for (const std::uint64_t seed : seeds) {
    TrainSettings settings = base;
    settings.seed = seed;
    settings.out = (scratch.path() / ("seed-" + std::to_string(seed))).string();
    const TrainOutcome outcome = train(settings, "[train]\n");
    double elapsed = 0, time_to_99 = -1;
    for (const EpochReport& e : outcome.epochs) {
      elapsed += e.seconds;
      if (time_to_99 < 0 && e.test_accuracy >= 0.99) time_to_99 = elapsed;
      emit(nlohmann::json{{"event", "epoch"}, {"seed", seed}, {"epoch", e.epoch},
                          {"seconds", e.seconds}, {"images_per_s", e.images_per_s},
                          {"lr", e.lr}, {"train_loss", e.train_loss},
                          {"test_accuracy", e.test_accuracy}, {"test_loss", e.test_loss}}
               .dump());
    }
    const double steady = median(steady_epoch_seconds(outcome.epochs));
    const double final_accuracy = outcome.epochs.empty() ? -1 : outcome.epochs.back().test_accuracy;
    accuracies.push_back(final_accuracy);
    epoch_medians.push_back(steady);
    nlohmann::json seed_line{{"event", "seed"}, {"seed", seed}, {"median_epoch_s", steady},
                             {"final_test_accuracy", final_accuracy},
                             {"training_s", elapsed}};
    if (resolve_device(settings.device, false) == Device::gpu) {
      // Peak of lenet5's own device buffers (data set, network, scratch; comparable to PyTorch's
      // max_memory_allocated), and what is still in use on the device once the run's buffers are
      // freed (the CUDA context, cuBLAS and the graph's own memory).
      seed_line["peak_allocated_mb"] = double(cuda::peak_allocated_bytes()) / (1 << 20);
      seed_line["device_used_at_end_mb"] = double(cuda::device_used_bytes()) / (1 << 20);
    }
    seed_line["time_to_99_s"] = time_to_99 < 0 ? nlohmann::json(nullptr) : nlohmann::json(time_to_99);
    emit(seed_line.dump());
  }
  double mean = 0;
  for (double a : accuracies) mean += a / double(accuracies.size());
  nlohmann::json summary = machine_description(base);
  summary["event"] = "summary";
  summary["seeds"] = seeds;
  summary["final_test_accuracy"] = accuracies;
  summary["mean_final_test_accuracy"] = mean;
  summary["min_final_test_accuracy"] = *std::min_element(accuracies.begin(), accuracies.end());
  summary["median_epoch_s"] = median(epoch_medians);
  emit(summary.dump());
}

}  // namespace lenet5
