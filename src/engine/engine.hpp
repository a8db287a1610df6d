// Engine: one device's implementation of the operations the trainer, `evaluate` and `classify`
// need. The training data is handed over once; within an epoch nothing crosses back to the host
// until take_epoch_totals() (the one synchronisation per epoch on the GPU).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/augment.hpp"
#include "core/device.hpp"
#include "core/layout.hpp"
#include "core/net_config.hpp"
#include "core/optimizer.hpp"
#include "core/sgd.hpp"
#include "core/shapes.hpp"
#include "data/mnist.hpp"

namespace lenet5 {

struct EpochTotals {
  double loss_sum = 0;
  std::int64_t correct = 0;
  std::int64_t seen = 0;
};

// What the network computes for one image, layer by layer (design.md's named layers, each after
// its activation where it has one): what the page shows.
struct LayerOutput {
  std::string name;           // "c1", "s2", "c3", "s4", "c5", "f6", "output"
  Dims dims;                  // (6, 28, 28) ... (10, 1, 1)
  std::vector<float> values;  // dims.size(), channel-major as the layers store them
};

struct Activations {
  std::vector<float> input;  // (1, 32, 32): the image normalised and padded as in training
  std::vector<LayerOutput> layers;
  // Each class's probability: the softmax of the output layer, or with --output rbf the MAP
  // criterion's p_i = e^-y_i / (e^-j + sum_k e^-y_k), which sum to less than 1 (the rest is its
  // "none of these").
  std::array<float, 10> probabilities{};
  int predicted = 0;  // the network's class: the largest probability's, or the nearest prototype's
};

struct Evaluation {
  double loss_sum = 0;
  std::int64_t correct = 0;
  int count = 0;
  std::array<std::array<std::int64_t, 10>, 10> confusion{};  // [true][predicted]
  // Which criterion loss_sum sums (softmax cross-entropy, or the MAP criterion of an RBF output)
  // and how the class was predicted (largest probability, or nearest prototype).
  OutputLayer output = OutputLayer::softmax;

  double accuracy() const { return count ? double(correct) / count : 0.0; }
  double mean_loss() const { return count ? loss_sum / count : 0.0; }
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual Device device() const = 0;
  virtual const ParamLayout& layout() const = 0;

  // Fresh weights from the seed, zero optimizer state.
  virtual void initialise(std::uint64_t seed) = 0;
  // Host copies of the flat parameter buffer and of the optimizer's state buffers, the ones it
  // keeps under the engine's settings (core/optimizer.hpp), layout().buffer_floats each.
  virtual std::vector<float> parameters() const = 0;
  virtual OptimizerState optimizer_state() const = 0;
  // The parameters, and the optimizer state by name as OptimizerBuffers::set takes it
  // (engine/optimizers.hpp): a kept buffer that `state` lacks is zeroed, others are ignored.
  virtual void set_state(const std::vector<float>& parameters, const OptimizerState& state) = 0;

  // The dataset must outlive the engine's use of it (the GPU engine keeps a device copy). Each
  // training step shows the network its samples transformed as `augmentation` says, keyed by
  // (its seed, the epoch, the sample's index in `train`); evaluation never augments.
  virtual void set_training_data(const Dataset& train, const Augmentation& augmentation) = 0;
  // Epoch `epoch` (counted from 0 over the whole run): the order of the training samples and the
  // learning rate of each step (step s trains on permutation[s * batch, min((s + 1) * batch, n))
  // with learning_rates[s]).
  virtual void begin_epoch(int epoch, const std::vector<std::int32_t>& permutation,
                           const std::vector<float>& learning_rates) = 0;
  // Runs steps [first_step, end_step) of the current epoch, in order. Before step 0 of an epoch an
  // optimizer with a curvature estimate (SDLM) has it made anew (engine/network_engine.hpp).
  virtual void train_steps(int first_step, int end_step) = 0;
  // How many steps the trainer should hand over per call: 1 gives the finest progress and
  // interruption; the GPU engine prefers whole epochs, which it replays as one CUDA graph.
  virtual int preferred_steps_per_call(int steps_in_epoch) const = 0;
  virtual EpochTotals take_epoch_totals() = 0;

  virtual Evaluation evaluate(const Dataset& data) = 0;
  // Each class's probability (n, 10) for n 28x28 byte images (Activations::probabilities says
  // which), and in `predicted` (resized to n) each image's class: the largest probability's
  // (softmax) or the nearest prototype's (rbf; far from every prototype all ten probabilities can
  // round to 0, and the distances still tell). The network keeps the last chunk of (at most
  // kEvalBatch) images as its last forward pass, which activations() reads.
  virtual std::vector<float> classify(const std::uint8_t* images, int n,
                                      std::vector<std::int32_t>& predicted) = 0;
  // classify() without the classes.
  std::vector<float> probabilities(const std::uint8_t* images, int n) {
    std::vector<std::int32_t> predicted;
    return classify(images, n, predicted);
  }
  // Every layer's output for one 28x28 byte image, on the engine's device. Not thread-safe: it
  // runs the engine's network.
  virtual Activations activations(const std::uint8_t* image) = 0;
};

// Models trained in lockstep, as `lenet5 sweep` packs them: model(i) is an Engine like any other,
// but the group may run the models' steps together (on the GPU, in the same launches). Each epoch,
// every model is given its begin_epoch, and then its train_steps for the same range, in any order;
// those steps have run once every model has asked for them (the last call runs them all). Until
// then no model's take_epoch_totals, parameters or evaluation may be asked for.
class EngineGroup {
 public:
  virtual ~EngineGroup() = default;
  virtual int size() const = 0;
  virtual Engine& model(int i) = 0;
};

// set_state's precondition on the parameters, shared by the engines: layout.buffer_floats values
// (throws an internal Error otherwise; OptimizerBuffers::set checks the state buffers).
void check_parameter_count(const ParamLayout& layout, const std::vector<float>& parameters);

}  // namespace lenet5
