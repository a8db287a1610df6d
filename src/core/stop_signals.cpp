// The SIGINT/SIGTERM handler that records a stop request, installed while a StopSignals lives.
#include "core/stop_signals.hpp"

namespace lenet5 {
namespace {

volatile std::sig_atomic_t g_stop_signal = 0;
int g_depth = 0;  // StopSignals objects alive (one thread creates them all)

extern "C" void on_stop_signal(int signal_number) {
  if (g_stop_signal) {  // a second signal: the user insists, stop at once
    std::signal(signal_number, SIG_DFL);
    std::raise(signal_number);
  }
  g_stop_signal = signal_number;
}

}  // namespace

StopSignals::StopSignals() {
  if (g_depth++ > 0) return;  // inside another: its request, if any, stands
  g_stop_signal = 0;
  m_previous_int = std::signal(SIGINT, on_stop_signal);
  m_previous_term = std::signal(SIGTERM, on_stop_signal);
}

StopSignals::~StopSignals() {
  if (--g_depth > 0) return;
  std::signal(SIGINT, m_previous_int);
  std::signal(SIGTERM, m_previous_term);
}

int StopSignals::signal() const {
  return int(g_stop_signal);
}

}  // namespace lenet5
