// The launch size of the element-wise kernels, whose grid-stride loops give one thread to each
// element: blocks of kThreads threads, at most kMaxBlocks of them (the loops cover the rest).
#pragma once

#include <algorithm>
#include <cstddef>

namespace lenet5::cuda {

constexpr int kThreads = 256;        // element-wise kernels: threads per block
constexpr int kMaxBlocks = 1 << 20;  // grid-stride loops cover anything beyond

inline int blocks_for(std::size_t count) {
  return int(std::min<std::size_t>((count + kThreads - 1) / kThreads, kMaxBlocks));
}

}  // namespace lenet5::cuda
