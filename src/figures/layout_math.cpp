// The memory-sector model of Exercise 2: every warp's loads and stores replayed through the
// kernels' own thread mappings, and the distinct 32-byte sectors counted.
#include "figures/layout_math.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "figures/chapter_math.hpp"

namespace lenet5::figures {
namespace {

using cuda::ConvDims;

constexpr std::int64_t kWord = sizeof(float);

// One request: the byte addresses of its active threads.
void count(AccessCount& a, std::vector<std::int64_t>& byte_addresses) {
  ++a.requests;
  a.lanes += std::int64_t(byte_addresses.size());
  a.sectors += distinct_sectors(byte_addresses);
  byte_addresses.clear();
}

// The active threads of each warp of a block of the direct kernel, in linear thread-id order
// (x fastest, then y, then z, as CUDA numbers a block's threads).
template <class L>
std::vector<std::vector<cuda::DirectThread>> direct_warps(const ConvDims& d, const dim3& block,
                                                          const dim3& shape) {
  const unsigned per_block = shape.x * shape.y * shape.z;
  std::vector<std::vector<cuda::DirectThread>> warps;
  for (unsigned first = 0; first < per_block; first += cuda::kLayoutWarp) {
    std::vector<cuda::DirectThread> warp;
    for (unsigned i = first; i < std::min(first + cuda::kLayoutWarp, per_block); ++i) {
      const uint3 thread{i % shape.x, i / shape.x % shape.y, i / (shape.x * shape.y)};
      const cuda::DirectThread t =
          cuda::direct_thread<L>(d, uint3{block.x, block.y, block.z}, thread);
      if (t.active) warp.push_back(t);
    }
    if (!warp.empty()) warps.push_back(std::move(warp));
  }
  return warps;
}

template <class L>
KernelSectors direct_sectors(const ConvShape& s) {
  const ConvDims d = cuda::dims_of(s);
  const cuda::LaunchShape launch = cuda::direct_launch_shape<L>(d);
  const cuda::Extents xe = cuda::x_extents(d), ye = cuda::y_extents(d);
  KernelSectors out;
  std::vector<std::int64_t> a;
  for (unsigned bz = 0; bz < launch.grid.z; ++bz)
    for (unsigned by = 0; by < launch.grid.y; ++by)
      for (unsigned bx = 0; bx < launch.grid.x; ++bx)
        for (const auto& warp : direct_warps<L>(d, dim3(bx, by, bz), launch.block)) {
          for (int c = 0; c < d.C; ++c)
            for (int p = 0; p < d.K; ++p)
              for (int q = 0; q < d.K; ++q) {
                for (const auto& t : warp)
                  a.push_back(kWord * std::int64_t(L::offset(xe, t.n, c, t.h + p, t.w + q)));
                count(out.x_loads, a);
                for (const auto& t : warp)
                  a.push_back(kWord * std::int64_t(cuda::weight_index(d, t.m, c, p, q)));
                count(out.w_loads, a);
              }
          for (const auto& t : warp)
            a.push_back(kWord * std::int64_t(L::offset(ye, t.n, t.m, t.h, t.w)));
          count(out.stores, a);
        }
  return out;
}

template <class L>
KernelSectors unroll_sectors(const ConvShape& s) {
  const ConvDims d = cuda::dims_of(s);
  const cuda::Extents xe = cuda::x_extents(d);
  const std::size_t threads = std::size_t(s.n) * s.c * s.h_out() * s.w_out();
  KernelSectors out;
  std::vector<std::int64_t> a;
  std::vector<cuda::UnrollThread> warp;
  // 1-D blocks of 1,024 = 32 warps: warp i holds threads 32i .. 32i + 31 of the whole grid.
  for (std::size_t first = 0; first < threads; first += cuda::kLayoutWarp) {
    warp.clear();
    for (std::size_t t = first; t < first + cuda::kLayoutWarp; ++t) {
      const cuda::UnrollThread u = cuda::unroll_thread<L>(d, t);
      if (u.active) warp.push_back(u);
    }
    for (int p = 0; p < d.K; ++p)
      for (int q = 0; q < d.K; ++q) {
        for (const auto& u : warp)
          a.push_back(kWord * std::int64_t(L::offset(xe, u.n, u.c, u.h + p, u.w + q)));
        count(out.x_loads, a);
        for (const auto& u : warp) {
          const int row = (u.c * d.K + p) * d.K + q;
          a.push_back(kWord * std::int64_t(cuda::unrolled_offset<L>(d, u.n, row, u.s)));
        }
        count(out.stores, a);
      }
  }
  return out;
}

}  // namespace

KernelSectors direct_kernel_sectors(cuda::Layout layout, const ConvShape& s) {
  return cuda::with_layout(layout, [&](auto tag) { return direct_sectors<decltype(tag)>(s); });
}

KernelSectors unroll_kernel_sectors(cuda::Layout layout, const ConvShape& s) {
  return cuda::with_layout(layout, [&](auto tag) { return unroll_sectors<decltype(tag)>(s); });
}

}  // namespace lenet5::figures
