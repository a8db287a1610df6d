// --config FILE, the settings file every command reads: a path, or the bare name of a config that
// ships with lenet5 (configs/ of the source tree, installed under share/lenet5/configs), so that
// `lenet5 --config fast.toml train` works from any folder.
#pragma once

#include <CLI/CLI.hpp>
#include <filesystem>
#include <vector>

namespace lenet5::cli {

// Adds --config to the program's top level: a bare name (no '/') that is not a file in the working
// folder is looked up in shipped_config_folders(), and the file found must be a small regular one.
CLI::Option* add_config_option(CLI::App& app);

// Where the shipped configs are, in the order searched: <the executable's folder>/../share/lenet5/
// configs (an installed lenet5), then, for the executable of the build tree, the source tree's
// configs/. Only the folders that exist.
std::vector<std::filesystem::path> shipped_config_folders();

}  // namespace lenet5::cli
