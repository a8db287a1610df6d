// Everything `lenet5 train` can be told. Each setting is declared once, in settings.cpp's table
// (train_setting_declarations()): its flag, which is also its key in a config file's [train]
// section, its default, its range or accepted names, and its help. The command line, --help, the
// config-file reader, the run folder's config.toml and the range errors all read that table. The
// defaults are configs/lenet5.toml's: the book's network, trained by the whole-step kernels on
// elastically distorted images, with the settings measured to end every seed of 1-5 at 99.2 % or
// more.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/augment.hpp"
#include "core/net_config.hpp"
#include "core/sgd.hpp"
#include "train/schedule.hpp"

namespace lenet5 {

// The fields hold values only; each one's default is in its declaration (the constructor sets
// them).
struct TrainSettings {
  TrainSettings();  // every field at its declared default

  // data
  std::string dataset;   // a data/datasets.hpp name: mnist | fashion-mnist
  std::string data_dir;  // empty: $LENET5_DATA or the data set's folder (data/mnist)
  int train_limit;       // train on the first N images only (0: all)
  // training images held out to choose the best epoch on (data/mnist.hpp's hold_out_validation;
  // 0: none, and no best is chosen)
  int validation;
  // network (core/net_config.hpp)
  std::string activation;
  std::string subsampling;
  std::string c3_table;
  std::string output;     // output layer: softmax | rbf (LeCun 1998)
  std::string conv_units;  // C1 and C3 units: linear | squashed (LeCun 1998)
  std::string kernels;    // kernel set: book | fast | whole-step (same function)
  std::string conv_algo;  // a core/conv_algo.hpp name; auto: direct (book), staged (fast)
  std::string precision;  // fp32 | tf32 | bf16 (the training step's products; on the GPU)
  std::string input_scaling;  // dataset (the data set's own) or a core/net_config.hpp name
  // optimisation
  int epochs;
  int batch_size;
  double lr;
  std::string schedule;
  double lr_gamma;
  double lr_step_epochs;
  double min_lr;
  double warmup_epochs;
  double one_cycle_start;
  double momentum;
  bool nesterov;
  double weight_decay;
  std::string optimizer;  // sgd | sdlm (engine/optimizers.hpp)
  double sdlm_mu;
  int sdlm_samples;
  std::uint64_t seed;
  // augmentation of the training images (core/augment.hpp)
  std::string augment;  // dataset | none | affine | elastic: read through augment_kind()
  double augment_rotation;
  double augment_scale;
  double augment_shear;
  double augment_translation;
  double elastic_alpha;
  double elastic_sigma;
  double augment_low_resolution;       // the share of samples seen as a small scan
  double augment_low_resolution_scan;  // the smallest such scan, in pixels of the digit's 20
  // running
  std::string device;
  int threads;      // CPU threads (core/cpu_threads.hpp); the results do not depend on it
  std::string out;  // run folder; empty: runs/<timestamp>
  bool evaluate_every_epoch;
  bool evaluate_training_set;  // the undistorted training set too, after each epoch (metrics.csv)

  NetConfig net_config() const;      // UsageError on unknown names
  Schedule schedule_config() const;  // validated
  SgdSettings sgd() const;           // validated
  std::string augment_kind() const;  // none | affine | elastic: "dataset" resolved
  Augmentation augmentation() const;  // validated; keyed by the run's seed
  void validate() const;             // every declared range, the names, and the combinations
};

// The values a numeric setting accepts: from `low` to `high`, each end included or not.
struct SettingRange {
  double low = -std::numeric_limits<double>::infinity();
  bool low_included = true;
  double high = std::numeric_limits<double>::infinity();
  bool high_included = true;

  SettingRange below(double limit) const;    // high end, excluded
  SettingRange at_most(double limit) const;  // high end, included
  bool contains(double value) const;
  std::string text() const;  // "at least 0 and below 1", "between 1 and 60000", "above 0"
};
SettingRange at_least(double limit);
SettingRange above(double limit);
SettingRange between(double low, double high);  // both ends included

using SettingField =
    std::variant<std::string TrainSettings::*, int TrainSettings::*, double TrainSettings::*,
                 bool TrainSettings::*, std::uint64_t TrainSettings::*>;
using SettingValue = std::variant<std::string, int, double, bool, std::uint64_t>;

// One [train] setting. The table's order is that of --help and of the effective config text, which
// every checkpoint stores (CLI11 writes the general options, then each group, in table order):
// moving a setting changes the bytes of every checkpoint written after.
struct SettingDeclaration {
  std::string flag;  // "--batch-size"; the config key is the flag without its dashes
  SettingField field;
  SettingValue default_value;  // of the field's own type
  std::string help;
  std::optional<SettingRange> range;  // numbers: the values accepted
  std::vector<std::string> names;     // names: the values accepted, where they are a fixed list
  std::string group;                  // --help's heading; empty: the general options
  bool in_config = true;  // false: kept out of config files, config.toml and checkpoints
  // false: in config files and config.toml, but not in the checkpoints' stored settings (how a run
  // is computed, not what it computes: the checkpoints stay byte-identical whatever its value).
  bool in_checkpoint = true;
  // false: in the checkpoints' stored settings only when not at its default. For a setting added
  // after checkpoints were written without it, whose default is what they all meant (--dataset
  // mnist, --optimizer sgd): those checkpoints' text stays the text that runs at the default write.
  bool in_checkpoint_at_default = true;

  // What --help says: the help, then the accepted names or the range.
  std::string help_text() const;
  bool same_in(const TrainSettings& a, const TrainSettings& b) const;  // the field's values equal
  // UsageError naming the flag and its range when `settings` holds a value outside it.
  void check(const TrainSettings& settings) const;

  SettingDeclaration within(SettingRange accepted) const;
  SettingDeclaration one_of(std::vector<std::string> accepted) const;
  SettingDeclaration in_group(std::string heading) const;
  SettingDeclaration not_in_config() const;
  SettingDeclaration not_in_checkpoint() const;
  SettingDeclaration in_checkpoint_unless_default() const;
};

// Every setting of `lenet5 train` (and `lenet5 bench`), in the order of the effective config text.
const std::vector<SettingDeclaration>& train_setting_declarations();
// The declaration of `flag` ("--threads"); internal Error when there is none.
const SettingDeclaration& train_setting_declaration(const std::string& flag);

// The effective config text (config.toml's) without the lines of the settings declared
// not_in_checkpoint(), nor those of in_checkpoint_unless_default() at their defaults: what a
// checkpoint stores.
std::string checkpoint_config(const std::string& config_toml);

// The value of `key` ("epochs", "output") in a config text: its "key=value" line (spaces around
// the "=" allowed), a name's quotes removed; empty when no line sets it. For reading a run's
// config.toml without the settings' parser (a run of another build, say).
std::string stored_setting(const std::string& config_toml, const std::string& key);

}  // namespace lenet5
