// The tensor cores' TF32 multiply-add, for the tensor-core kernel set (tensor_forward.cu,
// tensor_backward.cu, tensor_conv_backward.cu) and the whole-step kernels' --precision tf32
// (whole_step_device.cuh): one m16n8k8 tile of mma.sync with TF32 operands and float accumulators,
// the rounding to TF32, and where a 5x5 filter's taps sit in an implicit GEMM's k-steps.
//
// The fragments (PTX ISA, "Matrix Fragments for mma.m16n8k8" with .tf32), for lane = 4 g + t:
//   A (16 x 8, row-major): a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4);
//   B (8 x 8, column-major): b0 (t, g), b1 (t + 4, g);
//   C, D (16 x 8): c_r at row g + 8 (r / 2), column 2 t + r % 2.
#pragma once

#include <cstdint>

namespace lenet5::cuda::mma {

// Whether this build of the kernels has the instructions (compute capability 8.0 and newer). The
// host asks the loaded kernel's PTX version and refuses to run it without them, so the traps below
// are never reached.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
constexpr bool kTensorFloat32 = true;
#else
constexpr bool kTensorFloat32 = false;
#endif

// value rounded to TensorFloat-32 (10-bit mantissa, to nearest, ties away from zero), as bits.
__device__ inline std::uint32_t to_tf32(float value) {
  std::uint32_t rounded = 0;
  if constexpr (kTensorFloat32) {
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(rounded) : "f"(value));
  } else {
    __trap();
  }
  return rounded;
}

// The same, as the float it is: what the kernels store where only a product reads it, so that the
// product's operand loads need no conversion.
__device__ inline float rounded_to_tf32(float value) {
  return __uint_as_float(to_tf32(value));
}

// d += a b for one m16n8k8 tile, the warp's 32 lanes together; a and b already TF32.
__device__ inline void mma_tf32(float (&d)[4], const std::uint32_t (&a)[4],
                                const std::uint32_t (&b)[2]) {
  if constexpr (kTensorFloat32) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    __trap();
  }
}

// The implicit GEMMs of the 5x5 convolutions run k over one map's 25 taps k = 5 p + q in four
// steps of 8 (taps 25-31 are zeros on the weights' side): a step's gather offsets are then
// constants of the unrolled loop plus one per-lane value, where taps packed end to end across maps
// would need a division per load.
constexpr int kFilterSide = 5, kFilterTaps = kFilterSide * kFilterSide, kTapSteps = 4;

// Where tap k = 8 j + t + 4 h (what lane t of an A or B fragment reads in k-step j, h = 0 and 1)
// sits relative to the window's corner in a map of rows `row` floats apart: p row + q; 0 (the
// corner, a finite value that a zero weight multiplies) for taps 25-31.
__device__ inline void tap_offsets(int t, int row, int (&offset)[kTapSteps][2]) {
#pragma unroll
  for (int j = 0; j < kTapSteps; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int k = 8 * j + t + 4 * h;
      offset[j][h] = k < kFilterTaps ? k / kFilterSide * row + k % kFilterSide : 0;
    }
}

}  // namespace lenet5::cuda::mma
