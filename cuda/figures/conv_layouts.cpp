// Host side of Exercise 2's layouts (cuda/figures/conv_layouts.cuh): names, sizes, and conversions
// of host tensors between NCHW and each layout, through the same index helpers the kernels use.
#include "cuda/figures/conv_layouts.cuh"

#include <string>

#include "core/error.hpp"

namespace lenet5::cuda {

const char* layout_name(Layout layout) {
  switch (layout) {
    case Layout::nhwc:
      return "NHWC";
    case Layout::chwn:
      return "CHWN";
    default:
      return "NCHW";
  }
}

std::size_t unrolled_floats(const ConvShape& s) {
  return std::size_t(s.n) * s.c * s.k * s.k * s.h_out() * s.w_out();
}

namespace {

std::size_t count_of(const Extents& e) {
  return std::size_t(e.N) * e.C * e.H * e.W;
}

// Calls f(nchw_index, layout_index) for every element of a tensor of extents e.
template <class L, class F>
void for_each_element(const Extents& e, F&& f) {
  std::size_t i = 0;
  for (int n = 0; n < e.N; ++n)
    for (int c = 0; c < e.C; ++c)
      for (int h = 0; h < e.H; ++h)
        for (int w = 0; w < e.W; ++w) f(i++, L::offset(e, n, c, h, w));
}

void check_size(const std::vector<float>& v, std::size_t expected, const char* what) {
  if (v.size() != expected)
    throw Error(std::string("internal: ") + what + " got " + std::to_string(v.size()) +
                " floats, the extents give " + std::to_string(expected));
}

}  // namespace

namespace {

// The tensor `in` of extents e rearranged between NCHW and `layout`, either way: the same walk
// over the elements, copying NCHW index i to layout index j or back.
enum class Towards { layout, nchw };
std::vector<float> relayout(Layout layout, const Extents& e, const std::vector<float>& in,
                            Towards towards, const char* what) {
  check_size(in, count_of(e), what);
  std::vector<float> out(in.size());
  with_layout(layout, [&](auto tag) {
    for_each_element<decltype(tag)>(e, [&](std::size_t i, std::size_t j) {
      if (towards == Towards::layout)
        out[j] = in[i];
      else
        out[i] = in[j];
    });
  });
  return out;
}

}  // namespace

std::vector<float> to_layout(Layout layout, const Extents& e, const std::vector<float>& nchw) {
  return relayout(layout, e, nchw, Towards::layout, "to_layout");
}

std::vector<float> from_layout(Layout layout, const Extents& e, const std::vector<float>& data) {
  return relayout(layout, e, data, Towards::nchw, "from_layout");
}

std::vector<float> unrolled_per_sample(Layout layout, const ConvShape& s,
                                       const std::vector<float>& x_unroll) {
  check_size(x_unroll, unrolled_floats(s), "unrolled_per_sample");
  const ConvDims d = dims_of(s);
  const int rows = s.c * s.k * s.k, HW = s.h_out() * s.w_out();
  std::vector<float> out(x_unroll.size());
  with_layout(layout, [&](auto tag) {
    using L = decltype(tag);
    std::size_t i = 0;
    for (int n = 0; n < s.n; ++n)
      for (int row = 0; row < rows; ++row)
        for (int col = 0; col < HW; ++col) out[i++] = x_unroll[unrolled_offset<L>(d, n, row, col)];
  });
  return out;
}

}  // namespace lenet5::cuda
