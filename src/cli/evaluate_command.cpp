// lenet5 evaluate --checkpoint F [--data D] [--device ...] [--json] [--report DIR]
#include <spdlog/spdlog.h>

#include <cstdio>

#include "backend/backend.hpp"
#include "cli/commands.hpp"
#include "core/cpu_threads.hpp"
#include "data/mnist.hpp"
#include "train/evaluate.hpp"
#include "train/evaluation_report.hpp"

namespace lenet5::cli {
namespace {

Command add_evaluate_command(CLI::App& parent) {
  auto* cmd = add_subcommand(parent, "evaluate",
                             "test accuracy, loss and confusion matrix of a checkpoint");
  struct Options {
    std::string checkpoint, data, device = "auto", report;
    bool json = false;
    int threads = 1;
  };
  auto o = std::make_shared<Options>();
  add_checkpoint_option(*cmd, o->checkpoint);
  cmd->add_option("--data", o->data, "MNIST folder (default: $LENET5_DATA or data/mnist)");
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
            // Only the test split: the training split is six times larger and not needed here.
            const Dataset test = device_start.overlapping(
                [&] { return load_split(mnist_dataset(), resolve_data_dir(o->data), Split::test); });
            const std::unique_ptr<Engine> engine = engine_for(checkpoint, device_start.wait());
            const Evaluation result = engine->evaluate(test);
            const std::string text =
                o->json ? format_evaluation_json(result, o->checkpoint) : format_evaluation(result);
            std::fputs(text.c_str(), stdout);
            if (!o->report.empty()) {
              write_evaluation_report(o->report, *engine, test, result, o->checkpoint);
              spdlog::info("report: {}/{}", o->report, kReportIndexFile);
            }
            return 0;
          }};
}

const CommandRegistration kEvaluate{20, add_evaluate_command};

}  // namespace

}  // namespace lenet5::cli
