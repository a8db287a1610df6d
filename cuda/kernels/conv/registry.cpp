// The registrations of the convolution versions and make_conv_algorithm, which finds a version's
// factory by its number.
#include "cuda/kernels/conv/registry.hpp"

#include <map>
#include <string>

#include "core/error.hpp"
#include "core/registration_table.hpp"

namespace lenet5::cuda {
namespace {

// The versions' factories by number, filled during static initialisation.
std::map<int, ConvFactory>& factories() {
  return registration_table<ConvRegistration, std::map<int, ConvFactory>>();
}

}  // namespace

ConvRegistration::ConvRegistration(int number, const char* name, const char* source,
                                   ConvFactory make, const char* description) {
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
