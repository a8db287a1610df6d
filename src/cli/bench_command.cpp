// lenet5 bench [train settings] [--seeds 1,2,3]: JSON lines on stdout (train/bench.hpp).
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.hpp"

#include "cli/commands.hpp"
#include "cli/train_options.hpp"
#include "train/bench.hpp"

namespace lenet5::cli {
namespace {

// `lenet5 --config F bench ...` trains with F's [train] section, as `train` would: CLI11 reads a
// TOML section into the subcommand of the same name only, so bench applies the [train] items
// itself, to every option the command line did not set (flags win, as for train).
void apply_train_section(const CLI::App& parent, CLI::App& bench) {
  const CLI::Option* config = parent.get_option_no_throw("--config");
  if (!config || config->count() == 0) return;
  const std::string path = config->as<std::string>();
  for (const CLI::ConfigItem& item : CLI::ConfigTOML().from_file(path)) {
    if (item.parents != std::vector<std::string>{"train"} || item.name == "++" || item.name == "--")
      continue;  // other sections, and CLI11's section markers
    CLI::Option* option = bench.get_option_no_throw("--" + item.name);
    if (!option || !option->get_configurable())
      throw UsageError(path + ": [train] key '" + item.name + "' is not a bench setting");
    if (option->count() > 0) continue;
    option->add_result(item.inputs);
    option->run_callback();
  }
}

Command add_bench_command(CLI::App& parent) {
  auto* cmd = add_subcommand(
      parent, "bench",
      "time training epochs and report accuracy, as JSON lines (same settings as train)");
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
  return {cmd, [&parent, cmd, settings, seeds, layers]() {
            apply_train_section(parent, *cmd);
            const auto print = [](const std::string& line) {
              std::printf("%s\n", line.c_str());
              std::fflush(stdout);
            };
            if (*layers) {
              run_layer_benchmark(*settings, 50, print);
              return 0;
            }
            run_benchmark(*settings, *seeds, print);
            return 0;
          }};
}

const CommandRegistration kBench{40, add_bench_command};

}  // namespace

}  // namespace lenet5::cli
