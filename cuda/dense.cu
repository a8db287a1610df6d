// Activation and fully connected kernels (see dense.cuh for the contract and the versions).
#include <algorithm>

#include "cuda/check.hpp"
#include "cuda/dense.cuh"
#include "layers/activation_math.hpp"

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
  CUBLAS_CHECK(cublasCreate(&m_handle));
  try {
    CUBLAS_CHECK(cublasSetStream(m_handle, m_stream));
    // Pedantic FP32: inputs are never rounded to TF32 (10-bit mantissa) and never split into
    // BF16 pieces by FP32 emulation, whatever NVIDIA_TF32_OVERRIDE or the cuBLAS emulation
    // environment variables say. The GPU then computes the same FP32 products as the CPU
    // reference, only summed in another order, which keeps the GPU-vs-CPU tests tight (and exact
    // for small-integer inputs). Our GEMMs are at most (N x 120) x (120 x 84): far too small for
    // the faster modes to matter.
    CUBLAS_CHECK(cublasSetMathMode(m_handle, CUBLAS_PEDANTIC_MATH));
    constexpr std::size_t kWorkspaceBytes = 4u << 20;  // ample for GEMMs this small
    m_workspace = Buffer<std::uint8_t>(Device::gpu, kWorkspaceBytes);
    CUBLAS_CHECK(cublasSetWorkspace(m_handle, m_workspace.data(), m_workspace.size()));
  } catch (...) {
    (void)cublasDestroy(m_handle);
    throw;
  }
}

CublasHandle::~CublasHandle() {
  if (m_handle) (void)cublasDestroy(m_handle);  // a destructor must not throw
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
  CUBLAS_CHECK(cublasSgemm(cublas.get(), CUBLAS_OP_T, CUBLAS_OP_N, s.out, s.n, s.in, &one, weight,
                           s.in, x, s.in, &zero, y, s.out));
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
  CUBLAS_CHECK(cublasSgemm(cublas.get(), CUBLAS_OP_N, CUBLAS_OP_N, s.in, s.n, s.out, &one, weight,
                           s.in, dL_dy, s.out, &zero, dL_dx, s.in));
}

void fc_backward_weights(const CublasHandle& cublas, const FcShape& s, const float* x,
                         const float* dL_dy, float* dL_dweight, float* dL_dbias) {
  if (s.n == 0) return;
  const float one = 1.0f, zero = 0.0f;
  CUBLAS_CHECK(cublasSgemm(cublas.get(), CUBLAS_OP_N, CUBLAS_OP_T, s.in, s.out, s.n, &one, x, s.in,
                           dL_dy, s.out, &zero, dL_dweight, s.in));
  if (!dL_dbias) return;
  fc_bias_backward_kernel1<<<s.out, kBiasThreads, 0, cublas.stream()>>>(dL_dy, s.n, s.out,
                                                                        dL_dbias);
  CUDA_CHECK_LAUNCH();
}

}  // namespace lenet5::cuda
