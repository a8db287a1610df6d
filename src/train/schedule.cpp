// The learning-rate schedules' names and their rate as a function of the epochs done.
#include "train/schedule.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace lenet5 {

const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names{"constant", "step",      "exponential",
                                              "cosine",   "one-cycle", "lecun1998"};
  return names;
}

const char* to_string(ScheduleKind kind) { return schedule_names()[int(kind)].c_str(); }

ScheduleKind parse_schedule(const std::string& name) {
  const auto& names = schedule_names();
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return ScheduleKind(i);
  std::string accepted;
  for (const std::string& known : names) accepted += (accepted.empty() ? "" : ", ") + known;
  throw UsageError("unknown schedule '" + name + "' (accepted: " + accepted + ")");
}

double lecun1998_factor(double epochs_done) {
  const double pass = std::floor(epochs_done) + 1;  // counted from 1, as the paper counts them
  if (pass <= 2) return 1;
  if (pass <= 5) return 0.4;
  if (pass <= 8) return 0.2;
  if (pass <= 12) return 0.1;
  return 0.02;
}

double Schedule::rate(double epochs_done) const {
  const double progress = std::clamp(epochs_done / total_epochs, 0.0, 1.0);
  const double cosine_factor = 0.5 * (1 + std::cos(M_PI * progress));
  double value = lr;
  switch (kind) {
    case ScheduleKind::constant: break;
    case ScheduleKind::step: value = lr * std::pow(gamma, std::floor(epochs_done / step_epochs)); break;
    case ScheduleKind::exponential: value = lr * std::pow(gamma, std::floor(epochs_done)); break;
    case ScheduleKind::lecun1998:
      value = lr * lecun1998_factor(epochs_done);
      break;
    case ScheduleKind::cosine: value = min_lr + (lr - min_lr) * cosine_factor; break;
    case ScheduleKind::one_cycle: {
      // Linear rise from lr/25 to lr, then cosine annealing to min_lr (Smith & Topin's shape).
      const double start = lr / 25;
      if (progress < one_cycle_start) return start + (lr - start) * progress / one_cycle_start;
      const double fall = (progress - one_cycle_start) / (1 - one_cycle_start);
      return min_lr + (lr - min_lr) * 0.5 * (1 + std::cos(M_PI * fall));
    }
  }
  if (warmup_epochs > 0 && epochs_done < warmup_epochs) value *= epochs_done / warmup_epochs;
  return value;
}

}  // namespace lenet5
