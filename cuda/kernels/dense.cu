// Activation and fully connected kernels (see dense.cuh for the contract and the versions).
#include <algorithm>

#include "core/activation_math.hpp"
#include "cuda/kernels/dense.cuh"
#include "cuda/runtime/check.hpp"
#include "cuda/runtime/cublas_library.hpp"

namespace lenet5::cuda {
namespace {

constexpr int kElementThreads = 256;
// Enough blocks to fill an H100 several times over; larger tensors are covered by the grid-stride
// loop (the largest element-wise tensor, a2 at batch 60,000, has 70.6 M elements).
constexpr int kMaxElementBlocks = 4096;
// Threads per block of the bias reduction: a power of two for the tree, and at least the usual
// batch of 64 so that each thread starts with at most one sample there.
constexpr int kBiasThreads = 128;

int element_blocks(std::size_t count) {
  return int(
      std::min<std::size_t>((count + kElementThreads - 1) / kElementThreads, kMaxElementBlocks));
}

}  // namespace

// ---- activation ---------------------------------------------------------------------------------

__global__ void activation_forward_kernel1(Activation kind, const float* x, float* y,
                                           std::size_t count) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    y[i] = activate(kind, x[i]);
}

__global__ void activation_backward_kernel1(Activation kind, const float* y, const float* dL_dy,
                                            float* dL_dx, std::size_t count) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    dL_dx[i] = dL_dy[i] * activation_slope(kind, y[i]);
}

void activation_forward(Activation kind, const float* x, float* y, std::size_t count,
                        cudaStream_t stream) {
  if (count == 0) return;
  activation_forward_kernel1<<<element_blocks(count), kElementThreads, 0, stream>>>(kind, x, y,
                                                                                    count);
  CUDA_CHECK_LAUNCH();
}

void activation_backward(Activation kind, const float* y, const float* dL_dy, float* dL_dx,
                         std::size_t count, cudaStream_t stream) {
  if (count == 0) return;
  activation_backward_kernel1<<<element_blocks(count), kElementThreads, 0, stream>>>(kind, y, dL_dy,
                                                                                     dL_dx, count);
  CUDA_CHECK_LAUNCH();
}

// ---- cuBLAS handle ------------------------------------------------------------------------------

CublasHandle::CublasHandle(cudaStream_t stream) : m_stream(stream) {
  CUBLAS_CHECK(cuda::cublas::create(&m_handle));
  try {
    CUBLAS_CHECK(cuda::cublas::set_stream(m_handle, m_stream));
    // Pedantic FP32: inputs are never rounded to TF32 (10-bit mantissa) and never split into
    // BF16 pieces by FP32 emulation, whatever NVIDIA_TF32_OVERRIDE or the cuBLAS emulation
    // environment variables say. The GPU then computes the same FP32 products as the CPU
    // reference, only summed in another order, which keeps the GPU-vs-CPU tests tight (and exact
    // for small-integer inputs). Our GEMMs are at most (N x 120) x (120 x 84): far too small for
    // the faster modes to matter.
    CUBLAS_CHECK(cuda::cublas::set_math_mode(m_handle, CUBLAS_PEDANTIC_MATH));
    constexpr std::size_t kWorkspaceBytes = 4u << 20;  // ample for GEMMs this small
    m_workspace = Buffer<std::uint8_t>(Device::gpu, kWorkspaceBytes);
    CUBLAS_CHECK(cuda::cublas::set_workspace(m_handle, m_workspace.data(), m_workspace.size()));
  } catch (...) {
    (void)cuda::cublas::destroy(m_handle);
    throw;
  }
}

void CublasHandle::use_stream(cudaStream_t stream) {
  if (stream == m_stream) return;
  CUBLAS_CHECK(cuda::cublas::set_stream(m_handle, stream));
  // cublasSetStream also resets the handle to cuBLAS's default workspace pool (cuBLAS docs,
  // cublasSetStream): give it ours back, so that a call captured into a CUDA graph after a rebind
  // still allocates nothing.
  CUBLAS_CHECK(cuda::cublas::set_workspace(m_handle, m_workspace.data(), m_workspace.size()));
  m_stream = stream;
}

