// The GPU targets as a build without GPU support lists them (figures.hpp): there, the files that
// define them (gpu_targets.cpp and its parts, which drive CUDA kernels) are not compiled, yet
// `lenet5 figures --list` still names every target, and asking for one says how to get it.
// Kept in step with gpu_targets() by a test in the CPU suite of a build with CUDA
// (tests/cpu/test_figures.cpp, GpuTargetListMatchesTheGpuTargets).
#include <string>
#include <vector>

#include "core/error.hpp"
#include "cuda/runtime/runtime.hpp"
#include "figures/figures.hpp"

namespace lenet5::figures {

std::vector<Target> gpu_target_list() {
  struct Listed {
    const char* id;
    const char* title;
    const char* section;
  };
  static const Listed listed[] = {
      {"fig16.12", "basic forward kernel as printed (E10, E11) vs corrected, on the GPU",
       "§1.11, §2.2"},
      {"fig16.13", "shared-memory tiled kernel as printed (E15, E16, E18) vs corrected, on the GPU",
       "§1.12, §2.2"},
      {"fig16.14.gpu", "Fig 16.14 on the GPU: unroll, every version's forward and backward",
       "§1.13, §1.7, §1.8"},
      {"fig16.17", "unroll host code as printed: truncating block count (E23) on the GPU",
       "§1.17, §1.18"},
      {"ex2", "Exercise 2: layouts NCHW, NHWC, CHWN in the basic and unroll kernels", "§1.22"},
      {"ex3", "Exercise 3: FFT convolution with cuFFT, accuracy, padded-filter memory, time",
       "§1.22, §3.6"},
      {"lenet.timing", "LeNet-5 conv layers: every version timed, kernel only and with copies",
       "§4.4"},
      {"zf.timing", "ZF-Net conv layers at batch 1: every version timed, report's columns", "§4.4"},
      {"cudnn.tab3", "cuDNN Table 2 layers: our GEMM convolutions vs cuDNN, TFLOP/s, % of peak",
       "§3.4, §3.5"},
      {"cudnn.tab4",
       "training time per phase, book kernels vs every convolution version, with speedups", "§3.7"},
  };
  std::vector<Target> targets;
  for (const Listed& t : listed)
    targets.push_back(
        {t.id, t.title, t.section, true, [](Block&) { throw UsageError(cuda::kBuiltWithoutGpu); }});
  return targets;
}

}  // namespace lenet5::figures
