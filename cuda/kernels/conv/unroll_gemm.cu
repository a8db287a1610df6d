// Convolution version 3, "unroll-gemm": the chapter's reduction of a convolution layer to a matrix
// product (§16.4, Figs 16.14-16.18), with the unroll in global memory and the products in cuBLAS,
// batched over the mini-batch as the text suggests; the backward passes are the same reduction
// read backwards (col2im). The book's per-sample form (Fig 16.15 as printed, corrected) is kept
// for `lenet5 figures`: conv_unroll and conv_forward_unroll_per_sample (conv_unroll_gemm.cuh).
//
// Layout NCHW (textbook-figures.md §0.2), and per sample one unrolled matrix in the Fig 16.14
// layout: X_unroll[n] is CKK x HW row-major, row c*K*K + p*K + q, column h*W_out + w, holding
// X[n,c,h+p,w+q]; the N matrices follow each other (N*CKK*HW floats; C1 at N = 64: 1,254,400).
// Per sample n, with Wmat = the weights read as an M x CKK row-major matrix (W[M][C][K][K] as is):
//   forward           Y_n (M x HW)    = Wmat (M x CKK) X_unroll_n (CKK x HW)   -> y, NCHW directly
//   backward input    dXu_n (CKK x HW) = Wmat^T (CKK x M) dY_n (M x HW), then fold (col2im) into dX
//   backward weights  dW (M x CKK)    = sum_n dY_n (M x HW) X_unroll_n^T (HW x CKK)
// Each is one cublasSgemmStridedBatched call over the N samples (the weights shared: stride 0),
// in pedantic FP32 (CublasHandle): the same products as the CPU reference summed in another order,
// hence exact on small integers. Every output is overwritten, and results are bit-identical from
// run to run: cuBLAS gives the same bits for the same call on the same GPU (its atomics mode is
// left off), the weight gradient's batch sum is a kernel that adds the per-sample GEMM results in
// order n = 0..N-1, and the other kernels give each output one owner thread. No float atomics.
//
// Errata and hazards of the chapter's listings dealt with here (textbook-figures.md §2.1, §2.4):
//   E19 Fig 16.15 redeclares the parameter W_unroll as a local int: the sizes are named CKK and HW.
//   E20 Fig 16.15 passes the int width W to gemm as the filter matrix: the weights are passed.
//   E21 Fig 16.15 calls unroll with an n that Fig 16.16 does not take: the sample's own pointer
//       x + n*C*H*W is passed (the batched unroll computes it from n).
//   E22 Fig 16.15's Y[n] is a scalar and its malloc is never freed: y + n*M*HW, and the unrolled
//       matrices live in device buffers owned by the object, allocated once.
//   E23 Fig 16.17's ceil((C*H_out*W_out) / CUDA_MAX_NUM_THREADS) truncates first (0 blocks for
//       every LeNet layer): the block count is rounded up, and the kernel has a bounds guard.
//   E24 Fig 16.17 launches unroll_Kernel with no arguments: they are passed.
//   E25 Fig 16.18 uses w_unroll undeclared: declared.
//   H2  X_unroll(h_unroll, w_unroll) is column-major, element w_unroll*HW + h_unroll: the Fig 16.14
//       layout, the only one in which adjacent threads write adjacent elements and the column-major
//       GEMM of §1.15 yields Y (not Y^T) in NCHW.
//   H3  W_unroll means C*K*K in Fig 16.15 but H_out*W_out in Fig 16.18: CKK and HW here.
#include <cublas_v2.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <memory>
#include <string>

#include "core/error.hpp"
#include "cuda/kernels/block_reduce.cuh"
#include "cuda/kernels/element_grid.cuh"
#include "cuda/kernels/conv/conv_dims.cuh"
#include "cuda/kernels/conv/unroll_gemm.cuh"
#include "cuda/kernels/map_element.cuh"
#include "cuda/runtime/buffer.hpp"
#include "cuda/runtime/check.hpp"
#include "cuda/runtime/cublas_library.hpp"

