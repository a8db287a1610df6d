// The network's settings. The topology is fixed (book Fig 16.2); these choose its parts, with the
// book's choices as defaults.
#pragma once

#include <string>
#include <vector>

#include "core/conv_algo.hpp"
#include "core/shapes.hpp"

namespace lenet5 {

enum class Activation { tanh, sigmoid, scaled_tanh, relu };
// average and max: the book's (Fig 16.5, Exercise 1). trainable: LeCun et al. 1998, section II.B,
// "the four inputs to a unit in S2 are added, then multiplied by a trainable coefficient, and
// added to a trainable bias": S = coef[c] * (sum of the window) + bias[c].
enum class Subsampling { average, max, trainable };
enum class C3Table { full, lecun };
enum class InputScaling { mnist, fashion_mnist, lecun1998 };

// How the network's input is scaled (core/shapes.hpp's PixelScaling), one row per member: MNIST's
// and Fashion-MNIST's training-set statistics, and LeCun et al. 1998's background -0.1 and
// foreground 1.175 ("so that the mean input is roughly 0 and the variance roughly 1").
struct InputScalingInfo {
  InputScaling scaling;
  const char* name;  // what --input-scaling takes
  PixelScaling pixels;
  const char* help;
};
const std::vector<InputScalingInfo>& input_scalings();
PixelScaling pixel_scaling(InputScaling scaling);
// The output layer and the training criterion that goes with it. softmax: a trained linear layer
// (84 -> 10) and softmax cross-entropy (the book). rbf: LeCun et al. 1998's Euclidean radial basis
// function units, y_i = sum_j (x_j - w_ij)^2 over F6's 84 outputs with the fixed prototypes of
// core/rbf_prototypes.hpp, trained with the paper's MAP criterion (its equation (9)); the class
// is the nearest prototype's.
enum class OutputLayer { softmax, rbf };
// What C1 and C3 compute. linear: the book's, a plain convolution whose bias and activation come
// after the subsampling that follows (Fig 16.5). squashed: LeCun et al. 1998's, where "units in
// layers up to F6 compute a dot product between their input vector and their weight vector, to
// which a bias is added" and the sum "is then passed through a sigmoid squashing function"
// (section II.A): each C1 and C3 map has its own bias and applies the activation before S2 and S4
// (which then add their own bias and apply it again). 22 more parameters (6 + 16).
enum class ConvUnits { linear, squashed };
// The arithmetic of the matrix products of the whole-step and tensor-core kernels' training step.
// fp32: every product as exact as a float multiply-add (the default, and the only precision of the
// other kernel sets and of the CPU; the tensor-core set computes each of its products as three TF32
// products of the operands' split halves). tf32: each operand rounded to TensorFloat-32's 10-bit
// mantissa, the products added in float, on the tensor cores (mma.sync, compute capability 8.0 and
// newer): with --kernels whole-step, C3's forward pass, input gradient and weight gradient, and the
// dense layers' weight gradients summed over batches of 256 and more; with --kernels tensor, every
// product. bf16: every product of --kernels tensor with operands rounded to bfloat16's 7-bit
// mantissa. Each is deterministic, with its own bits.
enum class Precision { fp32, tf32, bf16 };

// Which kernels compute the network (the function is the same). On the GPU each set is its own
// kernels; on the CPU book runs the sequential reference layers, fast and whole-step the fast CPU
// layers (src/layers/fast_cpu.hpp), and tensor is refused. What each set means is its row of gpu_kernel_sets(), which the
// settings, the network, the engines and the layers all read.
enum class GpuKernels { book, fast, whole_step, tensor };

struct GpuKernelSet {
  GpuKernels kernels;
  const char* name;  // what --kernels takes
  const char* help;  // its words in --kernels' help
  ConvAlgo default_conv_algo;  // what --conv-algo auto chooses
  // false: it trains with convolution stages of its own, and refuses any --conv-algo but auto.
  bool takes_conv_algo;
  // The layers (and so evaluation) run the fused form, each activation computed inside the layer
  // before it (core/topology.hpp's fused_topology), by the fast kernels on the GPU and the fast
  // CPU layers on the CPU; false: one layer per operation, by the book's kernels, strictly in
  // order on one stream, or by the sequential reference layers on the CPU.
  bool fused_layers;
  // Training runs the whole step in two kernels, one block per sample (cuda/engine/whole_step.cuh)
  // instead of layer by layer.
  bool whole_step;
  // A training run's evaluations (the test set and the held-out images after each epoch, and a
  // sweep's, packed) run on the tensor cores, a tile of samples per block in TF32
  // (cuda/engine/tensor_forward.cuh), instead of the whole-step kernels' FP32 forward stages. On
  // the GPU only: the CPU has no tensor cores, so a run there is refused (the settings, and
  // backend.cpp's make_engine) rather than silently evaluated in fp32.
  bool tensor_evaluation;
  // A lone model's training step takes its gradient from the tensor cores too
  // (cuda/engine/tensor_backward.cuh: its products in the network's precision), whose last launch
  // also applies SGD's update (sgd_update_element, the formula of cuda/kernels/optimizer.cu and of
  // whole-step's update kernel, bit for bit). A sweep's packed models still train with the
  // whole-step kernels.
  bool tensor_gradient;
};

// book: the chapter's direct convolution kernel (Fig 16.12) and cuBLAS for the fully connected
// layers, every layer on its own; fast: each activation fused into the layer before it, the faster
// convolution and dense kernels; whole-step: trains in two kernels per step and evaluates with
// the same forward stages (a checkpoint read later, by evaluate, runs the fast set); tensor:
// a whole-step set whose training step takes its gradient, and whose evaluations run, on the
// tensor cores (docs/tensor-cores.md). On the CPU, book is the sequential reference, fast and
// whole-step are the fast CPU layers, and tensor is refused. In --kernels' order.
const std::vector<GpuKernelSet>& gpu_kernel_sets();
const GpuKernelSet& gpu_kernel_set(GpuKernels kernels);

struct NetConfig {
  Activation activation = Activation::tanh;
  Subsampling subsampling = Subsampling::average;
  C3Table c3_table = C3Table::full;
  // Part of what the weights mean, like the three above: a checkpoint records it.
  InputScaling input_scaling = InputScaling::mnist;
  OutputLayer output = OutputLayer::softmax;
  ConvUnits conv_units = ConvUnits::linear;
  // Neither is part of a checkpoint: they do not change what the weights mean.
  GpuKernels kernels = GpuKernels::fast;
  // The GPU kernels of C1 and C3 (and of C5 with the book's kernel set; the fast set runs C5, whose
  // output is 1x1, as a dense layer).
  ConvAlgo conv_algo = ConvAlgo::staged;
  // Nor does this one (a checkpoint's stored settings name it only as tf32 or bf16, so that a
  // resumed run goes on computing as it began).
  Precision precision = Precision::fp32;
};

const char* to_string(Activation value);
const char* to_string(Subsampling value);
const char* to_string(C3Table value);
const char* to_string(OutputLayer value);
const char* to_string(ConvUnits value);
const char* to_string(GpuKernels value);
const char* to_string(InputScaling value);
const char* to_string(Precision value);
// Each throws UsageError listing the accepted names.
Activation parse_activation(const std::string& name);
Subsampling parse_subsampling(const std::string& name);
C3Table parse_c3_table(const std::string& name);
OutputLayer parse_output_layer(const std::string& name);
ConvUnits parse_conv_units(const std::string& name);
GpuKernels parse_gpu_kernels(const std::string& name);
InputScaling parse_input_scaling(const std::string& name);
Precision parse_precision(const std::string& name);

const std::vector<std::string>& activation_names();   // "tanh", "sigmoid", "scaled-tanh", "relu"
const std::vector<std::string>& subsampling_names();  // "average", "max", "trainable"
const std::vector<std::string>& c3_table_names();     // "full", "lecun"
const std::vector<std::string>& output_layer_names();  // "softmax", "rbf"
const std::vector<std::string>& conv_units_names();    // "linear", "squashed"
const std::vector<std::string>& gpu_kernels_names();  // "book", "fast", "whole-step", "tensor"
const std::vector<std::string>& precision_names();    // "fp32", "tf32", "bf16"
// "mnist", "fashion-mnist", "lecun1998"
const std::vector<std::string>& input_scaling_names();

// LeCun et al. 1998, Table I: which of S2's 6 maps feed each of C3's 16 maps.
bool lecun_c3_connected(int output_map, int input_map);

}  // namespace lenet5
