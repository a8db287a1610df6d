// The dense layers' weight gradients over a whole batch on the tensor cores, a warp per m16n8 tile
// of each product, from what the dense forward kernel keeps of each sample (dense_record::), and
// the step's statistics: the blocks of dense_gradient_block, which run in the convolutions'
// backward launch of a step (tensor_conv_backward.cu: on the SMs its samples' blocks leave room
// on, the products need nothing that launch computes) or in the step gradient kernel
// (tensor_backward.cu, TensorDenseBackward::weight_gradients). tensor_backward.cuh has the plan.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/engine/tensor_tile.cuh"
#include "cuda/engine/whole_step.cuh"
#include "cuda/kernels/block_reduce.cuh"
#include "cuda/kernels/loss.cuh"

namespace lenet5::cuda {

// What the dense forward kernel keeps of each sample for the gradient kernel, a row of
// dense_record::floats per sample in global memory: the activations of C5 and F6 and the output
// gradients of the output layer, F6 and C5, every value stored for R's products (Operands<R>::
// stored, as S4's rows are), so that the weight gradients take their bits as operands with no
// rounding at the load (TF32's rounding of each operand read was most of a dense block's time:
// docs/tensor-cores.md). The rows of a short last tile's missing samples are written too
// (zero gradients), so that a product's operands are always finite; the gradient kernel reads only
// the rows of real samples as k.
namespace dense_record {
constexpr int a5 = 0;                 // C5's activation (120)
constexpr int a6 = a5 + kC5;          // F6's activation (84)
constexpr int d7 = a6 + kF6;          // dL/dlogits (10)
constexpr int d6 = d7 + kOut;         // dL/d(F6 pre-activation) (84)
constexpr int d5 = d6 + kF6;          // dL/d(C5 pre-activation) (120)
constexpr int floats = d5 + kC5 + 2;  // 420: two floats of padding keep rows 16-byte aligned
static_assert(floats % 4 == 0, "rows of whole float4s");
}  // namespace dense_record

// k-steps whose operands a warp reads before their products in the dense weight gradients: 8 in
// every precision, a lane's 48 reads in flight. BF16's packing needs registers of its own (146 a
// thread at 16, 80 at 8) and its epoch measured shorter at 8; FP32's split operands at 16 took the
// launch that ran them to 190 registers a thread, one block an SM (two blocks an SM need at most
// 128); TF32's 16 (a batch of 128 in one round trip to L2 where 8 make two) measured longer than
// 8 in the convolutions' backward launch (docs/tensor-cores.md).
constexpr int kGradientChunk = 8;

struct DenseGradientArgs {
  const float* records;  // (tiles * kTile, dense_record::floats)
  const float* s4_rows;  // (n, 400)
  int n;
  float* gradients;  // the layout's gradient buffer
  WholeStepOffsets at;
  const double* sample_loss;           // (n), from the forward kernel
  const std::int32_t* sample_correct;  // (n)
  StepStats* stats;                    // the step's statistics, added to; or null
  int tiles_a_block = kWarps;          // the products' tiles a block (dense_gradient_block)
};

// The dense products' work where a launch runs it beside its own (the convolutions' backward
// launch): its arguments, and SGD's step to take with each gradient (none where update.lr is null).
struct DenseGradientWork {
  DenseGradientArgs args;
  SgdUpdate update;
};

// The dense weight gradients' products, each a set of m16n8 tiles, in the order the kernel's warps
// take them. A weight gradient with its bias is one product, dL/d[W | b] = dᵀ [x | 1] (Out, In +
// 1), k the batch's samples in order: its last column is the bias's column sum, in the same order.
namespace products {
constexpr int n_tiles(int n) {
  return (n + 7) / 8;
}
constexpr int tiles(int m, int n) {
  return (m + 15) / 16 * n_tiles(n);
}
constexpr int c5 = tiles(kC5, kFlat4 + 1);  // 408
constexpr int f6 = tiles(kF6, kC5 + 1);     // 96
constexpr int out = tiles(kOut, kF6 + 1);   // 11
constexpr int all = c5 + f6 + out;
}  // namespace products

// dL/d[W | b] = dᵀ [x | 1] for a dense layer of Out outputs and In inputs: d a record's column
// block (dL/d(the layer's pre-activation)), x the layer's input (rows of x_ld floats from x), k
// the n samples; writes the tile's part of the weight's and the bias's gradients, and takes
// SGD's step on those parameters where `update` asks for it.
template <Precision R, int Out, int In>
__device__ void weight_gradient_tile(int tile, const DenseGradientArgs& args, int d_at,
                                     const float* x, int x_ld, int weight_to, int bias_to,
                                     const SgdUpdate& update, int lane) {
  constexpr int kNTiles = products::n_tiles(In + 1);
  const float* records = args.records;
  float* gradients = args.gradients;
  mma_tile<R, kGradientChunk>(
      tile / kNTiles * 16, tile % kNTiles * 8, args.n,
      [records, d_at](int m, int k) {
        const float value = records[std::size_t(k) * dense_record::floats + d_at + min(m, Out - 1)];
        return __float_as_uint(m < Out ? value : 0.0f);  // stored for R's products: its operand
      },
      [x, x_ld](int k, int j) {
        const float value = x[std::size_t(k) * x_ld + min(j, In - 1)];
        return __float_as_uint(j < In ? value : (j == In ? 1.0f : 0.0f));  // the same, and 1 and 0
      },
      [gradients, weight_to, bias_to, &update](int m, int j, float value) {
        if (m >= Out || j > In) return;
        update.write(gradients, j < In ? weight_to + m * In + j : bias_to + m, value);
      },
      lane);
}

// Warp `tile` of the dense products' (products::): its m16n8 tile of C5's, F6's or the output
// layer's weight and bias gradients, each the same sum in the same order whichever warp computes
// it (no slots, no atomics).
template <Precision R>
__device__ void dense_weight_gradient(int tile, const DenseGradientArgs& args,
                                      const SgdUpdate& update, int lane) {
  const WholeStepOffsets& at = args.at;
  const float* records = args.records;
  if (tile < products::c5) {
    weight_gradient_tile<R, kC5, kFlat4>(tile, args, dense_record::d5, args.s4_rows, kFlat4,
                                         at.c5_weight, at.c5_bias, update, lane);
    return;
  }
  tile -= products::c5;
  if (tile < products::f6) {
    weight_gradient_tile<R, kF6, kC5>(tile, args, dense_record::d6, records + dense_record::a5,
                                      dense_record::floats, at.f6_weight, at.f6_bias, update, lane);
    return;
  }
  tile -= products::f6;
  if (tile < products::out)
    weight_gradient_tile<R, kOut, kF6>(tile, args, dense_record::d7, records + dense_record::a6,
                                       dense_record::floats, at.output_weight, at.output_bias,
                                       update, lane);
}

// The blocks of kThreads threads that compute the dense weight gradients and the step's statistics:
// the first block adds the step's loss sum and correct count to args.stats in sample order by one
// warp (block_reduce.cuh's warp_add_sample_stats, as whole-step's update adds its), first so that
// it starts with the launch's first wave, and block b of the next dense_tile_blocks(tiles) takes
// the tiles `tiles` (b - 1) to `tiles` b - 1 of the dense products (a warp each,
// dense_weight_gradient; tiles is 8 or 4, args.tiles_a_block). A block's time is its warps' chains
// of reads from L2 whichever its tile count (the phase probe: a block of four tiles took about as
// long as one of eight), so where the blocks start beside the samples' (the convolutions' backward
// launch, at batch 128) eight make fewer to hold, and where a second wave runs them after the
// samples' end (at 256) four spread them over twice the SMs
// (TensorConvBackward::dense_tiles_a_block; docs/tensor-cores.md).
__host__ __device__ constexpr int dense_tile_blocks(int tiles_a_block) {
  return (products::all + tiles_a_block - 1) / tiles_a_block;
}
__host__ __device__ constexpr int dense_gradient_blocks(int tiles_a_block) {
  return dense_tile_blocks(tiles_a_block) + 1;
}
template <Precision R>
__device__ void dense_gradient_block(int block, const DenseGradientArgs& args,
                                     const SgdUpdate& update) {
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  if (block == 0) {
    if (warp == 0 && args.stats)
      warp_add_sample_stats(args.sample_loss, args.sample_correct, args.n, args.stats, lane);
    return;
  }
  if (warp < args.tiles_a_block)
    dense_weight_gradient<R>((block - 1) * args.tiles_a_block + warp, args, update, lane);
}

}  // namespace lenet5::cuda
