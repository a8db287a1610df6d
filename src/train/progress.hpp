// A one-line progress bar on stderr, drawn only when stderr is a terminal (never into logs or
// pipes) and redrawn at most ten times a second.
#pragma once

#include <chrono>
#include <string>

namespace lenet5 {

class ProgressBar {
 public:
  explicit ProgressBar(bool enabled);
  ~ProgressBar() { clear(); }
  void update(int done, int total, const std::string& label);
  void clear();

 private:
  bool m_enabled;
  bool m_drawn = false;
  std::chrono::steady_clock::time_point m_last{};
};

// True when stderr is a terminal and the log level shows progress.
bool progress_wanted();

}  // namespace lenet5
