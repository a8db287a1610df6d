// The options of `lenet5 train` (and `lenet5 bench`, which trains with the same settings): one per
// declared setting (train/settings.hpp), with the declaration's flag, help and default.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "train/settings.hpp"

namespace lenet5::cli {

void bind_train_settings(CLI::App& cmd, TrainSettings& settings);

// The effective settings of a command bound by bind_train_settings, as a config file: what the run
// folder's config.toml and every checkpoint store, and what --resume reads back. --augment dataset
// is written as the kind the data set's table resolves it to.
std::string effective_config(const CLI::App& cmd);

// `lenet5 --config F bench ...` (or sweep) trains with F's [train] section, as `train` would:
// CLI11 reads a TOML section into the subcommand of the same name only, so such a command applies
// the [train] items itself, to every option the command line did not set (flags win, as for
// train). `parent` holds --config; UsageError for a key that is not one of `command`'s settings.
void apply_train_section(const CLI::App& parent, CLI::App& command);

}  // namespace lenet5::cli
