// The augmentation on the device (core/augment.hpp says what it is; data/augment.hpp holds the
// double reference it is tested against). One team of threads (the block:
// cuda/kernels/block_team.cuh) augments one sample: the same draws from the
// same keys, the affine map in double as on the host, the elastic field and the resampling in
// float. Two callers share it: the whole-step kernels fold it into their input gather, and
// gather_sample (cuda/kernels/gather_sample.cuh) into gather_augmented_batch's (the book, fast and
// tensor-core kernel sets).
#pragma once

#include <cstdint>

#include "core/augment.hpp"
#include "core/shapes.hpp"
#include "cuda/kernels/block_team.cuh"

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
// apart, one more than the image's width: the first pass's lanes take one position of up to 32
// consecutive rows (smooth_along_x), and 29 floats apart those rows lie in distinct banks.
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
// takes a run of kRun consecutive outputs of one line.
constexpr int kLines = 2 * kImageSide;
constexpr int kRun = 4;
constexpr int kRunsPerLine = kImageSide / kRun;    // 7
constexpr int kPassItems = kLines * kRunsPerLine;  // 392 threads' work
static_assert(kImageSide % kRun == 0, "a line splits into whole runs");

// Outputs first .. first + kRun - 1 of a line (`stride` apart: a row, 1, or a column,
// kAugmentRowStride): output q (at first + q) is the sum, over the taps k = -radius..radius in
// that order, of taps[k + radius] times the line's value at first + q + k clamped to the line
// (edges repeated). The window's values (first - radius .. first + kRun - 1 + radius) are each
// read once and weighed into every output they reach, output q's with taps[j - q] for window
// value j: each output adds its products in k's order (the bits of a sum per output), and the
// shared-memory loads, which bound the pass, are shared by four outputs. Each product is one FMA
// by multiply_add, the form `sum += tap * v` compiles to, pinned: had a value stayed in a register
// over several window positions, nvcc could compute tap * value once for two outputs and round it
// apart from the sum. radius >= 1 (sigma > 0, as the settings' validation requires).
__device__ inline void smooth_run(const float* line, int stride, int first, const float* taps,
                                  int radius, float (&sum)[kRun]) {
  const int last_tap = 2 * radius;
  const auto value = [&](int j) {
    return line[min(max(first - radius + j, 0), kImageSide - 1) * stride];
  };
  float tap[kRun];  // tap[q]: taps[j - q], output q's tap for window value j
#pragma unroll
  for (int q = 0; q < kRun; ++q) sum[q] = tap[q] = 0.0f;
  const auto next_tap = [&tap](float t) {
#pragma unroll
    for (int q = kRun - 1; q > 0; --q) tap[q] = tap[q - 1];
    tap[0] = t;
  };
  // The window's first kRun - 1 values reach outputs 0..j only; radius >= 1 (sigma > 0), so
  // their taps exist.
#pragma unroll
  for (int j = 0; j < kRun - 1; ++j) {
    next_tap(taps[j]);
    const float v = value(j);
#pragma unroll
    for (int q = 0; q <= j; ++q) sum[q] = multiply_add(tap[q], v, sum[q]);
  }
  for (int j = kRun - 1; j <= last_tap; ++j) {
    next_tap(taps[j]);
    const float v = value(j);
#pragma unroll
    for (int q = 0; q < kRun; ++q) sum[q] = multiply_add(tap[q], v, sum[q]);
  }
  // The last kRun - 1 reach outputs e..kRun - 1 only.
#pragma unroll
  for (int e = 1; e < kRun; ++e) {
    next_tap(0.0f);
    const float v = value(last_tap + e);
#pragma unroll
    for (int q = e; q < kRun; ++q) sum[q] = multiply_add(tap[q], v, sum[q]);
  }
}

// Item `item` of a pass: its line (rows or columns of the x field, then of the y field) and its
// run. A warp's lanes take consecutive lines, at one run or at two (the same clamps within each),
// so that their loads fall in distinct banks but where the two fields or the two runs meet.
__device__ constexpr int item_line(int item) {
  return item % kLines;
}
__device__ constexpr int item_first(int item) {
  return item / kLines * kRun;
}

