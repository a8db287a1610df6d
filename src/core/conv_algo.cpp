// The convolution versions' table, filled by each version's registration, and its look-ups by
// name or number.
#include "core/conv_algo.hpp"

#include "core/error.hpp"
#include "core/registration_table.hpp"

namespace lenet5 {

namespace {

// Filled during static initialisation by register_conv_algorithm, kept in order of number.
std::vector<ConvAlgoInfo>& registered() {
  return registration_table<ConvAlgoInfo, std::vector<ConvAlgoInfo>>();
}

}  // namespace

const std::vector<ConvAlgoInfo>& conv_algorithms() { return registered(); }

void register_conv_algorithm(const ConvAlgoInfo& info) {
  std::vector<ConvAlgoInfo>& table = registered();
  auto at = table.begin();
  while (at != table.end() && at->number < info.number) ++at;
  table.insert(at, info);  // duplicates stay visible: a CPU test checks names and numbers unique
}

const ConvAlgoInfo& conv_algorithm_info(ConvAlgo algo) {
  for (const ConvAlgoInfo& info : conv_algorithms())
    if (info.algo == algo) return info;
  throw Error("internal: convolution version " + std::to_string(int(algo)) + " not registered");
}

const char* to_string(ConvAlgo algo) { return conv_algorithm_info(algo).name; }

std::string conv_algo_names_joined(const char* separator) {
  std::string out;
  for (const ConvAlgoInfo& info : conv_algorithms())
    out += (out.empty() ? "" : separator) + std::string(info.name);
  return out;
}

ConvAlgo parse_conv_algo(const std::string& name_or_number) {
  for (const ConvAlgoInfo& info : conv_algorithms())
    if (name_or_number == info.name || name_or_number == std::to_string(info.number))
      return info.algo;
  throw UsageError("unknown convolution version '" + name_or_number +
                   "' (accepted: " + conv_algo_names_joined(", ") + ", or their numbers 1-" +
                   std::to_string(conv_algorithms().size()) + ")");
}

}  // namespace lenet5
