// Learning-rate schedules: the documented shapes, and refusal of unknown names (the ranges of the
// schedule's settings are tested with the settings, test_settings.cpp).
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "train/schedule.hpp"

namespace lenet5 {
namespace {

Schedule schedule(ScheduleKind kind) {
  Schedule s;
  s.kind = kind;
  s.lr = 0.1;
  s.total_epochs = 10;
  return s;
}

// Rates are computed in double from exact inputs; 1e-12 only absorbs the last bits of pow/cos.
constexpr double kTight = 1e-12;

TEST(Schedule, ConstantStepAndExponential) {
  EXPECT_NEAR(schedule(ScheduleKind::constant).rate(7.3), 0.1, kTight);
  Schedule step = schedule(ScheduleKind::step);
  step.gamma = 0.5;
  step.step_epochs = 3;
  EXPECT_NEAR(step.rate(2.99), 0.1, kTight);
  EXPECT_NEAR(step.rate(3.0), 0.05, kTight);
  EXPECT_NEAR(step.rate(6.5), 0.025, kTight);
  Schedule exponential = schedule(ScheduleKind::exponential);
  exponential.gamma = 0.9;
  EXPECT_NEAR(exponential.rate(0.5), 0.1, kTight);
  EXPECT_NEAR(exponential.rate(2.0), 0.1 * 0.81, kTight);
}

TEST(Schedule, CosineAndOneCycle) {
  Schedule cosine = schedule(ScheduleKind::cosine);
  cosine.min_lr = 0.001;
  EXPECT_NEAR(cosine.rate(0), 0.1, kTight);
  EXPECT_NEAR(cosine.rate(5), 0.001 + 0.099 / 2, kTight);
  EXPECT_NEAR(cosine.rate(10), 0.001, kTight);
  Schedule cycle = schedule(ScheduleKind::one_cycle);
  cycle.one_cycle_start = 0.3;
  EXPECT_NEAR(cycle.rate(0), 0.1 / 25, kTight);
  EXPECT_NEAR(cycle.rate(3), 0.1, kTight);  // the peak at 30 % of training
  EXPECT_LT(cycle.rate(1.5), cycle.rate(2.9));
  EXPECT_LT(cycle.rate(9), cycle.rate(4));
  EXPECT_NEAR(cycle.rate(10), 0.0, kTight);
}

TEST(Schedule, WarmupRisesLinearly) {
  Schedule s = schedule(ScheduleKind::constant);
  s.warmup_epochs = 2;
  EXPECT_NEAR(s.rate(0), 0.0, kTight);
  EXPECT_NEAR(s.rate(0.5), 0.025, kTight);
  EXPECT_NEAR(s.rate(2), 0.1, kTight);
}

// LeCun et al. 1998, section V.A: 0.0005 for the first two passes, 0.0002 for the next three,
// 0.0001 for the next three, 0.00005 for the next four, then 0.00001. Each pass's rate holds for
// the whole pass, and the number of passes does not change it.
TEST(Schedule, Lecun1998GivesThePapersStepPerPass) {
  Schedule paper = schedule(ScheduleKind::lecun1998);
  paper.lr = 0.0005;
  paper.total_epochs = 20;
  const double expected[] = {0.0005,  0.0005,  0.0002,  0.0002,  0.0002,  0.0001,  0.0001,
                             0.0001,  0.00005, 0.00005, 0.00005, 0.00005, 0.00001, 0.00001,
                             0.00001, 0.00001, 0.00001, 0.00001, 0.00001, 0.00001};
  for (int pass = 0; pass < 20; ++pass) {
    EXPECT_NEAR(paper.rate(pass), expected[pass], kTight) << "pass " << pass + 1;
    EXPECT_NEAR(paper.rate(pass + 0.99), expected[pass], kTight) << "late in pass " << pass + 1;
  }
  paper.total_epochs = 3;
  EXPECT_NEAR(paper.rate(2.5), 0.0002, kTight);
  EXPECT_NEAR(paper.rate(40), 0.00001, kTight);  // past the end: the last rate
}

TEST(Schedule, NamesParseAndNonsenseIsRefused) {
  for (const std::string& name : schedule_names())
    EXPECT_EQ(to_string(parse_schedule(name)), name);
  EXPECT_THROW(parse_schedule("linear"), UsageError);
}

}  // namespace
}  // namespace lenet5
