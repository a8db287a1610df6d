// What a lenet5 process loads when it starts: cuBLAS only once something calls it
// (cuda/runtime/cublas_library.hpp says why that matters).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "cuda/runtime/cublas_library.hpp"

namespace lenet5 {
namespace {

std::string mapped_files() {
  std::ifstream maps("/proc/self/maps");
  std::ostringstream text;
  text << maps.rdbuf();
  return text.str();
}

// This test binary links the same library code as lenet5; nothing in the CPU suite calls cuBLAS.
TEST(Startup, CublasIsNotLoadedUntilCalled) {
  const std::string maps = mapped_files();
  ASSERT_NE(maps.find("libcudart"), std::string::npos)
      << "the CUDA runtime is linked, so /proc/self/maps should list it:\n"
      << maps.substr(0, 2000);
  EXPECT_EQ(maps.find("libcublas"), std::string::npos) << "cuBLAS is mapped at start-up";
  EXPECT_FALSE(cuda::cublas::loaded());
}

}  // namespace
}  // namespace lenet5
