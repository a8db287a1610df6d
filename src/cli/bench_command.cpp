// lenet5 bench [train settings] [--seeds 1,2,3]: JSON lines on stdout (train/bench.hpp).
#include <cstdio>

#include "cli/commands.hpp"
#include "cli/train_options.hpp"
#include "train/bench.hpp"

namespace lenet5::cli {

Command add_bench_command(CLI::App& parent) {
  auto* cmd = parent.add_subcommand(
      "bench", "time training epochs and report accuracy, as JSON lines (same settings as train)");
  cmd->fallthrough();
  auto settings = std::make_shared<TrainSettings>();
  auto seeds = std::make_shared<std::vector<std::uint64_t>>(std::vector<std::uint64_t>{1});
  bind_train_settings(*cmd, *settings);
  cmd->add_option("--seeds", *seeds, "train once per seed (comma-separated)")
      ->delimiter(',')
      ->configurable(false);
  auto layers = std::make_shared<bool>(false);
  cmd->add_flag("--layers", *layers,
                "instead of training, time each layer's CUDA kernels at --batch-size")
      ->configurable(false);
  return {cmd, [settings, seeds, layers]() {
            const auto print = [](const std::string& line) {
              std::printf("%s\n", line.c_str());
              std::fflush(stdout);
            };
            if (*layers) {
              run_layer_benchmark(*settings, 50, print);
              return 0;
            }
            run_benchmark(*settings, *seeds, [](const std::string& line) {
              std::printf("%s\n", line.c_str());
              std::fflush(stdout);
            });
            return 0;
          }};
}

}  // namespace lenet5::cli
