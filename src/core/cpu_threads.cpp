// The CPU thread count: what the machine offers, and the one setting OpenMP's loops use.
#include "core/cpu_threads.hpp"

#include <omp.h>
#include <sched.h>

#include <string>

#include "core/error.hpp"

namespace lenet5 {

int available_cpu_threads() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return 1;
  const int count = CPU_COUNT(&allowed);
  return count > 0 ? count : 1;
}

void use_cpu_threads(int threads) {
  if (threads < 1) throw UsageError("--threads must be at least 1, not " + std::to_string(threads));
  omp_set_num_threads(threads);
}

}  // namespace lenet5
