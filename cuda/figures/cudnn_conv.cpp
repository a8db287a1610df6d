// cuDNN's forward convolution behind CudnnConvolution (see cudnn_conv.hpp), or, in a build
// without cuDNN, the same class reporting that it was not built in.
//
// The convolution API used here (descriptors, cudnnFindConvolutionForwardAlgorithm,
// cudnnConvolutionForward) is the one the cuDNN paper describes. cuDNN 9 marks it deprecated in
// favour of its graph API but still ships it; the deprecation warnings are opt-in
// (CUDNN_WARN_DEPRECATED), so they stay off here.
#include "cuda/figures/cudnn_conv.hpp"

#include <string>

#include "core/error.hpp"

#if LENET5_HAVE_CUDNN
#include <cudnn.h>

#include <cstdint>

#include "cuda/runtime/buffer.hpp"
#endif

namespace lenet5::cuda {

#if LENET5_HAVE_CUDNN

namespace {

[[noreturn]] void throw_cudnn_error(cudnnStatus_t status, const char* expression,
                                    const char* file, int line) {
  throw Error(std::string("cuDNN error ") + cudnnGetErrorString(status) + " in " + expression +
              " at " + file + ":" + std::to_string(line));
}

#define CUDNN_CHECK(expr)                                                      \
  do {                                                                         \
    const cudnnStatus_t lenet5_cudnn_status_ = (expr);                         \
    if (lenet5_cudnn_status_ != CUDNN_STATUS_SUCCESS)                          \
      throw_cudnn_error(lenet5_cudnn_status_, #expr, __FILE__, __LINE__);      \
  } while (0)

// An owned cuDNN object (handle or descriptor): created in the constructor, destroyed in the
// destructor (whose status is ignored: a destructor must not throw).
template <class T, cudnnStatus_t (*Create)(T*), cudnnStatus_t (*Destroy)(T)>
class Owned {
 public:
  Owned() { CUDNN_CHECK(Create(&m_value)); }
  ~Owned() { (void)Destroy(m_value); }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  T get() const { return m_value; }

 private:
  T m_value{};
};

using Handle = Owned<cudnnHandle_t, cudnnCreate, cudnnDestroy>;
using TensorDescriptor =
    Owned<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDescriptor =
    Owned<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvolutionDescriptor = Owned<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
                                    cudnnDestroyConvolutionDescriptor>;

std::string version_text(std::size_t version) {
  return std::to_string(version / 10000) + "." + std::to_string(version % 10000 / 100) + "." +
         std::to_string(version % 100);
}

bool is_tensor_core_math(cudnnMathType_t math) {
  return math == CUDNN_TENSOR_OP_MATH || math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

}  // namespace

struct CudnnConvolution::Impl {
  Handle handle;
  TensorDescriptor x, y;
  FilterDescriptor weight;
  ConvolutionDescriptor conv;
  int algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  Buffer<std::uint8_t> workspace;
};

bool cudnn_built() { return true; }

std::string cudnn_description() {
  return "cuDNN " + version_text(cudnnGetVersion()) + " (headers " + version_text(CUDNN_VERSION) +
         ")";
}

CudnnConvolution::CudnnConvolution(const ConvShape& s) : m_impl(std::make_unique<Impl>()) {
  Impl& i = *m_impl;
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(i.x.get(), CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.n, s.c,
                                         s.h, s.w));
  CUDNN_CHECK(cudnnSetFilter4dDescriptor(i.weight.get(), CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s.m,
                                         s.c, s.k, s.k));
  // pad 0, stride 1, dilation 1; cross-correlation, as the chapter's convolution (§0.2).
  CUDNN_CHECK(cudnnSetConvolution2dDescriptor(i.conv.get(), 0, 0, 1, 1, 1, 1,
                                              CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CUDNN_CHECK(cudnnSetConvolutionMathType(i.conv.get(), CUDNN_FMA_MATH));
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(i.y.get(), CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.n, s.m,
                                         s.h_out(), s.w_out()));
}

CudnnConvolution::~CudnnConvolution() = default;

std::vector<int> CudnnConvolution::output_dims() const {
  int n = 0, m = 0, h = 0, w = 0;
  CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(m_impl->conv.get(), m_impl->x.get(),
                                                    m_impl->weight.get(), &n, &m, &h, &w));
  return {n, m, h, w};
}

std::vector<CudnnAlgorithm> CudnnConvolution::find_algorithms() {
  Impl& i = *m_impl;
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int returned = 0;
  CUDNN_CHECK(cudnnSetStream(i.handle.get(), cudaStreamPerThread));
  CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithm(i.handle.get(), i.x.get(), i.weight.get(),
                                                   i.conv.get(), i.y.get(),
                                                   CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned,
                                                   perf));
  std::vector<CudnnAlgorithm> found;  // cuDNN returns them fastest first
  for (int k = 0; k < returned; ++k) {
    if (perf[k].status != CUDNN_STATUS_SUCCESS || is_tensor_core_math(perf[k].mathType)) continue;
    found.push_back(CudnnAlgorithm{int(perf[k].algo), algorithm_name(int(perf[k].algo)),
                                   perf[k].time, perf[k].memory});
  }
  return found;
}

std::size_t CudnnConvolution::workspace_bytes(int algo) const {
  std::size_t bytes = 0;
  CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(
      m_impl->handle.get(), m_impl->x.get(), m_impl->weight.get(), m_impl->conv.get(),
      m_impl->y.get(), static_cast<cudnnConvolutionFwdAlgo_t>(algo), &bytes));
  return bytes;
}

