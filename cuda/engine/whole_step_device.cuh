// What the whole-step stages and kernels share (whole_step_forward.cuh, whole_step_backward.cuh,
// whole_step_tf32.cuh, whole_step_update.cuh, whole_step.cu): the network's sizes as constants,
// the per-sample record in global memory, a block's shared working set, the sample kernel's
// arguments, programmatic dependent launch, the warp sum and the tensor cores' TF32 multiply-add.
//
// Included by whole_step.cu alone, the one translation unit that compiles the kernels (device
// code is not linked across files here): the unnamed namespace gives every definition internal
// linkage, as when all of it sat in that one file.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/net_config.hpp"
#include "core/shapes.hpp"
#include "cuda/engine/dependent_launch.cuh"
#include "cuda/engine/tensor_mma.cuh"
#include "cuda/engine/whole_step.cuh"

namespace lenet5::cuda {
namespace {

// 16 warps: the stages give different warps different work (C1's and C3's weight gradients run
// side by side), and 4 warps per scheduler hide shared-memory and L2 latency.
constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
// whole_step_sample_kernel2, for grids larger than the GPU's SMs, puts two sample blocks on an SM:
// while one waits at a barrier (the first stall of a lone block, whose stages keep only some of
// its warps busy) or on L2, the other's warps issue. That asks for at most 64 registers a thread
// (65,536 / (2 x 512)) and two working sets in one SM's shared memory (228 KB on sm_90, 1 KB of
// it reserved per block). whole_step.cu says when each version runs.
constexpr int kSampleBlocksPerSm = 2;
constexpr int kUpdateThreads = 256;
// The parts of the batch each of the update kernel's gradient sums is split into
// (whole_step_update.cuh): quarters (eighths measured slower, before the dense tiles were added).
constexpr int kUpdateSplit = 4;

constexpr int kField = 32, kImage = 28, kK = 5;
constexpr int kMaps1 = 6, kSide1 = 28, kSide2 = 14;  // C1 output, S2 output
constexpr int kMaps3 = 16, kSide3 = 10, kSide4 = 5;  // C3 output, S4 output
constexpr int kFlat4 = kMaps3 * kSide4 * kSide4;     // 400, C5's input
constexpr int kC5 = 120, kF6 = 84, kOut = 10;
constexpr int kW1 = kMaps1 * kK * kK;           // 150
constexpr int kW3 = kMaps3 * kMaps1 * kK * kK;  // 2,400
static_assert(kField == kInputSide && kImage == kImageSide, "the topology's input");

// dL/dC3 is kept with kPadRows zero rows above and below each map, so that the tensor cores'
// input-gradient correlation (C3's transposed convolution, whole_step_tf32.cuh) reads zeros instead
// of testing row bounds; the fp32 one leaves out the taps that would read them
// (c3_input_gradient_half).
constexpr int kPadRows = kK - 1;
constexpr int kPaddedRows3 = kSide3 + 2 * kPadRows;  // 18
// Its rows are 16 floats apart and its maps 8 floats more than 18 rows, so that the weight-gradient
// stage's two maps per warp fall in disjoint banks. (Chosen when a warp of the fp32 input-gradient
// stage read a column in two groups of 14 lanes 7 rows apart, which then fell in disjoint banks;
// its warps now read one row per load, and a warp that spans two quarters of the maps reads maps 4
// apart, 4 x 296 = 0 mod 32: the same banks.)
constexpr int kD3Row = 16, kD3Map = kPaddedRows3 * kD3Row + 8;
// c3.weight is kept transposed and padded as [m][c][q][8] with p in 0..4, so that a stage that
// needs the five p values of one (m, c, q) reads them as one float4 and one float.
constexpr int kW3Q = 8;
__device__ inline int w3_index(int m, int c, int q) {
  return ((m * 6 + c) * 5 + q) * kW3Q;
}

// The per-sample record in global memory, read by the update kernel. Offsets in floats.
namespace record {
constexpr int a4 = 0;                                  // S4's activation, C5's input (400)
constexpr int d5 = a4 + kFlat4;                        // dL/d(C5 pre-activation) (120)
constexpr int a5 = d5 + kC5;                           // C5's activation (120)
constexpr int d6 = a5 + kC5;                           // dL/d(F6 pre-activation) (84)
constexpr int a6 = d6 + kF6;                           // F6's activation (84)
constexpr int d7 = a6 + kF6;                           // dL/dlogits (10)
constexpr int g1 = d7 + kOut;                          // this sample's part of dL/dc1.weight (150)
constexpr int gb2 = g1 + kW1;                          // ... of dL/ds2.bias (6)
constexpr int g3 = gb2 + kMaps1;                       // ... of dL/dc3.weight (2,400)
constexpr int gb4 = g3 + kW3;                          // ... of dL/ds4.bias (16)
constexpr int floats = (gb4 + kMaps3 + 31) / 32 * 32;  // each record starts 128-byte aligned
}  // namespace record

// One sample's working set (about 104 KB, so the kernel opts in to more than 48 KB).
struct SampleShared {
  float x[kField * kField];                           // the normalised, padded input
  float w1[kW1];                                      // c1.weight
  // c3.weight, transposed: w3_index (--precision tf32: rounded, w3_tf32_index's layout)
  alignas(16) float w3[kMaps3 * kMaps1 * kK * kW3Q];
  float c1[kMaps1 * kSide1 * kSide1];                 // C1's output; later dL/dC1
  float a2[kMaps1 * kSide2 * kSide2];                 // S2's activation
  float d2[kMaps1 * kSide2 * kSide2];                 // dL/d(S2 pre-activation)
  float c3[kMaps3 * kSide3 * kSide3];                 // C3's output
  float d3[kMaps3 * kD3Map];  // dL/dC3, rows padded with zeros (kD3Row, kD3Map)
  alignas(16) float a4[kFlat4];
  float d4[kFlat4];  // dL/d(S4 pre-activation)
  alignas(16) float a5[kC5];
  float d5[kC5];
  alignas(16) float a6[kF6];
  float d6[kF6];
  float z[kOut];   // logits
  float d7[kOut];  // dL/dlogits
  int label;       // the sample's label, read with its image
  // Partial sums that one stage combines in a fixed order: C3's two halves of input maps, its input
  // gradient's quarters of output maps, the dense layers' input gradients per warp, C1's weight
  // gradient per output column.
  // The input's augmentation works here too, before any stage needs the partial sums.
  alignas(16) float scratch[kWarps * kFlat4];
};
static_assert(kW1 * kSide1 <= kWarps * kFlat4, "C1's column partials fit the scratch");
static_assert(kSampleBlocksPerSm * (sizeof(SampleShared) + 1024) <= 228 * 1024,
              "two working sets fit an sm_90 SM's shared memory");
static_assert(sizeof(AugmentScratch) <= sizeof(float) * kWarps * kFlat4,
              "the augmentation's working set fits the scratch");

struct SampleArgs {
  const std::uint8_t* images;
  const std::uint8_t* labels;
  const std::int32_t* indices;
  int n;
  DeviceAugmentation augment;  // kind none: the image as it is
  PixelScaling scaling;        // of the network's input (core/net_config.hpp's InputScaling)
  const float* params;
  WholeStepOffsets at;
  float* records;
  double* sample_loss;
  std::int32_t* sample_correct;  // null: not written (an evaluation reads `predicted`)
  ModelGroup group;
  std::size_t samples_stride;  // records and sample slots per model: max_batch, or the n evaluated
  std::int32_t* predicted;     // (models, samples_stride) predicted classes; null: not written
};

// The arguments as model m of the group sees them (whole_step.cuh's ModelGroup).
__device__ inline SampleArgs args_of_model(SampleArgs args, int m) {
  if (args.indices) args.indices += m * args.group.indices_stride;
  args.params += m * args.group.params_stride;
  if (args.records) args.records += m * args.samples_stride * record::floats;
  args.sample_loss += m * args.samples_stride;
  if (args.sample_correct) args.sample_correct += m * args.samples_stride;
  if (args.predicted) args.predicted += m * args.samples_stride;
  if (args.group.augment_seeds) args.augment.seed = args.group.augment_seeds[m];
  return args;
}

// The update kernel's arguments (whole_step.cu).
struct UpdateArgs {
  WholeStepOffsets at;
  const float* records;
  int n;
  const float* c3_mask;
  float mu;
  bool nesterov;
  float decay;
  const float* lr;       // null: no update (the gradient only)
  float* params;         // null with lr null
  float* velocity;       // null without momentum
  float* gradients_out;  // null: not written
  const double* sample_loss;
  const std::int32_t* sample_correct;
  StepStats* stats;  // null: not counted
  ModelGroup group;
  std::size_t samples_stride;
};

__device__ inline UpdateArgs args_of_model(UpdateArgs args, int m) {
  args.records += m * args.samples_stride * record::floats;
  args.sample_loss += m * args.samples_stride;
  args.sample_correct += m * args.samples_stride;
  if (args.lr) args.lr += m * args.group.slots_stride;
  if (args.stats) args.stats += m * args.group.slots_stride;
  if (args.params) args.params += m * args.group.params_stride;
  if (args.velocity) args.velocity += m * args.group.params_stride;
  if (args.gradients_out) args.gradients_out += m * args.group.params_stride;
  return args;
}

// Programmatic dependent launch (dependent_launch.cuh): each whole-step kernel lets the next one
// in the stream be scheduled while it runs (allow_next_grid), and reads nothing the previous one
// writes, and writes nothing it reads, before wait_for_previous_grid(). The launch latency between
// the two kernels of a step, and between steps, then overlaps with work. The parameters are read
// with plain loads, not __ldg: the read-only path is only defined for data that no grid running at
// the same time writes, and with programmatic launch the previous step's update may still be
// running when this grid starts.

// --precision tf32 (whole_step_tf32.cuh, whole_step_update.cuh): the tensor cores' TF32 rounding
// and m16n8k8 product, shared with the tensor-core kernel set (tensor_mma.cuh). The host asks the
// loaded kernel's PTX version (whole_step.cu's has_tensor_float32) and refuses --precision tf32
// without the instructions, so their traps on older architectures are never reached.
using mma::mma_tf32;
using mma::rounded_to_tf32;
using mma::to_tf32;

__device__ float warp_sum(float value) {
  // A butterfly: every lane ends with the same sum, combined in the same order every run.
  for (int offset = 16; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

}  // namespace
}  // namespace lenet5::cuda
