// The table of subcommands, filled by their registrations before main() runs.
#include "cli/commands.hpp"

#include <filesystem>
#include <map>

#include "core/registration_table.hpp"
#include "train/run_folder.hpp"
#include "train/settings.hpp"

namespace lenet5::cli {
namespace {

// The subcommands by order key. A multimap keeps two registrations of one key both visible.
std::multimap<int, AddCommand>& registered() {
  return registration_table<CommandRegistration, std::multimap<int, AddCommand>>();
}

// --checkpoint's value, turned into the file it means: a run folder's checkpoint, or the file.
std::string resolve_checkpoint(std::string& value) {
  std::error_code error;
  // Anything but a folder is the file to load, whose reader refuses what is no checkpoint (a
  // device, a huge file) with the reason.
  if (!std::filesystem::is_directory(value, error))
    return std::filesystem::exists(value, error) ? "" : value + ": no such file";
  const std::filesystem::path file = run_checkpoint_file(value);
  if (file.empty())
    return value + " is a folder holding no " + kBestCheckpointFile + " nor " +
           kLastCheckpointFile + ": give a checkpoint file, or a run folder whose first epoch has "
           "ended";
  value = file.string();
  return {};
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

CLI::Option* add_checkpoint_option(CLI::App& command, std::string& file) {
  return command
      .add_option("--checkpoint", file,
                  "checkpoint file (.safetensors), or a run folder (runs/latest): its " +
                      std::string(kBestCheckpointFile) + ", else its " + kLastCheckpointFile)
      ->required()
      ->transform(CLI::Validator(resolve_checkpoint, ""))
      ->type_name("FILE|RUN");
}

std::vector<Command> add_commands(CLI::App& parent) {
  std::vector<Command> commands;
  for (const auto& [order, add] : registered()) commands.push_back(add(parent));
  return commands;
}

}  // namespace lenet5::cli
