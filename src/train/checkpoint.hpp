// Checkpoints: safetensors files holding every parameter tensor by name (core/layout.hpp), then
// the optimizer's state buffers by name, buffer S of tensor T as "T.S" (core/optimizer.hpp; SGD
// with momentum: "c1.weight.momentum", ...), and in __metadata__ everything a resumed run needs
// to continue exactly where this one stopped.
//
// An RBF output (--output rbf) has no output.weight or output.bias; its checkpoint holds the fixed
// prototypes as "output.prototypes" (10, 84), the one tensor that is not trained and has no
// optimizer state. They are not needed to load it (this program has them built in, and a load
// refuses a file whose prototypes differ from them), but with them the file alone says what its
// network computes, for tools that read safetensors without this program; and a later build that
// changed the prototypes could not silently give old weights another meaning.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/net_config.hpp"
#include "core/optimizer.hpp"
#include "engine/engine.hpp"

namespace lenet5 {

constexpr const char* kCheckpointFormat = "lenet5-checkpoint";
// The format version a checkpoint is written with: 1 for every network that version 1 could
// describe, so that those files stay byte for byte what they were; 2 only where the network needs
// what version 1 lacks (an RBF output: metadata 'output', the prototypes' tensor and no
// output.weight), so that a build that predates it refuses the file by its version instead of
// misreading it; 3 only where the network has C1 and C3 units of LeCun 1998's (metadata
// 'conv_units', tensors c1.bias and c3.bias), whatever its output layer, for the same reason. A
// load accepts all three.
constexpr int kCheckpointVersion = 1;
constexpr int kCheckpointVersionRbf = 2;
constexpr int kCheckpointVersionConvUnits = 3;
constexpr const char* kRbfPrototypesTensor = "output.prototypes";
int checkpoint_version(const NetConfig& net);

struct TrainingPosition {
  int epoch = 0;  // completed epochs
  int step = 0;   // steps already taken in epoch `epoch` (0 at an epoch boundary)
  EpochTotals partial;  // train loss/accuracy sums of those steps
  // The best epoch's accuracy on the images held out for validation (fraction), -1: none yet.
  // In a checkpoint written before images were held out: the best test accuracy.
  double best_accuracy = -1;
};

struct DataChecksums {
  std::uint32_t train_images = 0, train_labels = 0, test_images = 0, test_labels = 0;
  bool operator==(const DataChecksums& o) const {
    return train_images == o.train_images && train_labels == o.train_labels &&
           test_images == o.test_images && test_labels == o.test_labels;
  }
};

struct Checkpoint {
  NetConfig net;
  std::string config_toml;       // the run's effective settings
  std::vector<float> parameters;  // flat, layout().buffer_floats
  OptimizerState optimizer_state;  // each buffer flat, same length; none for plain SGD
  TrainingPosition position;
  double learning_rate = 0;      // rate of the last step taken
  std::uint64_t seed = 0;
  double test_accuracy = -1;     // of this checkpoint's weights, -1: not evaluated
  double validation_accuracy = -1;  // the same on the held-out images, -1: none or not evaluated
  // How many training images the run held out (--validation): a resumed run holds out the same.
  int validation_images = 0;
  DataChecksums data;
  // The data/datasets.hpp name of the data set it was trained on, whose class names its outputs
  // are; files without the record are MNIST's, the only data set before it.
  std::string dataset = "mnist";
};

// Atomic (temporary file, fsync, rename): never leaves a half-written checkpoint.
void save_checkpoint(const std::filesystem::path& file, const Checkpoint& checkpoint);
// Strict: refuses a file that is not a complete lenet5 checkpoint, naming the problem.
Checkpoint load_checkpoint(const std::filesystem::path& file);

}  // namespace lenet5
