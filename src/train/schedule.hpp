// Learning-rate schedules. The rate is a pure function of the training position (fractional
// epochs done), so a resumed run recomputes exactly the rate an uninterrupted run would use.
#pragma once

#include <string>
#include <vector>

namespace lenet5 {

enum class ScheduleKind { constant, step, exponential, cosine, one_cycle, lecun1998 };

// constant, step, exponential, cosine, one-cycle, lecun1998
const std::vector<std::string>& schedule_names();
ScheduleKind parse_schedule(const std::string& name);  // UsageError on an unknown name
const char* to_string(ScheduleKind kind);

struct Schedule {
  ScheduleKind kind = ScheduleKind::constant;
  double lr = 0.01;            // base (peak for one-cycle) learning rate
  double gamma = 0.1;          // step: factor every step_epochs; exponential: factor per epoch
  double step_epochs = 1;      // step: epochs between decays
  double min_lr = 0;           // cosine and one-cycle: final rate
  double warmup_epochs = 0;    // linear warm-up from 0 (any schedule but one-cycle, which has its own)
  double one_cycle_start = 0.25;  // one-cycle: fraction of training spent rising from lr/25 to lr
  int total_epochs = 1;

  // The accepted values are the settings' (train/settings.cpp declares each one's range), and
  // TrainSettings::schedule_config() checks them before it builds a schedule.
  // Rate for the step that starts at `epochs_done` (e.g. 2.5 = halfway through the third epoch).
  double rate(double epochs_done) const;
};

// lecun1998: LeCun et al. 1998's global step per pass, as a factor of lr: 1 for passes 1-2, 0.4 for
// 3-5, 0.2 for 6-8, 0.1 for 9-12 and 0.02 from 13 on, so that lr = 0.0005 gives the paper's
// 0.0005, 0.0002, 0.0001, 0.00005 and 0.00001. The factor of the pass that `epochs_done` is in.
double lecun1998_factor(double epochs_done);

}  // namespace lenet5
