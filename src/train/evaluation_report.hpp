// `lenet5 evaluate --report DIR`: a folder a browser opens without a server: index.html showing
// confusion.png (the confusion matrix as a heat map with its counts) and errors.png (the
// misclassified test images, most confident first, each labelled true->predicted with the
// network's probability).
#pragma once

#include <filesystem>
#include <string>

#include "data/datasets.hpp"
#include "data/mnist.hpp"
#include "engine/engine.hpp"

namespace lenet5 {

inline constexpr const char* kConfusionFile = "confusion.png";
inline constexpr const char* kErrorsFile = "errors.png";
inline constexpr const char* kReportIndexFile = "index.html";

// Before any work: the folder may be absent, empty, or an earlier report (holding only the
// report's own files, which are then replaced); anything else is refused with a UsageError, so a
// report never overwrites files it did not write.
void check_report_folder(const std::filesystem::path& dir);

// Classifies every image of `test` again for the per-image probabilities (Engine::probabilities),
// and writes the three files into `dir` (created if needed). `evaluation` is the engine's
// evaluation of `test`, whose confusion matrix the picture and the printed table share. `classes`
// is the checkpoint's data set: what its outputs mean, which the pictures and the page name.
void write_evaluation_report(const std::filesystem::path& dir, Engine& engine, const Dataset& test,
                             const Evaluation& evaluation, const std::string& checkpoint,
                             const DatasetDescription& classes);

}  // namespace lenet5
