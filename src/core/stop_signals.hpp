// Stopping a long command on SIGINT / SIGTERM: the first signal only asks (the command finishes
// what it is doing and stops cleanly: train saves, serve closes its socket), a second one stops the
// program at once. The handler only records the signal, so it is safe whichever thread the signal
// lands on (OpenBLAS and OpenMP start theirs before main, so blocking signals cannot steer it).
#pragma once

#include <csignal>

namespace lenet5 {

class StopSignals {
 public:
  // The outermost installs the handlers (and forgets any earlier request). One created while
  // another lives (train() inside a sweep) shares it: a signal that reached the sweep between two
  // models stops the next one at its first step instead of being forgotten.
  StopSignals();
  ~StopSignals();  // the outermost restores the handlers it replaced
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  bool requested() const { return signal() != 0; }
  int signal() const;  // SIGINT or SIGTERM once requested, else 0

 private:
  void (*m_previous_int)(int) = SIG_DFL;
  void (*m_previous_term)(int) = SIG_DFL;
};

}  // namespace lenet5
