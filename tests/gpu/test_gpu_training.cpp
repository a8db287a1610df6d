// The trainer on the GPU, end to end: a run resumed from its checkpoint ends with exactly the
// weights of an uninterrupted run, and same-seed runs write byte-identical checkpoints.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "cuda/runtime/runtime.hpp"
#include "train/checkpoint.hpp"
#include "train/trainer.hpp"

namespace lenet5 {
namespace {

namespace fs = std::filesystem;

#define REQUIRE_GPU_AND_MNIST()                                                         \
  do {                                                                                  \
    if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU tests need one"; \
    if (!fs::exists(mnist_dir() / "t10k-labels-idx1-ubyte") &&                          \
        !fs::exists(mnist_dir() / "t10k-labels-idx1-ubyte.gz"))                         \
      GTEST_SKIP() << "MNIST not in data/mnist: run scripts/fetch_mnist.sh";            \
  } while (0)

fs::path mnist_dir() { return fs::path(LENET5_SOURCE_DIR) / "data" / "mnist"; }

class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name)
      : m_path(fs::temp_directory_path() / ("lenet5-gpu-" + name + "-" + std::to_string(::getpid()))) {
    fs::remove_all(m_path);
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(m_path, ignored);
  }
  fs::path operator/(const std::string& part) const { return m_path / part; }

 private:
  fs::path m_path;
};

TrainSettings gpu_run(const fs::path& out, int epochs) {
  TrainSettings s;
  s.data_dir = mnist_dir().string();
  s.train_limit = 1280;
  s.epochs = epochs;
  s.device = "gpu";
  s.schedule = "constant";  // so that a 1-epoch run is exactly the first half of a 2-epoch run
  s.evaluate_every_epoch = false;
  s.out = out.string();
  return s;
}

std::string bytes_of(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

TEST(GpuTraining, ResumingAfterAnEpochGivesIdenticalWeights) {
  REQUIRE_GPU_AND_MNIST();
  ScratchDir straight("straight"), split("split");
  train(gpu_run(straight / "run", 2), "[train]\n");
  train(gpu_run(split / "run", 1), "[train]\n");
  const fs::path file = split / "run" / "last.safetensors";
  train(gpu_run(split / "run", 2), "[train]\n", load_checkpoint(file), file);
  const Checkpoint a = load_checkpoint(straight / "run" / "last.safetensors");
  const Checkpoint b = load_checkpoint(file);
  EXPECT_EQ(b.position.epoch, 2);
  EXPECT_EQ(a.parameters, b.parameters);
  ASSERT_EQ(a.optimizer_state.size(), 1u);  // the default momentum keeps SGD's velocity
  EXPECT_TRUE(a.optimizer_state == b.optimizer_state);
}

TEST(GpuTraining, SameSeedRunsWriteByteIdenticalCheckpoints) {
  REQUIRE_GPU_AND_MNIST();
  ScratchDir first("first"), second("second");
  train(gpu_run(first / "run", 1), "[train]\n");
  train(gpu_run(second / "run", 1), "[train]\n");
  EXPECT_EQ(bytes_of(first / "run" / "last.safetensors"),
            bytes_of(second / "run" / "last.safetensors"));
}

}  // namespace
}  // namespace lenet5
