// lenet5 bench [train settings] [--seeds 1,2,3] [--table | --layers]: JSON lines, or a table, on
// stdout (train/bench.hpp).
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.hpp"

#include "cli/commands.hpp"
#include "cli/train_options.hpp"
#include "train/bench.hpp"

namespace lenet5::cli {
namespace {

// What --help says of the output, field by field (the names are train/bench.cpp's).
constexpr const char* kOutputHelp = R"(Output (stdout; the log goes to stderr):
  JSON lines by default:
    setup    the program, device, GPU and the settings that matter
    epoch    per seed and epoch: seconds (training only), images_per_s, lr, train_loss,
             validation_accuracy, validation_loss (the training images held out by
             --validation), test_accuracy, test_loss (-1: not evaluated or none held out)
    seed     per seed: final_test_accuracy, final_validation_accuracy, chosen_test_accuracy
             (the test accuracy of the epoch the held-out images read best: what
             best.safetensors scores; null with --validation 0); time_to_99_s and time_to_99_2_s
             (training seconds, evaluation excluded, to the end of the first epoch whose test
             accuracy reached 99 % / 99.2 %; null: never reached); median_epoch_s (epochs 2 and
             later); when the run augments, median_epoch_s_no_augment (the same, from a run of
             the same settings with --augment none and at most 3 epochs) and augment_epoch_ratio
             (the first over the second; null otherwise); training_s; on the GPU,
             peak_allocated_mb (lenet5's own device
             buffers, this seed's run only) and device_used_at_end_mb (cudaMemGetInfo after the
             run: every process on the GPU, CUDA context included; null on the CPU)
    summary  the settings, the seeds, final_test_accuracy per seed, mean_ and
             min_final_test_accuracy, median_epoch_s, and over_seeds: {mean, min, max, count} of
             each seed field over the seeds that have a value
  --table: the seed lines as a Markdown table, then rows of their mean, min and max.
  --layers: one JSON line per layer: forward_us, backward_input_us, backward_weights_us.)";

Command add_bench_command(CLI::App& parent) {
  auto* cmd = add_subcommand(
      parent, "bench",
      "time training and report accuracy, time to 99 % and memory per seed (same settings as "
      "train)");
  cmd->footer(kOutputHelp);
  auto settings = std::make_shared<TrainSettings>();
  auto seeds = std::make_shared<std::vector<std::uint64_t>>(std::vector<std::uint64_t>{1});
  bind_train_settings(*cmd, *settings);
  cmd->add_option("--seeds", *seeds, "train once per seed (comma-separated)")
      ->delimiter(',')
      ->configurable(false);
  auto layers = std::make_shared<bool>(false), table = std::make_shared<bool>(false);
  CLI::Option* layers_flag =
      cmd->add_flag("--layers", *layers,
                    "instead of training, time each layer's CUDA kernels at --batch-size "
                    "(needs a GPU)")
          ->configurable(false);
  cmd->add_flag("--table", *table,
                "print a table (a row per seed, then mean, min and max) instead of JSON lines")
      ->configurable(false)
      ->excludes(layers_flag);
  return {cmd, [&parent, cmd, settings, seeds, layers, table]() {
            apply_train_section(parent, *cmd);
            const auto print = [](const std::string& line) {
              std::printf("%s\n", line.c_str());
              std::fflush(stdout);
            };
            if (*layers) {
              run_layer_benchmark(*settings, 50, print);
              return 0;
            }
            if (!*table) {
              run_benchmark(*settings, *seeds, print);
              return 0;
            }
            const BenchReport report = run_benchmark(*settings, *seeds, [](const std::string&) {});
            std::fputs(format_bench_table(report).c_str(), stdout);
            return 0;
          }};
}

const CommandRegistration kBench{40, add_bench_command};

}  // namespace

}  // namespace lenet5::cli
