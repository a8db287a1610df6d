// Helpers for the tests of the declared [train] settings (test_settings.cpp,
// test_train_options.cpp, test_cli.cpp): values outside a declared range, a numeric field written
// through its declaration, and settings compared field by field.
#pragma once

#include <cmath>
#include <sstream>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "train/settings.hpp"

namespace lenet5::testing {

// The nearest refused value beyond each finite end: the end itself where it is excluded, one step
// past it where it is included (a whole step, so that integer settings can hold it too).
inline std::vector<double> values_outside(const SettingRange& range) {
  std::vector<double> values;
  if (std::isfinite(range.low)) values.push_back(range.low_included ? range.low - 1 : range.low);
  if (std::isfinite(range.high))
    values.push_back(range.high_included ? range.high + 1 : range.high);
  return values;
}

// "0", "-1", "60001", "0.5": how a test writes a number on the command line.
inline std::string number_argument(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

// Sets a numeric setting (int, double or seed) to `value`.
inline void set_number(TrainSettings& settings, const SettingDeclaration& declaration,
                       double value) {
  std::visit(
      [&](auto member) {
        using T = std::remove_reference_t<decltype(settings.*member)>;
        if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>)
          settings.*member = static_cast<T>(value);
      },
      declaration.field);
}

// The flag of the first declared setting whose values differ; empty when all are equal.
inline std::string first_difference(const TrainSettings& a, const TrainSettings& b) {
  for (const SettingDeclaration& declaration : train_setting_declarations()) {
    const bool equal =
        std::visit([&](auto member) { return a.*member == b.*member; }, declaration.field);
    if (!equal) return declaration.flag;
  }
  return "";
}

}  // namespace lenet5::testing
