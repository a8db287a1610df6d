// Where a flat index falls in a tensor of H x W maps, for the element-wise kernels whose
// grid-stride loops run over i = map*H*W + h*W + w (NCHW: map = n*C + c).
#pragma once

#include <cstddef>

namespace lenet5::cuda {

struct MapElement {
  int w, h;
  std::size_t map;  // n*C + c
};

__device__ __forceinline__ MapElement map_element(std::size_t i, int H, int W) {
  return {int(i % W), int(i / W % H), i / (std::size_t(W) * H)};
}

}  // namespace lenet5::cuda
