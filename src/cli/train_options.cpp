#include "cli/train_options.hpp"

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

}  // namespace lenet5::cli
