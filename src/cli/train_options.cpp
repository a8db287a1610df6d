#include "cli/train_options.hpp"

#include "core/conv_algo.hpp"
#include "core/net_config.hpp"
#include "train/schedule.hpp"

namespace lenet5::cli {
namespace {

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : "|") + n;
  return out;
}

// "book (the chapter's kernels, ...), fast (fused layers) or whole-step (...)".
std::string kernels_help() {
  const std::vector<GpuKernelSet>& sets = gpu_kernel_sets();
  std::string out;
  for (std::size_t i = 0; i < sets.size(); ++i) {
    const char* before = i == 0 ? "" : i + 1 == sets.size() ? " or " : ", ";
    out += before + std::string(sets[i].name) + " (" + sets[i].help + ")";
  }
  return out;
}

}  // namespace

std::string conv_algo_help() {
  std::string out;
  for (const ConvAlgoInfo& info : conv_algorithms())
    out += std::string(out.empty() ? "" : ", ") + std::to_string(info.number) + " " + info.name +
           " (" + info.source + ")";
  return out;
}

void bind_train_settings(CLI::App& cmd, TrainSettings& s) {
  cmd.option_defaults()->always_capture_default();
  cmd.add_option("--data", s.data_dir, "MNIST folder (default: $LENET5_DATA or data/mnist)");
  cmd.add_option("--train-limit", s.train_limit, "train on the first N training images only (0: all)");
  cmd.add_option("--activation", s.activation, joined(activation_names()))->group("Network");
  cmd.add_option("--subsampling", s.subsampling, joined(subsampling_names()))->group("Network");
  cmd.add_option("--c3-table", s.c3_table, "C3 connectivity: full (the book) or lecun (LeCun 1998)")
      ->group("Network");
  cmd.add_option("--kernels", s.kernels, "GPU kernels: " + kernels_help())->group("Network");
  cmd.add_option("--conv-algo", s.conv_algo,
                 "GPU convolution version for C1 and C3, by name or number: auto (direct with "
                 "--kernels book, staged with fast; whole-step trains with its own convolution "
                 "stages and takes only auto), " + conv_algo_help())
      ->group("Network");
  cmd.add_option("--epochs", s.epochs, "passes over the training set");
  cmd.add_option("--batch-size", s.batch_size, "images per SGD step");
  cmd.add_option("--lr", s.lr, "learning rate (peak rate for one-cycle)");
  cmd.add_option("--schedule", s.schedule, "learning-rate schedule: " + joined(schedule_names()));
  cmd.add_option("--lr-gamma", s.lr_gamma, "step/exponential: decay factor");
  cmd.add_option("--lr-step-epochs", s.lr_step_epochs, "step: epochs between decays");
  cmd.add_option("--min-lr", s.min_lr, "cosine/one-cycle: final learning rate");
  cmd.add_option("--warmup-epochs", s.warmup_epochs, "linear warm-up length in epochs (0: none)");
  cmd.add_option("--one-cycle-start", s.one_cycle_start, "one-cycle: fraction of training spent rising");
  cmd.add_option("--momentum", s.momentum, "SGD momentum (0: the book's plain SGD)");
  cmd.add_option("--nesterov", s.nesterov, "Nesterov momentum instead of classical");
  cmd.add_option("--weight-decay", s.weight_decay, "L2 weight decay");
  cmd.add_option("--seed", s.seed, "seed of the initial weights and of every epoch's shuffle");
  cmd.add_option("--device", s.device, "auto|gpu|cpu");
  // Where a run is written is not a training setting: kept out of config.toml and checkpoints, so
  // that same-seed runs into different folders write byte-identical checkpoints.
  cmd.add_option("--out", s.out, "run folder (default: runs/<date-time>; runs/latest points at the newest)")
      ->configurable(false);
  cmd.add_option("--evaluate", s.evaluate_every_epoch, "evaluate on the test set after each epoch");
}


}  // namespace lenet5::cli
