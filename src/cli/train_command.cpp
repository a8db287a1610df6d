// lenet5 train [--config F] [flags]: the declared settings (train/settings.hpp), plus --resume.
#include <spdlog/spdlog.h>

#include <fstream>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/train_options.hpp"
#include "core/error.hpp"
#include "data/mnist.hpp"
#include "train/augment_preview.hpp"
#include "train/evaluate.hpp"
#include "train/trainer.hpp"

namespace lenet5::cli {
namespace {

// A resumed run that augments otherwise than the checkpoint's run shows its remaining epochs other
// images: allowed (the flags win), but no longer the run an uninterrupted one would have been.
void warn_if_augmentation_changes(const TrainSettings& stored, const TrainSettings& resumed) {
  const bool same = stored.augment_kind() == resumed.augment_kind() &&
                    stored.augment_rotation == resumed.augment_rotation &&
                    stored.augment_scale == resumed.augment_scale &&
                    stored.augment_shear == resumed.augment_shear &&
                    stored.augment_translation == resumed.augment_translation &&
                    stored.elastic_alpha == resumed.elastic_alpha &&
                    stored.elastic_sigma == resumed.elastic_sigma;
  if (!same)
    spdlog::warn(
        "the augmentation differs from the checkpoint's (--augment {} there, {} now, or "
        "its ranges): the resumed epochs train on other images than the first run's",
        stored.augment_kind(), resumed.augment_kind());
}

// A [sweep] table is lenet5 sweep's (the parent app's config reader leaves it out): train trains
// one model with the [train] settings, and says so instead of dropping the lists quietly.
void warn_of_sweep_table(const CLI::App& train_command) {
  const CLI::Option* config = train_command.get_parent()->get_config_ptr();
  if (!config || config->count() == 0) return;
  for (const std::string& file : config->results()) {
    std::ifstream in(file);
    std::string line;
    while (std::getline(in, line)) {
      const std::size_t start = line.find_first_not_of(" \t");
      if (start != std::string::npos && line.compare(start, 7, "[sweep]") == 0) {
        spdlog::warn(
            "{} holds a [sweep] table, which lenet5 train ignores: it trains one model "
            "with the [train] settings (for every combination: lenet5 sweep --config {})",
            file, file);
        return;
      }
    }
  }
}

// --resume F: the checkpoint's own settings, overridden by whatever was given explicitly now.
TrainSettings resumed_settings(const CLI::App& given, const Checkpoint& checkpoint,
                               std::string& config_toml) {
  TrainSettings settings;
  CLI::App fresh;
  fresh.allow_config_extras(CLI::config_extras_mode::error);
  CLI::App* cmd = fresh.add_subcommand("train");
  bind_train_settings(*cmd, settings);
  // A checkpoint written before training images were held out trained on all of them: its run
  // goes on holding out none (the [train] table is the stored text's only one).
  std::istringstream stored(
      checkpoint.config_toml +
      (stored_setting(checkpoint.config_toml, "validation").empty()
           ? "\nvalidation=" + std::to_string(checkpoint.validation_images) + "\n"
           : ""));
  try {
    fresh.parse_from_stream(stored);
  } catch (const CLI::Error& e) {
    throw Error(std::string("the checkpoint's stored settings cannot be read: ") + e.what());
  }
  const TrainSettings as_stored = settings;
  for (const CLI::Option* option : given.get_options()) {
    if (option->count() == 0 || option->check_name("--resume")) continue;
    CLI::Option* target = cmd->get_option_no_throw(option->get_name());
    if (!target) continue;
    target->clear();
    target->add_result(option->results());
    target->run_callback();
  }
  config_toml = effective_config(*cmd);
  warn_if_augmentation_changes(as_stored, settings);
  return settings;
}

Command add_train_command(CLI::App& parent) {
  auto* cmd =
      add_subcommand(parent, "train", "train LeNet-5 on MNIST (or Fashion-MNIST: --dataset)");
  auto settings = std::make_shared<TrainSettings>();
  auto resume = std::make_shared<std::string>();
  auto preview = std::make_shared<std::string>();
  bind_train_settings(*cmd, *settings);
  cmd->add_option("--resume", *resume, "continue the run saved in this checkpoint")
      ->configurable(false)
      ->check(CLI::ExistingFile);
  cmd->add_option("--augment-preview", *preview,
                  "write a PNG of six training images, each as stored and then as augmented in "
                  "epochs 1-7 under these settings, and exit without training")
      ->configurable(false)
      ->group("Augmentation");
  return {cmd, [cmd, settings, resume, preview]() {
            if (!preview->empty()) {
              const DatasetDescription& dataset = find_dataset(settings->dataset);
              const std::filesystem::path dir = resolve_data_dir(settings->data_dir, dataset);
              const Dataset train = load_split(dataset, dir, Split::train);
              require_dataset_files(dataset, train, Split::train, dir);
              write_augment_preview(*settings, train, *preview);
              std::printf("wrote %s: each row a training image, then epochs 1-%d (--augment %s)\n",
                          preview->c_str(), kPreviewEpochs, settings->augment.c_str());
              return 0;
            }
            warn_of_sweep_table(*cmd);
            std::optional<Checkpoint> checkpoint;
            TrainSettings effective = *settings;
            std::string config_toml = effective_config(*cmd);
            if (!resume->empty()) {
              checkpoint = load_checkpoint(*resume);
              effective = resumed_settings(*cmd, *checkpoint, config_toml);
            }
            const TrainOutcome outcome = train(effective, config_toml, checkpoint, *resume);
            // The shell's convention for a process ended by a signal: 128 + its number.
            if (outcome.interrupted) return 128 + outcome.stop_signal;
            std::fputs(
                format_outcome(outcome, effective.epochs, find_dataset(effective.dataset)).c_str(),
                stdout);
            return 0;
          }};
}

const CommandRegistration kTrain{10, add_train_command};

}  // namespace

}  // namespace lenet5::cli
