// Starting the lenet5 binary as a child process the test controls: killed at a chosen instant,
// run under resource limits, measured (wall time, peak memory).
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace lenet5::testing {

struct ChildOptions {
  std::vector<std::pair<std::string, std::string>> environment;  // added to the test's own
  std::optional<rlim_t> file_size_limit;  // RLIMIT_FSIZE in bytes, with SIGXFSZ ignored
  std::optional<rlim_t> cpu_seconds_limit;  // RLIMIT_CPU: a child spinning past it is killed
  std::filesystem::path stdout_file = "/dev/null", stderr_file = "/dev/null";
};

// Starts `lenet5 <arguments>` and returns its pid. Everything the child does between fork and
// exec is async-signal-safe, so this is safe in a test binary that has threads.
inline pid_t start_lenet5(const std::vector<std::string>& arguments, const ChildOptions& options) {
  std::vector<std::string> words{LENET5_BINARY};
  words.insert(words.end(), arguments.begin(), arguments.end());
  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  std::vector<std::string> variables;
  for (char** variable = environ; *variable != nullptr; ++variable) variables.push_back(*variable);
  for (const auto& [name, value] : options.environment) variables.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (std::string& variable : variables) envp.push_back(variable.data());
  envp.push_back(nullptr);
  const std::string out = options.stdout_file.string(), err = options.stderr_file.string();
  const pid_t child = fork();
  if (child != 0) return child;
  const int out_fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int err_fd = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (out_fd < 0 || err_fd < 0) _exit(126);
  dup2(out_fd, STDOUT_FILENO);
  dup2(err_fd, STDERR_FILENO);
  if (options.file_size_limit) {
    // Ignored, SIGXFSZ no longer kills the process at the limit: write() fails with EFBIG, as
    // it does on a full disk with ENOSPC, and the program's own error handling is what is seen.
    signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{*options.file_size_limit, *options.file_size_limit};
    if (setrlimit(RLIMIT_FSIZE, &limit) != 0) _exit(125);
  }
  if (options.cpu_seconds_limit) {
    const rlimit limit{*options.cpu_seconds_limit, *options.cpu_seconds_limit};
    if (setrlimit(RLIMIT_CPU, &limit) != 0) _exit(125);
  }
  execve(argv[0], argv.data(), envp.data());
  _exit(127);
}

struct ChildEnd {
  int status = 0;
  double wall_s = 0;
  long max_rss_kib = 0;  // the child's peak resident memory
  bool exited() const { return WIFEXITED(status); }
  int exit_code() const { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }
  bool killed_by(int signal) const { return WIFSIGNALED(status) && WTERMSIG(status) == signal; }
};

inline ChildEnd wait_for(
    pid_t child, std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now()) {
  ChildEnd end;
  rusage usage{};
  while (wait4(child, &end.status, 0, &usage) < 0 && errno == EINTR) {
  }
  end.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  end.max_rss_kib = usage.ru_maxrss;
  return end;
}

}  // namespace lenet5::testing
