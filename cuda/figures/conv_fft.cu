// The FFT convolution (see conv_fft.hpp for the contract and the algebra): three small kernels
// around three batched cuFFT plans.
//
// Layout NCHW, float32; spectra are cuFFT's packed R2C layout, H x (W/2+1) complex per map:
//   x              (N, C, H, W)            C1: (64, 1, 32, 32)
//   weight         (M, C, K, K)            C1: (6, 1, 5, 5)
//   padded filters (M, C, H, W)            C1: (6, 1, 32, 32)    6,144 floats instead of 150
//   input spectra  (N, C, H, W/2+1)        C1: (64, 1, 32, 17)   complex
//   filter spectra (M, C, H, W/2+1)        C1: (6, 1, 32, 17)
//   output spectra (N, M, H, W/2+1)        C1: (64, 6, 32, 17)
//   circular y     (N, M, H, W)            C1: (64, 6, 32, 32)
//   y              (N, M, H_out, W_out)    C1: (64, 6, 28, 28)
//
// The CPU reference is conv_forward_cpu (layers/conv_cpu.cpp); tests/gpu/test_conv_fft.cpp checks
// this against it on every LeNet shape, the Fig 16.14 example and shapes with H != W.
#include <cufft.h>

#include <algorithm>
#include <string>

#include "core/error.hpp"
#include "cuda/figures/conv_fft.hpp"
#include "cuda/kernels/conv/conv_dims.cuh"
#include "cuda/kernels/map_element.cuh"
#include "cuda/runtime/buffer.hpp"
#include "cuda/runtime/check.hpp"

namespace lenet5::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 1 << 20;  // grid-stride loops cover anything beyond

int blocks_for(std::size_t count) {
  return int(std::max<std::size_t>(
      1, std::min<std::size_t>((count + kThreads - 1) / kThreads, kMaxBlocks)));
}

// Wpad[m,c,p,q] = W[m,c,p,q] for p, q < K and 0 elsewhere, M*C maps of H x W. One thread per
// padded element (all of them are written: the zeros too, so the buffer needs no clearing).
__global__ void conv_fft_pad_filters_kernel(ConvDims d, const float* __restrict__ weight,
                                            float* __restrict__ padded) {
  const std::size_t count = std::size_t(d.M) * d.C * d.H * d.W;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const auto [q, p, mc] = map_element(i, d.H, d.W);  // mc = m*C + c
    padded[i] = p < d.K && q < d.K ? weight[(mc * d.K + p) * d.K + q] : 0.0f;
  }
}

// Yhat[n,m,f] = sum_c Xhat[n,c,f] * conj(What[m,c,f]) for the F = H*(W/2+1) frequencies f.
// (a + bi)(c - di) = (ac + bd) + (bc - ad)i. One thread per (n, m, f), f fastest so that a warp
// reads consecutive spectrum entries; the sum runs in order c (deterministic, no atomics).
__global__ void conv_fft_product_kernel(int N, int C, int M, int F,
                                        const cufftComplex* __restrict__ x_hat,
                                        const cufftComplex* __restrict__ w_hat,
                                        cufftComplex* __restrict__ y_hat) {
  const std::size_t count = std::size_t(N) * M * F;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const int f = int(i % F);
    const int m = int(i / F % M);
    const std::size_t n = i / (std::size_t(F) * M);
    float re = 0.0f, im = 0.0f;
    for (int c = 0; c < C; ++c) {
      const cufftComplex a = x_hat[(n * C + c) * F + f];
      const cufftComplex b = w_hat[(std::size_t(m) * C + c) * F + f];
      re += a.x * b.x + a.y * b.y;
      im += a.y * b.x - a.x * b.y;
    }
    y_hat[i] = make_cuFloatComplex(re, im);
  }
}

// Y[n,m,h,w] = Z[n,m,h,w] / (H W) for h < H_out, w < W_out: the valid window of the circular
// correlation Z (N*M maps of H x W), scaled because cuFFT's inverse is unnormalised. One thread
// per output; i runs over Y in NCHW order, so i == y_index(d, n, m, h, w).
__global__ void conv_fft_crop_kernel(ConvDims d, float scale, const float* __restrict__ circular,
                                     float* __restrict__ y) {
  const std::size_t count = std::size_t(d.N) * d.M * d.H_out * d.W_out;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const auto [w, h, nm] = map_element(i, d.H_out, d.W_out);  // nm = n*M + m
    y[i] = circular[(nm * d.H + h) * d.W + w] * scale;
  }
}

// A batched 2-D cuFFT plan (cufftMakePlanMany, packed layout: `batch` maps of h x w reals, or
// h x (w/2+1) complex, one after the other) whose work area is set by its owner
// (cufftSetAutoAllocation off: all device memory stays in lenet5's Buffers).
class FftPlan {
 public:
  FftPlan(int h, int w, cufftType type, int batch) {
    CUFFT_CHECK(cufftCreate(&m_plan));
    try {
      CUFFT_CHECK(cufftSetAutoAllocation(m_plan, 0));
      int dims[2] = {h, w};
      CUFFT_CHECK(cufftMakePlanMany(m_plan, 2, dims, nullptr, 1, 0, nullptr, 1, 0, type, batch,
                                    &m_work_bytes));
    } catch (...) {
      (void)cufftDestroy(m_plan);
      throw;
    }
  }
  ~FftPlan() { (void)cufftDestroy(m_plan); }  // a destructor must not throw
  FftPlan(const FftPlan&) = delete;
  FftPlan& operator=(const FftPlan&) = delete;

