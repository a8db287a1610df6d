// The TOML settings, read the way a checkpoint's stored settings are read back (train --resume)
// and, through the same CLI11 parser, a --config file: then range-checked and written out again
// as the effective config a run folder's config.toml and every checkpoint store.
#include <CLI/CLI.hpp>
#include <sstream>
#include <string>

#include "cli/train_options.hpp"
#include "fuzz_util.hpp"
#include "train/settings.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace lenet5;
  TrainSettings settings;
  CLI::App app;
  app.allow_config_extras(CLI::config_extras_mode::error);
  CLI::App* train = app.add_subcommand("train");
  cli::bind_train_settings(*train, settings);
  std::istringstream text(std::string(reinterpret_cast<const char*>(data), size));
  try {
    app.parse_from_stream(text);
  } catch (const CLI::ParseError&) {
    return 0;  // how CLI11 refuses a file: `lenet5` answers it with exit 2
  }
  fuzz::refusals_allowed([&] {
    for (const SettingDeclaration& declaration : train_setting_declarations())
      declaration.check(settings);
    checkpoint_config(cli::effective_config(*train));
  });
  return 0;
}
