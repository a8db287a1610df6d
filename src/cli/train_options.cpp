// Binding each declared train setting to its option, and the effective config written into a
// run folder, read back from the parsed command line.
#include "cli/train_options.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "data/datasets.hpp"

namespace lenet5::cli {

void bind_train_settings(CLI::App& cmd, TrainSettings& settings) {
  cmd.option_defaults()->always_capture_default();
  for (const SettingDeclaration& declaration : train_setting_declarations()) {
    CLI::Option* option = std::visit(
        [&](auto member) {
          return cmd.add_option(declaration.flag, settings.*member, declaration.help_text());
        },
        declaration.field);
    // An empty group would hide the option from --help.
    if (!declaration.group.empty()) option->group(declaration.group);
    if (!declaration.in_config) option->configurable(false);
  }
}

namespace {

// `--augment dataset` is written as the kind it resolves to: a run's config.toml says what it
// trained with, and a default MNIST run stores augment="elastic", the text every run stored
// before "dataset" was the default.
std::string with_augmentation_resolved(std::string text, const CLI::App& cmd) {
  const CLI::Option* augment = cmd.get_option_no_throw("--augment");
  const CLI::Option* dataset = cmd.get_option_no_throw("--dataset");
  const std::string line = "\naugment=\"dataset\"\n";
  const std::size_t at = text.find(line);
  if (!augment || !dataset || at == std::string::npos) return text;
  const std::string name = dataset->as<std::string>();
  const std::vector<std::string> known = dataset_names();
  // An unknown data set is left for the settings' validation to refuse, naming the flag.
  if (std::find(known.begin(), known.end(), name) == known.end()) return text;
  const std::string kind = find_dataset(name).augment;
  return text.replace(at, line.size(), "\naugment=\"" + kind + "\"\n");
}

}  // namespace

std::string effective_config(const CLI::App& cmd) {
  return with_augmentation_resolved(
      "# lenet5 train settings (lenet5 --config FILE train)\n[train]\n" +
          cmd.config_to_str(true, false),
      cmd);
}

void apply_train_section(const CLI::App& parent, CLI::App& command) {
  const CLI::Option* config = parent.get_option_no_throw("--config");
  if (!config || config->count() == 0) return;
  const std::string path = config->as<std::string>();
  for (const CLI::ConfigItem& item : CLI::ConfigTOML().from_file(path)) {
    if (item.parents != std::vector<std::string>{"train"} || item.name == "++" || item.name == "--")
      continue;  // other sections, and CLI11's section markers
    CLI::Option* option = command.get_option_no_throw("--" + item.name);
    if (!option || !option->get_configurable())
      throw UsageError(path + ": [train] key '" + item.name + "' is not a " + command.get_name() +
                       " setting");
    if (option->count() > 0) continue;
    option->add_result(item.inputs);
    option->run_callback();
  }
}

}  // namespace lenet5::cli
