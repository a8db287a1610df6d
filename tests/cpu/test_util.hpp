// Helpers shared by the CPU tests: temporary folders, the MNIST folder, running the lenet5 binary.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "data/datasets.hpp"
#include "io/temporary_folder.hpp"

namespace lenet5::testing {

namespace fs = std::filesystem;

// A fresh folder under the system's temporary folder, removed with everything in it.
class TempDir : public TemporaryFolder {
 public:
  TempDir() : TemporaryFolder("lenet5-test") {}
};

// Whether this build is instrumented by AddressSanitizer (.ci/run's second build), where the CPU
// layers run several times slower: the tests whose work is sized to outlast a fixed delay size it
// down there. GCC says so with __SANITIZE_ADDRESS__, clang through __has_feature.
#if defined(__SANITIZE_ADDRESS__)
#define LENET5_TESTS_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LENET5_TESTS_SANITIZED 1
#endif
#endif
#ifndef LENET5_TESTS_SANITIZED
#define LENET5_TESTS_SANITIZED 0
#endif
inline constexpr bool kSanitized = LENET5_TESTS_SANITIZED != 0;

inline fs::path source_dir() { return fs::path(LENET5_SOURCE_DIR); }
inline fs::path mnist_dir() { return source_dir() / "data" / "mnist"; }
inline bool have_mnist() {
  const std::string labels = mnist_dataset().test_labels.name;
  return fs::exists(mnist_dir() / labels) || fs::exists(mnist_dir() / (labels + ".gz"));
}
#define LENET5_REQUIRE_MNIST()                                                       \
  ASSERT_TRUE(::lenet5::testing::have_mnist())                                       \
      << "MNIST is not in " << ::lenet5::testing::mnist_dir()                        \
      << ": run scripts/fetch_mnist.sh (scripts/setup.sh does it)"

// Numbers as the bytes of a file format's fields (image and IDX headers).
inline std::string little_endian16(std::uint16_t value) {
  return {char(value & 0xFF), char(value >> 8)};
}
inline std::string little_endian32(std::uint32_t value) {
  return little_endian16(std::uint16_t(value & 0xFFFF)) +
         little_endian16(std::uint16_t(value >> 16));
}
inline std::string big_endian16(std::uint16_t value) {
  return {char(value >> 8), char(value & 0xFF)};
}
inline std::string big_endian32(std::uint32_t value) {
  return big_endian16(std::uint16_t(value >> 16)) + big_endian16(std::uint16_t(value & 0xFFFF));
}

// Whether `what` occurs in `text` (help texts, error messages, command output).
inline bool mentions(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// Writes `bytes` into `file` as they are, replacing what was there.
inline void write_bytes(const fs::path& file, const std::string& bytes) {
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
}

inline std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Sets or unsets LENET5_DATA for one test and restores the caller's value afterwards.
class DataEnv {
 public:
  explicit DataEnv(const char* value) {
    if (const char* old = std::getenv("LENET5_DATA")) m_old = old;
    if (value != nullptr)
      setenv("LENET5_DATA", value, 1);
    else
      unsetenv("LENET5_DATA");
  }
  ~DataEnv() {
    if (m_old)
      setenv("LENET5_DATA", m_old->c_str(), 1);
    else
      unsetenv("LENET5_DATA");
  }

 private:
  std::optional<std::string> m_old;
};

struct CommandResult {
  int exit_code = -1;
  std::string out, err;
};

// Runs `lenet5 <arguments>` (a shell fragment) with stdout and stderr captured.
inline CommandResult run_lenet5(const std::string& arguments, const TempDir& scratch) {
  const fs::path out = scratch / "stdout.txt", err = scratch / "stderr.txt";
  const std::string command = std::string("'") + LENET5_BINARY + "' " + arguments + " >'" +
                              out.string() + "' 2>'" + err.string() + "'";
  const int status = std::system(command.c_str());
  CommandResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.out = read_text(out);
  result.err = read_text(err);
  return result;
}

}  // namespace lenet5::testing
