// LeNet-5's layers as data (the book's order, the RBF variant, fused activations) and their
// weight tensors' names.
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

// The book's network with the chosen output layer and C1 and C3 units.
std::vector<LayerSpec> topology(OutputLayer output, ConvUnits conv_units) {
  std::vector<LayerSpec> layers = book_topology();
  if (output == OutputLayer::rbf)
    layers.back() = {LayerKind::rbf, "output", {84, 1, 1}, {kClasses, 1, 1}, 0, "", ""};
  if (conv_units == ConvUnits::squashed) {
    std::vector<LayerSpec> squashed;
    for (LayerSpec& layer : layers) {
      const bool map_convolution = layer.name == "c1" || layer.name == "c3";
      if (map_convolution) layer.bias = layer.name + ".bias";
      squashed.push_back(layer);
      if (map_convolution)  // a1, a3: C1's and C3's own squashing, before S2 and S4
        squashed.push_back(
            {LayerKind::activation, "a" + layer.name.substr(1), layer.out, layer.out, 0, "", ""});
    }
    layers = squashed;
  }
  return layers;
}

}  // namespace

const std::vector<LayerSpec>& lenet5_topology(const NetConfig& net) {
  static const std::vector<LayerSpec> table[2][2] = {
      {topology(OutputLayer::softmax, ConvUnits::linear),
       topology(OutputLayer::softmax, ConvUnits::squashed)},
      {topology(OutputLayer::rbf, ConvUnits::linear),
       topology(OutputLayer::rbf, ConvUnits::squashed)}};
  return table[int(net.output)][int(net.conv_units)];
}

bool fuses_activation(const LayerSpec& layer) {
  return !(layer.kind == LayerKind::convolution && (layer.out.h > 1 || layer.out.w > 1));
}

std::vector<LayerSpec> fused_topology(const std::vector<LayerSpec>& layers) {
  std::vector<LayerSpec> fused;
  for (const LayerSpec& layer : layers) {
    if (layer.kind == LayerKind::activation && !fused.empty() && !fused.back().activate &&
        fuses_activation(fused.back())) {
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
