// Convolution version 3, "unroll-gemm" (PMPP Figs 16.15-16.18, corrected): the input is unrolled
// (im2col) into global memory in the Fig 16.14 layout, and cuBLAS SGEMM does the arithmetic.
// Contract: exactly the functions of layers/reference_cpu.hpp (conv_*_cpu, conv_unroll_cpu), on
// device pointers, NCHW, launched without synchronising; every launch and cuBLAS call is checked.
//
// Names (hazard H3): CKK = C*K*K (the rows of the unrolled matrix, Fig 16.15's W_unroll) and
// HW = H_out*W_out (its columns, Fig 16.15's H_unroll and Fig 16.18's W_unroll).
//   LeNet C1: CKK 25,  HW 784 -> 19,600 floats per sample
//         C3: CKK 150, HW 100 -> 15,000
//         C5: CKK 400, HW 1   ->    400
//
// The ConvAlgorithm of this version comes from make_conv_algorithm(ConvAlgo::unroll_gemm, ...)
// (cuda/kernels/conv/registry.hpp): it batches over the mini-batch, as the text suggests. The two
// functions below are the book's own per-sample form, for `lenet5 figures` and the tests.
#pragma once

#include <cuda_runtime.h>

#include "core/shapes.hpp"
#include "cuda/kernels/conv/registry.hpp"
#include "cuda/kernels/dense.cuh"

namespace lenet5::cuda {

// Fig 16.18 (launched as Fig 16.17), with errata E23-E25 fixed: the unroll of ONE sample (s.n is
// ignored; pass x + n*C*H*W, erratum E21) into the C*K*K x H_out*W_out row-major matrix of
// Fig 16.14 (row c*K*K + p*K + q, column h*W_out + w), bit-identical to conv_unroll_cpu. One thread
// per (c, output position): C*H_out*W_out threads in 1-D blocks of 1,024. x_unroll holds
// CKK*HW floats; every one is written.
void conv_unroll(const ConvShape& s, const float* x_sample, float* x_unroll, cudaStream_t stream);

// Fig 16.15 with errata E19-E22 fixed: for each sample n in turn, conv_unroll into the one
// x_unroll buffer (CKK*HW floats of device memory, reused: the launches are in stream order) and
// one cublasSgemm whose C is y + n*M*HW, the exact call of textbook-figures.md §1.15. No bias.
// Runs on cublas.stream(); overwrites y (N, M, H_out, W_out).
void conv_forward_unroll_per_sample(CublasHandle& cublas, const ConvShape& s, const float* x,
                                    const float* weight, float* y, float* x_unroll);

}  // namespace lenet5::cuda
