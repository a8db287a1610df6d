// `lenet5 bench`: training throughput and accuracy as JSON lines, one per epoch and one summary
// per seed, then one over all seeds. It trains exactly as `lenet5 train` does (same loop, same
// timing: the epoch's steps up to its one synchronisation, evaluation excluded), into a
// temporary run folder that is removed afterwards.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "train/settings.hpp"

namespace lenet5 {

// Called with each JSON line as it is produced.
using JsonLineSink = std::function<void(const std::string&)>;

void run_benchmark(const TrainSettings& settings, const std::vector<std::uint64_t>& seeds,
                   const JsonLineSink& emit);

// Per-layer GPU timing at the settings' batch size: forward, backward_input and backward_weights
// of every layer, one JSON line each (median of `repetitions` runs timed with CUDA events).
void run_layer_benchmark(const TrainSettings& settings, int repetitions, const JsonLineSink& emit);

}  // namespace lenet5
