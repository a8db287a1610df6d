// Shared helpers of the GPU suite's end-to-end training tests (test_gpu_training.cpp,
// test_packed_training.cpp): the MNIST folder, a scratch folder per test, a file's bytes, and the
// skip without a device or without MNIST.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "cuda/runtime/runtime.hpp"

namespace lenet5::test {

inline std::filesystem::path mnist_dir() {
  return std::filesystem::path(LENET5_SOURCE_DIR) / "data" / "mnist";
}

// A folder under the temporary directory, named after the test and the process (ctest runs the
// tests side by side, each in its own process), emptied first and removed afterwards.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name)
      : m_path(std::filesystem::temp_directory_path() /
               ("lenet5-gpu-" + name + "-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(m_path);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(m_path, ignored);
  }
  std::filesystem::path operator/(const std::string& part) const { return m_path / part; }

 private:
  std::filesystem::path m_path;
};

// The file's bytes; a missing file fails the test (two missing files would compare equal).
inline std::string bytes_of(const std::filesystem::path& file) {
  EXPECT_TRUE(std::filesystem::exists(file)) << file;
  std::ifstream in(file, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace lenet5::test

#define REQUIRE_GPU_AND_MNIST()                                                               \
  do {                                                                                        \
    if (::lenet5::cuda::device_count() == 0)                                                  \
      GTEST_SKIP() << "no CUDA device: GPU tests need one";                                   \
    if (!std::filesystem::exists(::lenet5::test::mnist_dir() / "t10k-labels-idx1-ubyte") &&   \
        !std::filesystem::exists(::lenet5::test::mnist_dir() / "t10k-labels-idx1-ubyte.gz"))  \
      GTEST_SKIP() << "MNIST not in data/mnist: run scripts/fetch_mnist.sh";                  \
  } while (0)
