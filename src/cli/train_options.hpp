// The options of `lenet5 train` (and `lenet5 bench`, which trains with the same settings):
// every field of TrainSettings declared once, with its help text and default.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "train/settings.hpp"

namespace lenet5::cli {

void bind_train_settings(CLI::App& cmd, TrainSettings& settings);

// "1 direct (PMPP Fig 16.12), 2 tiled (...), ...": every registered convolution version, as the
// --conv-algo help lists them.
std::string conv_algo_help();

}  // namespace lenet5::cli
