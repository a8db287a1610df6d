// Where every parameter tensor lives in the one flat parameter buffer (and, at the same offsets,
// in the flat gradient and momentum buffers). The order and names are the checkpoint's contract.
//
// The book's network (Figs 16.4, 16.5): C1 and C3 have no bias of their own, because the
// subsampling layers that follow them add one per map (Fig 16.5); C5 is followed by no
// subsampling, so it carries its own bias. Hence 61,706 trainable parameters with the full C3
// table:
//   c1.weight (6,1,5,5) 150   s2.bias (6) 6      c3.weight (16,6,5,5) 2,400   s4.bias (16) 16
//   c5.weight (120,16,5,5) 48,000   c5.bias (120)   f6.weight (84,120) 10,080   f6.bias (84)
//   output.weight (10,84) 840   output.bias (10)
// With --subsampling trainable (LeCun et al. 1998, section II.B) each subsampling map also has a
// trainable coefficient, just before its bias: s2.weight (6) and s4.weight (16), 22 more (61,728).
// With --conv-units squashed (LeCun 1998's C1 and C3 units, core/net_config.hpp) each C1 and C3
// map has its own bias, just after its weights: c1.bias (6) and c3.bias (16), 22 more. LeCun 1998's
// network, every part of the paper's chosen (the C3 table, trainable subsampling, the RBF output
// and these), has 60,000: the paper's count (section II.B).
// The other settings have no such tensors, so their checkpoints are unchanged.
// With --output rbf the output layer is LeCun 1998's RBF units, whose prototypes are fixed data
// (core/rbf_prototypes.hpp), not parameters: the layout, and so the trained buffer, the optimizer's
// state and the checkpoint's parameter tensors, ends at f6.bias (60,856 trainable parameters with
// the full C3 table). The checkpoint stores the prototypes beside them as the one tensor that is
// not trained (train/checkpoint.hpp says why).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/net_config.hpp"

namespace lenet5 {

struct ParamSpec {
  std::string name;                 // "c3.weight"
  std::vector<std::int64_t> shape;  // (16, 6, 5, 5)
  std::size_t offset = 0;           // in floats, into the flat buffer
  std::size_t count = 0;            // product of shape
  int fan_in = 0;                   // inputs feeding one output, for initialisation (0: a bias)
  // The random stream initialise_parameters draws this tensor from: its index among the tensors
  // every setting has, and after those for the tensors only some settings have (the subsampling
  // coefficients, C1's and C3's biases), so that a network with them starts from the same other
  // weights as one without.
  std::uint64_t init_stream = 0;
};

// Offsets are rounded up to 32 floats (128 bytes) so every tensor starts on an aligned boundary
// for vectorised GPU access; the padding is never read and stays zero.
constexpr std::size_t kParamAlignment = 32;

struct ParamLayout {
  std::vector<ParamSpec> tensors;
  std::size_t buffer_floats = 0;     // flat buffer length, padding included
  std::size_t trainable_count = 0;   // sum of counts, less C3 weights the table disconnects

  const ParamSpec& find(const std::string& name) const;  // throws Error if absent
};

ParamLayout lenet5_layout(const NetConfig& config);

// Seeded fan-in initialisation (LeCun uniform): weights ~ U(-a, a) with a = sqrt(3 / fan_in),
// i.e. variance 1/fan_in, which keeps tanh units out of saturation at the start; biases 0.
// With the LeCun C3 table each C3 map uses its own fan-in and disconnected weights are 0.
template <class T>
void initialise_parameters(const ParamLayout& layout, const NetConfig& config, std::uint64_t seed,
                           T* host_params);

// 1 where a C3 weight exists, 0 where the table disconnects it; (16,6,5,5) like c3.weight.
std::vector<float> c3_weight_mask(const NetConfig& config);

}  // namespace lenet5