namespace lenet5::cuda {
namespace {


constexpr int kCudaMaxNumThreads = 1024;  // Fig 16.17's CUDA_MAX_NUM_THREADS: the unroll's blocks
constexpr int kReduceThreads = 256;       // the bias reduction: a power of two (block_sum)

// Floats of the N unrolled matrices, N*CKK*HW (C1 at N = 64: 1,254,400; C3: 960,000; C5: 25,600).
std::size_t unrolled_floats(const ConvShape& s) {
  return std::size_t(std::max(s.n, 0)) * s.c * s.k * s.k * s.h_out() * s.w_out();
}
// Floats of the weight gradient's per-sample GEMM results, N*M*CKK (N = 64: C1 9,600; C3 153,600;
// C5 3,072,000).
std::size_t partial_floats(const ConvShape& s) {
  return std::size_t(std::max(s.n, 0)) * s.m * s.c * s.k * s.k;
}

// ---- unroll (Figs 16.17 and 16.18) --------------------------------------------------------------

// X_unroll[n][c*K*K + p*K + q][h*W_out + w] = X[n,c,h+p,w+q]: Fig 16.18 over a batch.
// Thread t = blockIdx.x*1024 + threadIdx.x owns (n, c, s) with t = (n*C + c)*HW + s, where the
// output position s = h*W_out + w is the listing's h_unroll, and writes the K*K elements of column
// s in rows c*K*K .. c*K*K + K*K - 1 of sample n's matrix (a "K x K section of a column").
// Consecutive threads take consecutive s, so each of their K*K stores is to consecutive addresses
// (the text's "adjacent threads write adjacent elements", true in this layout only: hazard H2), and
// their loads of X[n,c,h+p,w+q] walk along w. Launched with N = 1 (conv_unroll) it has exactly
// the printed kernel's C*H_out*W_out threads (C1: 784, C3: 600, C5: 16, Fig 16.14: 12).
__global__ void conv_unroll_kernel3(ConvDims d, const float* __restrict__ x,
                                    float* __restrict__ x_unroll) {
  const int HW = d.H_out * d.W_out;  // Fig 16.18's W_unroll (hazard H3)
  const int KK = d.K * d.K;
  const std::size_t t = std::size_t(blockIdx.x) * kCudaMaxNumThreads + threadIdx.x;
  if (t >= std::size_t(d.N) * d.C * HW) return;  // the last block is partly idle (E23's guard)
  const int h_unroll = int(t % HW);
  const int c = int(t / HW % d.C);
  const std::size_t n = t / HW / d.C;
  const int h_out = h_unroll / d.W_out;
  const int w_out = h_unroll % d.W_out;
  const int w_base = c * KK;
  float* x_unroll_n = x_unroll + n * d.C * KK * HW;  // sample n's CKK x HW matrix (E21)
  const float* x_c = x + x_index(d, n, c, h_out, w_out);
  for (int p = 0; p < d.K; ++p)
    for (int q = 0; q < d.K; ++q) {
      const int w_unroll = w_base + p * d.K + q;  // declared (E25)
      // X_unroll(h_unroll, w_unroll), column-major with leading dimension HW (hazard H2)
      x_unroll_n[std::size_t(w_unroll) * HW + h_unroll] = x_c[p * d.W + q];
    }
}

// Fig 16.17 corrected: num_blocks rounded up (E23) and the arguments passed (E24). C1 at N = 64:
// 50,176 threads in 49 blocks (the printed formula gives 0 blocks even for one sample).
void unroll_batch(const ConvDims& d, const float* x, float* x_unroll, cudaStream_t stream) {
  const std::size_t num_threads = std::size_t(d.N) * d.C * d.H_out * d.W_out;
  if (num_threads == 0) return;
  const std::size_t num_blocks = (num_threads + kCudaMaxNumThreads - 1) / kCudaMaxNumThreads;
  if (num_blocks > std::size_t(INT_MAX))
    throw Error("internal: convolution unroll of " + std::to_string(num_threads) +
                " threads exceeds one grid");
  conv_unroll_kernel3<<<unsigned(num_blocks), kCudaMaxNumThreads, 0, stream>>>(d, x, x_unroll);
  CUDA_CHECK_LAUNCH();
}

// ---- forward: bias ------------------------------------------------------------------------------

// Y[n,m,h,w] += bias[m] over the GEMM's output (N, M, H_out, W_out); one thread per element,
// element i = ((n*M + m)*H_out + h)*W_out + w. The sum is thus (sum over c, p, q) + bias, where the
// CPU reference starts from the bias: exact on integers, a rounding apart otherwise.
__global__ void conv_bias_forward_kernel3(std::size_t count, int M, int HW,
                                          const float* __restrict__ bias, float* __restrict__ y) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count;
       i += std::size_t(gridDim.x) * blockDim.x)
    y[i] += bias[i / HW % M];
}

