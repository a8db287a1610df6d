// The RBF output layer's prototypes, decoded from the paper's 7x12 bitmaps of the ten digits.
#include "core/rbf_prototypes.hpp"

#include <string_view>

namespace lenet5 {
namespace {

// The digits of the paper's Fig. 3 ("Initial parameters of the output RBFs for recognizing the
// full ASCII set"), LeCun, Bottou, Bengio, Haffner, "Gradient-based learning applied to document
// recognition", Proc. IEEE 86(11), 1998: '#' is an ink pixel (+1), '.' background (-1). Entered
// row by row from the public transcription of the figure as +-1 arrays in
// github.com/AlgorithmicIntelligence/quantization_lenet (RBF_BITMAP.py), the same values that
// other reimplementations of the paper use; the figure itself was not re-read pixel by pixel here.
// The rows that look unlike a digit font (the bar above 0, 2, 4 and 5, the tail of 4 in the last
// two rows) are as transcribed.
constexpr std::string_view kBitmaps[kClasses][kRbfBitmapHeight] = {
    {".#####.", ".......", "..###..", ".##.##.", "##...##", "##...##",  // 0
     "##...##", "##...##", ".##.##.", "..###..", ".......", "......."},
    {"...##..", "..###..", ".####..", "...##..", "...##..", "...##..",  // 1
     "...##..", "...##..", "...##..", ".######", ".......", "......."},
    {".#####.", ".......", ".#####.", "##...##", "#....##", "....##.",  // 2
     "..###..", ".##....", "##.....", "#######", ".......", "......."},
    {"#######", ".....##", "....##.", "...##..", "..####.", ".....##",  // 3
     ".....##", ".....##", "##...##", ".#####.", ".......", "......."},
    {".#####.", ".......", ".......", ".##..##", ".##..##", "###..##",  // 4
     "##...##", "##...##", "##..###", ".######", ".....##", ".....##"},
    {".#####.", ".......", "#######", "##.....", "##.....", ".####..",  // 5
     "..####.", ".....##", "##...##", ".#####.", ".......", "......."},
    {"..####.", ".##....", "##.....", "##.....", "######.", "###..##",  // 6
     "##...##", "##...##", "###..##", ".#####.", ".......", "......."},
    {"#######", ".....##", ".....##", "....##.", "...##..", "...##..",  // 7
     "..##...", "..##...", "..##...", "..##...", ".......", "......."},
    {".#####.", "##...##", "##...##", "##...##", ".#####.", "##...##",  // 8
     "##...##", "##...##", "##...##", ".#####.", ".......", "......."},
    {".#####.", "##..###", "##...##", "##...##", "##..###", ".######",  // 9
     ".....##", ".....##", "....##.", ".####..", ".......", "......."},
};

std::array<float, kClasses * kRbfUnits> decode_bitmaps() {
  std::array<float, kClasses * kRbfUnits> values{};
  for (int digit = 0; digit < kClasses; ++digit)
    for (int row = 0; row < kRbfBitmapHeight; ++row)
      for (int column = 0; column < kRbfBitmapWidth; ++column) {
        // A short row would read as background; the prototypes' test checks every row's length.
        const std::string_view line = kBitmaps[digit][row];
        const char pixel = std::size_t(column) < line.size() ? line[std::size_t(column)] : '.';
        values[std::size_t(digit * kRbfUnits + row * kRbfBitmapWidth + column)] =
            pixel == '#' ? 1.0f : -1.0f;
      }
  return values;
}

}  // namespace

const std::array<float, kClasses * kRbfUnits>& rbf_prototypes() {
  static const std::array<float, kClasses * kRbfUnits> values = decode_bitmaps();
  return values;
}

std::string_view rbf_bitmap_row(int digit, int row) { return kBitmaps[digit][row]; }

}  // namespace lenet5
