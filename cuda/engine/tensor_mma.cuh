// The tensor cores' multiply-add, for the tensor-core kernel set (tensor_forward.cu,
// tensor_backward.cu, tensor_conv_backward.cu) and the whole-step kernels' --precision tf32
// (whole_step_device.cuh): one m16n8k8 tile of mma.sync with TF32 operands and float accumulators,
// the rounding to TF32, and where a 5x5 filter's taps sit in an implicit GEMM's k-steps; and, for
// the tensor-core set's --precision, the same tile with BF16 operands or in FP32 (three TF32
// products), behind one interface (Operands<R>).
//
// The fragments (PTX ISA, "Matrix Fragments for mma.m16n8k8" with .tf32), for lane = 4 g + t:
//   A (16 x 8, row-major): a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4);
//   B (8 x 8, column-major): b0 (t, g), b1 (t + 4, g);
//   C, D (16 x 8): c_r at row g + 8 (r / 2), column 2 t + r % 2.
// With .bf16 each register holds two k's of a row (A) or column (B), lower half first:
//   A: a0 (g, 2 t and 2 t + 1), a1 (g + 8, 2 t and 2 t + 1); B: b0 (2 t and 2 t + 1, g).
#pragma once

#include <cstdint>

#include "core/net_config.hpp"

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

// The same, as the float it is: what the kernels store where a product reads it, so that the
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

// Where tap k = 5 p + q sits relative to the window's corner in a map of rows `row` apart: p row
// + q; 0 (the corner, a finite value that a zero weight multiplies) for the padding taps past 24.
__device__ inline int tap_offset(unsigned k, int row) {
  const int p = int(k / kFilterSide), q = int(k) - kFilterSide * p;
  return k < kFilterTaps ? p * row + q : 0;
}

// tap_offset of tap k = 8 j + t + 4 h, what lane t of an A or B fragment reads in k-step j (h = 0
// and 1), for every j.
__device__ inline void tap_offsets(int t, int row, int (&offset)[kTapSteps][2]) {
  // A fragment's column t is 0-3: told so, and with k unsigned, the compiler drops the test
  // k < 25 where it always holds and divides by 5 in two instructions (c1_s2's setup took 118
  // instructions a warp, 62 so).
  __builtin_assume(t >= 0 && t < 4);
#pragma unroll
  for (int j = 0; j < kTapSteps; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) offset[j][h] = tap_offset(8 * j + 4 * h + unsigned(t), row);
}

// With BF16 operands stored as pairs of maps (two maps' values at one place, a 32-bit word), an
// implicit GEMM's k-step is a pair of maps at four taps: lane t's two k's are the pair at tap
// k = 4 j + t in step j of kPairTapSteps (taps 25-27 zeros on the weights' side).
constexpr int kPairTapSteps = (kFilterTaps + 3) / 4;  // 7

// tap_offset of tap k = 4 j + t, lane t's in step j of a map pair's, for every j.
__device__ inline void pair_tap_offsets(int t, int row, int (&offset)[kPairTapSteps]) {
  __builtin_assume(t >= 0 && t < 4);  // as in tap_offsets: the division by 5 in two instructions
#pragma unroll
  for (int j = 0; j < kPairTapSteps; ++j) offset[j] = tap_offset(4 * j + unsigned(t), row);
}

// d += a b for one m16n8k8 tile with BF16 operands (two to a register, lower half first).
__device__ inline void mma_bf16(float (&d)[4], const std::uint32_t (&a)[2], std::uint32_t b) {
  if constexpr (kTensorFloat32) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
        "{%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(b));
  } else {
    __trap();
  }
}

// low and high rounded to BF16 (to nearest, ties to even) in one register, low in its lower half.
__device__ inline std::uint32_t bf16_pair(float low, float high) {
  std::uint32_t packed = 0;
  if constexpr (kTensorFloat32) {
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(high), "f"(low));
  } else {
    __trap();
  }
  return packed;
}

// x rounded to BF16 (to nearest, ties to even, as bf16_pair rounds), as its 16 bits: for operands
// stored as BF16 pairs, a half at a time.
__device__ inline std::uint16_t to_bf16(float x) {
  return std::uint16_t(bf16_pair(x, 0.0f) & 0xffffu);
}

// The products' arithmetic for a --precision R of the tensor-core set, with one interface for the
// kernels: operand(x), the bits a fragment register takes for the float x; stored(x), what a
// kernel stores where a product reads x (operand(stored(x)) is then x's operand without a second
// rounding, so gathers may load such values' bits as they are: TF32's rounded, BF16's and FP32's
// the floats, which mma rounds or splits itself); and mma(d, a, b), d += a b
// for fragments laid out as the TF32 ones above (a0..a3, b0, b1), whatever R is.
//   tf32: operands rounded to TF32 (10-bit mantissa), one mma.sync per tile.
//   bf16: operands rounded to BF16 (7-bit mantissa) as they are packed. The TF32 layout's two k's
//     of a lane, t and t + 4, become the BF16 register's two, 2 t and 2 t + 1, on both sides: the
//     tile's sum over k is the same, its terms in another order. One mma.sync per tile.
//   fp32: each operand split into x = big + small, both TF32 (big the rounded x, small the rounded
//     rest), and the tile is small_a big_b + big_a small_b + big_a big_b (the small terms first),
//     three mma.sync: the products then come close to FP32's (only small_a small_b and the small
//     halves' own rounding, about 2^-22 of the product, are left out, and the tensor cores add in
//     their own order), at three times the tensor cores' work.
template <Precision R>
struct Operands {
  static_assert(R == Precision::tf32 || R == Precision::bf16 || R == Precision::fp32,
                "a precision the tensor cores compute");
  __device__ static std::uint32_t operand(float x) {
    if constexpr (R == Precision::tf32) return to_tf32(x);
    return __float_as_uint(x);
  }
  // BF16's operands are rounded as mma packs them, so its stored values stay floats: the same
  // products' bits, and the activations that the backward pass takes each unit's slope from keep
  // theirs (rounded to BF16, a saturated scaled tanh's would exceed its bound 1.7159).
  __device__ static float stored(float x) {
    if constexpr (R == Precision::tf32) return rounded_to_tf32(x);
    return x;
  }
  __device__ static void mma(float (&d)[4], const std::uint32_t (&a)[4],
                             const std::uint32_t (&b)[2]) {
    if constexpr (R == Precision::tf32) {
      mma_tf32(d, a, b);
    } else if constexpr (R == Precision::bf16) {
      const std::uint32_t packed_a[2] = {bf16_pair(__uint_as_float(a[0]), __uint_as_float(a[2])),
                                         bf16_pair(__uint_as_float(a[1]), __uint_as_float(a[3]))};
      mma_bf16(d, packed_a, bf16_pair(__uint_as_float(b[0]), __uint_as_float(b[1])));
    } else {
      std::uint32_t big_a[4], small_a[4], big_b[2], small_b[2];
      split(a, big_a, small_a);
      split(b, big_b, small_b);
      mma_tf32(d, small_a, big_b);
      mma_tf32(d, big_a, small_b);
      mma_tf32(d, big_a, big_b);
    }
  }

 private:
  template <int N>
  __device__ static void split(const std::uint32_t (&x)[N], std::uint32_t (&big)[N],
                               std::uint32_t (&small)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      big[i] = to_tf32(__uint_as_float(x[i]));
      small[i] = to_tf32(__uint_as_float(x[i]) - __uint_as_float(big[i]));
    }
  }
};

}  // namespace lenet5::cuda::mma