// ---- backward input: fold (col2im), gather form -------------------------------------------------

// dL/dX[n,c,h,w] = sum_{p,q} dXu[n][c*K*K + p*K + q][(h-p)*W_out + (w-q)] over 0 <= h-p < H_out
// and 0 <= w-q < W_out: the transpose of the unroll, which copied X[n,c,h,w] into exactly those
// cells of X_unroll. One thread per dL/dX element gathers its (at most K*K) cells, all of its own
// channel c, in order p, q: no two threads write the same element, so no atomics (the scatter form,
// each cell added into dX, would race; hazard H4). Elements no output touches get 0. Grid-stride
// over i = ((n*C + c)*H + h)*W + w (C1: N*1,024). Overwrites dL/dX.
__global__ void conv_fold_kernel3(ConvDims d, const float* __restrict__ dx_unroll,
                                  float* __restrict__ dL_dx) {
  const int HW = d.H_out * d.W_out;
  const int KK = d.K * d.K;
  const std::size_t count = std::size_t(d.N) * d.C * d.H * d.W;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const auto [w, h, nc] = map_element(i, d.H, d.W);  // nc = n*C + c
    const float* rows_c = dx_unroll + nc * KK * HW;       // row c*K*K of sample n's CKK x HW matrix
    const TapsReaching t = taps_reaching(d, h, w);
    float acc = 0.0f;
    for (int p = t.p_begin; p < t.p_end; ++p)
      for (int q = t.q_begin; q < t.q_end; ++q)
        acc += rows_c[std::size_t(p * d.K + q) * HW + (h - p) * d.W_out + (w - q)];
    dL_dx[i] = acc;
  }
}

// ---- backward weights: batch sum, mask, bias ----------------------------------------------------

// dL/dW[i] = mask[i] * sum_{n=0..N-1} partial[n][i] for i = (m*C + c)*K*K + p*K + q < M*CKK, where
// partial[n] (M x CKK row-major, the layout of W) is sample n's GEMM result. One thread per weight
// (C1: 150, C3: 2,400, C5: 48,000), n in order: deterministic. Neighbouring threads read
// neighbouring partials (coalesced). With N = 0 it writes zeros, as the CPU reference does.
__global__ void conv_backward_weights_reduce_kernel3(int N, int n_weights,
                                                     const float* __restrict__ partial,
                                                     const float* __restrict__ mask,
                                                     float* __restrict__ dL_dweight) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n_weights; i += gridDim.x * blockDim.x) {
    float acc = 0.0f;
    for (int n = 0; n < N; ++n) acc += partial[std::size_t(n) * n_weights + i];
    dL_dweight[i] = mask ? acc * mask[i] : acc;
  }
}

