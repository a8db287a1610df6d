// The subcommands. Each file binds its options, calls one library function, and registers itself
// in the table below; main() adds the registered ones, parses, sets up logging and turns
// exceptions into exit codes. Adding a subcommand is its file in src/cli/ plus its test.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace lenet5::cli {

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;  // called after parsing; returns the exit code
};

// Adds a subcommand and its options to `parent`.
using AddCommand = Command (*)(CLI::App& parent);

// The subcommand `name` of `parent`, for an AddCommand to bind its options to. Options of the
// top level (--config, -v) may follow its name: they fall through to `parent`.
inline CLI::App* add_subcommand(CLI::App& parent, const std::string& name,
                                const std::string& description) {
  CLI::App* command = parent.add_subcommand(name, description);
  command->fallthrough();
  return command;
}

// --checkpoint F, required: the model that evaluate, classify and serve load. F is a checkpoint
// file, or a run folder (runs/latest), which means its best checkpoint, else its last.
CLI::Option* add_checkpoint_option(CLI::App& command, std::string& file);

// --threads N for evaluate and classify: train's declaration (train/settings.cpp), its default
// and range. The command passes the value to use_cpu_threads (core/cpu_threads.hpp).
CLI::Option* add_threads_option(CLI::App& command, int& threads);

// A subcommand's one registration, at namespace scope in its own file:
//   const CommandRegistration kEvaluate{20, add_evaluate_command};
// `order` places it in `lenet5 --help`, smallest first (the keys go in tens, leaving room between).
// The files of src/cli/ are compiled into the executable itself, not taken from a library, so
// the linker keeps every registration.
class CommandRegistration {
 public:
  CommandRegistration(int order, AddCommand add);
};

// Every registered subcommand, added to `parent` in order.
std::vector<Command> add_commands(CLI::App& parent);

// Also set by the commands: whether stdout must stay machine-readable (logging is then quieter).
extern bool g_json_output;

}  // namespace lenet5::cli
