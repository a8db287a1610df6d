// The registrations of the convolution versions and make_conv_algorithm, which finds a version's
// factory by its number.
#include "cuda/kernels/conv/registry.hpp"

#include <map>
#include <string>

#include "core/error.hpp"

namespace lenet5::cuda {
namespace {

// Filled during static initialisation (a function-local static, so that it exists before the first
// registration runs, whatever the order of the files).
std::map<int, ConvFactory>& factories() {
  static std::map<int, ConvFactory> by_number;
  return by_number;
}

}  // namespace

ConvRegistration::ConvRegistration(int number, const char* name, const char* source,
                                   const char* description, ConvFactory make) {
  register_conv_algorithm({ConvAlgo(number), number, name, source, description});
  factories()[number] = make;
}

std::unique_ptr<ConvAlgorithm> make_conv_algorithm(ConvAlgo algo, const ConvShape& largest) {
  if (largest.n < 1 || largest.k < 1 || largest.h_out() < 1 || largest.w_out() < 1)
    throw Error("internal: invalid convolution shape for version " +
                std::string(to_string(algo)));
  const auto found = factories().find(int(algo));
  if (found == factories().end())
    throw Error("internal: unknown convolution version " + std::to_string(int(algo)));
  return found->second(largest);
}

}  // namespace lenet5::cuda