CublasHandle::~CublasHandle() {
  if (m_handle) (void)cuda::cublas::destroy(m_handle);  // a destructor must not throw
}

CublasHandle& default_cublas_handle() {
  // Deliberately never destroyed: a static's destructor would run at exit, possibly after the
  // CUDA runtime has been torn down, and cublasDestroy would then touch a dead context. The
  // process ends right after anyway, and the driver reclaims everything.
  static CublasHandle* handle = new CublasHandle(kDefaultStream);
  return *handle;
}

// ---- fully connected ----------------------------------------------------------------------------
//
// cuBLAS is column-major; our matrices are row-major. A row-major (r, c) array with leading
// dimension c is, read column-major, its transpose (c, r) with leading dimension c. So each
// row-major product is computed as the column-major product of the transposes:
//
//   forward        Y (n,out) = X (n,in) W^T          <=>  Y^T (out,n) = W (out,in) X^T (in,n)
//     W's buffer read column-major is W^T (in,out), ld in  -> op(A) = T, lda = in
//     X's buffer read column-major is X^T (in,n),   ld in  -> op(B) = N, ldb = in
//     Y's buffer read column-major is Y^T (out,n),  ld out -> C,          ldc = out
//     m = out, n = n, k = in
//   backward input dX (n,in) = dY (n,out) W (out,in)  <=>  dX^T (in,n) = W^T (in,out) dY^T (out,n)
//     W's buffer column-major is W^T (in,out), ld in   -> op(A) = N, lda = in
//     dY's buffer column-major is dY^T (out,n), ld out -> op(B) = N, ldb = out
//     dX's buffer column-major is dX^T (in,n), ld in   -> C,          ldc = in
//     m = in, n = n, k = out
//   backward weights dW (out,in) = dY^T (out,n) X (n,in)  <=>  dW^T (in,out) = X^T (in,n) dY
//   (n,out)
//     X's buffer column-major is X^T (in,n), ld in      -> op(A) = N, lda = in
//     dY's buffer column-major is dY^T (out,n), ld out  -> op(B) = T, ldb = out
//     dW's buffer column-major is dW^T (in,out), ld in  -> C,          ldc = in
//     m = in, n = out, k = n
// beta = 0 everywhere: cuBLAS then never reads C, so the outputs are overwritten, not accumulated.

__global__ void fc_bias_forward_kernel1(const float* bias, float* y, std::size_t count, int out) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    y[i] += bias[i % out];
}

// One block per output unit o: dL/db[o] = sum over samples of dL/dy[s, o]. Each thread sums its
// samples s = t, t + blockDim, ... in order, then a fixed tree combines the partial sums, so the
// result depends only on n and the block size, never on scheduling.
__global__ void fc_bias_backward_kernel1(const float* dL_dy, int n, int out, float* dL_dbias) {
  __shared__ float partial[kBiasThreads];
  const int o = blockIdx.x;
  float acc = 0.0f;
  for (int s = threadIdx.x; s < n; s += blockDim.x) acc += dL_dy[std::size_t(s) * out + o];
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) dL_dbias[o] = partial[0];
}

void fc_forward(const CublasHandle& cublas, const FcShape& s, const float* x, const float* weight,
                const float* bias, float* y) {
  if (s.n == 0) return;
  const float one = 1.0f, zero = 0.0f;
  CUBLAS_CHECK(cuda::cublas::sgemm(cublas.get(), CUBLAS_OP_T, CUBLAS_OP_N, s.out, s.n, s.in, &one,
                                   weight, s.in, x, s.in, &zero, y, s.out));
  if (!bias) return;
  const std::size_t count = std::size_t(s.n) * s.out;
  fc_bias_forward_kernel1<<<element_blocks(count), kElementThreads, 0, cublas.stream()>>>(
      bias, y, count, s.out);
  CUDA_CHECK_LAUNCH();
}

