// The fixed LeNet-5 topology (book Fig 16.2) as data, shared by every backend. The chapter's
// ordering: convolution, then subsampling with a per-map bias, then the activation (Fig 16.5);
// C5 and F6 are followed by the activation directly; the output layer is linear and feeds
// softmax cross-entropy, or (--output rbf) is LeCun 1998's layer of Euclidean RBF units, which
// has no trained parameters and feeds the paper's MAP criterion.
//   input (1,32,32) -> c1 (6,28,28) -> s2 (6,14,14) -> a2 -> c3 (16,10,10) -> s4 (16,5,5) -> a4
//   -> c5 (120,1,1) -> a5 -> f6 (84) -> a6 -> output (10)
// With --conv-units squashed (LeCun 1998's C1 and C3 units) C1 and C3 carry a bias of their own
// (c1.bias, c3.bias) and are followed by their own activation, a1 and a3:
//   input -> c1 -> a1 -> s2 -> a2 -> c3 -> a3 -> s4 -> a4 -> c5 ...
#pragma once

#include <string>
#include <vector>

#include "core/layer.hpp"
#include "core/net_config.hpp"

namespace lenet5 {

// rbf: y_i = sum_j (x_j - w_ij)^2 with the fixed prototypes w of core/rbf_prototypes.hpp.
enum class LayerKind { convolution, subsampling, activation, fully_connected, rbf };

struct LayerSpec {
  LayerKind kind;
  std::string name;    // "c3"
  Dims in, out;
  int kernel = 0;      // convolution filter size or subsampling window
  std::string weight;  // parameter tensor names, empty when the layer has none
  std::string bias;
  bool activate = false;  // applies the network's activation to its own output (fused form)
};

// The network as `net` chooses its output layer (the book's softmax layer, or LeCun 1998's RBF
// units: "output", kind rbf) and its C1 and C3 units; the other settings change no layer.
// lenet5_topology(NetConfig{}) is the book's network.
const std::vector<LayerSpec>& lenet5_topology(const NetConfig& net);
// The parameter tensor a layer's weight is: the topology's, and with trainable subsampling the
// subsampling layers' coefficients ("s2.weight", core/layout.hpp), which only that setting has.
// Empty when the layer has none.
std::string weight_tensor(const LayerSpec& spec, const NetConfig& config);
// Whether the fused form folds an activation into this layer: every kind but a convolution with
// more than one output per map (C1, C3), whose fast kernels, on the GPU and the CPU, apply none.
bool fuses_activation(const LayerSpec& layer);
// The same network with every activation layer folded into the layer before it where that layer
// fuses one (activate = true): s2, s4, c5 and f6 then write f(z) themselves. Same function, four
// fewer layers; a1 and a3 (--conv-units squashed) stay layers of their own.
std::vector<LayerSpec> fused_topology(const std::vector<LayerSpec>& layers);

}  // namespace lenet5
