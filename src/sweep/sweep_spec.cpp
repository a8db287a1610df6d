// Reading a sweep's lists of values ([sweep] tables and --set), expanding ranges, and the models
// of a shard in their fixed order.
#include "sweep/sweep_spec.hpp"

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "train/run_folder.hpp"
#include "train/settings.hpp"

namespace lenet5 {
namespace {

// Where and how a run happens, not what it computes: the same for every model of a sweep.
const std::vector<std::string>& fixed_keys() {
  static const std::vector<std::string> keys{"out",     "data",   "device",
                                             "threads", "config", "resume"};
  return keys;
}

const SettingDeclaration* find_declaration(const std::string& key) {
  for (const SettingDeclaration& declaration : train_setting_declarations())
    if (declaration.flag == "--" + key) return &declaration;
  return nullptr;
}

// The place of `key` in the sweep's order: the declaration table's, the seed after all others.
std::size_t order_of(const std::string& key) {
  const auto& declarations = train_setting_declarations();
  if (key == "seed") return declarations.size();
  for (std::size_t i = 0; i < declarations.size(); ++i)
    if (declarations[i].flag == "--" + key) return i;
  return declarations.size();
}

bool is_integer_setting(const SettingDeclaration& declaration) {
  return std::holds_alternative<int TrainSettings::*>(declaration.field) ||
         std::holds_alternative<std::uint64_t TrainSettings::*>(declaration.field);
}

bool all_digits(const std::string& text) {
  return !text.empty() && text.size() <= 18 &&
         std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c); });
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, separator)) parts.push_back(part);
  if (!text.empty() && text.back() == separator) parts.emplace_back();
  return parts;
}

std::string trimmed(const std::string& text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

// "3-6" -> 3, 4, 5, 6 into `values`.
void expand_range(const std::string& where, const std::string& range,
                  std::vector<std::string>& values) {
  const std::size_t dash = range.find('-');
  const std::string low_text = range.substr(0, dash), high_text = range.substr(dash + 1);
  if (!all_digits(low_text) || !all_digits(high_text))
    throw UsageError(where + ": '" + range +
                     "' is not a range: write LOW-HIGH with two whole numbers, LOW at most HIGH "
                     "(1-16)");
  const std::uint64_t low = std::stoull(low_text), high = std::stoull(high_text);
  if (low > high)
    throw UsageError(where + ": the range '" + range + "' runs backwards: write " + high_text +
                     "-" + low_text);
  if (high - low >= std::uint64_t(kMaxSweepModels))
    throw UsageError(where + ": the range '" + range + "' holds more than " +
                     std::to_string(kMaxSweepModels) + " values, more than a sweep may train");
  for (std::uint64_t value = low; value <= high; ++value) values.push_back(std::to_string(value));
}

// Characters a file name on any common system takes without quoting; the others become '_'.
std::string safe_file_name(const std::string& text) {
  std::string name = text;
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) &&
        std::string("=,.+-").find(c) == std::string::npos)
      c = '_';
  return name;
}

std::string joined_values(const std::vector<SweepList>& lists, bool with_seed) {
  std::string text;
  for (const SweepList& list : lists)
    if (with_seed || list.key != "seed")
      text += (text.empty() ? "" : ",") + list.key + "=" + list.values.front();
  return text;
}

std::string toml_string(const std::string& text) {
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return quoted + "\"";
}

// The quoted TOML strings of `value`, as toml_string writes them: one ("\"1/2\"") or an array of
// at least one ("[\"0.05\", \"0.1\"]"); false for anything else.
bool quoted_strings(const std::string& value, std::vector<std::string>& strings) {
  std::size_t i = 0;
  const auto next_is = [&](char c) {
    while (i < value.size() && value[i] == ' ') ++i;
    return i < value.size() && value[i] == c;
  };
  const auto read_string = [&] {
    if (!next_is('"')) return false;
    std::string text;
    for (++i; i < value.size() && value[i] != '"'; ++i) {
      if (value[i] == '\\' && i + 1 < value.size()) ++i;
      text += value[i];
    }
    if (i == value.size()) return false;  // no closing quote
    ++i;
    strings.push_back(text);
    return true;
  };
  const auto at_end = [&] { return !next_is('\0') && i == value.size(); };
  if (!next_is('[')) return read_string() && at_end();
  ++i;
  for (;;) {
    if (!read_string()) return false;
    if (!next_is(',')) break;
    ++i;
  }
  if (!next_is(']')) return false;
  ++i;
  return at_end();
}

}  // namespace

void check_sweep_key(const std::string& key, const std::string& origin) {
  const std::string where = origin.empty() ? "--set " + key : origin;
  if (std::find(fixed_keys().begin(), fixed_keys().end(), key) != fixed_keys().end())
    throw UsageError(where + ": " + key +
                     " may not vary within a sweep (it says where or how the models run, not "
                     "what they compute): give it once, as --" +
                     key + " VALUE");
  const SettingDeclaration* declaration = find_declaration(key);
  if (!declaration || !declaration->in_config)
    throw UsageError(where + ": there is no [train] setting '" + key +
                     "': the keys are the flags of `lenet5 train --help` without their dashes "
                     "(lr, batch-size, activation, ...)");
}