// Along x: rows of `noise` into `along_x` (both kAugmentRowStride apart), by `team`.
__device__ inline void smooth_along_x(const float* noise, float* along_x, const float* taps,
                                      int radius, const BlockTeam& team) {
  for (int item = team.thread(); item < kPassItems; item += team.size) {
    const int line = item_line(item), first = item_first(item);
    const int row_start = line / kImageSide * kAugmentPlane + line % kImageSide * kAugmentRowStride;
    float sum[kRun];
    smooth_run(noise + row_start, 1, first, taps, radius, sum);
#pragma unroll
    for (int q = 0; q < kRun; ++q) along_x[row_start + first + q] = sum[q];
  }
}

// Along y: columns of `along_x` into `field` (rows kImageSide apart), by `team`.
__device__ inline void smooth_along_y(const float* along_x, float* field, const float* taps,
                                      int radius, const BlockTeam& team) {
  for (int item = team.thread(); item < kPassItems; item += team.size) {
    const int line = item_line(item), first = item_first(item);
    const int axis = line / kImageSide, column = line % kImageSide;
    float sum[kRun];
    smooth_run(along_x + axis * kAugmentPlane + column, kAugmentRowStride, first, taps, radius,
               sum);
#pragma unroll
    for (int q = 0; q < kRun; ++q)
      field[axis * kImageBytes + (first + q) * kImageSide + column] = sum[q];
  }
}

}  // namespace augment_detail

