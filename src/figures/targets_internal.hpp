// How the CPU targets are split over source files (each stays a readable size); only
// chapter_targets.cpp and paper_targets.cpp include this.
#pragma once

#include <vector>

#include "figures/figures.hpp"

namespace lenet5::figures {

// §1.13-§1.22: Fig 16.14 and the unroll + GEMM path, Table 16.1, Exercises 4 and 5
// (chapter_gemm_targets.cpp). chapter_cpu_targets() appends them to its own.
std::vector<Target> chapter_gemm_cpu_targets();

}  // namespace lenet5::figures
