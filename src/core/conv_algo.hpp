// The table of convolution versions, read by `--conv-algo`, `lenet5 figures`, `lenet5 bench
// --layers`, the GPU tests and the errata page (tests/errata.md; a CPU test checks that the page
// and the help text list exactly these versions). Host code only, and no version is written here:
// each registers itself, with its kernels' factory, in its own file under cuda/kernels/conv/
// (cuda/kernels/conv/registry.hpp), and this table is filled from those registrations before
// main() runs.
#pragma once

#include <string>
#include <vector>

namespace lenet5 {

// A version by its number (the numbers are the versions' names in the code: conv_forward_kernel1,
// ...). Any registered number is a valid value; the constants name the versions that the code
// chooses by name (the kernel sets' defaults, the figures), in the chapter's order.
enum class ConvAlgo { direct = 1, tiled = 2, unroll_gemm = 3, implicit_gemm = 4, staged = 5 };

struct ConvAlgoInfo {
  ConvAlgo algo;
  int number;
  const char* name;         // what --conv-algo takes
  const char* source;       // where the idea comes from
  const char* description;  // one line
};

// Every registered version, in number order.
const std::vector<ConvAlgoInfo>& conv_algorithms();
// Adds a version to the table; called by cuda/kernels/conv/registry.hpp's registrations only
// (and, in a build without GPU support, by cuda/kernels/conv/without_cuda.cpp).
void register_conv_algorithm(const ConvAlgoInfo& info);
const ConvAlgoInfo& conv_algorithm_info(ConvAlgo algo);
// A name ("tiled") or a number ("2"); throws UsageError listing the accepted names otherwise.
ConvAlgo parse_conv_algo(const std::string& name_or_number);
const char* to_string(ConvAlgo algo);
// "direct|tiled|unroll-gemm|implicit-gemm|staged", for help texts.
std::string conv_algo_names_joined(const char* separator);

}  // namespace lenet5
