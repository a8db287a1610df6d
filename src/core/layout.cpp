// The flat parameter layout of the network (names, shapes, offsets), C3's connection mask, and
// the seeded initial weights.
#include "core/layout.hpp"

#include <cmath>

#include "core/error.hpp"
#include "core/rng.hpp"

namespace lenet5 {
namespace {

// Initialisation streams of the tensors only some settings have start here, after the others'.
constexpr std::uint64_t kOptionalStreams = 100;

void add_tensor(ParamLayout& layout, std::string name, std::vector<std::int64_t> shape, int fan_in,
                std::uint64_t init_stream) {
  ParamSpec spec;
  spec.name = std::move(name);
  spec.shape = std::move(shape);
  spec.count = 1;
  for (auto extent : spec.shape) spec.count *= std::size_t(extent);
  spec.offset = (layout.buffer_floats + kParamAlignment - 1) / kParamAlignment * kParamAlignment;
  spec.fan_in = fan_in;
  spec.init_stream = init_stream;
  layout.buffer_floats = spec.offset + spec.count;
  layout.trainable_count += spec.count;
  layout.tensors.push_back(std::move(spec));
}

int c3_connections(const NetConfig& config, int output_map) {
  if (config.c3_table == C3Table::full) return 6;
  int connected = 0;
  for (int c = 0; c < 6; ++c) connected += lecun_c3_connected(output_map, c);
  return connected;
}

}  // namespace

const ParamSpec& ParamLayout::find(const std::string& name) const {
  for (const auto& spec : tensors)
    if (spec.name == name) return spec;
  throw Error("internal: no parameter tensor named '" + name + "'");
}

ParamLayout lenet5_layout(const NetConfig& config) {
  ParamLayout layout;
  // Each subsampling map's coefficient multiplies the sum of its 2x2 window: fan-in 4.
  const bool coefficients = config.subsampling == Subsampling::trainable;
  const bool conv_biases = config.conv_units == ConvUnits::squashed;
  add_tensor(layout, "c1.weight", {6, 1, 5, 5}, 1 * 25, 0);
  if (conv_biases) add_tensor(layout, "c1.bias", {6}, 0, kOptionalStreams + 2);
  if (coefficients) add_tensor(layout, "s2.weight", {6}, 2 * 2, kOptionalStreams);
  add_tensor(layout, "s2.bias", {6}, 0, 1);
  add_tensor(layout, "c3.weight", {16, 6, 5, 5}, 6 * 25, 2);
  if (conv_biases) add_tensor(layout, "c3.bias", {16}, 0, kOptionalStreams + 3);
  if (coefficients) add_tensor(layout, "s4.weight", {16}, 2 * 2, kOptionalStreams + 1);
  add_tensor(layout, "s4.bias", {16}, 0, 3);
  add_tensor(layout, "c5.weight", {120, 16, 5, 5}, 16 * 25, 4);
  add_tensor(layout, "c5.bias", {120}, 0, 5);
  add_tensor(layout, "f6.weight", {84, 120}, 120, 6);
  add_tensor(layout, "f6.bias", {84}, 0, 7);
  if (config.output == OutputLayer::softmax) {
    add_tensor(layout, "output.weight", {10, 84}, 84, 8);
    add_tensor(layout, "output.bias", {10}, 0, 9);
  }
  if (config.c3_table == C3Table::lecun)
    for (int m = 0; m < 16; ++m) layout.trainable_count -= std::size_t(6 - c3_connections(config, m)) * 25;
  return layout;
}

std::vector<float> c3_weight_mask(const NetConfig& config) {
  std::vector<float> mask(16 * 6 * 25, 1.0f);
  if (config.c3_table == C3Table::full) return mask;
  for (int m = 0; m < 16; ++m)
    for (int c = 0; c < 6; ++c)
      if (!lecun_c3_connected(m, c))
        for (int i = 0; i < 25; ++i) mask[(m * 6 + c) * 25 + i] = 0.0f;
  return mask;
}

template <class T>
void initialise_parameters(const ParamLayout& layout, const NetConfig& config, std::uint64_t seed,
                           T* host_params) {
  for (std::size_t i = 0; i < layout.buffer_floats; ++i) host_params[i] = T(0);
  const std::vector<float> mask = c3_weight_mask(config);
  for (const ParamSpec& spec : layout.tensors) {
    if (spec.fan_in == 0) continue;  // biases start at zero
    SplitMix64 rng(stream_seed(seed, RngStream::init, spec.init_stream));
    const bool is_c3 = spec.name == "c3.weight";
    const std::size_t per_map = spec.count / std::size_t(spec.shape[0]);
    for (std::size_t i = 0; i < spec.count; ++i) {
      const int map = int(i / per_map);
      const int fan_in = is_c3 ? c3_connections(config, map) * 25 : spec.fan_in;
      const double limit = std::sqrt(3.0 / fan_in);
      const double value = (2.0 * rng.uniform() - 1.0) * limit;  // drawn even if masked: same stream
      host_params[spec.offset + i] = T(is_c3 ? value * mask[i] : value);
    }
  }
}

template void initialise_parameters<float>(const ParamLayout&, const NetConfig&, std::uint64_t,
                                           float*);
template void initialise_parameters<double>(const ParamLayout&, const NetConfig&, std::uint64_t,
                                            double*);

}  // namespace lenet5
