// --config: a bare name looked up among the shipped configs, and the checks on the file it names.
#include "cli/config_file.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

namespace lenet5::cli {
namespace fs = std::filesystem;
namespace {

fs::path executable_folder() {
  std::error_code error;
  const fs::path executable = fs::read_symlink("/proc/self/exe", error);
  return error ? fs::path() : executable.parent_path();
}

// Where shipped configs may be, in the order searched, whether or not they exist: beside an
// installed executable (LENET5_INSTALLED_CONFIGS is relative to its bin folder), then, for the
// build tree's executable, the source tree's configs/.
std::vector<fs::path> config_folder_candidates() {
  const fs::path here = executable_folder();
  if (here.empty()) return {};
  std::vector<fs::path> candidates{(here / LENET5_INSTALLED_CONFIGS).lexically_normal()};
  std::error_code error;
  if (fs::equivalent(here, LENET5_BUILD_FOLDER, error))
    candidates.push_back(fs::path(LENET5_SOURCE_CONFIGS));
  return candidates;
}

// The .toml files of the shipped folders, by name, each name once (the first folder's wins).
std::vector<std::string> shipped_config_names() {
  std::vector<std::string> names;
  for (const fs::path& folder : shipped_config_folders()) {
    std::error_code error;
    for (fs::directory_iterator it(folder, error), end; !error && it != end; it.increment(error))
      if (it->path().extension() == ".toml") names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

std::string joined(const std::vector<std::string>& items) {
  std::string text;
  for (const std::string& item : items) text += (text.empty() ? "" : ", ") + item;
  return text;
}

// A settings file holds a few hundred bytes. Anything but a regular file of at most 1 MiB (a
// device, a pipe, a huge file) is refused before CLI11 reads it line by line: an endless one never
// ends.
std::string settings_file_problem(const std::string& path) {
  constexpr std::uintmax_t kMaxSettingsBytes = std::uintmax_t(1) << 20;
  std::error_code error;
  if (!fs::exists(path, error)) return path + ": no such file";
  if (!fs::is_regular_file(path, error))
    return path + " is not a regular file: give a TOML settings file";
  if (fs::file_size(path, error) > kMaxSettingsBytes)
    return path +
           " is larger than 1 MiB, far more than any settings file: give a TOML file "
           "of [train] settings";
  return {};
}

// The files a bare --config name may mean: the name itself and, where it has no extension, the
// name with .toml (`--config quick` is quick.toml).
std::vector<std::string> config_spellings(const std::string& name) {
  std::vector<std::string> spellings{name};
  if (fs::path(name).extension().empty()) spellings.push_back(name + ".toml");
  return spellings;
}

// A bare name that is no file of the working folder: the shipped config of that name (by
// config_spellings), or an error that says where it looked and what it found there.
std::string shipped_config_problem(std::string& name) {
  for (const fs::path& folder : shipped_config_folders())
    for (const std::string& spelling : config_spellings(name)) {
      std::error_code error;
      if (fs::is_regular_file(folder / spelling, error)) {
        name = (folder / spelling).string();
        return settings_file_problem(name);
      }
    }
  std::error_code error;
  std::vector<std::string> looked{"the working folder (" + fs::current_path(error).string() + ")"};
  for (const fs::path& folder : config_folder_candidates()) looked.push_back(folder.string());
  const std::vector<std::string> shipped = shipped_config_names();
  return name + " was found in none of " + joined(looked) +
         (shipped.empty() ? std::string() : "; the shipped configs are " + joined(shipped)) +
         ". Give one of those names or the path of a TOML settings file";
}

// --config's value, turned into the file it means (CLI11 reads the file the value names): a bare
// name is a file of the working folder first (by config_spellings: `--config fast` is a fast.toml
// there before the shipped one), then a shipped config.
std::string resolve_config(std::string& value) {
  const bool bare =
      !value.empty() && value.find('/') == std::string::npos && value != "." && value != "..";
  if (!bare) return settings_file_problem(value);
  for (const std::string& spelling : config_spellings(value)) {
    std::error_code error;
    if (fs::exists(spelling, error)) {
      value = spelling;
      return settings_file_problem(value);
    }
  }
  return shipped_config_problem(value);
}

}  // namespace

std::vector<fs::path> shipped_config_folders() {
  std::vector<fs::path> folders;
  std::error_code error;
  for (const fs::path& folder : config_folder_candidates())
    if (fs::is_directory(folder, error)) folders.push_back(folder);
  return folders;
}

CLI::Option* add_config_option(CLI::App& app) {
  const std::vector<std::string> shipped = shipped_config_names();
  const std::string help =
      "TOML settings file; its [train] section sets train's options" +
      (shipped.empty() ? std::string()
                       : ". A bare name that is no file here (its .toml may be left off) is a "
                         "shipped config: " +
                             joined(shipped));
  return app.set_config("--config", "", help)
      ->transform(CLI::Validator(resolve_config, ""))
      ->type_name("FILE|NAME");
}

}  // namespace lenet5::cli
