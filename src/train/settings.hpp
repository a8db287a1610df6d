// Everything `lenet5 train` can be told. The defaults are configs/lenet5.toml's: the book's
// network, trained with the settings measured to reach 99 % within 10 epochs. The CLI declares each field
// once as an option (src/cli/train_options.cpp); configs/*.toml set the same names.
#pragma once

#include <cstdint>
#include <string>

#include "core/net_config.hpp"
#include "core/sgd.hpp"
#include "train/schedule.hpp"

namespace lenet5 {

struct TrainSettings {
  // data
  std::string data_dir;  // empty: $LENET5_DATA or data/mnist
  int train_limit = 0;   // train on the first N images only (0: all)
  // network (core/net_config.hpp)
  std::string activation = "tanh";
  std::string subsampling = "average";
  std::string c3_table = "full";
  std::string kernels = "fast";  // GPU kernel set: book | fast | whole-step (same function)
  std::string conv_algo = "auto";  // a core/conv_algo.hpp name; auto: direct (book), staged (fast)
  // optimisation
  int epochs = 10;
  int batch_size = 64;
  double lr = 0.07;
  std::string schedule = "cosine";
  double lr_gamma = 0.1;
  double lr_step_epochs = 1;
  double min_lr = 0;
  double warmup_epochs = 0;
  double one_cycle_start = 0.25;
  double momentum = 0.9;
  bool nesterov = false;
  double weight_decay = 5e-4;
  std::uint64_t seed = 1;
  // running
  std::string device = "auto";
  std::string out;  // run folder; empty: runs/<timestamp>
  bool evaluate_every_epoch = true;

  NetConfig net_config() const;      // UsageError on unknown names
  Schedule schedule_config() const;  // validated
  SgdSettings sgd() const;           // validated
  void validate() const;             // everything above, plus sizes
};

}  // namespace lenet5