void CudnnConvolution::use_algorithm(int algo) {
  const std::size_t bytes = workspace_bytes(algo);
  if (bytes > m_impl->workspace.size())
    m_impl->workspace = Buffer<std::uint8_t>(Device::gpu, bytes);
  m_impl->algo = algo;
}

int CudnnConvolution::implicit_gemm_id() { return CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM; }

std::string CudnnConvolution::algorithm_name(int algo) {
  switch (algo) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    default: return "algorithm " + std::to_string(algo);
  }
}

void CudnnConvolution::forward(const float* x, const float* weight, float* y,
                               cudaStream_t stream) {
  Impl& i = *m_impl;
  const float one = 1.0f, zero = 0.0f;  // y = 1 * conv + 0 * y: overwritten
  CUDNN_CHECK(cudnnSetStream(i.handle.get(), stream));
  CUDNN_CHECK(cudnnConvolutionForward(i.handle.get(), &one, i.x.get(), x, i.weight.get(), weight,
                                      i.conv.get(), static_cast<cudnnConvolutionFwdAlgo_t>(i.algo),
                                      i.workspace.data(), i.workspace.size(), &zero, i.y.get(), y));
}

#else  // ---- built without cuDNN: every entry point says so ---------------------------------------

struct CudnnConvolution::Impl {};

bool cudnn_built() { return false; }

std::string cudnn_description() {
  return "not built with cuDNN (configure with -DLENET5_WITH_CUDNN=ON, and CUDNN_ROOT=<folder> "
         "if CMake does not find it)";
}

namespace {
[[noreturn]] void not_built() { throw Error("cuDNN: " + cudnn_description()); }
}  // namespace

CudnnConvolution::CudnnConvolution(const ConvShape&) { not_built(); }
CudnnConvolution::~CudnnConvolution() = default;
std::vector<int> CudnnConvolution::output_dims() const { not_built(); }
std::vector<CudnnAlgorithm> CudnnConvolution::find_algorithms() { not_built(); }
std::size_t CudnnConvolution::workspace_bytes(int) const { not_built(); }
void CudnnConvolution::use_algorithm(int) { not_built(); }
int CudnnConvolution::implicit_gemm_id() { return 0; }
std::string CudnnConvolution::algorithm_name(int algo) { return "algorithm " + std::to_string(algo); }
void CudnnConvolution::forward(const float*, const float*, float*, cudaStream_t) { not_built(); }

#endif

}  // namespace lenet5::cuda
