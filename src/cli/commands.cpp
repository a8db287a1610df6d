// The table of subcommands, filled by their registrations before main() runs.
#include "cli/commands.hpp"

#include <map>

namespace lenet5::cli {
namespace {

// A function-local static, so that it exists before the first registration runs, whatever the
// order of the files. A multimap keeps two registrations of one order key both visible.
std::multimap<int, AddCommand>& registered() {
  static std::multimap<int, AddCommand> by_order;
  return by_order;
}

}  // namespace

CommandRegistration::CommandRegistration(int order, AddCommand add) {
  registered().emplace(order, add);
}

std::vector<Command> add_commands(CLI::App& parent) {
  std::vector<Command> commands;
  for (const auto& [order, add] : registered()) commands.push_back(add(parent));
  return commands;
}

}  // namespace lenet5::cli
