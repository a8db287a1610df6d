// What every fuzz target shares: the input as a file where the reader under test takes a path (the
// file is the path users give it, so the fuzzer goes through the same open and read), and the
// rule that a reader may refuse input only with lenet5's own errors. Anything else that escapes
// (std::bad_alloc, std::out_of_range from a missed check, ...) is a crash for libFuzzer, as are
// the sanitizers' reports, going over -rss_limit_mb and taking longer than -timeout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.hpp"
#include "io/temporary_folder.hpp"

namespace lenet5::fuzz {

// The input written to one file in a scratch folder of this process (rewritten for each input).
inline std::filesystem::path as_file(const std::uint8_t* data, std::size_t size,
                                     const std::string& name) {
  static const TemporaryFolder folder("lenet5-fuzz");
  const std::filesystem::path file = folder / name;
  std::ofstream(file, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), std::streamsize(size));
  return file;
}

// Runs `read`; lenet5::Error and lenet5::UsageError are how a reader says no, and pass.
template <class Read>
void refusals_allowed(Read&& read) {
  try {
    read();
  } catch (const Error&) {
  } catch (const UsageError&) {
  }
}

}  // namespace lenet5::fuzz
