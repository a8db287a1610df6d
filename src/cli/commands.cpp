// The table of subcommands, filled by their registrations before main() runs.
#include "cli/commands.hpp"

#include <map>

#include "core/registration_table.hpp"
#include "train/settings.hpp"

namespace lenet5::cli {
namespace {

// The subcommands by order key. A multimap keeps two registrations of one key both visible.
std::multimap<int, AddCommand>& registered() {
  return registration_table<CommandRegistration, std::multimap<int, AddCommand>>();
}

}  // namespace

CommandRegistration::CommandRegistration(int order, AddCommand add) {
  registered().emplace(order, add);
}

CLI::Option* add_threads_option(CLI::App& command, int& threads) {
  const SettingDeclaration& declaration = train_setting_declaration("--threads");
  threads = std::get<int>(declaration.default_value);
  return command.add_option(declaration.flag, threads, declaration.help_text())
      ->capture_default_str();
}

std::vector<Command> add_commands(CLI::App& parent) {
  std::vector<Command> commands;
  for (const auto& [order, add] : registered()) commands.push_back(add(parent));
  return commands;
}

}  // namespace lenet5::cli
