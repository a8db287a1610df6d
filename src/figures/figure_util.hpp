// Small formatting and comparison helpers shared by the figure targets (and usable by any of
// them): matrices as one-line text or as tables, exact comparison of computed values against the
// specification's expected values.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "figures/figures.hpp"

namespace lenet5::figures {

// An integer-valued number without decimals ("14"), anything else with 7 significant digits.
inline std::string number(double value) {
  if (std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 1e15)
    return fixed(value, 0);
  char text[32];
  std::snprintf(text, sizeof text, "%.7g", value);
  return text;
}

// "[[14,20],[15,24]]" for a rows x cols row-major matrix.
template <class T>
std::string matrix_text(const T* values, int rows, int cols) {
  std::string out = "[";
  for (int r = 0; r < rows; ++r) {
    out += r ? ",[" : "[";
    for (int c = 0; c < cols; ++c) out += (c ? "," : "") + number(double(values[r * cols + c]));
    out += "]";
  }
  return out + "]";
}
template <class T>
std::string matrix_text(const std::vector<T>& values, int rows, int cols, std::size_t offset = 0) {
  return matrix_text(values.data() + offset, rows, cols);
}

// A rows x cols matrix as a table with columns c1..cN and rows labelled r1..rN (1-based, as the
// specification numbers the rows and columns of Fig 16.14).
template <class T>
Table matrix_table(const std::vector<T>& values, int rows, int cols) {
  Table table;
  table.columns.push_back("row");
  for (int c = 0; c < cols; ++c) table.columns.push_back("c" + std::to_string(c + 1));
  for (int r = 0; r < rows; ++r) {
    std::vector<std::string> row{"r" + std::to_string(r + 1)};
    for (int c = 0; c < cols; ++c) row.push_back(number(double(values[std::size_t(r) * cols + c])));
    table.add(std::move(row));
  }
  return table;
}

// Exact equality of computed values with expected ones (used where every value is a small
// integer, or a sum of them, and so exact in float; textbook-figures.md §0.3's exactness rule).
template <class T>
bool same_values(const std::vector<T>& computed, const std::vector<double>& expected) {
  if (computed.size() != expected.size()) return false;
  for (std::size_t i = 0; i < computed.size(); ++i)
    if (double(computed[i]) != expected[i]) return false;
  return true;
}

template <class T>
std::vector<double> as_doubles(const std::vector<T>& values) {
  return std::vector<double>(values.begin(), values.end());
}

// True when a computed value agrees with a value printed to `decimals` decimals: within half a
// unit of the printed value's last place (the printed value's own rounding), plus 1e-9 so that
// exact halves survive binary representation (6.25 computed from 18.30 - 12.05 agrees with 6.3).
inline bool agrees(double computed, double printed, int decimals) {
  return std::fabs(computed - printed) <= 0.5 * std::pow(10.0, -decimals) + 1e-9;
}

// "1.295, 1.451, ..." with `decimals` decimals.
inline std::string list_text(const std::vector<double>& values, int decimals) {
  std::string out;
  for (double v : values) out += (out.empty() ? "" : ", ") + fixed(v, decimals);
  return out;
}

// Whether every computed value agrees with its printed counterpart to `decimals` decimals.
inline bool all_agree(const std::vector<double>& computed, const std::vector<double>& expected,
                      int decimals) {
  if (computed.size() != expected.size()) return false;
  for (std::size_t i = 0; i < computed.size(); ++i)
    if (!agrees(computed[i], expected[i], decimals)) return false;
  return true;
}

// Prints "<what>: <computed>" and checks it against the specification's values to `decimals`.
inline bool check_list(Block& b, const std::string& what, const std::vector<double>& computed,
                       const std::vector<double>& expected, int decimals) {
  b.line(what + ": " + list_text(computed, decimals));
  return b.check(what + " = " + list_text(expected, decimals),
                 all_agree(computed, expected, decimals), list_text(computed, decimals));
}

// "computed X, expected Y" for a failed check's detail.
inline std::string versus(const std::string& computed, const std::string& expected) {
  return "computed " + computed + ", expected " + expected;
}

// `maps` row-major rows x cols matrices stored one after the other: "[[14,20],[15,24]] [[12,..]]".
template <class T>
std::string maps_text(const std::vector<T>& values, int maps, int rows, int cols) {
  std::string out;
  for (int m = 0; m < maps; ++m)
    out += (m ? " " : "") + matrix_text(values, rows, cols, std::size_t(m) * rows * cols);
  return out;
}

// Prints `what = <computed maps>` and checks, exactly, that they equal the expected ones.
template <class T>
bool check_maps(Block& block, const std::string& what, const std::vector<T>& computed,
                const std::vector<double>& expected, int maps, int rows, int cols) {
  block.line(what + " = " + maps_text(computed, maps, rows, cols));
  return block.check(what + " is " + maps_text(expected, maps, rows, cols),
                     same_values(computed, expected),
                     "computed " + maps_text(computed, maps, rows, cols));
}

}  // namespace lenet5::figures