// dL/dbias[m] = sum_{n,h,w} dL/dY[n,m,h,w]: one block of kReduceThreads per map m; thread t sums
// the terms j = t, t + 256, ... of the N*HW terms (j = n*HW + h*W_out + w) in order, then block_sum
// adds the 256 partial sums in a fixed tree. Deterministic. Overwrites dL/dbias.
__global__ void conv_backward_bias_kernel3(int N, int M, int HW, const float* __restrict__ dL_dy,
                                           float* __restrict__ dL_dbias) {
  const int m = blockIdx.x;
  const std::size_t n_terms = std::size_t(N) * HW;
  float acc = 0.0f;
  for (std::size_t j = threadIdx.x; j < n_terms; j += kReduceThreads)
    acc += dL_dy[(j / HW * M + m) * HW + j % HW];
  const float sum = block_sum<kReduceThreads>(acc);
  if (threadIdx.x == 0) dL_dbias[m] = sum;
}

// The sizes of a shape's GEMMs: CKK rows and HW columns of a sample's unrolled matrix, and the
// batch strides of one sample's unrolled matrix (CKK*HW) and of its Y or dL/dY (M*HW).
struct GemmSizes {
  int CKK, HW;
  long long unrolled_stride, y_stride;
};

GemmSizes gemm_sizes(const ConvDims& d) {
  const int CKK = d.C * d.K * d.K, HW = d.H_out * d.W_out;
  return {CKK, HW, (long long)CKK * HW, (long long)d.M * HW};
}

// ---- the ConvAlgorithm of version 3 -------------------------------------------------------------
//
// cuBLAS is column-major; our matrices are row-major. A row-major (r, c) array with leading
// dimension c is, read column-major, its transpose (c, r) with leading dimension c (dense.cu), so
// each row-major product below is computed as the column-major product of the transposes. Per
// sample n, with the buffers read column-major:
//   X_unroll_n  (CKK x HW row-major)  = X_unroll_n^T (HW x CKK), ld HW, samples CKK*HW apart
//   W           (M x CKK row-major)   = Wmat^T (CKK x M),        ld CKK, shared (stride 0)
//   Y_n, dY_n   (M x HW row-major)    = Y_n^T (HW x M),          ld HW, samples M*HW apart
// beta = 0 everywhere: cuBLAS then never reads C, so NaN or stale contents do not matter.
//
// backward_weights has a cuBLAS handle and unroll buffer of its own: with the fast kernel set,
// Network::backward runs a layer's weight gradient on a side stream while its input gradient runs
// on the main stream (cuda/runtime/streams.hpp), and a shared buffer or cuBLAS workspace would race.
// forward and backward_input share the rest (they run in stream order). Scratch at N = 64:
// 2*N*CKK*HW + N*M*CKK floats (C1 10.1 MB, C3 8.3 MB, C5 12.5 MB), plus two cuBLAS workspaces.
class UnrollGemmConvolution final : public ConvAlgorithm {
 public:
  explicit UnrollGemmConvolution(const ConvShape& largest)
      : m_largest(largest),
        m_unrolled(Device::gpu, unrolled_floats(largest)),
        m_weights_unrolled(Device::gpu, unrolled_floats(largest)),
        m_partials(Device::gpu, partial_floats(largest)) {}

