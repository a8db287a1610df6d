// The subcommands. Each file binds its options and calls one library function; main() parses,
// sets up logging and turns exceptions into exit codes.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace lenet5::cli {

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;  // called after parsing; returns the exit code
};

Command add_train_command(CLI::App& parent);
Command add_evaluate_command(CLI::App& parent);
Command add_classify_command(CLI::App& parent);
Command add_bench_command(CLI::App& parent);
Command add_figures_command(CLI::App& parent);

// Also set by the commands: whether stdout must stay machine-readable (logging is then quieter).
extern bool g_json_output;

}  // namespace lenet5::cli
