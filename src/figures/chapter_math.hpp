// The computations behind the chapter's CPU figure targets (textbook-figures.md §1), kept free of
// printing so that tests call them directly: host versions of the printed listings' errata (each
// reproduces what the printed code would compute, and never touches memory out of range), the
// unroll + GEMM forward path of Fig 16.15, launch arithmetic of Fig 16.17, and the sector model
// of Exercise 5. Layout NCHW as in layers/reference_cpu.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "layers/reference_cpu.hpp"

namespace lenet5::figures {

// ---- errata of the sequential listings -------------------------------------------------------

// E01 (Fig 16.4, rendering A): `Y[m,h,w] += Y[m,h,w] + X[..]*W[..]`, i.e. y <- 2y + term, with Y
// zeroed per output and the terms taken in the listing's c, p, q order. One sample (N ignored).
std::vector<float> conv_forward_e01(const ConvShape& s, const float* x, const float* weight);

// E04 (Fig 16.5, rendering A): `S[m,h,w] += S[m,hh,ww] + Y[..]/(K*K)` with hh, ww read as h, w,
// i.e. s <- 2s + y/K^2 (average pooling, no bias or activation). One sample.
std::vector<float> pool_forward_e04(const PoolShape& s, const float* y);

// E06 (Fig 16.5, rendering B): the `S = sigmoid(S + b[m])` statement sits after the loops' closing
// braces, so it runs once, with m, h, w at their loop-exit values M, H/K, W/K: every real output
// keeps its plain average, and the one statement writes S[M, H/K, W/K] (out of range; its index is
// reported here, the write is not performed).
struct PoolE06Result {
  std::vector<float> s;         // what the listing leaves in S
  std::size_t stray_index = 0;  // linear index of the statement's write
  std::size_t size = 0;         // number of elements of S
};
PoolE06Result pool_forward_e06(const PoolShape& s, const float* y);

// E08 (Fig 16.9): the printed `dE_dY[m, c, h, w]` read as a 4-D index into dE/dY, which has only
// M x H_out x W_out elements per sample. Counted by index arithmetic alone (nothing is read).
struct LiteralIndexReads {
  long long reads = 0;         // every read the listing's loop nest performs
  long long out_of_range = 0;  // reads at an index >= M*H_out*W_out
  long long max_index = 0;     // the largest index read
  long long size = 0;          // M*H_out*W_out
  long long differ = 0;        // reads whose index differs from the correct ((m*H_out+h)*W_out+w)
};
LiteralIndexReads e08_literal_dy_reads(const ConvShape& s);

// E08 (Fig 16.9) computed as printed, for one sample: dE/dW[m,c,p,q] = sum_{h,w} X[c,h+p,w+q] *
// dE/dY[((m*C + c)*H_out + h)*W_out + w]. dE/dY is copied into a buffer long enough for the
// largest literal index, whose elements past the real M*H_out*W_out are NaN: a weight whose sum
// strayed out of range comes out NaN (as a NaN-padded buffer would show on a GPU), and nothing
// outside the real data is ever read.
std::vector<float> conv_backward_weights_e08(const ConvShape& s, const float* x, const float* dy);

// Fig 16.8's gradient in the gather form a GPU needs (one writer per dE/dX element, race-free):
// dE/dX[c,h,w] = sum_{m,p,q} dE/dY[m,h-p,w-q] W[m,c,p,q] over 0 <= h-p < H_out, 0 <= w-q < W_out.
template <class T>
void conv_backward_input_gather(const ConvShape& s, const T* dy, const T* weight, T* dx);

// The largest relative error between central differences (E(v + h) - E(v - h)) / 2h of a scalar
// function of `values` and the `analytic` gradient, over every element. The difference quotient
// carries rounding noise of about eps |E| / h (2e-10 for |E| ~ 10 with h = 1e-5 in double); a
// floor of 1e-2 under the denominator keeps gradients that are nearly zero from turning that noise
// into a large ratio, while a wrong gradient still shows as an error of order 1.
double finite_difference_max_rel_error(const std::function<double()>& loss,
                                       std::vector<double>& values,
                                       const std::vector<double>& analytic, double h = 1e-5);

// ---- unroll (Figs 16.14, 16.16) ----------------------------------------------------------------

// How many times conv_unroll_cpu copies each element of sample 0's input (C x H x W), measured by
// unrolling an input whose elements hold their own indices and counting them in the result.
std::vector<int> unroll_duplication(const ConvShape& s);

// The number of elements conv_unroll_cpu writes for one sample, measured: the unroll runs into a
// NaN-filled buffer twice the expected size, and the elements no longer NaN are counted.
std::size_t unroll_written_count(const ConvShape& s);

// Cells where two row-major matrices of the same size differ: (row, col), 0-based.
struct Cell {
  int row, col;
};
std::vector<Cell> differing_cells(const std::vector<float>& a, const std::vector<float>& b,
                                  int cols);

// Reading a printed unrolled matrix back (Fig 16.14, §1.13): every copy of input element
// (c, h, w) sits at row c*K*K + p*K + q, column (h-p)*W_out + (w-q) for each valid (p, q).
struct InputCopies {
  int c = 0, h = 0, w = 0;
  std::vector<float> values;  // what each copy holds
  std::vector<Cell> cells;    // where (row, col), 0-based
  bool agree() const;
};
std::vector<InputCopies> unrolled_copies(const ConvShape& s, const std::vector<float>& unrolled);

// Brute force over the LAST input channel (entries 0..max_value), the other channels taken from
// `x`: the inputs whose direct convolution with `weight` equals `y`, and among them those whose
// unrolled matrix is closest to `printed_unrolled` (fewest differing cells).
struct ChannelSearch {
  long long tried = 0;
  long long consistent = 0;              // inputs that reproduce y
  int distance = -1;                     // fewest differing cells among them
  std::vector<std::vector<float>> best;  // the last channels at that distance
};
ChannelSearch search_last_channel(const ConvShape& s, const std::vector<float>& x,
                                  const std::vector<float>& weight, const std::vector<float>& y,
                                  const std::vector<float>& printed_unrolled, int max_value);

// C = A B for row-major A (rows x inner) and B (inner x cols), summed in inner order.
std::vector<float> matmul(const std::vector<float>& a, const std::vector<float>& b, int rows,
                          int inner, int cols);

// ---- unroll + GEMM forward (Fig 16.15) ---------------------------------------------------------

// Column-major C(m x n) = A(m x k) B(k x n), alpha = 1, beta = 0, as cublasSgemm(N, N) computes
// it; each element sums its k products in k order.
void sgemm_colmajor_ref(int m, int n, int k, const float* a, int lda, const float* b, int ldb,
                        float* c, int ldc);

// Fig 16.15 read as §1.15 does: for each sample, unroll (Fig 16.16) then a column-major GEMM with
// m = H_out*W_out, n = M, k = C*K*K, A = X_unrolled (lda = H_out*W_out), B = the filters
// (ldb = C*K*K), C = Y[n] (ldc = H_out*W_out). With per_sample_offset false the unroll gets X
// itself for every sample: what erratum E21's 7-argument call becomes if "fixed" by dropping n.
std::vector<float> conv_forward_unroll_gemm(const ConvShape& s, const float* x, const float* weight,
                                            bool per_sample_offset = true);

// ---- the unroll kernel's launch (Fig 16.17) ---------------------------------------------------

// As printed: ceil((C*H_out*W_out) / CUDA_MAX_NUM_THREADS) with int operands, so the division
// truncates before ceil sees it (E23).
long long unroll_blocks_printed(long long threads, int threads_per_block);
long long unroll_blocks_correct(long long threads, int threads_per_block);

// ---- Exercise 5: memory sectors per warp request of the unroll kernel (Fig 16.18) -------------

// Model (textbook-figures.md §1.22 ex 5, §7): thread t = c*H_out*W_out + h_out*W_out + w_out; a
// warp is 32 consecutive t, threads with t >= C*H_out*W_out are inactive (the kernel's guard);
// each (p, q) iteration is one warp request for the X read and one for the X_unroll write; X and
// X_unroll start on 128-byte boundaries; a request costs the number of distinct 32-byte sectors its
// active threads touch. Each figure is the average over all requests (every warp, every (p, q)).
// The number of distinct 32-byte sectors among byte addresses (offsets from a 128-byte aligned
// base, as cudaMalloc's are): what one warp request costs. Overwrites the addresses (sorts the
// sector numbers). Also the building block of Exercise 2's model (layout_math.hpp).
int distinct_sectors(std::vector<std::int64_t>& byte_addresses);

struct SectorCounts {
  double x_reads = 0;           // X[c, h_out+p, w_out+q]
  double writes_fig16_14 = 0;   // X_unroll[(c*K*K + p*K + q)*H_out*W_out + t % (H_out*W_out)]
  double writes_row_major = 0;  // literal row-major X_unroll[h_unroll][w_unroll], rows of C*K*K
  double ideal = 0;             // the active threads' 4-byte words packed contiguously
  long long requests = 0;       // warp requests averaged over (per kind of access)
};
SectorCounts unroll_sector_counts(int C, int H, int W, int K);

}  // namespace lenet5::figures
