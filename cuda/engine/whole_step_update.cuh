// The update kernel's work (whole_step_update_kernel, whole_step.cu): the batch gradient of every
// parameter from the samples' records, in a fixed order, then the SGD update.
//
// Each gradient is summed in kUpdateSplit parts of the batch (the tensor cores' dense tiles, below:
// kMmaParts), each part in sample order, and the parts are added in order: a fixed order, so every
// run gives the same bits, with the parts on different threads (one thread per parameter summing
// the whole batch had waited on memory with a quarter of the SM's warps: roofline_whole_step.sh).
// Two kinds of blocks do it, below.
//
// Included by whole_step.cu alone, the one translation unit that compiles the kernels (device
// code is not linked across files here): the unnamed namespace gives every definition internal
// linkage, as when all of it sat in that one file.
#pragma once

#include <cstddef>

#include "cuda/engine/whole_step_device.cuh"
#include "cuda/kernels/sgd_element.cuh"

namespace lenet5::cuda {
namespace {

// The update kernel's blocks come in two kinds (whole_step_update_kernel): first the flat
// parameters, kUpdateSplit threads each, then the dense layers' weights in tiles.
//
// The flat parameters are the tensors between the dense weights: C1's and C3's weights, the
// subsampling biases and the dense biases, whose gradients are sums of one record value per
// sample. flat_segments lists them as [begin, end) ranges of the buffer, each covered by whole
// blocks of kFlatPerBlock parameters.
constexpr int kFlatPerBlock = kUpdateThreads / kUpdateSplit;
constexpr int kFlatSegments = 4;
struct FlatSegments {
  int begin[kFlatSegments], end[kFlatSegments];
};
__host__ __device__ inline FlatSegments flat_segments(const WholeStepOffsets& at) {
  return {{0, at.c5_weight + kFlat4 * kC5, at.f6_weight + kC5 * kF6, at.output_weight + kF6 * kOut},
          {at.c5_weight, at.f6_weight, at.output_weight, at.buffer_floats}};
}
__host__ __device__ inline int segment_blocks(const FlatSegments& segments, int k) {
  return (segments.end[k] - segments.begin[k] + kFlatPerBlock - 1) / kFlatPerBlock;
}
__host__ __device__ inline int flat_blocks(const WholeStepOffsets& at) {
  const FlatSegments segments = flat_segments(at);
  int blocks = 0;
  for (int k = 0; k < kFlatSegments; ++k) blocks += segment_blocks(segments, k);
  return blocks;
}
// The flat parameter that column `column` of flat block `block` sums, or -1 past its segment.
__device__ int flat_parameter(const WholeStepOffsets& at, int block, int column) {
  const FlatSegments segments = flat_segments(at);
  for (int k = 0; k < kFlatSegments; ++k) {
    const int blocks = segment_blocks(segments, k);
    if (block < blocks) {
      const int p = segments.begin[k] + block * kFlatPerBlock + column;
      return p < segments.end[k] ? p : -1;
    }
    block -= blocks;
  }
  return -1;
}

// A dense weight tile: kWarpsPerPart x Rows rows of kTileColumns weights. A warp takes Rows rows
// of it and one part of the batch, four adjacent weights per lane and row, so that each float4 of
// inputs a lane loads serves 4 x Rows parameters (the flat kind loads two values per multiply-add,
// and waited on L2 for most of its time). Rows is 1, 2 or 4 (dense_tile_rows, whole_step.cu,
// picks): with 4, each input is read from L2 a quarter as often, by a quarter as many blocks.
constexpr int kWarpsPerPart = kUpdateThreads / 32 / kUpdateSplit;  // 2
constexpr int kTileColumns = 4 * 32;                               // 128
static_assert(kUpdateThreads % (32 * kUpdateSplit) == 0 && kWarpsPerPart >= 1,
              "a block holds whole warps per part of the batch, and whole parts");
static_assert(record::a4 % 4 == 0 && record::a5 % 4 == 0 && record::a6 % 4 == 0,
              "a dense tile reads its layer's inputs from the records as float4");
// Rows' dL/dz values are read as one float4 (4) or float2 (2, from an even first row o0).
static_assert(record::d5 % 4 == 0 && record::d6 % 4 == 0 && record::d7 % 4 == 0 &&
                  record::d7 + (kOut + 3) / 4 * 4 <= record::floats,
              "four rows' dL/dz are read as a float4, the output layer's last past its 10 rows "
              "but inside the record (Rows is 1, 2 or 4)");
template <int In, int Out, int Rows>
constexpr int dense_tiles() {
  constexpr int kTileRows = kWarpsPerPart * Rows;
  return (Out + kTileRows - 1) / kTileRows * ((In + kTileColumns - 1) / kTileColumns);
}
template <int Rows>
constexpr int all_dense_tiles() {
  return dense_tiles<kFlat4, kC5, Rows>() + dense_tiles<kC5, kF6, Rows>() +
         dense_tiles<kF6, kOut, Rows>();
}

// The flat parameter p's gradient summed over samples [first, end) of the batch in sample order:
// sum_s record[s][at_in_record + k] for the k-th value of the tensor the record keeps at
// at_in_record.
__device__ float flat_gradient(const WholeStepOffsets& at, int p, const float* records, int first,
                               int end, const float* c3_mask) {
  const auto summed = [&](int offset, int at_in_record) {
    float acc = 0.0f;
#pragma unroll 8
    for (int s = first; s < end; ++s)
      acc += records[std::size_t(s) * record::floats + at_in_record + p - offset];
    return acc;
  };
  if (p < at.s2_bias) return summed(at.c1_weight, record::g1);
  if (p < at.c3_weight) return summed(at.s2_bias, record::gb2);
  // Disconnected C3 weights get no gradient.
  if (p < at.s4_bias) return summed(at.c3_weight, record::g3) * c3_mask[p - at.c3_weight];
  if (p < at.c5_weight) return summed(at.s4_bias, record::gb4);
  if (p < at.f6_weight) return summed(at.c5_bias, record::d5);
  if (p < at.output_weight) return summed(at.f6_bias, record::d6);
  return summed(at.output_bias, record::d7);
}

// Whether flat index p is a parameter of a tensor rather than the alignment padding between
// tensors (never read, never updated).
__device__ bool is_flat_parameter(const WholeStepOffsets& at, int p) {
  const auto inside = [p](int offset, int count) { return p >= offset && p < offset + count; };
  return inside(at.c1_weight, kW1) || inside(at.s2_bias, kMaps1) || inside(at.c3_weight, kW3) ||
         inside(at.s4_bias, kMaps3) || inside(at.c5_bias, kC5) || inside(at.f6_bias, kF6) ||
         inside(at.output_bias, kOut);
}

// Parameter p's batch gradient is known: the SGD update (lr not null), or the gradient itself
// (gradients_out not null).
__device__ void apply_gradient(const UpdateArgs& args, int p, float gradient) {
  if (args.gradients_out) args.gradients_out[p] = gradient;
  if (args.lr)
    sgd_update_element(args.mu, args.nesterov, args.decay, *args.lr, gradient, args.params + p,
                       args.velocity ? args.velocity + p : nullptr);
}

// Where part c of the batch starts: part c sums samples
// [c * n / kUpdateSplit, (c + 1) * n / kUpdateSplit).
__device__ int first_of_part(int part, int n) {
  return part * n / kUpdateSplit;
}

// The flat kind: kUpdateSplit threads per parameter, thread c summing the c-th part of the batch
// in sample order, and the first adding the parts in order (((q0 + q1) + q2) + q3).
__device__ void update_flat_parameters(const UpdateArgs& args, int block) {
  __shared__ float partial[kUpdateSplit][kFlatPerBlock];
  const int column = threadIdx.x % kFlatPerBlock, part = threadIdx.x / kFlatPerBlock;
  const int p = flat_parameter(args.at, block, column);
  const bool is_parameter = p >= 0 && is_flat_parameter(args.at, p);
  partial[part][column] = is_parameter
                              ? flat_gradient(args.at, p, args.records, first_of_part(part, args.n),
                                              first_of_part(part + 1, args.n), args.c3_mask)
                              : 0.0f;
  __syncthreads();
  if (part != 0 || !is_parameter) return;
  float gradient = partial[0][column];
#pragma unroll
  for (int q = 1; q < kUpdateSplit; ++q) gradient += partial[q][column];
  apply_gradient(args, p, gradient);
}

template <int Rows>
using TilePartials = float4[kUpdateSplit - 1][kWarpsPerPart * Rows][32];

// A dense weight (o, i) of a layer with In inputs: sum_s dy[s][o] * x[s][i], in the flat kind's
// parts and order (the order in which the update kernel summed the dense weights before their
// tiles, so the tiles changed no bit).
template <int In, int Out, int Rows>
__device__ void update_dense_tile(const UpdateArgs& args, int tile, int weight_at, int dy_at,
                                  int x_at, TilePartials<Rows>& partial) {
  static_assert(In % 4 == 0, "four adjacent weights of a row are read as one float4");
  static_assert(Rows == 1 || Rows == 2 || Rows == 4,
                "one row, two as a float2 or four as a float4");
  constexpr int kColumnTiles = (In + kTileColumns - 1) / kTileColumns;
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int part = warp / kWarpsPerPart, row0 = warp % kWarpsPerPart * Rows;
  const int o0 = tile / kColumnTiles * (kWarpsPerPart * Rows) + row0;  // rows o0 .. o0 + Rows - 1
  const int i = tile % kColumnTiles * kTileColumns + 4 * lane;
  const bool inside = o0 < Out && i < In;
  float4 acc[Rows];
#pragma unroll
  for (int k = 0; k < Rows; ++k) acc[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (inside) {
#pragma unroll 8
    for (int s = first_of_part(part, args.n); s < first_of_part(part + 1, args.n); ++s) {
      const float* r = args.records + std::size_t(s) * record::floats;
      const float4 x = *reinterpret_cast<const float4*>(r + x_at + i);
      float dy[Rows];  // rows past Out (the output layer's 10 and 11) are never stored
      if constexpr (Rows == 1) {
        dy[0] = r[dy_at + o0];
      } else if constexpr (Rows == 2) {
        const float2 d = *reinterpret_cast<const float2*>(r + dy_at + o0);
        dy[0] = d.x;
        dy[1] = d.y;
      } else {
        const float4 d = *reinterpret_cast<const float4*>(r + dy_at + o0);
        dy[0] = d.x;
        dy[1] = d.y;
        dy[2] = d.z;
        dy[3] = d.w;
      }
#pragma unroll
      for (int k = 0; k < Rows; ++k) {
        acc[k].x += dy[k] * x.x;
        acc[k].y += dy[k] * x.y;
        acc[k].z += dy[k] * x.z;
        acc[k].w += dy[k] * x.w;
      }
    }
  }
  if (part > 0)
#pragma unroll
    for (int k = 0; k < Rows; ++k) partial[part - 1][row0 + k][lane] = acc[k];
  __syncthreads();
  if (part > 0 || !inside) return;
#pragma unroll
  for (int k = 0; k < Rows; ++k) {
    if (o0 + k >= Out) break;
    float gradient[4] = {acc[k].x, acc[k].y, acc[k].z, acc[k].w};
#pragma unroll
    for (int q = 1; q < kUpdateSplit; ++q) {
      const float4 other = partial[q - 1][row0 + k][lane];
      gradient[0] += other.x;
      gradient[1] += other.y;
      gradient[2] += other.z;
      gradient[3] += other.w;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j)
      apply_gradient(args, weight_at + (o0 + k) * In + i + j, gradient[j]);
  }
}

// --precision tf32: the dense weights' gradients as matrix products on the tensor cores,
// G[o][i] = sum_s dy[s][o] x[s][i] in m16n8k8 TF32 tiles (fragments as whole_step_tf32.cuh gives
// them), M = o, N = i, K = the batch's samples. A block takes kMmaTileRows rows and
// kMmaTileColumns columns of a layer; its 8 warps each sum an eighth of the batch in sample order,
// 8 samples a step, loading the fragments straight from the records (a sample's dy and x values,
// rounded to TF32), and the eighths are added in warp order through shared memory. Each x value is
// then read by one block per 16 rows, where the fp32 tiles read it once per 2, 4 or 8 rows.
// Deterministic (a fixed order throughout); other bits than fp32's, as the tf32 stages are.
// They run for batches of kMmaMinBatch samples and more, where they measured faster than the fp32
// tiles in their one-row form (configs/fast.toml at batch 256, alone and 16 or 64 models packed;
// not measured since against the two- and four-row forms that fp32 now runs there); at batch 64
// and 128, with one or two steps of 8 samples per warp, the reduction through shared memory costs
// more than the sums (measured slower), and a tf32 run's smaller batches (its epoch's last one
// too) sum the dense weights with the fp32 tiles.
constexpr int kMmaMinBatch = 256;
constexpr int kMmaTileRows = 16, kMmaTileColumns = 32;
constexpr int kMmaParts = kUpdateThreads / 32;  // a warp per part of the batch
static_assert(kMmaTileRows * kMmaTileColumns % kUpdateThreads == 0, "whole outputs per thread");
template <int In, int Out>
constexpr int dense_mma_tiles() {
  return (Out + kMmaTileRows - 1) / kMmaTileRows * ((In + kMmaTileColumns - 1) / kMmaTileColumns);
}
constexpr int kDenseMmaTiles =
    dense_mma_tiles<kFlat4, kC5>() + dense_mma_tiles<kC5, kF6>() + dense_mma_tiles<kF6, kOut>();

// Rows padded by 4 floats: a warp's lanes of one t store to rows g = 0..7, 8 different banks.
using MmaPartials = float[kMmaParts][kMmaTileRows][kMmaTileColumns + 4];
template <int In, int Out>
__device__ void update_dense_tile_tf32(const UpdateArgs& args, int tile, int weight_at, int dy_at,
                                       int x_at, MmaPartials& partial) {
  constexpr int kColumnTiles = (In + kMmaTileColumns - 1) / kMmaTileColumns;
  constexpr int kNTiles = kMmaTileColumns / 8;
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
  const int o0 = tile / kColumnTiles * kMmaTileRows, i0 = tile % kColumnTiles * kMmaTileColumns;
  const int first = warp * args.n / kMmaParts, end = (warp + 1) * args.n / kMmaParts;
  // The rows and columns this lane reads; past the layer's, zeros.
  const int top = o0 + g, bottom = o0 + g + 8;
  float acc[kNTiles][4] = {};
  for (int s0 = first; s0 < end; s0 += 8) {
    const auto record = [&](int k) { return args.records + std::size_t(s0 + k) * record::floats; };
    const bool near = s0 + t < end, far = s0 + t + 4 < end;  // samples t and t + 4 of the step
    const float* r_near = record(near ? t : 0);
    const float* r_far = record(far ? t + 4 : 0);
    std::uint32_t a[4];
    a[0] = near && top < Out ? to_tf32(r_near[dy_at + top]) : 0u;
    a[1] = near && bottom < Out ? to_tf32(r_near[dy_at + bottom]) : 0u;
    a[2] = far && top < Out ? to_tf32(r_far[dy_at + top]) : 0u;
    a[3] = far && bottom < Out ? to_tf32(r_far[dy_at + bottom]) : 0u;
#pragma unroll
    for (int j = 0; j < kNTiles; ++j) {
      const int i = i0 + 8 * j + g;
      const std::uint32_t b[2] = {near && i < In ? to_tf32(r_near[x_at + i]) : 0u,
                                  far && i < In ? to_tf32(r_far[x_at + i]) : 0u};
      mma_tf32(acc[j], a, b);
    }
  }
#pragma unroll
  for (int j = 0; j < kNTiles; ++j)
#pragma unroll
    for (int r = 0; r < 4; ++r) partial[warp][g + 8 * (r / 2)][8 * j + 2 * t + r % 2] = acc[j][r];
  __syncthreads();
  for (int k = threadIdx.x; k < kMmaTileRows * kMmaTileColumns; k += kUpdateThreads) {
    const int row = k / kMmaTileColumns, column = k % kMmaTileColumns;
    const int o = o0 + row, i = i0 + column;
    if (o >= Out || i >= In) continue;
    float gradient = partial[0][row][column];
#pragma unroll
    for (int w = 1; w < kMmaParts; ++w) gradient += partial[w][row][column];
    apply_gradient(args, weight_at + o * In + i, gradient);
  }
}

// Dense weight tile `tile` of the three layers' kDenseMmaTiles, in layer order (--precision tf32).
// The three layers' tiles share one array of partial sums (16 KB: one each would pass the 48 KB
// of static shared memory a kernel may have).
__device__ void update_dense_weights_tf32(const UpdateArgs& args, int tile) {
  __shared__ MmaPartials partial;
  constexpr int kC5Tiles = dense_mma_tiles<kFlat4, kC5>(), kF6Tiles = dense_mma_tiles<kC5, kF6>();
  if (tile < kC5Tiles)
    return update_dense_tile_tf32<kFlat4, kC5>(args, tile, args.at.c5_weight, record::d5,
                                               record::a4, partial);
  tile -= kC5Tiles;
  if (tile < kF6Tiles)
    return update_dense_tile_tf32<kC5, kF6>(args, tile, args.at.f6_weight, record::d6, record::a5,
                                            partial);
  update_dense_tile_tf32<kF6, kOut>(args, tile - kF6Tiles, args.at.output_weight, record::d7,
                                    record::a6, partial);
}

// Dense weight tile `tile` of the three layers' all_dense_tiles<Rows>(), in layer order. The three
// layers' tiles share one array of partial sums, as the tf32 ones do (one each would take three
// times the static shared memory: 36 KB with four rows).
template <int Rows>
__device__ void update_dense_weights(const UpdateArgs& args, int tile) {
  __shared__ TilePartials<Rows> partial;
  constexpr int kC5Tiles = dense_tiles<kFlat4, kC5, Rows>();
  constexpr int kF6Tiles = dense_tiles<kC5, kF6, Rows>();
  if (tile < kC5Tiles)
    return update_dense_tile<kFlat4, kC5, Rows>(args, tile, args.at.c5_weight, record::d5,
                                                record::a4, partial);
  tile -= kC5Tiles;
  if (tile < kF6Tiles)
    return update_dense_tile<kC5, kF6, Rows>(args, tile, args.at.f6_weight, record::d6, record::a5,
                                             partial);
  update_dense_tile<kF6, kOut, Rows>(args, tile - kF6Tiles, args.at.output_weight, record::d7,
                                     record::a6, partial);
}

}  // namespace
}  // namespace lenet5::cuda
