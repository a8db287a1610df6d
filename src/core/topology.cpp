#include "core/topology.hpp"

namespace lenet5 {

namespace {

std::vector<LayerSpec> book_topology() {
  using K = LayerKind;
  return {
      {K::convolution, "c1", {1, 32, 32}, {6, 28, 28}, 5, "c1.weight", ""},
      {K::subsampling, "s2", {6, 28, 28}, {6, 14, 14}, 2, "", "s2.bias"},
      {K::activation, "a2", {6, 14, 14}, {6, 14, 14}, 0, "", ""},
      {K::convolution, "c3", {6, 14, 14}, {16, 10, 10}, 5, "c3.weight", ""},
      {K::subsampling, "s4", {16, 10, 10}, {16, 5, 5}, 2, "", "s4.bias"},
      {K::activation, "a4", {16, 5, 5}, {16, 5, 5}, 0, "", ""},
      {K::convolution, "c5", {16, 5, 5}, {120, 1, 1}, 5, "c5.weight", "c5.bias"},
      {K::activation, "a5", {120, 1, 1}, {120, 1, 1}, 0, "", ""},
      {K::fully_connected, "f6", {120, 1, 1}, {84, 1, 1}, 0, "f6.weight", "f6.bias"},
      {K::activation, "a6", {84, 1, 1}, {84, 1, 1}, 0, "", ""},
      {K::fully_connected, "output", {84, 1, 1}, {kClasses, 1, 1}, 0, "output.weight",
       "output.bias"},
  };
}

std::vector<LayerSpec> rbf_topology() {
  std::vector<LayerSpec> layers = book_topology();
  layers.back() = {LayerKind::rbf, "output", {84, 1, 1}, {kClasses, 1, 1}, 0, "", ""};
  return layers;
}

}  // namespace

const std::vector<LayerSpec>& lenet5_topology(OutputLayer output) {
  static const std::vector<LayerSpec> book = book_topology(), rbf = rbf_topology();
  return output == OutputLayer::rbf ? rbf : book;
}

std::vector<LayerSpec> fused_topology(const std::vector<LayerSpec>& layers) {
  std::vector<LayerSpec> fused;
  for (const LayerSpec& layer : layers) {
    if (layer.kind == LayerKind::activation && !fused.empty() && !fused.back().activate) {
      fused.back().activate = true;
      continue;
    }
    fused.push_back(layer);
  }
  return fused;
}

std::string weight_tensor(const LayerSpec& spec, const NetConfig& config) {
  if (spec.kind == LayerKind::subsampling && config.subsampling == Subsampling::trainable)
    return spec.name + ".weight";
  return spec.weight;
}

}  // namespace lenet5
