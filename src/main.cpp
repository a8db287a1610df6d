// lenet5: builds the command line, sets up logging, runs the chosen command, and is the one place
// where errors become messages and exit codes (0 success, 1 runtime failure, 2 usage error).
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>

#include "cli/commands.hpp"
#include "cli/config_file.hpp"
#include "core/error.hpp"
#include "core/version.hpp"

namespace lenet5::cli {
bool g_json_output = false;
}

namespace {

void configure_logging(int verbosity, bool quiet, bool json) {
  auto logger = spdlog::stderr_color_mt("lenet5");
  logger->set_pattern("%^%l%$: %v");
  spdlog::set_default_logger(logger);
  spdlog::level::level_enum level = spdlog::level::info;
  if (verbosity == 1) level = spdlog::level::debug;
  if (verbosity >= 2) level = spdlog::level::trace;
  if (quiet || json) level = spdlog::level::warn;  // keep stdout results alone on the terminal
  // --quiet quiets the terminal only: a run's train.log (a sink the trainer adds) still gets the
  // run's info lines.
  logger->sinks().front()->set_level(level);
  spdlog::set_level(std::min(level, spdlog::level::info));
}

}  // namespace

int main(int argc, char** argv) {
  using namespace lenet5;
  CLI::App app{"lenet5: LeNet-5 on MNIST with hand-written CUDA kernels (the PMPP chapter's network)"};
  app.set_version_flag("--version",
                       std::string("lenet5 ") + LENET5_VERSION + " (commit " + git_commit() + ")");
  app.require_subcommand(1);
  app.allow_config_extras(CLI::config_extras_mode::error);
  cli::add_config_option(app);
  int verbosity = 0;
  bool quiet = false;
  app.add_flag("-v,--verbose", verbosity, "more log output (-vv for even more)");
  app.add_flag("-q,--quiet", quiet, "only warnings and errors on stderr");
  const std::vector<cli::Command> commands = cli::add_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "error: %s\nRun with --help for more information.\n", e.what());
    return 2;
  }
  configure_logging(verbosity, quiet, cli::g_json_output);
  try {
    for (const cli::Command& command : commands)
      if (command.app->parsed()) return command.run();
  } catch (const UsageError& e) {
    spdlog::error("{}", e.what());
    return 2;
  } catch (const Error& e) {
    spdlog::error("{}", e.what());
    return 1;
  } catch (const std::exception& e) {
    spdlog::critical("unexpected failure: {}", e.what());
    return 1;
  }
  return 2;
}
