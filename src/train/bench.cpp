// `lenet5 bench`: runs trained per seed in a temporary folder, and their epochs, seeds and summary
// printed as JSON lines or a table.
#include "train/bench.hpp"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "backend/backend.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"
#include "core/rng.hpp"
#include "core/version.hpp"
#include "cuda/runtime/buffer.hpp"
#include "cuda/runtime/runtime.hpp"
#include "engine/network.hpp"
#include "io/temporary_folder.hpp"

namespace lenet5 {
namespace fs = std::filesystem;
namespace {

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

bool augments(const TrainSettings& settings) {
  return settings.augment_kind() != "none";
}

nlohmann::json or_null(const std::optional<double>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

nlohmann::json machine_description(const TrainSettings& settings, Device device) {
  nlohmann::json json{{"lenet5_version", LENET5_VERSION}, {"commit", git_commit()}};
  json["device"] = to_string(device);
  if (device == Device::gpu) json["gpu"] = cuda::device_description();
  json["batch_size"] = settings.batch_size;
  json["epochs"] = settings.epochs;
  json["schedule"] = settings.schedule;
  json["lr"] = settings.lr;
  json["momentum"] = settings.momentum;
  json["weight_decay"] = settings.weight_decay;
  json["kernels"] = settings.kernels;
  json["precision"] = settings.precision;
  json["augment"] = settings.augment_kind();
  json["parameters"] = lenet5_layout(settings.net_config()).trainable_count;
  json["train_images"] = settings.train_limit;
  json["validation_images"] = settings.validation;  // held out first: an epoch trains the rest
  return json;
}

// Which training images an epoch trained on: those not held out (--validation; a setup from before
// the field existed says nothing of it), or the first --train-limit of them.
std::string trained_images(int limit, int held_out) {
  const std::string held = std::to_string(held_out);
  if (limit == 0)
    return held_out == 0 ? "all training images"
                         : "the training images less the " + held + " held out";
  const std::string first = "the first " + std::to_string(limit) + " training images";
  return held_out == 0 ? first : first + " of those not held out (" + held + ")";
}

// The table's first line: what ran, where, with which settings.
std::string heading(const nlohmann::json& machine) {
  const bool gpu = machine.contains("gpu");  // the kernel set matters on the GPU only
  // fp32, the default, goes without saying (and keeps the headings of earlier tables).
  const std::string precision = machine.value("precision", std::string("fp32"));
  const std::string where = gpu ? "the GPU, " + machine["gpu"].get<std::string>() + ", kernels " +
                                      machine["kernels"].get<std::string>() +
                                      (precision == "fp32" ? "" : " in " + precision)
                                : "the " + machine["device"].get<std::string>();
  return fmt::format(
      "lenet5 {} ({}) on {}: batch {}, {} epoch{}, {} lr {}, momentum {}, weight decay {}, "
      "augment {}, {}, {} trainable parameters",
      machine["lenet5_version"].get<std::string>(), machine["commit"].get<std::string>(), where,
      int(machine["batch_size"]), int(machine["epochs"]), int(machine["epochs"]) == 1 ? "" : "s",
      machine["schedule"].get<std::string>(), double(machine["lr"]), double(machine["momentum"]),
      double(machine["weight_decay"]), machine["augment"].get<std::string>(),
      trained_images(machine["train_images"], machine.value("validation_images", 0)),
      machine.value("parameters", std::size_t(0)));
}

nlohmann::json epoch_json(std::uint64_t seed, const EpochReport& e) {
  return {{"event", "epoch"},
          {"seed", seed},
          {"epoch", e.epoch},
          {"seconds", e.seconds},
          {"images_per_s", e.images_per_s},
          {"lr", e.lr},
          {"train_loss", e.train_loss},
          {"validation_accuracy", e.validation_accuracy},
          {"validation_loss", e.validation_loss},
          {"test_accuracy", e.test_accuracy},
          {"test_loss", e.test_loss}};
}

nlohmann::json seed_json(const SeedBench& s) {
  return {{"event", "seed"},
          {"seed", s.seed},
          {"final_test_accuracy", or_null(s.final_accuracy)},
          {"final_validation_accuracy", or_null(s.final_validation_accuracy)},
          {"chosen_test_accuracy", or_null(s.chosen_accuracy)},
          {"time_to_99_s", or_null(s.time_to_99_s)},
          {"time_to_99_2_s", or_null(s.time_to_99_2_s)},
          {"median_epoch_s", s.median_epoch_s},
          {"median_epoch_s_no_augment", or_null(s.median_epoch_s_no_augment)},
          {"augment_epoch_ratio", or_null(s.augment_epoch_ratio())},
          {"training_s", s.training_s},
          {"peak_allocated_mb", or_null(s.peak_allocated_mb)},
          {"device_used_at_end_mb", or_null(s.device_used_at_end_mb)}};
}

// One field of every seed, for spread_of.
template <class Field>
std::vector<std::optional<double>> column(const std::vector<SeedBench>& seeds, Field field) {
  std::vector<std::optional<double>> values;
  for (const SeedBench& s : seeds) values.push_back(field(s));
  return values;
}

// Each per-seed measure, named as in the seed lines, read from a SeedBench.
struct Measure {
  const char* name;
  std::optional<double> (*read)(const SeedBench&);
};
const std::vector<Measure>& measures() {
  static const std::vector<Measure> all{
      {"final_test_accuracy", [](const SeedBench& s) { return s.final_accuracy; }},
      {"final_validation_accuracy", [](const SeedBench& s) { return s.final_validation_accuracy; }},
      {"chosen_test_accuracy", [](const SeedBench& s) { return s.chosen_accuracy; }},
      {"time_to_99_s", [](const SeedBench& s) { return s.time_to_99_s; }},
      {"time_to_99_2_s", [](const SeedBench& s) { return s.time_to_99_2_s; }},
      {"median_epoch_s",
       [](const SeedBench& s) { return std::optional<double>(s.median_epoch_s); }},
      {"median_epoch_s_no_augment", [](const SeedBench& s) { return s.median_epoch_s_no_augment; }},
      {"augment_epoch_ratio", [](const SeedBench& s) { return s.augment_epoch_ratio(); }},
      {"training_s", [](const SeedBench& s) { return std::optional<double>(s.training_s); }},
      {"peak_allocated_mb", [](const SeedBench& s) { return s.peak_allocated_mb; }},
      {"device_used_at_end_mb", [](const SeedBench& s) { return s.device_used_at_end_mb; }},
  };
  return all;
}

nlohmann::json spread_json(const std::optional<Spread>& spread) {
  if (!spread) return nullptr;
  return {
      {"mean", spread->mean}, {"min", spread->min}, {"max", spread->max}, {"count", spread->count}};
}

// The last line: the settings again, then every measure's mean, min and max over the seeds. The
// first keys are the ones earlier versions wrote, kept for the scripts that read them.
nlohmann::json summary_json(const nlohmann::json& machine, const std::vector<std::uint64_t>& seeds,
                            const std::vector<SeedBench>& results) {
  nlohmann::json summary = machine;
  summary["event"] = "summary";
  summary["seeds"] = seeds;
  nlohmann::json accuracies = nlohmann::json::array(), medians = nlohmann::json::array();
  std::vector<double> epoch_medians;
  for (const SeedBench& s : results) {
    accuracies.push_back(or_null(s.final_accuracy));
    epoch_medians.push_back(s.median_epoch_s);
  }
  const std::optional<Spread> final_accuracy =
      spread_of(column(results, [](const SeedBench& s) { return s.final_accuracy; }));
  summary["final_test_accuracy"] = accuracies;
  summary["mean_final_test_accuracy"] =
      final_accuracy ? nlohmann::json(final_accuracy->mean) : nullptr;
  summary["min_final_test_accuracy"] =
      final_accuracy ? nlohmann::json(final_accuracy->min) : nullptr;
  summary["median_epoch_s"] = median(epoch_medians);
  nlohmann::json over_seeds;
  for (const Measure& m : measures())
    over_seeds[m.name] = spread_json(spread_of(column(results, m.read)));
  summary["over_seeds"] = over_seeds;
  return summary;
}

// The median epoch of a short run with the same settings and --augment none; its evaluations
// (test set and training set) are off (not timed anyway) and it writes into its own folder.
double median_epoch_without_augmentation(const TrainSettings& augmented, const fs::path& out) {
  TrainSettings plain = augmented;
  plain.augment = "none";
  plain.epochs = std::min(augmented.epochs, kNoAugmentEpochs);
  plain.evaluate_every_epoch = false;
  plain.evaluate_training_set = false;
  plain.out = out.string();
  spdlog::info("seed {}: {} epochs with --augment none, to compare the epoch time", plain.seed,
               plain.epochs);
  return median_steady_epoch_seconds(train(plain, "[train]\n").epochs);
}

SeedBench bench_seed(const TrainSettings& base, std::uint64_t seed, const TemporaryFolder& scratch,
                     bool on_gpu, const JsonLineSink& emit) {
  TrainSettings settings = base;
  settings.seed = seed;
  settings.out = (scratch / ("seed-" + std::to_string(seed))).string();
  // The peak counter is the process's; restarted here, it holds this run's peak alone.
  if (on_gpu) cuda::reset_peak_allocated_bytes();
  const TrainOutcome outcome = train(settings, "[train]\n");
  for (const EpochReport& e : outcome.epochs) emit(epoch_json(seed, e).dump());
  SeedBench result = summarise_epochs(seed, outcome.epochs);
  if (on_gpu) {  // before the comparison run, whose buffers are not this run's
    result.peak_allocated_mb = double(cuda::peak_allocated_bytes()) / (1 << 20);
    result.device_used_at_end_mb = double(cuda::device_used_bytes()) / (1 << 20);
  }
  if (augments(settings))
    result.median_epoch_s_no_augment = median_epoch_without_augmentation(
        settings, scratch / ("seed-" + std::to_string(seed) + "-no-augment"));
  return result;
}

// ---- the table ---------------------------------------------------------------------------------
const Measure& measure(const std::string& name) {
  for (const Measure& m : measures())
    if (name == m.name) return m;
  throw Error("bench: no measure named " + name);
}

struct TableColumn {
  std::string header;
  const Measure& measure;
  std::string (*format)(double);
};

std::string percent(double fraction) {
  return fmt::format("{:.2f}", 100 * fraction);
}
std::string seconds(double value) {
  return fmt::format("{:.3f}", value);
}
std::string milliseconds(double value) {
  return fmt::format("{:.1f}", 1000 * value);
}
std::string ratio(double value) {
  return fmt::format("{:.2f}x", value);
}
std::string megabytes(double value) {
  return fmt::format("{:.1f}", value);
}

// The columns that apply: the epoch without augmentation only for runs that augment, memory only
// on the GPU.
std::vector<TableColumn> table_columns(const BenchReport& report) {
  std::vector<TableColumn> columns{{"final %", measure("final_test_accuracy"), percent},
                                   {"validation %", measure("final_validation_accuracy"), percent},
                                   {"chosen %", measure("chosen_test_accuracy"), percent},
                                   {"to 99 % (s)", measure("time_to_99_s"), seconds},
                                   {"to 99.2 % (s)", measure("time_to_99_2_s"), seconds},
                                   {"epoch (ms)", measure("median_epoch_s"), milliseconds}};
  if (report.augments) {
    columns.push_back(
        {"no-augment epoch (ms)", measure("median_epoch_s_no_augment"), milliseconds});
    columns.push_back({"epoch / no-augment", measure("augment_epoch_ratio"), ratio});
  }
  columns.push_back({"training (s)", measure("training_s"), seconds});
  if (report.on_gpu) {
    columns.push_back({"peak (MB)", measure("peak_allocated_mb"), megabytes});
    columns.push_back({"device at end (MB)", measure("device_used_at_end_mb"), megabytes});
  }
  return columns;
}

using Rows = std::vector<std::vector<std::string>>;

// Mean, min and max of each column over the seeds that have a value; a mean over fewer than all
// seeds says over how many ("0.412 (3/5)"), "-" where no seed has one.
Rows summary_rows(const std::vector<TableColumn>& columns, const std::vector<SeedBench>& seeds) {
  Rows rows{{"mean"}, {"min"}, {"max"}};
  for (const TableColumn& c : columns) {
    const std::optional<Spread> s = spread_of(column(seeds, c.measure.read));
    const std::string partial =
        s && s->count < int(seeds.size()) ? fmt::format(" ({}/{})", s->count, seeds.size()) : "";
    rows[0].push_back(s ? c.format(s->mean) + partial : "-");
    rows[1].push_back(s ? c.format(s->min) : "-");
    rows[2].push_back(s ? c.format(s->max) : "-");
  }
  return rows;
}

// Markdown, padded so that it reads as a table in a terminal too; numbers aligned right.
std::string markdown_table(const Rows& rows) {
  std::vector<std::size_t> width(rows.front().size(), 3);
  for (const auto& row : rows)
    for (std::size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  const auto line = [&](const std::vector<std::string>& cells) {
    std::string out = "|";
    for (std::size_t i = 0; i < cells.size(); ++i)
      out += fmt::format(" {:>{}} |", cells[i], width[i]);
    return out + "\n";
  };
  std::vector<std::string> rule;
  for (const std::size_t w : width) rule.push_back(std::string(w - 1, '-') + ":");
  std::string out = line(rows.front()) + line(rule);
  for (std::size_t r = 1; r < rows.size(); ++r) out += line(rows[r]);
  return out;
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

std::optional<double> SeedBench::augment_epoch_ratio() const {
  if (!median_epoch_s_no_augment || *median_epoch_s_no_augment <= 0) return std::nullopt;
  return median_epoch_s / *median_epoch_s_no_augment;
}

std::optional<double> time_to_accuracy(const std::vector<EpochReport>& epochs, double target) {
  double elapsed = 0;
  for (const EpochReport& e : epochs) {
    elapsed += e.seconds;
    if (e.test_accuracy >= target) return elapsed;  // -1 (not evaluated) never reaches a target
  }
  return std::nullopt;
}

double median_steady_epoch_seconds(const std::vector<EpochReport>& epochs) {
  std::vector<double> seconds;
  for (std::size_t i = epochs.size() > 1 ? 1 : 0; i < epochs.size(); ++i)
    seconds.push_back(epochs[i].seconds);
  return median(seconds);
}

SeedBench summarise_epochs(std::uint64_t seed, const std::vector<EpochReport>& epochs) {
  SeedBench s;
  s.seed = seed;
  double best_validation = -1;
  for (const EpochReport& e : epochs) {
    s.training_s += e.seconds;
    // As the trainer chooses best.safetensors: the first epoch of the highest validation accuracy.
    if (e.validation_accuracy > best_validation) {
      best_validation = e.validation_accuracy;
      if (e.test_accuracy >= 0) s.chosen_accuracy = e.test_accuracy;
    }
  }
  if (!epochs.empty() && epochs.back().test_accuracy >= 0)  // -1: not evaluated
    s.final_accuracy = epochs.back().test_accuracy;
  if (!epochs.empty() && epochs.back().validation_accuracy >= 0)
    s.final_validation_accuracy = epochs.back().validation_accuracy;
  s.time_to_99_s = time_to_accuracy(epochs, 0.99);
  s.time_to_99_2_s = time_to_accuracy(epochs, 0.992);
  s.median_epoch_s = median_steady_epoch_seconds(epochs);
  return s;
}

std::optional<Spread> spread_of(const std::vector<std::optional<double>>& values) {
  std::optional<Spread> spread;
  double sum = 0;
  for (const std::optional<double>& v : values) {
    if (!v) continue;
    if (!spread) spread = Spread{0, *v, *v, 0};
    spread->min = std::min(spread->min, *v);
    spread->max = std::max(spread->max, *v);
    sum += *v;
    ++spread->count;
  }
  if (spread) spread->mean = sum / spread->count;
  return spread;
}

BenchReport run_benchmark(const TrainSettings& base, const std::vector<std::uint64_t>& seeds,
                          const JsonLineSink& emit) {
  const Device device = resolve_device(base.device);
  // A run the device refuses is refused before the setup line, as train refuses it before it
  // reads any data.
  check_runs_on(device, base.net_config());
  const nlohmann::json machine = machine_description(base, device);
  nlohmann::json setup = machine;
  setup["event"] = "setup";
  emit(setup.dump());
  if (!base.evaluate_every_epoch)
    spdlog::warn("bench with --evaluate false: no test accuracy, so no time to 99 % either");
  BenchReport report;
  report.heading = heading(machine);
  report.augments = augments(base);
  report.on_gpu = device == Device::gpu;
  TemporaryFolder scratch("lenet5-bench");
  for (const std::uint64_t seed : seeds) {
    report.seeds.push_back(bench_seed(base, seed, scratch, report.on_gpu, emit));
    emit(seed_json(report.seeds.back()).dump());
  }
  emit(summary_json(machine, seeds, report.seeds).dump());
  return report;
}

std::string format_bench_table(const BenchReport& report) {
  const std::vector<TableColumn> columns = table_columns(report);
  Rows rows{{"seed"}};
  for (const TableColumn& c : columns) rows[0].push_back(c.header);
  for (const SeedBench& s : report.seeds) {
    rows.push_back({std::to_string(s.seed)});
    for (const TableColumn& c : columns) {
      const std::optional<double> value = c.measure.read(s);
      rows.back().push_back(value ? c.format(*value) : "-");
    }
  }
  if (!report.seeds.empty())
    for (auto& row : summary_rows(columns, report.seeds)) rows.push_back(std::move(row));
  std::string notes =
      "to 99 %, to 99.2 %: training seconds (evaluation excluded) to the end of the first epoch "
      "whose test accuracy reached it; \"-\": never reached. epoch: the median epoch, epochs 2 "
      "and later.";
  if (report.augments)
    notes += fmt::format(
        " no-augment epoch: the same, from a run of the same settings with --augment "
        "none ({} epochs, or fewer if the run has fewer).",
        kNoAugmentEpochs);
  if (report.on_gpu)
    notes +=
        " peak: lenet5's own device buffers during that seed's run. device at end: the "
        "GPU's memory in use after it (cudaMemGetInfo: every process, CUDA context "
        "included).";
  return report.heading + "\n\n" + markdown_table(rows) + "\n" + notes + "\n";
}

void run_layer_benchmark(const TrainSettings& settings, int repetitions, const JsonLineSink& emit) {
  if (!cuda::gpu_available_in_build())
    throw UsageError(std::string("bench --layers times CUDA kernels: ") + cuda::kBuiltWithoutGpu);
  if (resolve_device(settings.device) != Device::gpu)
    throw UsageError("bench --layers times CUDA kernels: it needs a GPU");
  // The layer kernels compute in fp32 only: timing them under tf32's name would mislead.
  if (settings.net_config().precision != Precision::fp32)
    throw UsageError(
        "bench --layers times the layer-by-layer kernels, which compute in fp32 only: drop "
        "--precision " +
        settings.precision +
        " (the whole-step and tensor-core kernels' steps in it are timed by bench without "
        "--layers)");
  const int n = settings.batch_size;
  Network<float> network(settings.net_config(), Device::gpu, n);
  network.initialise(settings.seed);
  for (const auto& layer : network.layers()) {
    const Buffer<float> x = random_device_buffer(layer->in().size() * n, 1);
    const Buffer<float> dy = random_device_buffer(layer->out().size() * n, 2);
    Buffer<float> y(Device::gpu, layer->out().size() * n), dx(Device::gpu, layer->in().size() * n);
    const double forward =
        cuda::median_microseconds(repetitions, [&] { layer->forward(x.data(), y.data(), n); });
    const double backward_input = cuda::median_microseconds(
        repetitions, [&] { layer->backward_input(x.data(), y.data(), dy.data(), dx.data(), n); });
    const double backward_weights = cuda::median_microseconds(
        repetitions, [&] { layer->backward_weights(x.data(), y.data(), dy.data(), n); });
    emit(nlohmann::json{{"event", "layer"},
                        {"layer", layer->name()},
                        {"batch", n},
                        {"forward_us", forward},
                        {"backward_input_us", backward_input},
                        {"backward_weights_us", backward_weights}}
             .dump());
  }
}

}  // namespace lenet5
