// The forward convolution by FFT (PMPP Exercise 3, textbook-figures.md §1.22 item 3; the cuDNN
// paper's ref [10]), with cuFFT. Not a version of the registry (core/conv_algo.hpp): it has no
// backward directions and, rounding through its transforms, does not match the CPU reference
// exactly; `lenet5 figures ex3` checks it against the double CPU reference and times it next to
// versions 1 and 5. This header does not include cufft.h.
//
// Contract: the registry's forward without bias (cuda/kernels/conv/registry.hpp): NCHW float32 device
// pointers, valid stride-1 CROSS-CORRELATION, y overwritten, launched on `stream` without
// synchronising; every cuFFT call and launch checked; all scratch (and cuFFT's work area) owned by
// the object and allocated in the constructor, never during a call; x and weight are only read.
//
// Why circular correlation of size H x W is enough: with Wpad = W zero-padded to H x W,
//   Z[h,w] = sum_{p<H, q<W} X[(h+p) mod H, (w+q) mod W] Wpad[p,q]
//          = sum_{p<K, q<K}  X[h+p, w+q] W[p,q]        for h < H_out, w < W_out,
// since h + p <= H_out - 1 + K - 1 = H - 1 never wraps. The correlation theorem gives
// Z = IDFT( DFT(X) . conj(DFT(Wpad)) ) (W real), summed over c by linearity:
//   Y[n,m] = window [0,H_out) x [0,W_out) of IDFT( sum_c DFT(X[n,c]) . conj(DFT(Wpad[m,c])) ).
// Real transforms (R2C/C2R) keep only the H x (W/2+1) non-redundant frequencies (Hermitian
// symmetry), and cuFFT's inverse is unnormalised: the crop multiplies by 1/(H W).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <string>

#include "core/shapes.hpp"

namespace lenet5::cuda {

// The scratch memory of the FFT convolution of shape `s`, in elements: pure arithmetic, the
// "extra memory" the specification asks to print (a CPU test checks it). For LeNet's C1
// (N = 64, 1x32x32 -> 6 maps, K = 5) the filters take 150 floats as stored and 6,144 padded to
// 32x32, 40.96x (the spec's "41x"): the temporary-memory cost the cuDNN paper cites (§3.6).
struct FftScratch {
  std::size_t filter_floats = 0;            // M*C*K*K, the filters as stored
  std::size_t padded_filter_floats = 0;     // M*C*H*W, zero-padded to the input size
  std::size_t filter_spectrum_complex = 0;  // M*C*H*(W/2+1): DFT(Wpad)
  std::size_t input_spectrum_complex = 0;   // N*C*H*(W/2+1): DFT(X)
  std::size_t output_spectrum_complex = 0;  // N*M*H*(W/2+1): sum_c DFT(X) . conj(DFT(Wpad))
  std::size_t circular_output_floats = 0;   // N*M*H*W: the inverse before the crop

  // padded_filter_floats / filter_floats: (H W) / (K K).
  double padding_ratio() const { return double(padded_filter_floats) / double(filter_floats); }
  // Everything above (float 4 B, complex 8 B), without cuFFT's own work area.
  std::size_t bytes() const {
    return 4 * (padded_filter_floats + circular_output_floats) +
           8 * (filter_spectrum_complex + input_spectrum_complex + output_spectrum_complex);
  }
};

inline FftScratch fft_scratch(const ConvShape& s) {
  const std::size_t n = std::size_t(s.n), c = std::size_t(s.c), m = std::size_t(s.m);
  const std::size_t plane = std::size_t(s.h) * s.w, half_plane = std::size_t(s.h) * (s.w / 2 + 1);
  FftScratch f;
  f.filter_floats = m * c * s.k * s.k;
  f.padded_filter_floats = m * c * plane;
  f.filter_spectrum_complex = m * c * half_plane;
  f.input_spectrum_complex = n * c * half_plane;
  f.output_spectrum_complex = n * m * half_plane;
  f.circular_output_floats = n * m * plane;
  return f;
}

// "cuFFT 12.0.0" (cufftGetVersion of the library loaded at run time).
std::string cufft_description();

class FftConvolution {
 public:
  // Plans and scratch for exactly the shape `s` (batched cuFFT plans: N*C input maps, M*C filters,
  // N*M outputs). Throws lenet5::Error if cuFFT cannot plan it or memory runs out.
  explicit FftConvolution(const ConvShape& s);
  ~FftConvolution();
  FftConvolution(const FftConvolution&) = delete;
  FftConvolution& operator=(const FftConvolution&) = delete;

  // cuFFT's work area, one for the three plans (they never run at the same time).
  std::size_t cufft_work_bytes() const;

  // y (N,M,H_out,W_out) = x (N,C,H,W) cross-correlated with weight (M,C,K,K), on `stream`:
  // pad the filters, two R2C transforms, the spectral product summed over c, one C2R transform,
  // crop and scale. The filter transform runs on every call (in training the filters change at
  // every step).
  void forward(const float* x, const float* weight, float* y, cudaStream_t stream);

 private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

}  // namespace lenet5::cuda
