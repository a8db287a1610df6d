// FolderLock: flock() on the folder's lock file, the holder's pid written in it for the refusal's
// message.
#include "io/folder_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <system_error>
#include <utility>

#include "core/error.hpp"

namespace lenet5 {
namespace {

std::string error_text(int error) {
  return std::system_category().message(error);
}

// The pid the holder wrote, or "unknown" while it has not written it yet.
std::string holder_pid(int fd) {
  char text[32] = {};
  const ssize_t n_read = ::pread(fd, text, sizeof text - 1, 0);
  std::string pid = n_read > 0 ? std::string(text, std::size_t(n_read)) : "";
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  return pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos ? "unknown" : pid;
}

void write_own_pid(int fd) {
  const std::string pid = std::to_string(::getpid()) + "\n";
  // Informational only (the flock is the lock): a failure to record it is not worth an error.
  if (::ftruncate(fd, 0) == 0) (void)!::pwrite(fd, pid.data(), pid.size(), 0);
}

}  // namespace

FolderLock::FolderLock(const std::filesystem::path& folder, const std::string& in_use_hint)
    : m_file(folder / kFolderLockFile) {
  m_fd = ::open(m_file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (m_fd < 0) {
    const int error = errno;
    throw Error("cannot lock " + folder.string() + ": open(" + m_file.string() +
                "): " + error_text(error) +
                (error == EACCES || error == EROFS
                     ? " (the folder is not writable: make it writable or choose another one)"
                     : ""));
  }
  int result;
  do {
    result = ::flock(m_fd, LOCK_EX | LOCK_NB);
  } while (result != 0 && errno == EINTR);
  if (result != 0) {
    const int error = errno;
    const std::string pid = holder_pid(m_fd);
    ::close(m_fd);
    m_fd = -1;
    if (error == EWOULDBLOCK)
      throw Error(folder.string() + " is in use by another process (pid " + pid + ", lock file " +
                  m_file.string() + "): " + in_use_hint);
    throw Error("cannot lock " + m_file.string() + ": flock: " + error_text(error));
  }
  write_own_pid(m_fd);
}

FolderLock::FolderLock(FolderLock&& other) noexcept
    : m_file(std::move(other.m_file)), m_fd(other.m_fd) {
  other.m_fd = -1;
}

FolderLock::~FolderLock() {
  if (m_fd < 0) return;
  (void)!::ftruncate(m_fd, 0);
  ::close(m_fd);  // releases the flock
}

}  // namespace lenet5
