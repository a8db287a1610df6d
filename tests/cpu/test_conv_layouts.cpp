// Exercise 2's layouts on the host (cuda/figures/conv_layouts.cuh, src/figures/layout_math.hpp): the index
// helpers are bijections and NCHW's is the project's own, the conversions invert each other, the
// kernels' thread mappings cover every output once, and the sector model counts what a hand count
// gives (and Exercise 5's model where both apply). The kernels themselves run in
// tests/gpu/test_conv_layouts.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "cuda/figures/conv_layouts.cuh"
#include "figures/chapter_math.hpp"
#include "figures/layout_math.hpp"

namespace lenet5 {
namespace {

using cuda::Layout;

// N = 3, C = 2, 6x5 input, M = 4 maps of 4x3, K = 3: every extent distinct, so a swapped index
// shows.
const ConvShape kSmall{3, 2, 6, 5, 4, 3};

std::string name(Layout l) {
  return cuda::layout_name(l);
}

std::vector<ConvShape> lenet_shapes(int n) {
  return {ConvShape{n, 1, 32, 32, 6, 5}, ConvShape{n, 6, 14, 14, 16, 5},
          ConvShape{n, 16, 5, 5, 120, 5}};
}

// The offsets of every element of a tensor of extents e, in NCHW loop order.
std::vector<std::size_t> offsets(Layout layout, const cuda::Extents& e) {
  std::vector<std::size_t> out;
  cuda::with_layout(layout, [&](auto tag) {
    using L = decltype(tag);
    for (int n = 0; n < e.N; ++n)
      for (int c = 0; c < e.C; ++c)
        for (int h = 0; h < e.H; ++h)
          for (int w = 0; w < e.W; ++w) out.push_back(L::offset(e, n, c, h, w));
  });
  return out;
}

TEST(ConvLayouts, EveryLayoutIsABijectionOntoTheBuffer) {
  const cuda::ConvDims d = cuda::dims_of(kSmall);
  for (const cuda::Extents& e : {cuda::x_extents(d), cuda::y_extents(d)})
    for (Layout l : cuda::kLayouts) {
      std::vector<std::size_t> seen = offsets(l, e);
      std::sort(seen.begin(), seen.end());
      std::vector<std::size_t> all(seen.size());
      std::iota(all.begin(), all.end(), std::size_t(0));
      EXPECT_EQ(seen, all) << name(l) << " C=" << e.C;
    }
}

TEST(ConvLayouts, NchwIsTheProjectsIndex) {
  const cuda::ConvDims d = cuda::dims_of(kSmall);
  for (int n = 0; n < d.N; ++n)
    for (int c = 0; c < d.M; ++c)
      for (int h = 0; h < d.H_out; ++h)
        for (int w = 0; w < d.W_out; ++w) {
          EXPECT_EQ(cuda::layout::NCHW::offset(cuda::y_extents(d), n, c, h, w),
                    cuda::y_index(d, n, c, h, w));
          if (c < d.C) {
            EXPECT_EQ(cuda::layout::NCHW::offset(cuda::x_extents(d), n, c, h, w),
                      cuda::x_index(d, n, c, h, w));
          }
        }
}

// The strides the exercise's guidance is about: along w (threads on (h,w)) and along n.
TEST(ConvLayouts, StridesAlongWAndN) {
  const cuda::Extents e = cuda::x_extents(cuda::dims_of(kSmall));  // N 3, C 2, H 6, W 5
  auto stride_w = [&](auto tag) {
    using L = decltype(tag);
    return L::offset(e, 1, 1, 2, 3) - L::offset(e, 1, 1, 2, 2);
  };
  auto stride_n = [&](auto tag) {
    using L = decltype(tag);
    return L::offset(e, 2, 1, 2, 3) - L::offset(e, 1, 1, 2, 3);
  };
  EXPECT_EQ(stride_w(cuda::layout::NCHW{}), 1u);
  EXPECT_EQ(stride_w(cuda::layout::NHWC{}), 2u);   // C
  EXPECT_EQ(stride_w(cuda::layout::CHWN{}), 3u);   // N
  EXPECT_EQ(stride_n(cuda::layout::NCHW{}), 60u);  // C*H*W
  EXPECT_EQ(stride_n(cuda::layout::NHWC{}), 60u);  // H*W*C
  EXPECT_EQ(stride_n(cuda::layout::CHWN{}), 1u);
}

TEST(ConvLayouts, ConversionsPlaceEachElementAtItsOffsetAndInvertEachOther) {
  const cuda::Extents e = cuda::x_extents(cuda::dims_of(kSmall));
  std::vector<float> nchw(std::size_t(e.N) * e.C * e.H * e.W);
  std::iota(nchw.begin(), nchw.end(), 0.0f);
  for (Layout l : cuda::kLayouts) {
    const std::vector<float> data = cuda::to_layout(l, e, nchw);
    const std::vector<std::size_t> at = offsets(l, e);
    for (std::size_t i = 0; i < nchw.size(); ++i)
      ASSERT_EQ(data[at[i]], nchw[i]) << name(l) << " " << i;
    EXPECT_EQ(cuda::from_layout(l, e, data), nchw) << name(l);
  }
}

TEST(ConvLayouts, UnrolledOffsetsAreABijectionAndReadBackPerSample) {
  const cuda::ConvDims d = cuda::dims_of(kSmall);
  const int rows = d.C * d.K * d.K, HW = d.H_out * d.W_out;
  for (Layout l : cuda::kLayouts) {
    std::vector<float> buffer(cuda::unrolled_floats(kSmall), -1.0f);
    cuda::with_layout(l, [&](auto tag) {
      using L = decltype(tag);
      float v = 0;  // value = the element's position in the per-sample order
      for (int n = 0; n < d.N; ++n)
        for (int row = 0; row < rows; ++row)
          for (int s = 0; s < HW; ++s) buffer[cuda::unrolled_offset<L>(d, n, row, s)] = v++;
    });
    const std::vector<float> per_sample = cuda::unrolled_per_sample(l, kSmall, buffer);
    std::vector<float> expected(buffer.size());
    std::iota(expected.begin(), expected.end(), 0.0f);
    EXPECT_EQ(per_sample, expected) << name(l);  // also: no element left at -1, none written twice
  }
}

// Every output of the direct kernel has exactly one active thread, over the real launch shape.
TEST(ConvLayouts, DirectMappingCoversEveryOutputOnce) {
  for (int batch : {5, 64})
    for (const ConvShape& s : lenet_shapes(batch))
      for (Layout l : cuda::kLayouts) {
        const cuda::ConvDims d = cuda::dims_of(s);
        std::vector<int> hits(std::size_t(s.n) * s.m * s.h_out() * s.w_out());
        cuda::with_layout(l, [&](auto tag) {
          using L = decltype(tag);
          const cuda::LaunchShape launch = cuda::direct_launch_shape<L>(d);
          for (unsigned bz = 0; bz < launch.grid.z; ++bz)
            for (unsigned by = 0; by < launch.grid.y; ++by)
              for (unsigned bx = 0; bx < launch.grid.x; ++bx)
                for (unsigned ty = 0; ty < launch.block.y; ++ty)
                  for (unsigned tx = 0; tx < launch.block.x; ++tx) {
                    const cuda::DirectThread t =
                        cuda::direct_thread<L>(d, uint3{bx, by, bz}, uint3{tx, ty, 0});
                    if (t.active) ++hits[cuda::y_index(d, t.n, t.m, t.h, t.w)];
                  }
        });
        EXPECT_EQ(std::set<int>(hits.begin(), hits.end()), std::set<int>{1})
            << name(l) << " N=" << s.n << " C=" << s.c;
      }
}

TEST(ConvLayouts, UnrollMappingCoversEveryChannelAndPositionOnce) {
  for (const ConvShape& s : lenet_shapes(5))
    for (Layout l : cuda::kLayouts) {
      const cuda::ConvDims d = cuda::dims_of(s);
      const std::size_t HW = std::size_t(s.h_out()) * s.w_out(),
                        threads = std::size_t(s.n) * s.c * HW;
      std::vector<int> hits(threads);
      cuda::with_layout(l, [&](auto tag) {
        using L = decltype(tag);
        const std::size_t launched =
            (threads + cuda::kUnrollThreads - 1) / cuda::kUnrollThreads * cuda::kUnrollThreads;
        for (std::size_t t = 0; t < launched; ++t) {
          const cuda::UnrollThread u = cuda::unroll_thread<L>(d, t);
          if (!u.active) continue;
          ASSERT_EQ(u.h * s.w_out() + u.w, u.s);
          ++hits[(std::size_t(u.n) * s.c + u.c) * HW + u.s];
        }
      });
      EXPECT_EQ(std::set<int>(hits.begin(), hits.end()), std::set<int>{1})
          << name(l) << " C=" << s.c;
    }
}

// ---- the sector counter ------------------------------------------------------------------------

int sectors_of(std::vector<std::int64_t> bytes) {
  return figures::distinct_sectors(bytes);
}
std::vector<std::int64_t> floats_at(int count, std::int64_t first_byte,
                                    std::int64_t stride_floats) {
  std::vector<std::int64_t> bytes;
  for (int i = 0; i < count; ++i) bytes.push_back(first_byte + 4 * stride_floats * i);
  return bytes;
}

TEST(SectorCounter, HandCountedWarpRequests) {
  EXPECT_EQ(sectors_of(floats_at(32, 0, 1)), 4);   // 128 aligned bytes
  EXPECT_EQ(sectors_of(floats_at(32, 4, 1)), 5);   // shifted by one float: a fifth sector
  EXPECT_EQ(sectors_of(floats_at(32, 0, 2)), 8);   // stride 2: 256 bytes, half of each used
  EXPECT_EQ(sectors_of(floats_at(32, 0, 8)), 32);  // stride 32 B: a sector per thread
  EXPECT_EQ(sectors_of(floats_at(32, 0, 6)), 24);  // stride 24 B (NHWC, C = 6): 768 B / 32
  EXPECT_EQ(sectors_of(floats_at(32, 0, 0)), 1);   // one address: a broadcast
  EXPECT_EQ(sectors_of(floats_at(16, 16, 1)), 3);  // 64 B from byte 16: bytes 16..79
}

// A case small enough to count by hand: N = 32, C = 1, 5x5 input, M = 1, K = 5: one output per
// sample, 25 taps.
TEST(SectorCounter, DirectKernelOnOneOutputPerSample) {
  const ConvShape s{32, 1, 5, 5, 1, 5};
  // CHWN: one block of 32 x 8 threads; only warp 0 (output position 0) is active, its 32 lanes the
  // 32 samples: 25 X loads of 4 sectors, 25 W loads of 1 (all lanes read the same weight), 1 store
  // of 4 sectors.
  const figures::KernelSectors chwn = figures::direct_kernel_sectors(Layout::chwn, s);
  EXPECT_EQ(chwn.x_loads.requests, 25);
  EXPECT_EQ(chwn.x_loads.sectors, 100);
  EXPECT_EQ(chwn.w_loads.sectors, 25);
  EXPECT_EQ(chwn.stores.requests, 1);
  EXPECT_EQ(chwn.stores.sectors, 4);
  EXPECT_DOUBLE_EQ(chwn.x_loads.efficiency(), 1.0);
  // NCHW: 32 blocks (one per sample) of 16x16 threads, one of them active: 32 warps of one lane,
  // each 25 X loads, 25 W loads and a store of 1 sector.
  const figures::KernelSectors nchw = figures::direct_kernel_sectors(Layout::nchw, s);
  EXPECT_EQ(nchw.x_loads.requests, 32 * 25);
  EXPECT_EQ(nchw.x_loads.sectors, 32 * 25);
  EXPECT_EQ(nchw.loads().requests, 32 * 50);
  EXPECT_EQ(nchw.stores.sectors, 32);
  EXPECT_DOUBLE_EQ(nchw.x_loads.efficiency(), 1.0 / 8);
}

// Exercise 5's model (chapter_math.hpp) and this one, coded independently, on the same kernel:
// the NCHW unroll of one sample.
TEST(SectorCounter, UnrollModelAtOneSampleIsExercise5s) {
  for (const ConvShape& s : {ConvShape{1, 1, 32, 32, 6, 5}, ConvShape{1, 6, 14, 14, 16, 5}}) {
    const figures::KernelSectors mine = figures::unroll_kernel_sectors(Layout::nchw, s);
    const figures::SectorCounts ex5 = figures::unroll_sector_counts(s.c, s.h, s.w, s.k);
    EXPECT_DOUBLE_EQ(mine.x_loads.sectors_per_request(), ex5.x_reads) << s.c;
    EXPECT_DOUBLE_EQ(mine.stores.sectors_per_request(), ex5.writes_fig16_14) << s.c;
    EXPECT_EQ(mine.x_loads.requests, ex5.requests) << s.c;
  }
}

// The guidance's claims on LeNet C3 (at N = 32: one warp of samples), as the model counts them.
TEST(SectorCounter, GuidanceOrderingOnC3) {
  const ConvShape c3{32, 6, 14, 14, 16, 5};
  const auto nchw = figures::direct_kernel_sectors(Layout::nchw, c3);
  const auto nhwc = figures::direct_kernel_sectors(Layout::nhwc, c3);
  const auto chwn = figures::direct_kernel_sectors(Layout::chwn, c3);
  EXPECT_LT(nchw.x_loads.sectors_per_request(), nhwc.x_loads.sectors_per_request());
  EXPECT_DOUBLE_EQ(chwn.x_loads.sectors_per_request(), 4.0);
  EXPECT_DOUBLE_EQ(chwn.stores.sectors_per_request(), 4.0);
  EXPECT_EQ(nhwc.stores.sectors, nhwc.stores.lanes);  // stride M = 16 floats = 64 B
}

}  // namespace
}  // namespace lenet5