  cufftHandle get() const { return m_plan; }
  std::size_t work_bytes() const { return m_work_bytes; }

 private:
  cufftHandle m_plan = 0;
  std::size_t m_work_bytes = 0;
};

ConvShape checked(const ConvShape& s) {
  if (s.n < 1 || s.c < 1 || s.m < 1 || s.k < 1 || s.h_out() < 1 || s.w_out() < 1)
    throw Error("FFT convolution: invalid shape N=" + std::to_string(s.n) +
                " C=" + std::to_string(s.c) + " " + std::to_string(s.h) + "x" +
                std::to_string(s.w) + " M=" + std::to_string(s.m) + " K=" + std::to_string(s.k) +
                " (needs positive sizes and K <= H, W)");
  return s;
}

}  // namespace

struct FftConvolution::Impl {
  explicit Impl(const ConvShape& shape)
      : s(checked(shape)),
        scratch(fft_scratch(s)),
        inputs(s.h, s.w, CUFFT_R2C, s.n * s.c),
        filters(s.h, s.w, CUFFT_R2C, s.m * s.c),
        outputs(s.h, s.w, CUFFT_C2R, s.n * s.m),
        padded_filters(Device::gpu, scratch.padded_filter_floats),
        circular_output(Device::gpu, scratch.circular_output_floats),
        input_spectra(Device::gpu, scratch.input_spectrum_complex),
        filter_spectra(Device::gpu, scratch.filter_spectrum_complex),
        output_spectra(Device::gpu, scratch.output_spectrum_complex),
        work(Device::gpu,
             std::max({inputs.work_bytes(), filters.work_bytes(), outputs.work_bytes()})) {
    for (const FftPlan* plan : {&inputs, &filters, &outputs})
      if (work.size() > 0) CUFFT_CHECK(cufftSetWorkArea(plan->get(), work.data()));
  }

  ConvShape s;
  FftScratch scratch;
  FftPlan inputs, filters, outputs;
  Buffer<float> padded_filters, circular_output;
  Buffer<cufftComplex> input_spectra, filter_spectra, output_spectra;
  Buffer<unsigned char> work;  // cuFFT's work area, shared: the plans run one after the other
};

std::string cufft_description() {
  int version = 0;
  CUFFT_CHECK(cufftGetVersion(&version));  // major * 1000 + minor * 100 + patch
  return "cuFFT " + std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 100) +
         "." + std::to_string(version % 100);
}

FftConvolution::FftConvolution(const ConvShape& s) : m_impl(std::make_unique<Impl>(s)) {}
FftConvolution::~FftConvolution() = default;

std::size_t FftConvolution::cufft_work_bytes() const {
  return m_impl->work.size();
}

void FftConvolution::forward(const float* x, const float* weight, float* y, cudaStream_t stream) {
  Impl& i = *m_impl;
  const ConvDims d = dims_of(i.s);
  for (const FftPlan* plan : {&i.inputs, &i.filters, &i.outputs})
    CUFFT_CHECK(cufftSetStream(plan->get(), stream));

  conv_fft_pad_filters_kernel<<<blocks_for(i.scratch.padded_filter_floats), kThreads, 0, stream>>>(
      d, weight, i.padded_filters.data());
  CUDA_CHECK_LAUNCH();
  CUFFT_CHECK(cufftExecR2C(i.filters.get(), i.padded_filters.data(), i.filter_spectra.data()));
  // An out-of-place R2C transform only reads its input (cuFFT overwrites the input of C2R
  // transforms only), so the caller's const x is safe; tests/gpu/test_conv_fft.cpp checks it.
  CUFFT_CHECK(cufftExecR2C(i.inputs.get(), const_cast<float*>(x), i.input_spectra.data()));

  const int frequencies = d.H * (d.W / 2 + 1);
  conv_fft_product_kernel<<<blocks_for(i.scratch.output_spectrum_complex), kThreads, 0, stream>>>(
      d.N, d.C, d.M, frequencies, i.input_spectra.data(), i.filter_spectra.data(),
      i.output_spectra.data());
  CUDA_CHECK_LAUNCH();
  CUFFT_CHECK(cufftExecC2R(i.outputs.get(), i.output_spectra.data(), i.circular_output.data()));

  const std::size_t outputs = std::size_t(d.N) * d.M * d.H_out * d.W_out;
  conv_fft_crop_kernel<<<blocks_for(outputs), kThreads, 0, stream>>>(d, 1.0f / float(d.H * d.W),
                                                                     i.circular_output.data(), y);
  CUDA_CHECK_LAUNCH();
}

}  // namespace lenet5::cuda
