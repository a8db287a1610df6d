// Number formats shared by everything that prints or records results, so that `evaluate` prints
// exactly the accuracy that `train` wrote into metrics.csv for the same weights.
#pragma once

#include <cstdint>
#include <string>

namespace lenet5 {

// 100 * correct / count with two decimals: "98.91".
std::string format_percent(std::int64_t correct, std::int64_t count);
// "146k", "2.1M": images per second in a log line.
std::string format_rate(double per_second);

}  // namespace lenet5
