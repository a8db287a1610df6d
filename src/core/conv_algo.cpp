#include "core/conv_algo.hpp"

#include "core/error.hpp"

namespace lenet5 {

const std::vector<ConvAlgoInfo>& conv_algorithms() {
  static const std::vector<ConvAlgoInfo> table{
      {ConvAlgo::direct, 1, "direct", "PMPP Fig 16.12",
       "one thread per output element, every operand read from global memory"},
      {ConvAlgo::tiled, 2, "tiled", "PMPP Fig 16.13",
       "input tile and filter staged in shared memory per input channel"},
      {ConvAlgo::unroll_gemm, 3, "unroll-gemm", "PMPP Figs 16.15-16.18",
       "input unrolled (im2col) into global memory, then cuBLAS SGEMM over the mini-batch"},
      {ConvAlgo::implicit_gemm, 4, "implicit-gemm", "cuDNN paper, section 3",
       "GEMM whose unrolled-input tiles are built in shared memory only, never in global memory"},
      {ConvAlgo::staged, 5, "staged", "this project",
       "one sample's operands staged in shared memory, specialised for 5x5 filters"},
  };
  return table;
}

const ConvAlgoInfo& conv_algorithm_info(ConvAlgo algo) {
  for (const ConvAlgoInfo& info : conv_algorithms())
    if (info.algo == algo) return info;
  throw Error("internal: convolution version " + std::to_string(int(algo)) + " not registered");
}

const char* to_string(ConvAlgo algo) { return conv_algorithm_info(algo).name; }

std::string conv_algo_names_joined(const char* separator) {
  std::string out;
  for (const ConvAlgoInfo& info : conv_algorithms())
    out += (out.empty() ? "" : separator) + std::string(info.name);
  return out;
}

ConvAlgo parse_conv_algo(const std::string& name_or_number) {
  for (const ConvAlgoInfo& info : conv_algorithms())
    if (name_or_number == info.name || name_or_number == std::to_string(info.number))
      return info.algo;
  throw UsageError("unknown convolution version '" + name_or_number +
                   "' (accepted: " + conv_algo_names_joined(", ") + ", or their numbers 1-" +
                   std::to_string(conv_algorithms().size()) + ")");
}

}  // namespace lenet5
