// The numeric example of Fig 16.14 (textbook-figures.md §1.13): C = 3 input maps of 3x3, M = 2
// output maps of 2x2, K = 2. Two kinds of data live here and are kept apart:
//   * what the figure PRINTS (rendering B:244-250): W', X_unrolled and Y, as data to check;
//   * the inputs X and W that the figure implies, the ones every target and test computes with.
// X is the reconstruction of §1.13 (the `fig16.14` target re-derives it from the printed matrix by
// brute force and checks that it is the only input consistent with the printed Y); W is read off
// the rows of the printed W'. Layout as everywhere: X[c][h][w], W[m][c][p][q], Y[m][h][w].
#pragma once

#include <vector>

#include "layers/reference_cpu.hpp"

namespace lenet5::figures::fig16_14 {

constexpr int kC = 3, kH = 3, kW = 3, kM = 2, kK = 2, kHout = 2, kWout = 2;
constexpr int kRows = kC * kK * kK;   // 12: X_unrolled rows, the filter taps c*K*K + p*K + q
constexpr int kCols = kHout * kWout;  // 4: X_unrolled columns, the output positions h*W_out + w

inline ConvShape shape(int n = 1) {
  return {n, kC, kH, kW, kM, kK};
}

// (1, 3, 3, 3)
inline const std::vector<float>& x() {
  static const std::vector<float> v = {
      1, 2, 0, 1, 1, 3, 0, 2, 2,  // X[0]
      0, 2, 1, 0, 3, 2, 1, 1, 0,  // X[1]
      1, 2, 1, 0, 1, 3, 3, 3, 2,  // X[2]
  };
  return v;
}

// (2, 3, 2, 2): W[m][c] is the c-th 2x2 block of row m of the printed W'.
inline const std::vector<float>& w() {
  static const std::vector<float> v = {
      1, 1, 2, 2, 1, 1, 1, 1, 0, 1, 1, 0,  // W[0][0..2]
      1, 0, 0, 1, 2, 1, 2, 1, 1, 2, 2, 0,  // W[1][0..2]
  };
  return v;
}

// dE/dY[m,h,w] = 1 + 4m + 2h + w: [[1,2],[3,4]] and [[5,6],[7,8]] (§1.7).
inline const std::vector<float>& dy() {
  static const std::vector<float> v = {1, 2, 3, 4, 5, 6, 7, 8};
  return v;
}

// As printed, row-major.
inline const std::vector<float>& printed_w_prime() {  // 2 x 12
  static const std::vector<float> v = {
      1, 1, 2, 2, 1, 1, 1, 1, 0, 1, 1, 0,  //
      1, 0, 0, 1, 2, 1, 2, 1, 1, 2, 2, 0,  //
  };
  return v;
}

inline const std::vector<float>& printed_x_unrolled() {  // 12 x 4
  static const std::vector<float> v = {
      1, 2, 1, 1, 2, 0, 1, 3, 1, 1, 0, 2, 1, 3, 2, 2,  // r1-r4
      0, 2, 0, 3, 2, 1, 3, 2, 0, 3, 1, 1, 3, 2, 1, 0,  // r5-r8
      1, 2, 1, 1, 2, 1, 0, 3, 0, 1, 3, 3, 1, 3, 3, 2,  // r9-r12
  };
  return v;
}

inline const std::vector<float>& printed_y() {  // 2 x 4, i.e. Y[m][h*2 + w]
  static const std::vector<float> v = {14, 20, 15, 24, 12, 24, 17, 26};
  return v;
}

}  // namespace lenet5::figures::fig16_14
