// lenet5 evaluate --checkpoint F [--dataset NAME] [--data D] [--force] [--device ...] [--json]
//                 [--report DIR]
#include <spdlog/spdlog.h>

#include <cstdio>

#include "backend/backend.hpp"
#include "cli/commands.hpp"
#include "core/cpu_threads.hpp"
#include "core/error.hpp"
#include "data/mnist.hpp"
#include "train/evaluate.hpp"
#include "train/evaluation_report.hpp"

namespace lenet5::cli {
namespace {

// A checkpoint's outputs are the classes of the data set it was trained on: evaluated on another,
// its accuracy measures nothing, so that takes --force.
void refuse_other_dataset(const Checkpoint& checkpoint, const std::string& file,
                          const DatasetDescription& data, const std::filesystem::path& dir) {
  const DatasetDescription& trained = find_dataset(checkpoint.dataset);
  if (&trained == &data) return;
  throw Error("checkpoint " + file + " was trained on " + trained.title + ", but the test set in " +
              dir.string() + " is " + data.title + "'s: its " + trained.title +
              " classes would be scored against " + data.title + " labels. Evaluate it on " +
              trained.title + " (leave out --dataset, and give --data the " + trained.title +
              " folder), or pass --force to score it anyway");
}

Command add_evaluate_command(CLI::App& parent) {
  auto* cmd = add_subcommand(parent, "evaluate",
                             "test accuracy, loss and confusion matrix of a checkpoint");
  struct Options {
    std::string checkpoint, dataset, data, device = "auto", report;
    bool json = false, force = false;
    int threads = 1;
  };
  auto o = std::make_shared<Options>();
  add_checkpoint_option(*cmd, o->checkpoint);
  cmd->add_option("--dataset", o->dataset,
                  "data set of the test images (default: the one the checkpoint was trained on)")
      ->check(CLI::IsMember(dataset_names()));
  cmd->add_option("--data", o->data,
                  "data folder (default: $LENET5_DATA, else the data set's: data/mnist or "
                  "data/fashion-mnist)");
  cmd->add_flag("--force", o->force,
                "evaluate a checkpoint on a data set other than the one it was trained on");
  cmd->add_option("--device", o->device, "auto|gpu|cpu")->capture_default_str();
  add_threads_option(*cmd, o->threads);
  cmd->add_flag("--json", o->json, "print one JSON object instead of tables");
  cmd->add_option("--report", o->report,
                  "also write DIR/index.html with confusion.png (the confusion matrix) and "
                  "errors.png (the misclassified test images); DIR must be new, empty or an "
                  "earlier report, whose files are replaced")
      ->type_name("DIR");
  cmd->parse_complete_callback([o] { g_json_output = o->json; });
  return {cmd, [o]() {
            use_cpu_threads(o->threads);
            if (!o->report.empty()) check_report_folder(o->report);  // before the slow part
            DeviceStart device_start(o->device, /*warn_on_cpu_fallback=*/false);
            const Checkpoint checkpoint =
                device_start.overlapping([&] { return load_checkpoint(o->checkpoint); });
            const DatasetDescription& requested =
                find_dataset(o->dataset.empty() ? checkpoint.dataset : o->dataset);
            // Only the test split: the training split is six times larger and not needed here.
            const FoundTestSet found =
                device_start.overlapping([&] { return find_test_set(requested, o->data); });
            const Dataset& test = found.test;
            if (!o->force)
              refuse_other_dataset(checkpoint, o->checkpoint, *found.dataset, found.dir);
            const std::unique_ptr<Engine> engine = engine_for(checkpoint, device_start.wait());
            const Evaluation result = engine->evaluate(test);
            // The rows and columns are the checkpoint's classes: what its outputs mean.
            const DatasetDescription& classes = find_dataset(checkpoint.dataset);
            const std::string text = o->json
                                         ? format_evaluation_json(result, o->checkpoint, classes)
                                         : format_evaluation(result, classes);
            std::fputs(text.c_str(), stdout);
            if (!o->report.empty()) {
              write_evaluation_report(o->report, *engine, test, result, o->checkpoint, classes);
              spdlog::info("report: {}/{}", o->report, kReportIndexFile);
            }
            return 0;
          }};
}

const CommandRegistration kEvaluate{20, add_evaluate_command};

}  // namespace

}  // namespace lenet5::cli
