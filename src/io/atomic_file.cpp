// Writing a file atomically (a temporary beside it, flushed, renamed, the folder synced) and
// removing the temporaries a killed writer left.
#include "io/atomic_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include "core/error.hpp"

namespace lenet5 {
namespace {

// What the user can do about the errors a full disk or a protected folder gives.
std::string remedy(int error) {
  switch (error) {
    case ENOSPC:
    case EDQUOT:
      return " (the disk is full or the quota is used up: free some space and try again)";
    case EFBIG:
      return " (a file size limit was reached: raise it with ulimit -f, or write elsewhere)";
    case EACCES:
    case EPERM:
    case EROFS:
      return " (the folder is not writable: make it writable or write elsewhere)";
    default:
      return "";
  }
}

[[noreturn]] void fail(const std::filesystem::path& target, const std::string& step, int error) {
  // std::system_category().message is the thread-safe spelling of strerror.
  throw Error("cannot write " + target.string() + ": " + step + ": " +
              std::system_category().message(error) + remedy(error));
}

// For the crash test only (tests/cpu/test_crash_safety.cpp): LENET5_TEST_SAVE_DELAY_MS=N makes
// every atomic write pause N milliseconds with half of its bytes in the temporary file, and again
// before the rename, so that a test can kill the process inside a write at will. Unset (always,
// outside that test) it costs one getenv per process and changes nothing.
std::chrono::milliseconds test_save_delay() {
  static const std::chrono::milliseconds delay = [] {
    const char* text = std::getenv("LENET5_TEST_SAVE_DELAY_MS");
    return std::chrono::milliseconds(text != nullptr ? std::atoi(text) : 0);
  }();
  return delay;
}

void pause_for_crash_test() {
  if (test_save_delay().count() > 0) std::this_thread::sleep_for(test_save_delay());
}

constexpr const char* kTemporaryMark = ".tmp.";

// The pid keeps concurrent processes apart, the counter keeps threads of one process apart;
// O_EXCL below makes any remaining clash an error instead of two writers sharing one file.
std::filesystem::path temporary_path_for(const std::filesystem::path& target) {
  static std::atomic<unsigned> counter{0};
  std::filesystem::path temp = target;
  temp += kTemporaryMark + std::to_string(::getpid()) + "." + std::to_string(counter++);
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

// The writer's pid if `name` is <target>.tmp.<pid>.<n>, else 0.
pid_t temporary_file_writer(const std::string& name) {
  const std::size_t mark = name.rfind(kTemporaryMark);
  if (mark == std::string::npos || mark == 0) return 0;
  const std::string rest = name.substr(mark + std::string(kTemporaryMark).size());
  if (rest.empty() || rest.find_first_not_of("0123456789.") != std::string::npos) return 0;
  unsigned long pid = 0, n = 0;
  char unused = 0;
  if (std::sscanf(rest.c_str(), "%lu.%lu%c", &pid, &n, &unused) != 2) return 0;
  return pid <= 0x7fffffff ? static_cast<pid_t>(pid) : 0;
}

}  // namespace

int remove_others_temporary_files(const std::filesystem::path& folder) {
  int n_removed = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(folder, error)) {
    const pid_t writer = temporary_file_writer(entry.path().filename().string());
    if (writer <= 0 || writer == ::getpid() || !entry.is_regular_file(error)) continue;
    if (std::filesystem::remove(entry.path(), error)) ++n_removed;
  }
  return n_removed;
}

void write_file_atomically(const std::filesystem::path& target,
                           std::initializer_list<std::string_view> pieces) {
  std::size_t n_bytes = 0;
  for (const std::string_view piece : pieces) n_bytes += piece.size();
  {
    TemporaryFile temp(target, temporary_path_for(target));
    // The crash test's pause falls after the first half of the bytes, wherever the pieces split.
    std::size_t before_pause = n_bytes / 2;
    for (std::string_view piece : pieces) {
      const std::size_t head = std::min(piece.size(), before_pause);
      temp.write_all(piece.substr(0, head));
      before_pause -= head;
      if (head > 0 && before_pause == 0) pause_for_crash_test();
      temp.write_all(piece.substr(head));
    }
    temp.sync_and_close();
    pause_for_crash_test();
    temp.rename_over_target();
  }
  sync_directory(target);
}

void write_file_atomically(const std::filesystem::path& target, std::string_view bytes) {
  write_file_atomically(target, {bytes});
}

void write_file_atomically(const std::filesystem::path& target,
                           const std::function<void(std::ostream&)>& writer) {
  std::ostringstream content;
  writer(content);
  if (!content) throw Error("cannot write " + target.string() + ": formatting its content failed");
  const std::string bytes = content.str();
  write_file_atomically(target, std::string_view(bytes));
}

std::string read_text_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error("cannot read " + file.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace lenet5