  void forward(const ConvShape& s, const float* x, const float* weight, const float* bias, float* y,
               cudaStream_t stream) override {
    const ConvDims d = checked_dims(s);
    const auto [CKK, HW, unrolled_stride, y_stride] = gemm_sizes(d);
    if (d.N == 0) return;  // nothing to write
    m_cublas.use_stream(stream);
    unroll_batch(d, x, m_unrolled.data(), stream);
    // Y_n (M x HW) = Wmat (M x CKK) X_unroll_n (CKK x HW)
    //   <=>  Y_n^T (HW x M) = X_unroll_n^T (HW x CKK) Wmat^T (CKK x M)      (§1.15's call, batched)
    //   X_unroll's buffer column-major is X_unroll_n^T (HW x CKK), ld HW  -> op(A) = N, lda = HW
    //   W's buffer column-major is Wmat^T (CKK x M), ld CKK              -> op(B) = N, ldb = CKK
    //   y's buffer column-major is Y_n^T (HW x M), ld HW                 -> C,          ldc = HW
    //   m = HW, n = M, k = CKK; strides CKK*HW (A), 0 (B), M*HW (C); N samples
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cuda::cublas::sgemm_strided_batched(
        m_cublas.get(), CUBLAS_OP_N, CUBLAS_OP_N, HW, d.M, CKK, &one, m_unrolled.data(), HW,
        unrolled_stride, weight, CKK, 0, &zero, y, HW, y_stride, d.N));
    if (!bias) return;
    const std::size_t count = std::size_t(d.N) * d.M * HW;
    conv_bias_forward_kernel3<<<blocks_for(count), kThreads, 0, stream>>>(count, d.M, HW, bias, y);
    CUDA_CHECK_LAUNCH();
  }

  void backward_input(const ConvShape& s, const float* dL_dy, const float* weight, float* dL_dx,
                      cudaStream_t stream) override {
    const ConvDims d = checked_dims(s);
    const auto [CKK, HW, unrolled_stride, y_stride] = gemm_sizes(d);
    if (d.N == 0) return;  // nothing to write
    m_cublas.use_stream(stream);
    // dXu_n (CKK x HW) = Wmat^T (CKK x M) dY_n (M x HW)
    //   <=>  dXu_n^T (HW x CKK) = dY_n^T (HW x M) Wmat (M x CKK)
    //   dY's buffer column-major is dY_n^T (HW x M), ld HW                -> op(A) = N, lda = HW
    //   W's buffer column-major is Wmat^T (CKK x M), ld CKK; we need Wmat -> op(B) = T, ldb = CKK
    //   the scratch column-major is dXu_n^T (HW x CKK), ld HW             -> C,          ldc = HW
    //   m = HW, n = CKK, k = M; strides M*HW (A), 0 (B), CKK*HW (C); N samples
    // so dXu_n is in the Fig 16.14 layout, row c*K*K + p*K + q, column h*W_out + w.
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cuda::cublas::sgemm_strided_batched(
        m_cublas.get(), CUBLAS_OP_N, CUBLAS_OP_T, HW, CKK, d.M, &one, dL_dy, HW, y_stride, weight,
        CKK, 0, &zero, m_unrolled.data(), HW, unrolled_stride, d.N));
    const std::size_t count = std::size_t(d.N) * d.C * d.H * d.W;
    conv_fold_kernel3<<<blocks_for(count), kThreads, 0, stream>>>(d, m_unrolled.data(), dL_dx);
    CUDA_CHECK_LAUNCH();
  }

  void backward_weights(const ConvShape& s, const float* x, const float* dL_dy, float* dL_dweight,
                        float* dL_dbias, const float* mask, cudaStream_t stream) override {
    const ConvDims d = checked_dims(s);
    const auto [CKK, HW, unrolled_stride, y_stride] = gemm_sizes(d);
    const int n_weights = d.M * CKK;
    const long long partial_stride = n_weights;  // one sample's (M, C, K, K)
    if (d.N > 0) {
      m_weights_cublas.use_stream(stream);
      unroll_batch(d, x, m_weights_unrolled.data(), stream);
      // partial_n (M x CKK) = dY_n (M x HW) X_unroll_n^T (HW x CKK)
      //   <=>  partial_n^T (CKK x M) = X_unroll_n (CKK x HW) dY_n^T (HW x M)
      //   X_unroll's buffer column-major is X_unroll_n^T (HW x CKK), ld HW; we need X_unroll_n
      //                                                               -> op(A) = T, lda = HW
      //   dY's buffer column-major is dY_n^T (HW x M), ld HW          -> op(B) = N, ldb = HW
      //   the partials column-major are partial_n^T (CKK x M), ld CKK -> C,          ldc = CKK
      //   m = CKK, n = M, k = HW; strides CKK*HW (A), M*HW (B), M*CKK (C); N samples
      // so partial_n has the layout of W, (M, C, K, K).
      const float one = 1.0f, zero = 0.0f;
      CUBLAS_CHECK(cuda::cublas::sgemm_strided_batched(
          m_weights_cublas.get(), CUBLAS_OP_T, CUBLAS_OP_N, CKK, d.M, HW, &one,
          m_weights_unrolled.data(), HW, unrolled_stride, dL_dy, HW, y_stride, &zero,
          m_partials.data(), CKK, partial_stride, d.N));
    }
    // With N = 0 both kernels sum nothing and write zeros.
    conv_backward_weights_reduce_kernel3<<<blocks_for(std::size_t(n_weights)), kThreads, 0,
                                           stream>>>(d.N, n_weights, m_partials.data(), mask,
                                                     dL_dweight);
    CUDA_CHECK_LAUNCH();
    if (!dL_dbias) return;
    conv_backward_bias_kernel3<<<d.M, kReduceThreads, 0, stream>>>(d.N, d.M, HW, dL_dy, dL_dbias);
    CUDA_CHECK_LAUNCH();
  }

 private:
  // The scratch is sized for m_largest: same C, H, W, M, K and at most its batch.
  ConvDims checked_dims(const ConvShape& s) const {
    const ConvShape& l = m_largest;
    if (s.n < 0 || s.n > l.n || s.c != l.c || s.h != l.h || s.w != l.w || s.m != l.m || s.k != l.k)
      throw Error("internal: convolution shape other than the one its scratch was sized for");
    return dims_of(s);
  }

  ConvShape m_largest;
  CublasHandle m_cublas;             // forward, backward_input
  Buffer<float> m_unrolled;          // X_unroll (forward) or dX_unroll (backward_input), N*CKK*HW
  CublasHandle m_weights_cublas;     // backward_weights
  Buffer<float> m_weights_unrolled;  // X_unroll for backward_weights, N*CKK*HW
  Buffer<float> m_partials;          // per-sample weight gradients (N, M, C, K, K)
};

}  // namespace

