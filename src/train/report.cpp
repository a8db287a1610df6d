// The shared number formats: percentages and rates.
#include "train/report.hpp"

#include <spdlog/fmt/fmt.h>

namespace lenet5 {

std::string format_percent(std::int64_t correct, std::int64_t count) {
  return fmt::format("{:.2f}", count ? 100.0 * double(correct) / double(count) : 0.0);
}

std::string format_rate(double per_second) {
  if (per_second >= 1e6) return fmt::format("{:.2f}M", per_second / 1e6);
  if (per_second >= 1e3) return fmt::format("{:.0f}k", per_second / 1e3);
  return fmt::format("{:.0f}", per_second);
}

}  // namespace lenet5
