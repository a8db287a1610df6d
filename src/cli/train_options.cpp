#include "cli/train_options.hpp"

#include "core/error.hpp"

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

std::string effective_config(const CLI::App& cmd) {
  return "# lenet5 train settings (lenet5 --config FILE train)\n[train]\n" +
         cmd.config_to_str(true, false);
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
