// The registry of convolution versions: one table, read by `--conv-algo`, `lenet5 figures`,
// `lenet5 bench --layers`, the GPU tests and the errata page (tests/errata.md; a CPU test checks
// that the page and the help text list exactly these versions). Host code only: the kernels are in
// cuda/conv*.cu, and cuda/kernels/conv/registry.hpp maps each entry to them.
#pragma once

#include <string>
#include <vector>

namespace lenet5 {

// The numbers are the versions' names in the code (conv_forward1, ...), in the chapter's order.
enum class ConvAlgo { direct = 1, tiled = 2, unroll_gemm = 3, implicit_gemm = 4, staged = 5 };

struct ConvAlgoInfo {
  ConvAlgo algo;
  int number;
  const char* name;         // what --conv-algo takes
  const char* source;       // where the idea comes from
  const char* description;  // one line
};

// Every version, in number order.
const std::vector<ConvAlgoInfo>& conv_algorithms();
const ConvAlgoInfo& conv_algorithm_info(ConvAlgo algo);
// A name ("tiled") or a number ("2"); throws UsageError listing the accepted names otherwise.
ConvAlgo parse_conv_algo(const std::string& name_or_number);
const char* to_string(ConvAlgo algo);
// "direct|tiled|unroll-gemm|implicit-gemm|staged", for help texts.
std::string conv_algo_names_joined(const char* separator);

}  // namespace lenet5