// ---- the book's per-sample form -----------------------------------------------------------------

void conv_unroll(const ConvShape& s, const float* x_sample, float* x_unroll, cudaStream_t stream) {
  ConvDims d = dims_of(s);
  d.N = 1;  // one sample, x_sample = x + n*C*H*W (E21)
  unroll_batch(d, x_sample, x_unroll, stream);
}

void conv_forward_unroll_per_sample(CublasHandle& cublas, const ConvShape& s, const float* x,
                                    const float* weight, float* y, float* x_unroll) {
  const ConvDims d = dims_of(s);
  const int CKK = d.C * d.K * d.K;   // Fig 16.15's W_unroll (E19, H3)
  const int HW = d.H_out * d.W_out;  // Fig 16.15's H_unroll
  const float one = 1.0f, zero = 0.0f;
  for (int n = 0; n < d.N; ++n) {
    conv_unroll(s, x + std::size_t(n) * d.C * d.H * d.W, x_unroll, cublas.stream());  // E21
    // Y[n] (M x HW) = Wmat (M x CKK) X_unroll (CKK x HW), as the forward call of the batched
    // version above for one sample: textbook-figures.md §1.15, with the filter matrix passed as B
    // (E20) and C = y + n*M*HW (E22).
    CUBLAS_CHECK(cuda::cublas::sgemm(cublas.get(), CUBLAS_OP_N, CUBLAS_OP_N, HW, d.M, CKK, &one,
                                     x_unroll, HW, weight, CKK, &zero,
                                     y + std::size_t(n) * d.M * HW, HW));
  }
}

namespace {

std::unique_ptr<ConvAlgorithm> make_unroll_gemm_convolution(const ConvShape& largest) {
  if (largest.c < 1 || largest.m < 1)
    throw Error("internal: unroll-gemm convolution needs at least one input and one output map");
  return std::make_unique<UnrollGemmConvolution>(largest);
}

const ConvRegistration kUnrollGemm{
    3, "unroll-gemm", "PMPP Figs 16.15-16.18", make_unroll_gemm_convolution,
    "input unrolled (im2col) into global memory, then cuBLAS SGEMM over the mini-batch"};

}  // namespace

}  // namespace lenet5::cuda
