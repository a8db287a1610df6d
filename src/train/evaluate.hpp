// `lenet5 evaluate` and `lenet5 classify`: what a checkpoint says about the test set and about
// the user's own images.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "data/datasets.hpp"
#include "engine/engine.hpp"
#include "image/preprocess.hpp"
#include "train/checkpoint.hpp"

namespace lenet5 {

// An engine holding a checkpoint's weights, on the requested device.
std::unique_ptr<Engine> engine_for(const Checkpoint& checkpoint, Device device);

// Test accuracy, mean loss, confusion matrix; text for people, one JSON object for scripts. The
// classes are named as `dataset` names them (a checkpoint's: find_dataset(checkpoint.dataset)).
std::string format_evaluation(const Evaluation& evaluation, const DatasetDescription& dataset);
std::string format_evaluation_json(const Evaluation& evaluation, const std::string& checkpoint,
                                   const DatasetDescription& dataset);

struct Classification {
  std::string file;
  std::string error;                // empty on success
  bool inverted = false;
  std::vector<float> probabilities;  // (10)
  int predicted = 0;                 // the engine's class (Engine::classify): what digit() returns
  // With an RBF output, 1 - the probabilities' sum: the MAP criterion's "none of these"; -1 with
  // the softmax output, whose probabilities sum to 1.
  float none_of_these = -1;
  int digit() const;
};

struct ClassifyOptions {
  InvertMode invert = InvertMode::automatic;
  OutputLayer output = OutputLayer::softmax;  // the checkpoint's
  std::filesystem::path save_preprocessed;  // one image: that file; several: a folder
};

// Every image is tried: one that cannot be read gets its error and the others go on.
std::vector<Classification> classify_images(Engine& engine, const std::vector<std::string>& files,
                                            const ClassifyOptions& options);
// Each class named as `dataset` names it ("7", "T-shirt/top").
std::string format_classification(const Classification& result, int top,
                                  const DatasetDescription& dataset);
std::string format_classifications_json(const std::vector<Classification>& results, int top,
                                        const DatasetDescription& dataset);

}  // namespace lenet5
