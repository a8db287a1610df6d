// Versions 2-4 of the registry, until their kernels land: asking for one is a clear error.
#include <string>

#include "core/error.hpp"
#include "cuda/conv_algorithm.hpp"

namespace lenet5::cuda {
namespace {

[[noreturn]] void not_built(ConvAlgo algo) {
  throw UsageError(std::string("--conv-algo ") + to_string(algo) +
                   ": this version is not built yet; use direct or staged");
}

}  // namespace

std::unique_ptr<ConvAlgorithm> make_tiled_convolution(const ConvShape&) {
  not_built(ConvAlgo::tiled);
}
std::unique_ptr<ConvAlgorithm> make_unroll_gemm_convolution(const ConvShape&) {
  not_built(ConvAlgo::unroll_gemm);
}

}  // namespace lenet5::cuda
