// TemporaryFolder: a fresh folder under the system's temporary folder, removed with everything in
// it when it goes.
#include "io/temporary_folder.hpp"

#include <unistd.h>

#include <atomic>

namespace lenet5 {

namespace fs = std::filesystem;

TemporaryFolder::TemporaryFolder(const std::string& prefix) {
  static std::atomic<int> counter{0};
  m_path = fs::temp_directory_path() /
           (prefix + "-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
  fs::remove_all(m_path);  // a folder left by an earlier process with the same id
  fs::create_directories(m_path);
}

TemporaryFolder::~TemporaryFolder() {
  std::error_code ignored;  // never throws from a destructor
  fs::remove_all(m_path, ignored);
}

}  // namespace lenet5
