// A scratch folder that cleans up after itself: `lenet5 bench` trains its runs in one, and the
// tests write their files in one.
#pragma once

#include <filesystem>
#include <string>

namespace lenet5 {

// A fresh, empty folder <system temporary folder>/<prefix>-<process id>-<n> (n counts the folders
// this process has made), removed with everything in it when the object goes.
class TemporaryFolder {
 public:
  explicit TemporaryFolder(const std::string& prefix);
  ~TemporaryFolder();
  TemporaryFolder(const TemporaryFolder&) = delete;
  TemporaryFolder& operator=(const TemporaryFolder&) = delete;

  const std::filesystem::path& path() const { return m_path; }
  std::filesystem::path operator/(const std::string& name) const { return m_path / name; }

 private:
  std::filesystem::path m_path;
};

}  // namespace lenet5
