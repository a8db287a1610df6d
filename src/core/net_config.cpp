// The network settings' names and parsers, and the table of GPU kernel sets.
#include "core/net_config.hpp"

#include <array>

#include "core/error.hpp"

namespace lenet5 {
namespace {

template <class Enum>
Enum parse_named(const std::string& name, const std::vector<std::string>& names,
                 const char* what) {
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<Enum>(i);
  std::string accepted;
  for (const auto& n : names) accepted += (accepted.empty() ? "" : ", ") + n;
  throw UsageError(std::string("unknown ") + what + " '" + name + "' (accepted: " + accepted + ")");
}

}  // namespace

const std::vector<std::string>& activation_names() {
  static const std::vector<std::string> names{"tanh", "sigmoid", "scaled-tanh", "relu"};
  return names;
}
const std::vector<std::string>& subsampling_names() {
  static const std::vector<std::string> names{"average", "max", "trainable"};
  return names;
}
const std::vector<std::string>& c3_table_names() {
  static const std::vector<std::string> names{"full", "lecun"};
  return names;
}

const std::vector<std::string>& output_layer_names() {
  static const std::vector<std::string> names{"softmax", "rbf"};
  return names;
}

const std::vector<std::string>& conv_units_names() {
  static const std::vector<std::string> names{"linear", "squashed"};
  return names;
}

const std::vector<std::string>& precision_names() {
  static const std::vector<std::string> names{"fp32", "tf32", "bf16"};
  return names;
}

const std::vector<GpuKernelSet>& gpu_kernel_sets() {
  static const std::vector<GpuKernelSet> table{
      {GpuKernels::book, "book", "the chapter's kernels, one layer at a time", ConvAlgo::direct,
       true, false, false, false, false},
      {GpuKernels::fast, "fast", "fused layers", ConvAlgo::staged, true, true, false, false, false},
      {GpuKernels::whole_step, "whole-step", "a training step in two kernels, one block per sample",
       ConvAlgo::staged, false, true, true, false, false},
      {GpuKernels::tensor, "tensor",
       "the training step's gradient and the evaluations after each epoch on the tensor cores, a "
       "tile of samples per block (the dense layers' training pass a cluster of blocks a tile on "
       "GPUs of compute capability 9.0), the step's products in --precision's arithmetic (fp32 as "
       "three TF32 products, tf32 or bf16) and the evaluations' in TF32 (a sweep's packed "
       "models train as whole-step does); GPU only",
       ConvAlgo::staged, false, true, true, true, true},
  };
  return table;
}

const GpuKernelSet& gpu_kernel_set(GpuKernels kernels) { return gpu_kernel_sets()[int(kernels)]; }

const std::vector<std::string>& gpu_kernels_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const GpuKernelSet& set : gpu_kernel_sets()) out.push_back(set.name);
    return out;
  }();
  return names;
}

const char* to_string(GpuKernels value) { return gpu_kernel_set(value).name; }

GpuKernels parse_gpu_kernels(const std::string& name) {
  return parse_named<GpuKernels>(name, gpu_kernels_names(), "kernel set");
}

const std::vector<InputScalingInfo>& input_scalings() {
  // Fashion-MNIST's: the mean and standard deviation of its 47,040,000 training pixels / 255.
  // LeCun 1998's: grey 0 -> -0.1 and 255 -> 1.175 is x = -0.1 + 1.275 * grey/255, that is a mean
  // of 0.1 / 1.275 and a std of 1 / 1.275.
  static const std::vector<InputScalingInfo> table{
      {InputScaling::mnist, "mnist", {0.1307f, 0.3081f}, "MNIST's mean 0.1307 and std 0.3081"},
      {InputScaling::fashion_mnist,
       "fashion-mnist",
       {0.2860406f, 0.3530242f},
       "Fashion-MNIST's mean 0.2860 and std 0.3530"},
      {InputScaling::lecun1998,
       "lecun1998",
       {0.1f / 1.275f, 1.0f / 1.275f},
       "LeCun et al. 1998: background -0.1, ink 1.175"},
  };
  return table;
}

PixelScaling pixel_scaling(InputScaling scaling) {
  return input_scalings()[int(scaling)].pixels;
}

const std::vector<std::string>& input_scaling_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const InputScalingInfo& info : input_scalings()) out.push_back(info.name);
    return out;
  }();
  return names;
}

const char* to_string(InputScaling value) {
  return input_scalings()[int(value)].name;
}

InputScaling parse_input_scaling(const std::string& name) {
  return parse_named<InputScaling>(name, input_scaling_names(), "input scaling");
}

const char* to_string(Activation value) { return activation_names()[int(value)].c_str(); }
const char* to_string(Subsampling value) { return subsampling_names()[int(value)].c_str(); }
const char* to_string(C3Table value) { return c3_table_names()[int(value)].c_str(); }
const char* to_string(OutputLayer value) {
  return output_layer_names()[int(value)].c_str();
}
const char* to_string(ConvUnits value) {
  return conv_units_names()[int(value)].c_str();
}
const char* to_string(Precision value) {
  return precision_names()[int(value)].c_str();
}

Activation parse_activation(const std::string& name) {
  return parse_named<Activation>(name, activation_names(), "activation");
}
Subsampling parse_subsampling(const std::string& name) {
  return parse_named<Subsampling>(name, subsampling_names(), "subsampling");
}
C3Table parse_c3_table(const std::string& name) {
  return parse_named<C3Table>(name, c3_table_names(), "C3 table");
}

OutputLayer parse_output_layer(const std::string& name) {
  return parse_named<OutputLayer>(name, output_layer_names(), "output layer");
}

ConvUnits parse_conv_units(const std::string& name) {
  return parse_named<ConvUnits>(name, conv_units_names(), "convolution units");
}

Precision parse_precision(const std::string& name) {
  return parse_named<Precision>(name, precision_names(), "precision");
}

bool lecun_c3_connected(int output_map, int input_map) {
  // Rows: input maps 0..5; columns: output maps 0..15 (an X in the paper's Table I).
  static constexpr std::array<const char*, 6> table{
      "X   XXX  XXXX XX", "XX   XXX  XXXX X", "XXX   XXX  X XXX",
      " XXX  XXXX  X XX", "  XXX  XXXX XX X", "   XXX  XXXX XXX"};
  return table[input_map][output_map] == 'X';
}

}  // namespace lenet5
