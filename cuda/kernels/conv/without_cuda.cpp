// The convolution versions' rows of the table (core/conv_algo.hpp) in a build without GPU support,
// where their files (one per version, beside this one) are not compiled: the table names them
// still, so that --conv-algo, the help texts, the figures and the checkpoints' settings read the
// same versions in every build. A new version's file gets its line here too; the rows are checked
// against tests/errata.md's table in that build
// (FiguresDocs.ConvolutionVersionsMatchRegistryAndHelp).
#include "core/conv_algo.hpp"

namespace lenet5 {
namespace {

// Each version's registration as its own file makes it (cuda/kernels/conv/registry.hpp), before
// main() runs.
const bool kListed = [] {
  const ConvAlgoInfo versions[] = {
      {ConvAlgo(1), 1, "direct", "PMPP Fig 16.12",
       "one thread per output element, every operand read from global memory"},
      {ConvAlgo(2), 2, "tiled", "PMPP Fig 16.13",
       "input tile and filter staged in shared memory per input channel"},
      {ConvAlgo(3), 3, "unroll-gemm", "PMPP Figs 16.15-16.18",
       "input unrolled (im2col) into global memory, then cuBLAS SGEMM over the mini-batch"},
      {ConvAlgo(4), 4, "implicit-gemm", "cuDNN paper, section 3",
       "GEMM whose unrolled-input tiles are built in shared memory only, never in global memory"},
      {ConvAlgo(5), 5, "staged", "this project",
       "one sample's operands staged in shared memory, specialised for 5x5 filters"},
  };
  for (const ConvAlgoInfo& version : versions) register_conv_algorithm(version);
  return true;
}();

}  // namespace
}  // namespace lenet5