// Augments `image` (28 x 28 bytes in global memory), sample `sample` of the current epoch, and
// calls store(p, grey) for every pixel p of the 28 x 28 result (grey in [0, 255], not rounded),
// by `team` (the block: cuda/kernels/block_team.cuh). Every thread of the block must call it (it
// synchronises the block). aug must be enabled.
// The serial parts run beside the parallel ones: the affine map's six terms on lane 0 of the
// block's first six warps at once (fewer warps take several) beside the noise's draws (with 12
// warps or more, drawn by the warps past those six only) and the taps (on the last threads); then
// the map (and the resolution stage's side) and the field's scale each on one thread of the last
// two warps, while the rest smooth the field (with 512 threads those two have no smoothing of
// their own; with 256 they have one run each). Each value is the same whatever the team's size.
// The index arithmetic keeps the team's unsigned types (block_team.cuh says why).
template <class Store>
__device__ void augment_sample(const std::uint8_t* image, const DeviceAugmentation& aug,
                               std::uint32_t sample, AugmentScratch& scratch, const BlockTeam& team,
                               Store store) {
  const AugmentSettings& s = aug.settings;
  const AugmentRandom random(aug.seed, *aug.epoch, sample);
  const bool elastic = s.kind == AugmentKind::elastic;
  const int radius = elastic ? gaussian_radius(s.elastic_sigma) : 0;
  const int warp = int(team.thread()) / 32, warps = (int(team.size) + 31) / 32;
  if (team.thread() % 32 == 0)
    for (int term = warp; term < kAffineTerms; term += warps)
      scratch.terms[term] = affine_term(s, random, term);
  // The image's bytes are all read before the noise is drawn and written after it (a block of 196
  // threads or more, as every caller's, has them in registers): the draws hide the round trip to
  // memory, where a loop that wrote each byte as it came waited for four of them. Read before the
  // terms, they stayed live through the trigonometry and raised the kernels' registers.
  constexpr int kHeldBytes = 4;
  std::uint8_t held[kHeldBytes];
#pragma unroll
  for (int b = 0; b < kHeldBytes; ++b) {
    const int p = int(team.thread() + b * team.size);
    held[b] = p < int(kImageBytes) ? image[p] : 0;
  }
  if (elastic) {
    // Draw i (axis i / 784, pixel i % 784) sits at axis * 812 + y * 29 + x = i + i / 28: the rows
    // of both axes end to end, each one float longer.
    static_assert(
        kAugmentPlane == kImageSide * kAugmentRowStride && kAugmentRowStride == kImageSide + 1,
        "a row of noise is one float longer than the image's");
    // A thread's draws are independent chains (the mixer's multiplies, the conversions):
    // kDrawsAtOnce of them made before any is stored overlap. A block of 12 warps or more leaves
    // the noise to the warps past the six that make the terms, whose lane 0 has the longer chain
    // already.
    constexpr int kDraws = 2 * int(kImageBytes), kDrawsAtOnce = 5;
    const int skipped = warps >= 2 * kAffineTerms ? 32 * kAffineTerms : 0;
    const int drawers = int(team.size) - skipped;
    for (int first = int(team.thread()) - skipped; first >= 0 && first < kDraws;
         first += kDrawsAtOnce * drawers) {
      float draw[kDrawsAtOnce];
#pragma unroll
      for (int d = 0; d < kDrawsAtOnce; ++d) {
        const int i = first + d * drawers;
        draw[d] =
            i < kDraws ? float(random.symmetric_uniform(kDrawFieldNoise + std::uint32_t(i))) : 0.0f;
      }
#pragma unroll
      for (int d = 0; d < kDrawsAtOnce; ++d) {
        const int i = first + d * drawers;
        if (i < kDraws) scratch.noise[i + int(unsigned(i) / kImageSide)] = draw[d];
      }
    }
    // The taps on the block's last threads, away from the first warps' terms.
    for (int k = int(team.size - 1 - team.thread()); k <= 2 * radius; k += team.size)
      scratch.taps[k] = float(gaussian_weight(k - radius, s.elastic_sigma));
  }
#pragma unroll
  for (int b = 0; b < kHeldBytes; ++b) {
    const int p = int(team.thread() + b * team.size);
    if (p < int(kImageBytes)) scratch.image[p] = held[b];
  }
  for (int p = int(team.thread() + kHeldBytes * team.size); p < int(kImageBytes); p += team.size)
    scratch.image[p] = image[p];  // blocks of fewer than 196 threads
  team.sync();
  // The last thread of the block, and the last of the warp before it (past the 392 items of a
  // smoothing pass where the block has 512 threads).
  const auto map_thread = team.size - 1, scale_thread = team.size > 32 ? team.size - 33 : 0;
  if (team.thread() == map_thread) {
    scratch.map = affine_map(scratch.terms);
    scratch.side = low_resolution_side(s, random);  // the block's, where each thread drew it
  }
  if (elastic) {
    if (team.thread() == scale_thread) {
      // alpha / (sum of taps)^2: each of the two passes normalises once
      float sum = 0.0f;
      for (int k = 0; k <= 2 * radius; ++k) sum += scratch.taps[k];
      scratch.field_scale = float(s.elastic_alpha) / (sum * sum);
    }
    augment_detail::smooth_along_x(scratch.noise, scratch.along_x, scratch.taps, radius, team);
    team.sync();
    augment_detail::smooth_along_y(scratch.along_x, scratch.noise, scratch.taps, radius, team);
  }
  team.sync();
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
    for (int p = team.thread(); p < int(kImageBytes); p += team.size) store(p, transformed(p));
    return;
  }
  // The resolution stage, in the first pass's buffer (free once the field is smoothed): the
  // transformed image, then its side x side reduction, then each pixel enlarged back.
  float* staged = scratch.along_x;
  float* low = scratch.along_x + kImageBytes;
  for (int p = team.thread(); p < int(kImageBytes); p += team.size) staged[p] = transformed(p);
  team.sync();
  for (int q = team.thread(); q < side * side; q += team.size)
    low[q] = area_mean<float>(RowMajorValues<float>{staged, kImageSide}, side, q % side, q / side);
  team.sync();
  for (int p = team.thread(); p < int(kImageBytes); p += team.size)
    store(p, enlarged_bilinear<float>(RowMajorValues<float>{low, side}, side, p % kImageSide,
                                      p / kImageSide));
}
#endif  // __CUDACC__

}  // namespace lenet5::cuda
