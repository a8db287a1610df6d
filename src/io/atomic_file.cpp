#include "io/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>

#include "core/error.hpp"

namespace lenet5 {
namespace {

[[noreturn]] void fail(const std::filesystem::path& target, const std::string& step, int error) {
  // std::system_category().message is the thread-safe spelling of strerror.
  throw Error("cannot write " + target.string() + ": " + step + ": " +
              std::system_category().message(error));
}

// The pid keeps concurrent processes apart, the counter keeps threads of one process apart;
// O_EXCL below makes any remaining clash an error instead of two writers sharing one file.
std::filesystem::path temporary_path_for(const std::filesystem::path& target) {
  static std::atomic<unsigned> counter{0};
  std::filesystem::path temp = target;
  temp += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  return temp;
}

// Owns the temporary file until it has been renamed over the target: whatever fails before
// that, the destructor closes the descriptor and unlinks the half-written file.
class TemporaryFile {
 public:
  TemporaryFile(const std::filesystem::path& target, std::filesystem::path path)
      : m_target(target), m_path(std::move(path)) {
    m_fd = ::open(m_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (m_fd < 0) fail(m_target, "open(" + m_path.string() + ")", errno);
  }
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  ~TemporaryFile() {
    if (m_fd >= 0) ::close(m_fd);
    if (!m_renamed) ::unlink(m_path.c_str());
  }

  void write_all(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n_written = ::write(m_fd, bytes.data(), bytes.size());
      if (n_written < 0 && errno == EINTR) continue;
      if (n_written < 0) fail(m_target, "write(" + m_path.string() + ")", errno);
      bytes.remove_prefix(static_cast<std::size_t>(n_written));
    }
  }

  // close() can report a deferred write error (NFS, full disk), so it is checked, not left to
  // the destructor.
  void sync_and_close() {
    if (::fsync(m_fd) != 0) fail(m_target, "fsync(" + m_path.string() + ")", errno);
    const int fd = m_fd;
    m_fd = -1;
    if (::close(fd) != 0) fail(m_target, "close(" + m_path.string() + ")", errno);
  }

  void rename_over_target() {
    if (::rename(m_path.c_str(), m_target.c_str()) != 0) {
      fail(m_target, "rename(" + m_path.string() + ")", errno);
    }
    m_renamed = true;
  }

 private:
  std::filesystem::path m_target;
  std::filesystem::path m_path;
  int m_fd = -1;
  bool m_renamed = false;
};

// Without this the rename may still be lost in a power failure even though the data is on disk.
// Some file systems cannot fsync a directory and answer EINVAL; the rename has then already
// happened and is as durable as that file system allows, so that one answer is not an error.
void sync_directory(const std::filesystem::path& target) {
  std::filesystem::path directory = target.parent_path();
  if (directory.empty()) directory = ".";
  const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail(target, "open(" + directory.string() + ")", errno);
  const int result = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (result != 0 && error != EINVAL) fail(target, "fsync(" + directory.string() + ")", error);
}

}  // namespace

void write_file_atomically(const std::filesystem::path& target, std::string_view bytes) {
  {
    TemporaryFile temp(target, temporary_path_for(target));
    temp.write_all(bytes);
    temp.sync_and_close();
    temp.rename_over_target();
  }
  sync_directory(target);
}

void write_file_atomically(const std::filesystem::path& target,
                           const std::function<void(std::ostream&)>& writer) {
  std::ostringstream content;
  writer(content);
  if (!content) throw Error("cannot write " + target.string() + ": formatting its content failed");
  const std::string bytes = content.str();
  write_file_atomically(target, std::string_view(bytes));
}

}  // namespace lenet5
