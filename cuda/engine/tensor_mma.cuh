// The tensor cores' TF32 multiply-add, for the tensor-core kernel set (tensor_forward.cu) and the
// whole-step kernels' --precision tf32 (whole_step_device.cuh): one m16n8k8 tile of mma.sync with
// TF32 operands and float accumulators, and the rounding to TF32.
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

}  // namespace lenet5::cuda::mma
