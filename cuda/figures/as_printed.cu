// The printed Figs 16.12, 16.13, 16.17 and 16.18, kept to demonstrate their errata (see
// as_printed.cuh for what is counted instead of done out of range, and why).
//
// Deviations from the print needed to compile at all, in every kernel here:
//   * X[n, c, h, w]-style subscripts are written as linear NCHW offsets (hazard H1: the comma
//     form compiles and means X[w]; the project builds with -Werror=unused-value);
//   * the sizes the linear offsets need are passed in a struct (E13), `int K` has its space (E12);
//   * the filter pointer is `W` as printed; the input width is d.W (no clash: it is a member);
//   * pointers are const where the kernel only reads;
//   * the counters of as_printed.cuh: the bounds tests they need are the only added branches.
// Kernel-specific deviations are named at each kernel.
#include "cuda/figures/as_printed.cuh"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "cuda/runtime/buffer.hpp"
#include "cuda/runtime/check.hpp"

namespace lenet5::cuda::as_printed {
namespace {

#define TILE_WIDTH 16               // §16.3, as printed (a macro, so the kernels read as the book)
#define CUDA_MAX_NUM_THREADS 1024   // Fig 16.17
static_assert(TILE_WIDTH == kTileWidth && CUDA_MAX_NUM_THREADS == kMaxNumThreads);

struct Dims {
  int N, C, H, W, M, K, H_out, W_out;
};

Dims dims_of(const ConvShape& s) { return Dims{s.n, s.c, s.h, s.w, s.m, s.k, s.h_out(), s.w_out()}; }

__device__ __forceinline__ std::size_t x_at(const Dims& d, int n, int c, int h, int w) {
  return ((std::size_t(n) * d.C + c) * d.H + h) * d.W + w;
}
__device__ __forceinline__ std::size_t w_at(const Dims& d, int m, int c, int p, int q) {
  return ((std::size_t(m) * d.C + c) * d.K + p) * d.K + q;
}
__device__ __forceinline__ std::size_t y_at(const Dims& d, int n, int m, int h, int w) {
  return ((std::size_t(n) * d.M + m) * d.H_out + h) * d.W_out + w;
}

// Slots of the device tally; each thread adds its own counts once, at its end.
enum Slot { kOutOfMap = 0, kXOutside = 1, kSharedOutOfTile = 2, kSharedPastAllocation = 3, kSlots = 4 };

__device__ __forceinline__ void add_count(unsigned long long* tally, int slot, int count) {
  if (tally && count > 0) atomicAdd(tally + slot, static_cast<unsigned long long>(count));
}

// ---- Fig 16.12 -----------------------------------------------------------------------------------

// Fig 16.12 (B:174-189). With PrintedIndex the tile index is not multiplied by TILE_WIDTH (E10):
// with a 2x2-tile grid every block writes inside the top-left 17x17 corner, and the rest of the
// map stays unwritten. The print has no bounds guard (E11): a thread outside Y's map counts
// itself and returns here (its reads would leave X and its store Y; see as_printed.cuh).
template <bool PrintedIndex>
__global__ void conv_forward_fig16_12_kernel(Dims d, int W_grid, const float* X, const float* W,
                                             float* Y, unsigned long long* tally) {
  int n, m, h, w, c, p, q;
  const int tile = PrintedIndex ? 1 : TILE_WIDTH;
  n = blockIdx.x;
  m = blockIdx.y;
  h = int(blockIdx.z) / W_grid * tile + int(threadIdx.y);
  w = int(blockIdx.z) % W_grid * tile + int(threadIdx.x);
  if (h >= d.H_out || w >= d.W_out) {  // not in the print: count instead of storing out of range
    add_count(tally, kOutOfMap, 1);
    return;
  }
  float acc = 0.;
  for (c = 0; c < d.C; c++) {     // sum over all input channels
    for (p = 0; p < d.K; p++)     // loop over KxK filter
      for (q = 0; q < d.K; q++)
        acc = acc + X[x_at(d, n, c, h + p, w + q)] * W[w_at(d, m, c, p, q)];
  }
  Y[y_at(d, n, m, h, w)] = acc;
}

// ---- Fig 16.13 -----------------------------------------------------------------------------------

// X_shared[row, col] as the E16 compute reads it: counted when outside the tile, read at the
// linear index (as the hardware would) while that lies inside the block's dynamic shared memory
// of `allocated` floats, else 0 (counted).
__device__ __forceinline__ float shared_read(const float* shmem, int row, int col,
                                             int X_tile_width, int allocated, int& out_of_tile,
                                             int& past_allocation) {
  if (row >= X_tile_width || col >= X_tile_width) ++out_of_tile;
  const int index = row * X_tile_width + col;
  if (index >= allocated) {
    ++past_allocation;
    return 0.0f;
  }
  return shmem[index];
}

// One slot of the input tile: the corrected load X[n, c, i, j] (0 outside the input map), or the
// printed one (E15) X[n, c, h, w], the thread's own pixel, counted and 0 outside the input map.
template <bool E15>
__device__ __forceinline__ float tile_value(const Dims& d, const float* X, int n, int c, int h,
                                            int w, int i, int j, int& x_outside) {
  if (!E15) return (i < d.H && j < d.W) ? X[x_at(d, n, c, i, j)] : 0.0f;
  if (h < d.H && w < d.W) return X[x_at(d, n, c, h, w)];
  ++x_outside;
  return 0.0f;
}

// Fig 16.13 (B:197-236). Kernel-specific deviations: TILE_SIZE is TILE_WIDTH (E14), the two
// missing semicolons are there (E17), W_shared[h0, w0] / X_shared[a, b] / W_shared[p, q] are
// linearised with the tile's row lengths (K, X_tile_width), and the bounds test of E15's fix
// (i < H && j < W) comes with it. E15, E16 and E18 are kept or fixed by the template arguments.
// Every thread runs the whole channel loop (no early return: the barriers need all of them).
template <bool E15, bool E16, bool E18>
__global__ void conv_forward_fig16_13_kernel(Dims d, int W_grid, const float* X, const float* W,
                                             float* Y, unsigned long long* tally) {
  int n, m, h0, w0, h_base, w_base, h, w;
  int X_tile_width = TILE_WIDTH + d.K - 1;
  extern __shared__ float shmem[];
  float* X_shared = &shmem[0];
  float* W_shared = &shmem[X_tile_width * X_tile_width];
  const int allocated = X_tile_width * X_tile_width + d.K * d.K;
  int out_of_tile = 0, past_allocation = 0, x_outside = 0;
  n = blockIdx.x;
  m = blockIdx.y;
  h0 = E18 ? threadIdx.x : threadIdx.y;  // E18 as printed: transposed against Fig 16.12
  w0 = E18 ? threadIdx.y : threadIdx.x;
  h_base = (int(blockIdx.z) / W_grid) * TILE_WIDTH;  // vertical base out data index for the block
  w_base = (int(blockIdx.z) % W_grid) * TILE_WIDTH;  // horizontal base out data index for the block
  h = h_base + h0;
  w = w_base + w0;

  float acc = 0.;
  int c, i, j, p, q;
  for (c = 0; c < d.C; c++) {  // sum over all input channels
    if ((h0 < d.K) && (w0 < d.K))
      W_shared[h0 * d.K + w0] = W[w_at(d, m, c, h0, w0)];  // load weights for W[m, c, ...]
    __syncthreads();
    for (i = h; i < h_base + X_tile_width; i += TILE_WIDTH) {
      for (j = w; j < w_base + X_tile_width; j += TILE_WIDTH)
        X_shared[(i - h_base) * X_tile_width + (j - w_base)] =
            tile_value<E15>(d, X, n, c, h, w, i, j, x_outside);
    }  // load tile from X[n, c, ...] into shared memory
    __syncthreads();
    for (p = 0; p < d.K; p++) {
      for (q = 0; q < d.K; q++) {
        const int row = E16 ? h + p : h0 + p, col = E16 ? w + q : w0 + q;
        acc = acc + shared_read(X_shared, row, col, X_tile_width, allocated, out_of_tile,
                                past_allocation) * W_shared[p * d.K + q];
      }
    }
    __syncthreads();
  }
  if (h < d.H_out && w < d.W_out)  // not in the print (E11): count instead of storing out of range
    Y[y_at(d, n, m, h, w)] = acc;
  else
    add_count(tally, kOutOfMap, 1);
  add_count(tally, kXOutside, x_outside);
  add_count(tally, kSharedOutOfTile, out_of_tile);
  add_count(tally, kSharedPastAllocation, past_allocation);
}

using Fig16_13Kernel = void (*)(Dims, int, const float*, const float*, float*,
                                unsigned long long*);

template <bool E15, bool E16>
Fig16_13Kernel fig16_13_kernel_for(bool e18) {
  return e18 ? conv_forward_fig16_13_kernel<E15, E16, true>
             : conv_forward_fig16_13_kernel<E15, E16, false>;
}

Fig16_13Kernel fig16_13_kernel_for(Fig16_13Errata e) {
  if (e.e15) return e.e16 ? fig16_13_kernel_for<true, true>(e.e18)
                          : fig16_13_kernel_for<true, false>(e.e18);
  return e.e16 ? fig16_13_kernel_for<false, true>(e.e18) : fig16_13_kernel_for<false, false>(e.e18);
}

// ---- Figs 16.17 / 16.18 --------------------------------------------------------------------------

// Fig 16.18 (B:321-342), one sample. Deviations: `int w_unroll` is declared (E25), and
// X_unroll(h_unroll, w_unroll) is read column-major, X_unroll[w_unroll * W_unroll + h_unroll]
// (hazard H2: the only reading under which Fig 16.15's gemm call and the text's claims hold; it
// is the Fig 16.14 layout). Note H3: here W_unroll means H_out*W_out, not C*K*K as in Fig 16.15.
// The print's own guard (t < C * W_unroll) keeps every access in range.
__global__ void unroll_Kernel(int C, int H, int W, int K, const float* X, float* X_unroll) {
  int c, s, h_out, w_out, h_unroll, w_base, p, q;
  int t = blockIdx.x * CUDA_MAX_NUM_THREADS + threadIdx.x;
  int H_out = H - K + 1;
  int W_out = W - K + 1;
  int W_unroll = H_out * W_out;

  if (t < C * W_unroll) {
    c = t / W_unroll;
    s = t % W_unroll;
    h_out = s / W_out;
    w_out = s % W_out;
    h_unroll = h_out * W_out + w_out;
    w_base = c * K * K;
    for (p = 0; p < K; p++)
      for (q = 0; q < K; q++) {
        int w_unroll = w_base + p * K + q;
        X_unroll[std::size_t(w_unroll) * W_unroll + h_unroll] =
            X[(std::size_t(c) * H + h_out + p) * W + w_out + q];
      }
  }
}

// ---- launch checking -----------------------------------------------------------------------------

}  // namespace

bool is_zero_grid_refusal(cudaError_t status) {
  return status == cudaErrorInvalidConfiguration || status == cudaErrorInvalidValue;
}

namespace {

bool has_zero_dimension(const dim3& grid) { return grid.x == 0 || grid.y == 0 || grid.z == 0; }

// The status of the launch just made. The runtime must refuse a grid with a zero dimension (that
// is the erratum being shown): the spec's "cudaErrorInvalidConfiguration", or, as the CUDA 13
// runtime reports it (measured on the H200), cudaErrorInvalidValue ("invalid argument"). Any other
// outcome is an error.
// cudaGetLastError also clears the failure, which is not sticky, so later calls are unaffected.
cudaError_t checked_launch_status(const dim3& grid) {
  const cudaError_t status = cudaGetLastError();
  if (has_zero_dimension(grid)) {
    if (!is_zero_grid_refusal(status))
      throw Error(std::string("as-printed launch with a zero-block grid: expected the runtime to ") +
                  "refuse it, got " + cudaGetErrorName(status));
    return status;
  }
  CUDA_CHECK(status);
  return status;
}

Tally read_tally(const Buffer<unsigned long long>& counters) {
  CUDA_CHECK(cudaStreamSynchronize(cudaStreamPerThread));
  const std::vector<unsigned long long> c = counters.to_vector();
  Tally t;
  t.out_of_map_threads = static_cast<long long>(c[kOutOfMap]);
  t.x_reads_outside = static_cast<long long>(c[kXOutside]);
  t.shared_out_of_tile = static_cast<long long>(c[kSharedOutOfTile]);
  t.shared_past_allocation = static_cast<long long>(c[kSharedPastAllocation]);
  return t;
}

int grid_count(int extent, GridRule rule) {
  return rule == GridRule::printed ? extent / TILE_WIDTH : (extent + TILE_WIDTH - 1) / TILE_WIDTH;
}

}  // namespace

dim3 fig16_12_grid(const ConvShape& s, GridRule rule) {
  const int W_grid = grid_count(s.w_out(), rule);  // number of horizontal tiles per output map
  const int H_grid = grid_count(s.h_out(), rule);  // number of vertical tiles per output map
  return dim3(unsigned(s.n), unsigned(s.m), unsigned(H_grid * W_grid));
}

Launch conv_forward_fig16_12(const ConvShape& s, GridRule rule, bool printed_index,
                             const float* x, const float* weight, float* y) {
  Launch launch;
  launch.grid = fig16_12_grid(s, rule);
  launch.block = dim3(TILE_WIDTH, TILE_WIDTH, 1);
  Buffer<unsigned long long> counters(Device::gpu, kSlots);  // zeroed
  const int W_grid = grid_count(s.w_out(), rule);
  auto kernel = printed_index ? conv_forward_fig16_12_kernel<true> : conv_forward_fig16_12_kernel<false>;
  kernel<<<launch.grid, launch.block, 0, cudaStreamPerThread>>>(dims_of(s), std::max(W_grid, 1), x,
                                                                weight, y, counters.data());
  launch.status = checked_launch_status(launch.grid);
  launch.tally = read_tally(counters);
  return launch;
}

namespace {

void require_tile_fits(const ConvShape& s) {
  if (s.k > TILE_WIDTH)  // hazard H5: the weight load uses threads h0, w0 < K only
    throw Error("Fig 16.13 needs K <= TILE_WIDTH (16); got K = " + std::to_string(s.k));
}

std::size_t fig16_13_shared_bytes(const ConvShape& s) {
  return sizeof(float) * ((TILE_WIDTH + s.k - 1) * (TILE_WIDTH + s.k - 1) + s.k * s.k);
}

}  // namespace

Launch conv_forward_fig16_13(const ConvShape& s, GridRule rule, Fig16_13Errata errata,
                             const float* x, const float* weight, float* y) {
  require_tile_fits(s);
  Launch launch;
  launch.grid = fig16_12_grid(s, rule);
  launch.block = dim3(TILE_WIDTH, TILE_WIDTH, 1);
  launch.shared_bytes = fig16_13_shared_bytes(s);
  Buffer<unsigned long long> counters(Device::gpu, kSlots);
  const int W_grid = grid_count(s.w_out(), rule);
  fig16_13_kernel_for(errata)<<<launch.grid, launch.block, launch.shared_bytes,
                                cudaStreamPerThread>>>(dims_of(s), std::max(W_grid, 1), x, weight,
                                                       y, counters.data());
  launch.status = checked_launch_status(launch.grid);
  launch.tally = read_tally(counters);
  return launch;
}

void conv_forward_fig16_13_async(const ConvShape& s, Fig16_13Errata errata, const float* x,
                                 const float* weight, float* y, cudaStream_t stream) {
  require_tile_fits(s);
  const dim3 grid = fig16_12_grid(s, GridRule::ceil);
  fig16_13_kernel_for(errata)<<<grid, dim3(TILE_WIDTH, TILE_WIDTH, 1), fig16_13_shared_bytes(s),
                                stream>>>(dims_of(s), grid_count(s.w_out(), GridRule::ceil), x,
                                          weight, y, nullptr);
  CUDA_CHECK_LAUNCH();
}

int fig16_17_printed_blocks(const ConvShape& s) {
  const int C = s.c, H_out = s.h_out(), W_out = s.w_out();
  return int(std::ceil((C * H_out * W_out) / CUDA_MAX_NUM_THREADS));  // E23, as printed
}

int fig16_17_correct_blocks(const ConvShape& s) {
  const int num_threads = s.c * s.h_out() * s.w_out();
  return (num_threads + CUDA_MAX_NUM_THREADS - 1) / CUDA_MAX_NUM_THREADS;
}

// Fig 16.17 (B:306-313) as printed but for the arguments of the launch (E24) and the stream (the
// project's per-thread default stream instead of the legacy one).
Launch unroll_gpu_fig16_17(const ConvShape& s, const float* x_sample, float* x_unroll) {
  Launch launch;
  const int num_blocks = fig16_17_printed_blocks(s);
  launch.grid = dim3(unsigned(num_blocks));
  launch.block = dim3(CUDA_MAX_NUM_THREADS);
  unroll_Kernel<<<num_blocks, CUDA_MAX_NUM_THREADS, 0, cudaStreamPerThread>>>(s.c, s.h, s.w, s.k,
                                                                             x_sample, x_unroll);
  launch.status = checked_launch_status(launch.grid);
  CUDA_CHECK(cudaStreamSynchronize(cudaStreamPerThread));
  return launch;
}

}  // namespace lenet5::cuda::as_printed