void fc_backward_input(const CublasHandle& cublas, const FcShape& s, const float* dL_dy,
                       const float* weight, float* dL_dx) {
  if (s.n == 0) return;
  const float one = 1.0f, zero = 0.0f;
  CUBLAS_CHECK(cuda::cublas::sgemm(cublas.get(), CUBLAS_OP_N, CUBLAS_OP_N, s.in, s.n, s.out, &one,
                                   weight, s.in, dL_dy, s.out, &zero, dL_dx, s.in));
}

void fc_backward_weights(const CublasHandle& cublas, const FcShape& s, const float* x,
                         const float* dL_dy, float* dL_dweight, float* dL_dbias) {
  if (s.n == 0) return;
  const float one = 1.0f, zero = 0.0f;
  CUBLAS_CHECK(cuda::cublas::sgemm(cublas.get(), CUBLAS_OP_N, CUBLAS_OP_T, s.in, s.out, s.n, &one,
                                   x, s.in, dL_dy, s.out, &zero, dL_dweight, s.in));
  if (!dL_dbias) return;
  fc_bias_backward_kernel1<<<s.out, kBiasThreads, 0, cublas.stream()>>>(dL_dy, s.n, s.out,
                                                                        dL_dbias);
  CUDA_CHECK_LAUNCH();
}

// ---- fully connected, version 2 --------------------------------------------------------------

