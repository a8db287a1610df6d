// The augmentation on the device (core/augment.hpp says what it is; data/augment.hpp holds the
// double reference it is tested against). One block augments one sample: the same draws from the
// same keys, the affine map in double as on the host, the elastic field and the resampling in
// float. Two callers share it: the whole-step kernels fold it into their input gather, and
// gather_sample (cuda/kernels/gather_sample.cuh) into gather_augmented_batch's (the book and fast
// kernel sets) and the tensor-core convolutions' forward kernel's.
#pragma once

#include <cstdint>

#include "core/augment.hpp"
#include "core/shapes.hpp"

namespace lenet5::cuda {

// What a kernel needs to augment its samples. The epoch is read from device memory, so that an
// epoch captured once in a CUDA graph replays with each epoch's own value.
struct DeviceAugmentation {
  AugmentSettings settings;
  std::uint64_t seed = 0;
  const std::uint32_t* epoch = nullptr;  // device; one value
  LENET5_HD bool enabled() const { return settings.kind != AugmentKind::none; }
};

// The widest Gaussian the settings accept: radius ceil(3 * 28) = 84 on each side.
constexpr int kAugmentMaxTaps = 2 * 84 + 1;
static_assert(3 * kMaxElasticSigma <= 84, "kAugmentMaxTaps covers the widest Gaussian");

// The elastic field's noise and its first smoothing pass keep their rows kAugmentRowStride floats
// apart, one more than the image's width. That removed the four-way bank conflicts of a first
// pass whose lanes took one column of 32 consecutive rows. The pass as it is (four lines a thread,
// smooth_along_x) gives a warp 14 row groups at each of three or four columns, and then most of
// its loads are two-way conflicts with either stride: 88 % at 29 against 93 % at 28, at radius 12,
// by a model of the addresses.
constexpr int kAugmentRowStride = kImageSide + 1;
constexpr int kAugmentPlane = kImageSide * kAugmentRowStride;  // one field's floats, so laid out
// The resolution stage keeps the transformed image and its reduction in the first smoothing
// pass's buffer.
static_assert(2 * kAugmentPlane >= int(kImageBytes) + (kImageSide - 1) * (kImageSide - 1),
              "the first pass's buffer holds the image and its largest reduction");

// The shared memory augment_sample works in: the field's noise and its smoothed version (x and y
// each), the taps, the image's bytes, the affine map's terms and the map, the field's scale, the
// resolution stage's side.
struct AugmentScratch {
  // Uniform noise (rows kAugmentRowStride apart), then the smoothed field (rows kImageSide apart).
  float noise[2 * kAugmentPlane];
  float along_x[2 * kAugmentPlane];  // the first pass of the separable Gaussian
  float taps[kAugmentMaxTaps];     // unnormalised weights
  std::uint8_t image[kImageBytes];
  double terms[kAffineTerms];
  AffineMap map;
  float field_scale;
  int side;  // low_resolution_side's, drawn once for the block
};

// The device code below is compiled by nvcc only; host files (tests among them) see the types.
#ifdef __CUDACC__
namespace augment_detail {

// A pass of the Gaussian smooths 56 lines (the rows, or the columns, of both fields); a thread
// takes four of them, kLineGroups apart, at one position.
constexpr int kLines = 2 * kImageSide;
constexpr int kLinesAtOnce = 4;
constexpr int kLineGroups = kLines / kLinesAtOnce;    // 14
constexpr int kPassItems = kImageSide * kLineGroups;  // 392 threads' work
static_assert(kLines % kLinesAtOnce == 0, "the lines split into whole groups");

// Four outputs of a pass, at position `at` of four lines (rows, stride 1, or columns, stride
// kAugmentRowStride): for each, the taps k = -radius..radius in that order, each times the value
// at at + k clamped to the image (edges repeated). The taps past an edge all read that edge's
// value, loaded once: the same products in the same order as clamping at every tap, so the same
// bits, without a clamp per tap. The four sums are independent chains of multiply-adds that
// overlap, where one output at a time waits on each of its own.
__device__ inline void smooth_four(const float* (&line)[kLinesAtOnce], int stride, int at,
                                   const float* taps, int radius, float (&sum)[kLinesAtOnce]) {
  float edge[kLinesAtOnce];
#pragma unroll
  for (int q = 0; q < kLinesAtOnce; ++q) {
    sum[q] = 0.0f;
    edge[q] = line[q][0];
  }
  int k = -radius;
  for (; k < -at; ++k) {
    const float tap = taps[k + radius];
#pragma unroll
    for (int q = 0; q < kLinesAtOnce; ++q) sum[q] += tap * edge[q];
  }
  const int last_inside = min(radius, kImageSide - 1 - at);
  for (; k <= last_inside; ++k) {
    const float tap = taps[k + radius];
    const int offset = (at + k) * stride;
#pragma unroll
    for (int q = 0; q < kLinesAtOnce; ++q) sum[q] += tap * line[q][offset];
  }
#pragma unroll
  for (int q = 0; q < kLinesAtOnce; ++q) edge[q] = line[q][(kImageSide - 1) * stride];
  for (; k <= radius; ++k) {
    const float tap = taps[k + radius];
#pragma unroll
    for (int q = 0; q < kLinesAtOnce; ++q) sum[q] += tap * edge[q];
  }
}

// Line group + 14 q (q = 0-3) of an item's four, of the 56 (axis 28 + i): axis q / 2, i = group +
// 14 (q % 2), as group < 14 = 28 / 2. The four lines then lie constants apart, so that their loads
// share one address (dividing each line's index by 28 cost an eighth of a pass's instructions).
static_assert(2 * kLineGroups == kImageSide && kLinesAtOnce == 4, "an item's lines: 2 an axis");
__device__ constexpr int line_axis(int q) {
  return q / 2;
}
__device__ constexpr int line_in_axis(int group, int q) {
  return group + q % 2 * kLineGroups;
}

// Along x: rows of `noise` into `along_x` (both kAugmentRowStride apart). Consecutive threads take
// the same column of consecutive row groups, so a warp's lanes share their clamped ranges (three
// or four columns a warp) rather than diverge over 28 of them.
__device__ inline void smooth_along_x(const float* noise, float* along_x, const float* taps,
                                      int radius) {
  for (int item = threadIdx.x; item < kPassItems; item += blockDim.x) {
    const int x = item / kLineGroups, group = item % kLineGroups;
    int row_start[kLinesAtOnce];
    const float* rows[kLinesAtOnce];
#pragma unroll
    for (int q = 0; q < kLinesAtOnce; ++q) {
      row_start[q] = line_axis(q) * kAugmentPlane + line_in_axis(group, q) * kAugmentRowStride;
      rows[q] = noise + row_start[q];
    }
    float sum[kLinesAtOnce];
    smooth_four(rows, 1, x, taps, radius, sum);
#pragma unroll
    for (int q = 0; q < kLinesAtOnce; ++q) along_x[row_start[q] + x] = sum[q];
  }
}

// Along y: columns of `along_x` into `field` (rows kImageSide apart). Consecutive threads take
// consecutive column groups at one row (three or four rows a warp).
__device__ inline void smooth_along_y(const float* along_x, float* field, const float* taps,
                                      int radius) {
  for (int item = threadIdx.x; item < kPassItems; item += blockDim.x) {
    const int y = item / kLineGroups, group = item % kLineGroups;
    const float* columns[kLinesAtOnce];
#pragma unroll
    for (int q = 0; q < kLinesAtOnce; ++q)
      columns[q] = along_x + line_axis(q) * kAugmentPlane + line_in_axis(group, q);
    float sum[kLinesAtOnce];
    smooth_four(columns, kAugmentRowStride, y, taps, radius, sum);
#pragma unroll
    for (int q = 0; q < kLinesAtOnce; ++q)
      field[line_axis(q) * kImageBytes + y * kImageSide + line_in_axis(group, q)] = sum[q];
  }
}

}  // namespace augment_detail

// Augments `image` (28 x 28 bytes in global memory), sample `sample` of the current epoch, and
// calls store(p, grey) for every pixel p of the 28 x 28 result (grey in [0, 255], not rounded).
// Every thread of the block must call it (it synchronises the block). aug must be enabled.
// The serial parts run beside the parallel ones: the affine map's six terms on lane 0 of the
// block's first six warps at once (fewer warps take several), while the others draw the noise;
// then the map (and the resolution stage's side) and the field's scale each on one thread of the
// last two warps, while the rest smooth the field (with 512 threads those two have no smoothing of
// their own; with 256 they have one group of lines each).
template <class Store>
__device__ void augment_sample(const std::uint8_t* image, const DeviceAugmentation& aug,
                               std::uint32_t sample, AugmentScratch& scratch, Store store) {
  const AugmentSettings& s = aug.settings;
  const AugmentRandom random(aug.seed, *aug.epoch, sample);
  const bool elastic = s.kind == AugmentKind::elastic;
  const int radius = elastic ? gaussian_radius(s.elastic_sigma) : 0;
  const int warp = int(threadIdx.x) / 32, warps = (int(blockDim.x) + 31) / 32;
  if (threadIdx.x % 32 == 0)
    for (int term = warp; term < kAffineTerms; term += warps)
      scratch.terms[term] = affine_term(s, random, term);
  // The image's bytes are all read before the noise is drawn and written after it (a block of 196
  // threads or more, as every caller's, has them in registers): the draws hide the round trip to
  // memory, where a loop that wrote each byte as it came waited for four of them.
  constexpr int kHeldBytes = 4;
  std::uint8_t held[kHeldBytes];
#pragma unroll
  for (int b = 0; b < kHeldBytes; ++b) {
    const int p = int(threadIdx.x + b * blockDim.x);
    held[b] = p < int(kImageBytes) ? image[p] : 0;
  }
  if (elastic) {
    // Draw i (axis i / 784, pixel i % 784) sits at axis * 812 + y * 29 + x = i + i / 28: the rows
    // of both axes end to end, each one float longer.
    static_assert(
        kAugmentPlane == kImageSide * kAugmentRowStride && kAugmentRowStride == kImageSide + 1,
        "a row of noise is one float longer than the image's");
    for (int i = threadIdx.x; i < 2 * int(kImageBytes); i += blockDim.x) {
      const int rows_before = int(unsigned(i) / kImageSide);
      scratch.noise[i + rows_before] =
          float(random.symmetric_uniform(kDrawFieldNoise + std::uint32_t(i)));
    }
    for (int k = threadIdx.x; k <= 2 * radius; k += blockDim.x)
      scratch.taps[k] = float(gaussian_weight(k - radius, s.elastic_sigma));
  }
#pragma unroll
  for (int b = 0; b < kHeldBytes; ++b) {
    const int p = int(threadIdx.x + b * blockDim.x);
    if (p < int(kImageBytes)) scratch.image[p] = held[b];
  }
  for (int p = int(threadIdx.x + kHeldBytes * blockDim.x); p < int(kImageBytes); p += blockDim.x)
    scratch.image[p] = image[p];  // blocks of fewer than 196 threads
  __syncthreads();
  // The last thread of the block, and the last of the warp before it (past the 392 items of a
  // smoothing pass where the block has 512 threads).
  const unsigned map_thread = blockDim.x - 1, scale_thread = blockDim.x > 32 ? blockDim.x - 33 : 0;
  if (threadIdx.x == map_thread) {
    scratch.map = affine_map(scratch.terms);
    scratch.side = low_resolution_side(s, random);  // the block's, where each thread drew it
  }
  if (elastic) {
    if (threadIdx.x == scale_thread) {
      // alpha / (sum of taps)^2: each of the two passes normalises once
      float sum = 0.0f;
      for (int k = 0; k <= 2 * radius; ++k) sum += scratch.taps[k];
      scratch.field_scale = float(s.elastic_alpha) / (sum * sum);
    }
    augment_detail::smooth_along_x(scratch.noise, scratch.along_x, scratch.taps, radius);
    __syncthreads();
    augment_detail::smooth_along_y(scratch.along_x, scratch.noise, scratch.taps, radius);
  }
  __syncthreads();
  const AffineMap map = scratch.map;
  const float field_scale = elastic ? scratch.field_scale : 0.0f;
  const auto transformed = [&](int p) {
    float sx, sy;
    affine_source(map, p % kImageSide, p / kImageSide, sx, sy);
    if (elastic) {
      sx += field_scale * scratch.noise[p];
      sy += field_scale * scratch.noise[kImageBytes + p];
    }
    return bilinear_sample(scratch.image, sx, sy);
  };
  // The same side for the whole block (one sample's draws): every thread takes the same branch.
  const int side = scratch.side;
  if (side == 0) {
    for (int p = threadIdx.x; p < int(kImageBytes); p += blockDim.x) store(p, transformed(p));
    return;
  }
  // The resolution stage, in the first pass's buffer (free once the field is smoothed): the
  // transformed image, then its side x side reduction, then each pixel enlarged back.
  float* staged = scratch.along_x;
  float* low = scratch.along_x + kImageBytes;
  for (int p = threadIdx.x; p < int(kImageBytes); p += blockDim.x) staged[p] = transformed(p);
  __syncthreads();
  for (int q = threadIdx.x; q < side * side; q += blockDim.x)
    low[q] = area_mean<float>(RowMajorValues<float>{staged, kImageSide}, side, q % side, q / side);
  __syncthreads();
  for (int p = threadIdx.x; p < int(kImageBytes); p += blockDim.x)
    store(p, enlarged_bilinear<float>(RowMajorValues<float>{low, side}, side, p % kImageSide,
                                      p / kImageSide));
}
#endif  // __CUDACC__

}  // namespace lenet5::cuda
