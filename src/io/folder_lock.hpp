// A lock on a folder for the life of a process: two trainings writing one run folder would
// overwrite each other's checkpoints, so the second is refused while the first holds the lock.
//
// The lock is flock() on <folder>/lock, which the kernel releases when the holder's descriptor
// closes, however the process ends (SIGKILL and power loss included): a lock whose holder is gone
// never blocks anyone. The file stays in the folder between runs (removing it would let two
// processes lock two different files of the same name); while held it holds the holder's pid,
// so the refusal can name the process.
#pragma once

#include <filesystem>
#include <string>

namespace lenet5 {

inline constexpr const char* kFolderLockFile = "lock";

class FolderLock {
 public:
  // Takes the lock without waiting. Throws lenet5::Error when another process holds it (naming its
  // pid, as `in_use_hint` continues: "wait for it to end or ..."), or when the lock file cannot be
  // created or opened.
  FolderLock(const std::filesystem::path& folder, const std::string& in_use_hint);
  // Empties the file (the pid would be stale) and releases the lock.
  ~FolderLock();
  FolderLock(FolderLock&& other) noexcept;
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;
  FolderLock& operator=(FolderLock&&) = delete;

  const std::filesystem::path& file() const { return m_file; }

 private:
  std::filesystem::path m_file;
  int m_fd = -1;
};

}  // namespace lenet5
