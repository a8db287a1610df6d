// Version 4 of the registry, until its kernels land: asking for it is a clear error.
#include <string>

#include "core/error.hpp"
#include "cuda/conv_algorithm.hpp"

namespace lenet5::cuda {

std::unique_ptr<ConvAlgorithm> make_implicit_gemm_convolution(const ConvShape&) {
  throw UsageError(std::string("--conv-algo ") + to_string(ConvAlgo::implicit_gemm) +
                   ": this version is not built yet; use direct, tiled, unroll-gemm or staged");
}

}  // namespace lenet5::cuda
