// How many threads the CPU work of this process uses (the fast CPU layers, the CPU engine's
// augmentation and gathering, all through OpenMP). Results never depend on it: every parallel
// loop splits its work into pieces fixed by the data alone (layers/fast_cpu.hpp).
#pragma once

namespace lenet5 {

// The cores this process may run on (sched_getaffinity's count: what taskset or a container
// allows, not the machine's total); at least 1.
int available_cpu_threads();

// Every later parallel loop uses `threads` threads. UsageError below 1.
void use_cpu_threads(int threads);

}  // namespace lenet5