SweepList parse_sweep_list(const std::string& key, const std::string& text,
                           const std::string& origin) {
  check_sweep_key(key, origin);
  const std::string where = origin.empty() ? "--set " + key : origin;
  const bool integers = is_integer_setting(*find_declaration(key));
  SweepList list{key, {}};
  for (const std::string& raw : split(text, ',')) {
    const std::string item = trimmed(raw);
    if (item.empty())
      throw UsageError(where + ": '" + text +
                       "': an empty value; write the values separated by commas (" + key +
                       "=V1,V2)");
    if (integers && item.find('-') != std::string::npos)
      expand_range(where, item, list.values);
    else
      list.values.push_back(item);
  }
  if (list.values.empty()) throw UsageError(where + ": the list is empty; give at least one value");
  std::set<std::string> seen;
  for (const std::string& value : list.values)
    if (!seen.insert(value).second)
      throw UsageError(where + ": the value " + value +
                       " is listed twice; each model would be trained twice");
  return list;
}

void add_sweep_list(SweepSpec& spec, SweepList list) {
  for (const SweepList& existing : spec.lists)
    if (existing.key == list.key)
      throw UsageError(list.key +
                       " is given two lists (with --seeds and --set seed=, twice with "
                       "--set, or on the command line and in [sweep]): give one");
  const auto place = std::find_if(spec.lists.begin(), spec.lists.end(), [&](const SweepList& l) {
    return order_of(l.key) > order_of(list.key);
  });
  spec.lists.insert(place, std::move(list));
}

SweepShard parse_sweep_shard(const std::string& text) {
  const std::size_t slash = text.find('/');
  const std::string k = slash == std::string::npos ? "" : text.substr(0, slash);
  const std::string n = slash == std::string::npos ? "" : text.substr(slash + 1);
  if (!all_digits(k) || !all_digits(n) || k.size() > 6 || n.size() > 6)
    throw UsageError("--shard '" + text +
                     "' is not K/N: write the shard's number and the number "
                     "of shards, e.g. --shard 2/4");
  const SweepShard shard{std::stoi(k), std::stoi(n)};
  if (shard.count < 1 || shard.index < 1 || shard.index > shard.count)
    throw UsageError("--shard " + text + ": K must be between 1 and N (" + n + ")");
  return shard;
}

std::vector<SweepModel> expand_sweep(const SweepSpec& spec) {
  if (spec.lists.empty())
    throw UsageError(
        "nothing to sweep: give --seeds LIST and/or --set KEY=V1,V2,... (or a "
        "[sweep] table in the --config file)");
  std::size_t count = 1;
  for (const SweepList& list : spec.lists) {
    count *= list.values.size();
    if (count > std::size_t(kMaxSweepModels))
      throw UsageError("the sweep holds more than " + std::to_string(kMaxSweepModels) +
                       " models (the product of the lists' lengths): shorten the lists");
  }
  std::vector<SweepModel> models(count);
  std::set<std::string> names;
  for (std::size_t i = 0; i < count; ++i) {
    SweepModel& model = models[i];
    model.index = int(i);
    // Mixed radix, the last list fastest.
    std::size_t rest = i;
    model.values.resize(spec.lists.size());
    for (std::size_t l = spec.lists.size(); l-- > 0;) {
      const SweepList& list = spec.lists[l];
      model.values[l] = {list.key, {list.values[rest % list.values.size()]}};
      rest /= list.values.size();
    }
    model.name = safe_file_name(joined_values(model.values, true));
    model.setting = joined_values(model.values, false);
    if (model.setting.empty()) model.setting = "(all)";
    if (!names.insert(model.name).second)
      throw UsageError("two models of the sweep would share the folder " + model.name +
                       ": their values differ only in characters a file name cannot hold");
  }
  return models;
}

std::vector<SweepModel> models_of_shard(const SweepSpec& spec) {
  std::vector<SweepModel> shard;
  for (SweepModel& model : expand_sweep(spec))
    if (model.index % spec.shard.count == spec.shard.index - 1) shard.push_back(std::move(model));
  return shard;
}

std::string sweep_table_toml(const SweepSpec& spec) {
  std::string text = "[sweep]\n";
  for (const SweepList& list : spec.lists) {
    text += list.key + " = [";
    for (std::size_t i = 0; i < list.values.size(); ++i)
      text += (i == 0 ? "" : ", ") + toml_string(list.values[i]);
    text += "]\n";
  }
  text += "shard = " +
          toml_string(std::to_string(spec.shard.index) + "/" + std::to_string(spec.shard.count)) +
          "\n";
  return text;
}

SweepSpec parse_sweep_table_toml(const std::string& text, const std::string& origin) {
  std::istringstream in(text);
  std::string line;
  bool in_table = false, found = false;
  SweepSpec spec;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '[' && line.find('=') == std::string::npos) {
      in_table = line == "[sweep]";
      found = found || in_table;
      continue;
    }
    if (!in_table) continue;
    const std::size_t equals = line.find(" = ");
    std::vector<std::string> values;
    if (equals == std::string::npos || !quoted_strings(line.substr(equals + 3), values))
      throw Error(origin + ": the [sweep] line '" + line +
                  "' is not KEY = [\"V1\", ...] or shard = \"K/N\" as lenet5 sweep writes them");
    const std::string key = line.substr(0, equals);
    try {
      if (key == "shard" && values.size() == 1)
        spec.shard = parse_sweep_shard(values[0]);
      else {
        check_sweep_key(key, "[sweep] " + key);
        add_sweep_list(spec, SweepList{key, values});
      }
    } catch (const UsageError& e) {
      throw Error(origin + ": " + e.what());  // a damaged file, not a mistake on a command line
    }
  }
  if (!found)
    throw Error(origin + " holds no [sweep] table: it is not a sweep folder's " + kSweepFile);
  return spec;
}

}  // namespace lenet5
