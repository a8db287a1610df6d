// The progress bar: drawn on stderr only when it is a terminal showing info lines, at most ten
// times a second.
#include "train/progress.hpp"

#include <spdlog/sinks/sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>

namespace lenet5 {

// The default logger's first sink is the terminal's (main.cpp); --quiet raises its level alone.
bool progress_wanted() {
  const std::vector<spdlog::sink_ptr>& sinks = spdlog::default_logger()->sinks();
  return isatty(STDERR_FILENO) && spdlog::should_log(spdlog::level::info) && !sinks.empty() &&
         sinks.front()->should_log(spdlog::level::info);
}

ProgressBar::ProgressBar(bool enabled) : m_enabled(enabled) {}

void ProgressBar::update(int done, int total, const std::string& label) {
  if (!m_enabled || total <= 0) return;
  const auto now = std::chrono::steady_clock::now();
  if (done < total && now - m_last < std::chrono::milliseconds(100)) return;
  m_last = now;
  constexpr int width = 30;
  const int filled = int(double(done) / total * width);
  std::string bar(filled, '=');
  if (filled < width) bar += '>' + std::string(width - filled - 1, ' ');
  std::fprintf(stderr, "\r%s [%s] %d/%d", label.c_str(), bar.c_str(), done, total);
  std::fflush(stderr);
  m_drawn = true;
}

void ProgressBar::clear() {
  if (!m_drawn) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  m_drawn = false;
}

}  // namespace lenet5
