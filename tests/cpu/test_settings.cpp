// The declared [train] settings (train/settings.cpp): every declaration complete and its default
// accepted, every range enforced with an error that names the flag, the settings that depend on
// each other checked together.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.hpp"
#include "settings_test_util.hpp"
#include "test_util.hpp"
#include "train/settings.hpp"

namespace lenet5 {
namespace {

using testing::set_number;
using testing::values_outside;

// The message of the UsageError that validate() throws; empty when it throws none.
std::string refusal(const TrainSettings& settings) {
  try {
    settings.validate();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(TrainSettings, EveryDeclarationHasAFlagHelpAndADefaultItAccepts) {
  const TrainSettings defaults;
  EXPECT_EQ(refusal(defaults), "");
  std::set<std::string> flags;
  std::set<std::size_t> fields;
  for (const SettingDeclaration& d : train_setting_declarations()) {
    EXPECT_EQ(d.flag.rfind("--", 0), 0u) << d.flag;
    EXPECT_TRUE(flags.insert(d.flag).second) << d.flag << " is declared twice";
    EXPECT_FALSE(d.help.empty()) << d.flag;
    EXPECT_EQ(d.field.index(), d.default_value.index()) << d.flag << ": default of another type";
    EXPECT_NO_THROW(d.check(defaults)) << d.flag;
    if (!d.names.empty()) {
      const std::string value = defaults.*std::get<std::string TrainSettings::*>(d.field);
      EXPECT_NE(std::find(d.names.begin(), d.names.end(), value), d.names.end()) << d.flag;
    }
  }
  // Two declarations of one field would let the later default overwrite the earlier silently.
  const auto& all = train_setting_declarations();
  for (std::size_t i = 0; i < all.size(); ++i)
    for (std::size_t j = i + 1; j < all.size(); ++j)
      EXPECT_FALSE(all[i].field == all[j].field) << all[i].flag << " and " << all[j].flag;
}

// The settings a name needs besides itself, where the defaults do not go with it: SDLM takes no
// momentum (the default has 0.9) and does not run in the whole-step kernels (the default set);
// test_cli.cpp checks that it is refused without them.
void add_companions(const SettingDeclaration& d, const std::string& name, TrainSettings& settings) {
  if (d.flag == "--optimizer" && name == "sdlm") {
    settings.momentum = 0;
    settings.kernels = "fast";
  }
  // bf16 is the tensor-core set's alone (PrecisionBf16IsTheTensorCoreSetsOnAGpu).
  if (d.flag == "--precision" && name == "bf16") settings.kernels = "tensor";
}

TEST(TrainSettings, EveryAcceptedNameIsAccepted) {
  for (const SettingDeclaration& d : train_setting_declarations())
    for (const std::string& name : d.names) {
      TrainSettings settings;
      // The default kernel set, whole-step, refuses --output rbf (test_rbf_output.cpp) and
      // --conv-units squashed (test_conv_units.cpp).
      if (d.flag == "--output" || d.flag == "--conv-units") settings.kernels = "fast";
      settings.*std::get<std::string TrainSettings::*>(d.field) = name;
      // The default kernel set (whole-step) has no trainable subsampling (tested in test_cli).
      if (d.flag == "--subsampling" && name == "trainable") settings.kernels = "fast";
      add_companions(d, name, settings);
      EXPECT_EQ(refusal(settings), "") << d.flag << " " << name;
    }
}

TEST(TrainSettings, EachOutOfRangeValueIsRefusedNamingTheFlagAndItsRange) {
  int ranged = 0;
  for (const SettingDeclaration& d : train_setting_declarations()) {
    if (!d.range) continue;
    ++ranged;
    const std::vector<double> outside = values_outside(*d.range);
    EXPECT_FALSE(outside.empty()) << d.flag << ": a range without an end refuses nothing";
    for (double value : outside) {
      TrainSettings settings;
      set_number(settings, d, value);
      const std::string message = refusal(settings);
      EXPECT_NE(message.find(d.flag + " must be " + d.range->text()), std::string::npos)
          << d.flag << " " << value << ": \"" << message << "\"";
    }
  }
  EXPECT_GE(ranged, 10);  // train-limit, epochs, batch-size, lr, ... weight-decay
}

TEST(TrainSettings, NotANumberIsOutOfEveryRange) {
  TrainSettings settings;
  settings.lr = std::nan("");
  EXPECT_NE(refusal(settings).find("--lr must be above 0"), std::string::npos) << refusal(settings);
}

TEST(TrainSettings, RangesReadAsTheyAreWritten) {
  EXPECT_EQ(between(1, 60000).text(), "between 1 and 60000");
  EXPECT_EQ(at_least(0).below(1).text(), "at least 0 and below 1");
  EXPECT_EQ(above(0).below(1).text(), "above 0 and below 1");
  EXPECT_EQ(above(0).text(), "above 0");
  EXPECT_EQ(at_least(0.5).at_most(2).text(), "between 0.5 and 2");
  EXPECT_EQ(above(0.5).at_most(2).text(), "above 0.5 and at most 2");
  EXPECT_EQ(SettingRange().at_most(2).text(), "at most 2");
  EXPECT_TRUE(at_least(0).below(1).contains(0));
  EXPECT_FALSE(at_least(0).below(1).contains(1));
  EXPECT_FALSE(above(0).contains(0));
}

TEST(TrainSettings, SettingsThatDependOnEachOtherAreCheckedTogether) {
  TrainSettings settings;
  settings.min_lr = 0.5;  // above the default --lr 0.05
  EXPECT_NE(refusal(settings).find("--min-lr 0.5 is above --lr 0.05"), std::string::npos)
      << refusal(settings);
  settings = TrainSettings();
  settings.nesterov = true;
  settings.momentum = 0;
  EXPECT_NE(refusal(settings).find("--momentum above 0"), std::string::npos) << refusal(settings);
  settings = TrainSettings();
  settings.c3_table = "sparse";
  EXPECT_NE(refusal(settings).find("sparse"), std::string::npos) << refusal(settings);
}

// schedule_config() and sgd() hand their values to the trainer and the engines: both refuse what
// validate() refuses, so that neither can be built from an unchecked value.
TEST(TrainSettings, ScheduleAndSgdAreBuiltFromCheckedValuesOnly) {
  TrainSettings settings;
  settings.momentum = 1;
  EXPECT_THROW(settings.sgd(), UsageError);
  EXPECT_THROW(settings.schedule_config(), UsageError);
  settings = TrainSettings();
  const SgdSettings sgd = settings.sgd();
  EXPECT_EQ(sgd.momentum, 0.9);
  EXPECT_EQ(sgd.weight_decay, 5e-4);
  const Schedule schedule = settings.schedule_config();
  EXPECT_EQ(schedule.kind, ScheduleKind::cosine);
  EXPECT_EQ(schedule.lr, 0.05);
  EXPECT_EQ(schedule.total_epochs, 20);
}

// --input-scaling dataset (the default) is the data set's own statistics; a name of the table is
// that row whatever the data set.
TEST(TrainSettings, InputScalingDatasetIsTheDataSetsOwn) {
  TrainSettings settings;
  EXPECT_EQ(settings.input_scaling, "dataset");
  EXPECT_EQ(settings.net_config().input_scaling, InputScaling::mnist);
  settings.dataset = "fashion-mnist";
  EXPECT_EQ(settings.net_config().input_scaling, InputScaling::fashion_mnist);
  settings.input_scaling = "lecun1998";
  EXPECT_EQ(settings.net_config().input_scaling, InputScaling::lecun1998);
  settings.input_scaling = "mnist";
  EXPECT_EQ(settings.net_config().input_scaling, InputScaling::mnist);
  settings.input_scaling = "unit";
  EXPECT_NE(refusal(settings).find("unit"), std::string::npos) << refusal(settings);
}

// --augment dataset (the default) is the data set's own: MNIST's elastic distortions (the default
// before, so MNIST runs train on the same images), none for Fashion-MNIST; a kind named wins.
TEST(TrainSettings, AugmentDatasetIsTheDataSetsOwn) {
  TrainSettings settings;
  EXPECT_EQ(settings.augment, "dataset");
  EXPECT_EQ(settings.augment_kind(), "elastic");
  EXPECT_EQ(settings.augmentation().settings.kind, AugmentKind::elastic);
  settings.dataset = "fashion-mnist";
  EXPECT_EQ(settings.augment_kind(), "none");
  EXPECT_EQ(settings.augmentation().settings.kind, AugmentKind::none);
  settings.augment = "affine";
  EXPECT_EQ(settings.augment_kind(), "affine");
  EXPECT_EQ(settings.augmentation().settings.kind, AugmentKind::affine);
  settings.augment = "bogus";
  EXPECT_NE(refusal(settings).find("dataset|none|affine|elastic"), std::string::npos)
      << refusal(settings);
}

// stored_setting reads a config text as effective_config writes it, or by hand with spaces.
TEST(TrainSettings, StoredSettingReadsAConfigTextsLine) {
  const std::string text = "[train]\nepochs=20\noutput=\"rbf\"\n optimizer = \"sdlm\"\r\n";
  EXPECT_EQ(stored_setting(text, "epochs"), "20");
  EXPECT_EQ(stored_setting(text, "output"), "rbf");
  EXPECT_EQ(stored_setting(text, "optimizer"), "sdlm");
  EXPECT_EQ(stored_setting(text, "lr"), "");
  EXPECT_EQ(stored_setting(text, "epoch"), "");  // a key, not a prefix of one
}

// --precision: fp32 by default; tf32 reaches the network's config (what the whole-step engine is
// built from) with the whole-step kernels (and the tensor-core set's, tested below), never with
// the others or for a run on the CPU, each refusal naming the way out; unknown names are refused.
TEST(TrainSettings, PrecisionTf32IsTheWholeStepKernelsOnAGpu) {
  TrainSettings settings;
  EXPECT_EQ(settings.net_config().precision, Precision::fp32);
  settings.precision = "tf32";
  settings.device = "gpu";
  EXPECT_EQ(refusal(settings), "");
  EXPECT_EQ(settings.net_config().precision, Precision::tf32);
  settings.kernels = "fast";
  EXPECT_TRUE(testing::mentions(refusal(settings), "--kernels whole-step")) << refusal(settings);
  settings.kernels = "whole-step";
  settings.device = "cpu";
  EXPECT_TRUE(testing::mentions(refusal(settings), "--precision fp32")) << refusal(settings);
  settings.device = "gpu";
  settings.precision = "fp16";
  EXPECT_TRUE(testing::mentions(refusal(settings), "fp32, tf32")) << refusal(settings);
  // In the checkpoints as tf32 only (test_train_options.cpp reads one back).
  EXPECT_TRUE(train_setting_declaration("--precision").in_checkpoint);
  EXPECT_FALSE(train_setting_declaration("--precision").in_checkpoint_at_default);
}

// --precision bf16 reaches the network's config with --kernels tensor on a GPU, and tf32 does
// too; bf16 is refused with every other set and on the CPU, each refusal naming the way out.
TEST(TrainSettings, PrecisionBf16IsTheTensorCoreSetsOnAGpu) {
  TrainSettings settings;
  settings.device = "gpu";
  settings.kernels = "tensor";
  for (const char* name : {"fp32", "tf32", "bf16"}) {
    settings.precision = name;
    EXPECT_EQ(refusal(settings), "") << name;
    EXPECT_EQ(to_string(settings.net_config().precision), std::string(name));
  }
  for (const char* kernels : {"whole-step", "fast", "book"}) {
    settings.kernels = kernels;
    EXPECT_TRUE(testing::mentions(refusal(settings), "--kernels tensor")) << refusal(settings);
  }
  settings.kernels = "tensor";
  settings.device = "cpu";
  EXPECT_TRUE(testing::mentions(refusal(settings), "--precision fp32")) << refusal(settings);
  // Every activation trains in bf16 (the stored activations keep their floats).
  settings.device = "gpu";
  for (const char* activation : {"tanh", "sigmoid", "scaled-tanh", "relu"}) {
    settings.activation = activation;
    EXPECT_EQ(refusal(settings), "") << activation;
  }
}

}  // namespace
}  // namespace lenet5
