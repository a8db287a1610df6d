// The tables of GPU kernels that everything else reads: the convolution versions, filled by the
// versions' own registrations in cuda/kernels/conv/ (so this also checks that the build links
// every one of them into the program), and the kernel sets of --kernels.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/conv_algo.hpp"
#include "core/error.hpp"
#include "core/net_config.hpp"
#include "cuda/runtime/runtime.hpp"
#include "test_util.hpp"

namespace lenet5 {
namespace {

// Numbers 1, 2, 3, ... without a gap: a version whose file the linker left out shows as a gap (or,
// the newest, as a missing row of tests/errata.md, which FiguresDocs checks).
TEST(ConvVersions, EveryVersionRegisteredOnceInNumberOrder) {
  const std::vector<ConvAlgoInfo>& table = conv_algorithms();
  ASSERT_GE(table.size(), 5u) << "versions 1-5 (direct ... staged) not all registered";
  std::set<std::string> names;
  for (std::size_t i = 0; i < table.size(); ++i) {
    const ConvAlgoInfo& info = table[i];
    EXPECT_EQ(info.number, int(i) + 1) << info.name;
    EXPECT_EQ(int(info.algo), info.number) << info.name;
    EXPECT_TRUE(names.insert(info.name).second) << "two versions named " << info.name;
    EXPECT_NE(std::string(info.source), "") << info.name;
    EXPECT_NE(std::string(info.description), "") << info.name;
  }
}

// A build without GPU support does not compile the versions' files: it lists them from
// cuda/kernels/conv/without_cuda.cpp, whose rows must say what the versions' registrations say.
TEST(ConvVersions, TheListOfABuildWithoutGpuSupportMatchesTheRegistrations) {
  if (!cuda::gpu_available_in_build())
    GTEST_SKIP() << "built without GPU support: the table is that list";
  const std::string listed =
      testing::read_text(testing::source_dir() / "cuda" / "kernels" / "conv" / "without_cuda.cpp");
  for (const ConvAlgoInfo& info : conv_algorithms()) {
    const std::string number = std::to_string(info.number);
    const auto quoted = [](const char* text) { return "\"" + std::string(text) + "\""; };
    for (const std::string& literal : {"{ConvAlgo(" + number + "), " + number + ", " +
                                           quoted(info.name) + ", " + quoted(info.source) + ",",
                                       quoted(info.description) + "}"})
      EXPECT_NE(listed.find(literal), std::string::npos) << literal;
  }
}

TEST(ConvVersions, TheNamedConstantsAreTheirVersions) {
  EXPECT_STREQ(to_string(ConvAlgo::direct), "direct");
  EXPECT_STREQ(to_string(ConvAlgo::tiled), "tiled");
  EXPECT_STREQ(to_string(ConvAlgo::unroll_gemm), "unroll-gemm");
  EXPECT_STREQ(to_string(ConvAlgo::implicit_gemm), "implicit-gemm");
  EXPECT_STREQ(to_string(ConvAlgo::staged), "staged");
}

TEST(ConvVersions, ParsedByNameOrNumber) {
  EXPECT_EQ(parse_conv_algo("implicit-gemm"), ConvAlgo::implicit_gemm);
  EXPECT_EQ(parse_conv_algo("2"), ConvAlgo::tiled);
  EXPECT_THROW(parse_conv_algo(std::to_string(conv_algorithms().size() + 1)), UsageError);
  EXPECT_THROW(parse_conv_algo("winograd"), UsageError);
}

TEST(GpuKernelSets, RowsInEnumOrderWithRegisteredDefaults) {
  const std::vector<GpuKernelSet>& sets = gpu_kernel_sets();
  ASSERT_EQ(sets.size(), 4u);
  for (std::size_t i = 0; i < sets.size(); ++i) {
    EXPECT_EQ(sets[i].kernels, GpuKernels(i)) << sets[i].name;
    EXPECT_EQ(parse_gpu_kernels(sets[i].name), sets[i].kernels);
    EXPECT_NO_THROW(conv_algorithm_info(sets[i].default_conv_algo)) << sets[i].name;
    // The whole step trains without the layers' convolutions; evaluating still uses them.
    EXPECT_EQ(sets[i].takes_conv_algo, !sets[i].whole_step) << sets[i].name;
    if (sets[i].whole_step) EXPECT_TRUE(sets[i].fused_layers) << sets[i].name;
  }
  EXPECT_EQ(gpu_kernel_set(GpuKernels::book).default_conv_algo, ConvAlgo::direct);
  EXPECT_FALSE(gpu_kernel_set(GpuKernels::book).fused_layers);
  EXPECT_EQ(gpu_kernel_set(GpuKernels::fast).default_conv_algo, ConvAlgo::staged);
  // Only --kernels tensor evaluates and takes its gradient on the tensor cores, and it is a
  // whole-step set otherwise (the settings' refusals of whole-step apply to it too).
  for (const GpuKernelSet& set : sets) {
    EXPECT_EQ(set.tensor_evaluation, set.kernels == GpuKernels::tensor) << set.name;
    EXPECT_EQ(set.tensor_gradient, set.kernels == GpuKernels::tensor) << set.name;
  }
  EXPECT_TRUE(gpu_kernel_set(GpuKernels::tensor).whole_step);
}

}  // namespace
}  // namespace lenet5