namespace {

constexpr int kDenseThreads = 256;
constexpr int kMaxDenseBlocks = 1 << 16;

int dense_blocks(std::size_t threads) {
  return int(std::min<std::size_t>((threads + kDenseThreads - 1) / kDenseThreads, kMaxDenseBlocks));
}

// Sum over the 32 lanes of a warp by a butterfly: every lane adds the same pairs in the same tree
// (a + b and b + a are equal in IEEE arithmetic), so every lane ends with the same, fixed total.
__device__ __forceinline__ float warp_sum(float value) {
  for (int offset = 16; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

// dL/dz of output element i: dL/dy, times f'(z) expressed through y when the activation is fused.
__device__ __forceinline__ float dense_dz(FusedActivation activation, const float* dL_dy,
                                          const float* y, std::size_t i) {
  return activation.enabled ? dL_dy[i] * activation_slope(activation.kind, y[i]) : dL_dy[i];
}

}  // namespace

// One warp per output y[n][o]: the lanes split the dot product x[n][:] . W[o][:] (both rows are
// contiguous, so the loads coalesce), a butterfly adds the 32 partial sums, lane 0 adds the bias,
// applies the activation and stores. C5: 7,680 warps of 400-term dot products at batch 64.
__global__ void dense_forward_kernel2(FcShape s, const float* __restrict__ x,
                                      const float* __restrict__ weight,
                                      const float* __restrict__ bias, FusedActivation activation,
                                      float* __restrict__ y) {
  const int lane = threadIdx.x % 32;
  const std::size_t outputs = std::size_t(s.n) * s.out;
  const std::size_t warps = std::size_t(gridDim.x) * blockDim.x / 32;
  for (std::size_t i = (std::size_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; i < outputs;
       i += warps) {  // the same trip count for every lane of a warp: the shuffles stay converged
    const std::size_t n = i / s.out, o = i % s.out;
    const float* x_row = x + n * s.in;
    const float* w_row = weight + o * s.in;
    float partial = 0.0f;
    for (int k = lane; k < s.in; k += 32) partial += x_row[k] * w_row[k];
    const float z = warp_sum(partial) + (bias ? bias[o] : 0.0f);
    if (lane == 0) y[i] = activation.enabled ? activate(activation.kind, z) : z;
  }
}

// One thread per dL/dx[n][i], summing over the outputs o in order; consecutive threads take
// consecutive i, so the reads of W[o][i] coalesce and dL/dz[n][o] is one broadcast per warp.
__global__ void dense_backward_input_kernel2(FcShape s, const float* __restrict__ dL_dy,
                                             const float* __restrict__ y,
                                             FusedActivation activation,
                                             const float* __restrict__ weight,
                                             float* __restrict__ dL_dx) {
  const std::size_t count = std::size_t(s.n) * s.in;
  for (std::size_t j = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; j < count;
       j += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t n = j / s.in, i = j % s.in;
    float acc = 0.0f;
    for (int o = 0; o < s.out; ++o)
      acc += dense_dz(activation, dL_dy, y, n * s.out + o) * weight[std::size_t(o) * s.in + i];
    dL_dx[j] = acc;
  }
}

// One thread per weight W[o][i], plus one per bias b[o] (the extra column i == in, an input that
// is always 1), each summing over the batch in order n = 0, 1, ...: deterministic, no atomics.
__global__ void dense_backward_weights_kernel2(FcShape s, const float* __restrict__ x,
                                               const float* __restrict__ dL_dy,
                                               const float* __restrict__ y,
                                               FusedActivation activation,
                                               float* __restrict__ dL_dweight,
                                               float* __restrict__ dL_dbias) {
  const int columns = s.in + 1;
  const std::size_t count = std::size_t(s.out) * columns;
  for (std::size_t j = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; j < count;
       j += std::size_t(gridDim.x) * blockDim.x) {
    const int o = int(j / columns), i = int(j % columns);
    if (i == s.in && !dL_dbias) continue;
    float acc = 0.0f;
    for (int n = 0; n < s.n; ++n) {
      const float dz = dense_dz(activation, dL_dy, y, std::size_t(n) * s.out + o);
      acc += i < s.in ? dz * x[std::size_t(n) * s.in + i] : dz;
    }
    if (i < s.in)
      dL_dweight[std::size_t(o) * s.in + i] = acc;
    else
      dL_dbias[o] = acc;
  }
}

// Versions 3 of the two backward kernels: the same sums in the same order as version 2 (so the
// same bits), but each block first forms the dL/dz values its threads share in shared memory,
// once, instead of every thread recomputing dL/dy * f'(y) in its inner loop; the inner loops then
// read one shared and one global value per multiply-add and unroll.
constexpr std::size_t kMaxDenseShared = 48 * 1024;  // bytes, without an opt-in attribute

// Block b covers dL/dx elements j = b*256 .. b*256+255 (j = n*in + i), i.e. rows n_lo..n_hi of
// dL/dz, staged as dz_rows[(n - n_lo)*out + o]. C5 at batch 64: at most 2 rows of 120.
__global__ void dense_backward_input_kernel3(FcShape s, const float* __restrict__ dL_dy,
                                             const float* __restrict__ y,
                                             FusedActivation activation,
                                             const float* __restrict__ weight,
                                             float* __restrict__ dL_dx) {
  extern __shared__ float dz_rows[];
  const std::size_t count = std::size_t(s.n) * s.in;
  const std::size_t j0 = std::size_t(blockIdx.x) * blockDim.x;
  const std::size_t j_last = std::min(j0 + blockDim.x, count) - 1;  // j0 < count: exact grid
  const std::size_t n_lo = j0 / s.in, rows = j_last / s.in - n_lo + 1;
  for (std::size_t k = threadIdx.x; k < rows * s.out; k += blockDim.x)
    dz_rows[k] = dense_dz(activation, dL_dy, y, n_lo * s.out + k);
  __syncthreads();
  const std::size_t j = j0 + threadIdx.x;
  if (j >= count) return;
  const std::size_t n = j / s.in, i = j % s.in;
  const float* dz = dz_rows + (n - n_lo) * s.out;
  float acc = 0.0f;
#pragma unroll 8
  for (int o = 0; o < s.out; ++o) acc += dz[o] * weight[std::size_t(o) * s.in + i];
  dL_dx[j] = acc;
}

// Block b covers weight-or-bias elements j = b*256 .. b*256+255 (j = o*(in+1) + i), i.e. outputs
// o_lo..o_hi, whose dL/dz columns are staged as dz_cols[n*cols + (o - o_lo)].
__global__ void dense_backward_weights_kernel3(FcShape s, const float* __restrict__ x,
                                               const float* __restrict__ dL_dy,
                                               const float* __restrict__ y,
                                               FusedActivation activation,
                                               float* __restrict__ dL_dweight,
                                               float* __restrict__ dL_dbias) {
  extern __shared__ float dz_cols[];
  const int columns = s.in + 1;
  const std::size_t count = std::size_t(s.out) * columns;
  const std::size_t j0 = std::size_t(blockIdx.x) * blockDim.x;
  const int o_lo = int(j0 / columns);
  const int o_hi = int((std::min(j0 + blockDim.x, count) - 1) / columns);
  const int cols = o_hi - o_lo + 1;
  for (int k = threadIdx.x; k < s.n * cols; k += blockDim.x) {
    const int n = k / cols, o = o_lo + k % cols;
    dz_cols[k] = dense_dz(activation, dL_dy, y, std::size_t(n) * s.out + o);
  }
  __syncthreads();
  const std::size_t j = j0 + threadIdx.x;
  if (j >= count) return;
  const int o = int(j / columns), i = int(j % columns);
  if (i == s.in && !dL_dbias) return;
  const float* dz = dz_cols + (o - o_lo);
  float acc = 0.0f;
  if (i < s.in) {
#pragma unroll 8
    for (int n = 0; n < s.n; ++n) acc += dz[n * cols] * x[std::size_t(n) * s.in + i];
    dL_dweight[std::size_t(o) * s.in + i] = acc;
  } else {
    for (int n = 0; n < s.n; ++n) acc += dz[n * cols];
    dL_dbias[o] = acc;
  }
}

void dense_forward2(const FcShape& s, const float* x, const float* weight, const float* bias,
                    FusedActivation activation, float* y, cudaStream_t stream) {
  const std::size_t threads = std::size_t(s.n) * s.out * 32;
  if (threads == 0) return;
  dense_forward_kernel2<<<dense_blocks(threads), kDenseThreads, 0, stream>>>(s, x, weight, bias,
                                                                             activation, y);
  CUDA_CHECK_LAUNCH();
}

void dense_backward_input2(const FcShape& s, const float* dL_dy, const float* y,
                           FusedActivation activation, const float* weight, float* dL_dx,
                           cudaStream_t stream) {
  if (activation.enabled && !y) throw Error("internal: a fused activation needs the output y");
  const std::size_t threads = std::size_t(s.n) * s.in;
  if (threads == 0) return;
  // A block of 256 consecutive elements spans at most 256 / in + 2 rows of dL/dz.
  const std::size_t shared = (kDenseThreads / std::size_t(s.in) + 2) * s.out * sizeof(float);
  const std::size_t blocks = (threads + kDenseThreads - 1) / kDenseThreads;
  if (shared <= kMaxDenseShared && blocks <= std::size_t(kMaxDenseBlocks))
    dense_backward_input_kernel3<<<unsigned(blocks), kDenseThreads, shared, stream>>>(
        s, dL_dy, y, activation, weight, dL_dx);
  else
    dense_backward_input_kernel2<<<dense_blocks(threads), kDenseThreads, 0, stream>>>(
        s, dL_dy, y, activation, weight, dL_dx);
  CUDA_CHECK_LAUNCH();
}

void dense_backward_weights2(const FcShape& s, const float* x, const float* dL_dy, const float* y,
                             FusedActivation activation, float* dL_dweight, float* dL_dbias,
                             cudaStream_t stream) {
  if (activation.enabled && !y) throw Error("internal: a fused activation needs the output y");
  const std::size_t threads = std::size_t(s.out) * (s.in + 1);
  if (threads == 0) return;
  // A block of 256 consecutive elements spans at most 256 / (in + 1) + 2 outputs o.
  const std::size_t shared =
      std::size_t(s.n) * (kDenseThreads / std::size_t(s.in + 1) + 2) * sizeof(float);
  const std::size_t blocks = (threads + kDenseThreads - 1) / kDenseThreads;
  if (shared <= kMaxDenseShared && blocks <= std::size_t(kMaxDenseBlocks))
    dense_backward_weights_kernel3<<<unsigned(blocks), kDenseThreads, shared, stream>>>(
        s, x, dL_dy, y, activation, dL_dweight, dL_dbias);
  else
    dense_backward_weights_kernel2<<<dense_blocks(threads), kDenseThreads, 0, stream>>>(
        s, x, dL_dy, y, activation, dL_dweight, dL_dbias);
  CUDA_CHECK_LAUNCH();
}

}  // namespace lenet5::cuda
