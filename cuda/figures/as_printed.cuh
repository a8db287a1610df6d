// The chapter's printed GPU listings, kept ONLY to demonstrate their errata (`lenet5 figures`
// fig16.12, fig16.13, fig16.17 and tests/gpu/test_as_printed.cpp). Never used for training: the
// corrected versions are the registry's (core/conv_algo.hpp, cuda/kernels/conv/registry.hpp).
//
// Each kernel is as close to the print (rendering B, textbook-figures.md §2.1) as compilable C++
// allows; as_printed.cu names every deviation. What the printed code would do out of range is
// counted in device counters instead of being done, so compute-sanitizer memcheck stays clean:
//   * a thread whose output (h, w) lies outside Y's map (no bounds guard, E11) skips its store and
//     counts itself: the literal linear index would land on another element of Y (racing with
//     that element's owner) or past the end of Y. textbook-figures.md §2.2's host emulation
//     skipped the same stores, so the counts are comparable;
//   * Fig 16.13's reads of X_shared[row, col] with row or col outside the tile (E16) are counted;
//     the read itself goes to the linear index row * X_tile_width + col, as on the hardware, while
//     that index lies inside the block's dynamic shared memory, and yields 0 (counted apart)
//     beyond it;
//   * Fig 16.13's E15 load X[n, c, h, w] of a thread whose (h, w) is outside the input map is
//     counted and loads 0.
// Layout NCHW, valid stride-1 cross-correlation, as everywhere (layers/reference_cpu.hpp).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "core/shapes.hpp"

namespace lenet5::cuda::as_printed {

constexpr int kTileWidth = 16;        // TILE_WIDTH of §16.3: 16x16 = 256 threads per block
constexpr int kMaxNumThreads = 1024;  // CUDA_MAX_NUM_THREADS of Figs 16.17/16.18

// What the kernels counted instead of doing it (read back after the launch).
struct Tally {
  long long out_of_map_threads = 0;      // stores skipped: (h, w) outside Y's map (E11)
  long long x_reads_outside = 0;         // E15 loads of X[n, c, h, w] outside the input map
  long long shared_out_of_tile = 0;      // E16 reads X_shared[row, col], row or col >= X_tile_width
  long long shared_past_allocation = 0;  // ... whose linear index is past the dynamic allocation
};

// Whether `status` is how the runtime refuses a launch with a zero grid dimension:
// cudaErrorInvalidConfiguration (the spec's wording) or cudaErrorInvalidValue (CUDA 13).
bool is_zero_grid_refusal(cudaError_t status);

// How the host code sizes the grid: the print's W_grid = W_out / TILE_WIDTH (E11, truncating) or
// the corrected (W_out + TILE_WIDTH - 1) / TILE_WIDTH; the same for H_grid.
enum class GridRule { printed, ceil };

// One demonstration launch: its configuration, the launch's own status, and the tally.
struct Launch {
  dim3 grid, block;
  std::size_t shared_bytes = 0;
  // cudaSuccess, or the runtime's refusal of a grid with a zero dimension (E11, E23; see
  // is_zero_grid_refusal): that failure is expected, checked and returned; any other failure
  // throws lenet5::Error.
  cudaError_t status = cudaSuccess;
  Tally tally;
  bool launched() const { return status == cudaSuccess; }
};

// gridDim (N, M, H_grid * W_grid) of §16.3 under `rule`.
dim3 fig16_12_grid(const ConvShape& s, GridRule rule);

// Fig 16.12 (B:174-189). printed_index keeps E10 (the tile index is not multiplied by
// TILE_WIDTH); false gives the corrected mapping. Synchronises to read the tally back.
Launch conv_forward_fig16_12(const ConvShape& s, GridRule rule, bool printed_index,
                             const float* x, const float* weight, float* y);

// Which of Fig 16.13's errata a launch keeps (true = as printed).
struct Fig16_13Errata {
  bool e15 = true;  // the tile load copies the thread's own X[n, c, h, w] into every slot it fills
  bool e16 = true;  // the compute reads X_shared[h + p, w + q] with global output coordinates
  bool e18 = true;  // h0 = threadIdx.x, w0 = threadIdx.y: transposed against Fig 16.12
};

// Fig 16.13 (B:197-236) with the errata chosen; E14 and E17 are always fixed (they do not
// compile). Needs K <= TILE_WIDTH (H5). Synchronises to read the tally back.
Launch conv_forward_fig16_13(const ConvShape& s, GridRule rule, Fig16_13Errata errata,
                             const float* x, const float* weight, float* y);
// The same kernel with the rounded-up grid, launched on `stream` without synchronising and
// without counting (for timing E18). Checks the launch.
void conv_forward_fig16_13_async(const ConvShape& s, Fig16_13Errata errata, const float* x,
                                 const float* weight, float* y, cudaStream_t stream);

// Fig 16.17's block count: ceil((C*H_out*W_out) / CUDA_MAX_NUM_THREADS) in int arithmetic, so
// the division truncates before ceil sees it (E23); and the corrected rounded-up count.
int fig16_17_printed_blocks(const ConvShape& s);
int fig16_17_correct_blocks(const ConvShape& s);

// Fig 16.17 + 16.18 as printed (E23 kept; E24 and E25 fixed, they do not compile): unrolls ONE
// sample (x_sample = x + n*C*H*W) into the Fig 16.14 layout, C*K*K x H_out*W_out row-major.
// Synchronises. Zero blocks -> the launch is refused (is_zero_grid_refusal) and nothing written.
Launch unroll_gpu_fig16_17(const ConvShape& s, const float* x_sample, float* x_unroll);

}  // namespace lenet5::cuda::as_printed
