// The robustness suite: a checkpoint reading MNIST digits rendered as the images people bring
// (renderings.hpp), through the same decoding and preprocessing `lenet5 classify` uses, beside the
// same digits read as plain 28x28 images. One row per variant: images, refused, accuracy.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "data/mnist.hpp"
#include "engine/engine.hpp"
#include "image/preprocess.hpp"

namespace lenet5::robustness {

struct SuiteOptions {
  int digits = 2000;                  // per variant: the same digits for every variant
  std::uint64_t seed = 1;             // which digits, and every random choice of the renderings
  std::vector<std::string> variants;  // by name; empty: all
  InvertMode invert = InvertMode::automatic;
  // When set, every rendered image is written there (VARIANT/NNNNN_D.png|jpg and a labels.csv
  // per variant in scripts/handwriting_accuracy.sh's layout), to look at or to classify.
  std::filesystem::path save_images;
};

struct VariantResult {
  std::string name, description;
  int images = 0, refused = 0, correct = 0;
  // Of the images read, how many were taken for the other polarity than they have (dark ink for
  // light, or light for dark): what --invert auto got wrong.
  int wrong_polarity = 0;
  // How many refusals each reason had (the error's text after the file's name), most common first
  // in the report.
  std::map<std::string, int> refusal_reasons;
  double accuracy() const { return images ? double(correct) / images : 0.0; }
};

struct SuiteReport {
  int digits = 0;
  std::uint64_t seed = 0;
  std::string source;     // "test" or "validation": where the digits came from
  int plain_correct = 0;  // the same digits as 28x28 images, straight into the network
  std::vector<VariantResult> variants;
  double plain_accuracy() const { return digits ? double(plain_correct) / digits : 0.0; }
};

// Reads `options.digits` digits of `source` (a seeded sample, the same for every variant) through
// every chosen variant. `source_name` says which split they are ("test", "validation"). Progress
// is logged per variant.
SuiteReport run_suite(Engine& engine, const Dataset& source, const std::string& source_name,
                      const SuiteOptions& options);

// A table for people: one row per variant.
std::string format_report(const SuiteReport& report);
// One JSON object: the options and one entry per variant.
std::string format_report_json(const SuiteReport& report);

}  // namespace lenet5::robustness
