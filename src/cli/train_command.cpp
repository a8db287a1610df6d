// lenet5 train [--config F] [flags]: every setting of TrainSettings declared once, here.
#include <spdlog/spdlog.h>

#include <sstream>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "net/config.hpp"
#include "train/schedule.hpp"
#include "train/trainer.hpp"

namespace lenet5::cli {
namespace {

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : "|") + n;
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
  cmd.add_option("--out", s.out, "run folder (default: runs/<date-time>; runs/latest points at the newest)");
  cmd.add_option("--evaluate", s.evaluate_every_epoch, "evaluate on the test set after each epoch");
}

std::string effective_config(const CLI::App& cmd) {
  return "# lenet5 train settings (lenet5 --config FILE train)\n[train]\n" +
         cmd.config_to_str(true, false);
}

// --resume F: the checkpoint's own settings, overridden by whatever was given explicitly now.
TrainSettings resumed_settings(const CLI::App& given, const Checkpoint& checkpoint,
                               std::string& config_toml) {
  TrainSettings settings;
  CLI::App fresh;
  fresh.allow_config_extras(CLI::config_extras_mode::error);
  CLI::App* cmd = fresh.add_subcommand("train");
  bind_train_settings(*cmd, settings);
  std::istringstream stored(checkpoint.config_toml);
  try {
    fresh.parse_from_stream(stored);
  } catch (const CLI::Error& e) {
    throw Error(std::string("the checkpoint's stored settings cannot be read: ") + e.what());
  }
  for (const CLI::Option* option : given.get_options()) {
    if (option->count() == 0 || !option->get_configurable()) continue;
    CLI::Option* target = cmd->get_option_no_throw(option->get_name());
    if (!target) continue;
    target->clear();
    target->add_result(option->results());
    target->run_callback();
  }
  config_toml = effective_config(*cmd);
  return settings;
}

}  // namespace

Command add_train_command(CLI::App& parent) {
  auto* cmd = parent.add_subcommand("train", "train LeNet-5 on MNIST");
  cmd->fallthrough();  // --config belongs to the top level but may follow "train"
  auto settings = std::make_shared<TrainSettings>();
  auto resume = std::make_shared<std::string>();
  bind_train_settings(*cmd, *settings);
  cmd->add_option("--resume", *resume, "continue the run saved in this checkpoint")
      ->configurable(false)
      ->check(CLI::ExistingFile);
  return {cmd, [cmd, settings, resume]() {
            std::optional<Checkpoint> checkpoint;
            TrainSettings effective = *settings;
            std::string config_toml = effective_config(*cmd);
            if (!resume->empty()) {
              checkpoint = load_checkpoint(*resume);
              effective = resumed_settings(*cmd, *checkpoint, config_toml);
            }
            const TrainOutcome outcome = train(effective, config_toml, checkpoint, *resume);
            if (outcome.interrupted) return 130;
            std::printf("trained %d epochs; best test accuracy %s; run folder %s\n",
                        outcome.epochs_done,
                        outcome.best_accuracy < 0
                            ? "not measured"
                            : (fmt::format("{:.2f}%", 100 * outcome.best_accuracy)).c_str(),
                        outcome.run_dir.string().c_str());
            return 0;
          }};
}

}  // namespace lenet5::cli
