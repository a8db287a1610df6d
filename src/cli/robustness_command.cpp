// lenet5 robustness --checkpoint F [--digits N] [--seed S] [--variants A,B,...]
//                   [--from test|validation] [--data D] [--save-images DIR] [--invert ...]
//                   [--device ...] [--threads N] [--json]
#include <spdlog/spdlog.h>

#include <cstdio>

#include "backend/backend.hpp"
#include "cli/commands.hpp"
#include "core/cpu_threads.hpp"
#include "core/error.hpp"
#include "data/mnist.hpp"
#include "robustness/renderings.hpp"
#include "robustness/robustness.hpp"
#include "train/evaluate.hpp"

namespace lenet5::cli {
namespace {

std::vector<std::string> variant_names() {
  std::vector<std::string> names;
  for (const robustness::Variant& v : robustness::variants()) names.push_back(v.name);
  return names;
}

// The digits to render: the test set, or the training images that `train` holds out for
// validation, which a change to the preprocessing can be tuned on without touching the test set.
Dataset digits_from(const std::string& from, const DatasetDescription& dataset,
                    const std::string& data_flag) {
  if (from == "test") return find_test_set(dataset, data_flag).test;
  Dataset train = load_split(dataset, resolve_data_dir(data_flag, dataset), Split::train);
  return hold_out_validation(std::move(train), kDefaultValidationImages).validation;
}

Command add_robustness_command(CLI::App& parent) {
  auto* cmd = add_subcommand(
      parent, "robustness",
      "read MNIST digits rendered as people's images (cropped tight, scanned small, light on "
      "dark, bold, blurred, JPEG, shadowed, coloured, rotated, in a photo) through classify's "
      "preprocessing: one row per variant with images, refused and accuracy");
  struct Options {
    std::string checkpoint, from = "test", data, device = "auto", invert = "auto", save;
    std::vector<std::string> variants;
    int digits = 2000, threads = 0;
    std::uint64_t seed = 1;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  o->threads = available_cpu_threads();
  add_checkpoint_option(*cmd, o->checkpoint);
  cmd->add_option("--digits", o->digits, "digits per variant (the same digits in every variant)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "which digits, and every random choice of the renderings")
      ->capture_default_str();
  cmd->add_option("--variants", o->variants, "the variants to run, comma-separated (default: all)")
      ->delimiter(',')
      ->check(CLI::IsMember(variant_names()));
  cmd->add_option("--from", o->from,
                  "test: MNIST's test digits; validation: the training digits `train` holds out "
                  "(tune on these, report on the test set)")
      ->check(CLI::IsMember({"test", "validation"}))
      ->capture_default_str();
  cmd->add_option("--data", o->data, "data folder (default: $LENET5_DATA, else data/mnist)");
  cmd->add_option("--save-images", o->save,
                  "also write every rendered image, DIR/VARIANT/NNNNN_D.png with a labels.csv")
      ->type_name("DIR");
  cmd->add_option("--invert", o->invert, "as classify's --invert: auto, yes or no")
      ->check(CLI::IsMember({"auto", "yes", "no"}))
      ->capture_default_str();
  cmd->add_option("--device", o->device, "auto|gpu|cpu")->capture_default_str();
  cmd->add_option("--threads", o->threads, "CPU threads that render and preprocess the images")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "print one JSON object instead of the table");
  cmd->parse_complete_callback([o] { g_json_output = o->json; });
  return {cmd, [o]() {
            use_cpu_threads(o->threads);
            DeviceStart device_start(o->device, /*warn_on_cpu_fallback=*/false);
            const Checkpoint checkpoint =
                device_start.overlapping([&] { return load_checkpoint(o->checkpoint); });
            const DatasetDescription& dataset = find_dataset(checkpoint.dataset);
            if (dataset.name != mnist_dataset().name)
              throw UsageError("the robustness suite renders handwritten digits; checkpoint " +
                               o->checkpoint + " was trained on " + dataset.title);
            const Dataset digits =
                device_start.overlapping([&] { return digits_from(o->from, dataset, o->data); });
            const std::unique_ptr<Engine> engine = engine_for(checkpoint, device_start.wait());
            robustness::SuiteOptions options;
            options.digits = o->digits;
            options.seed = o->seed;
            options.variants = o->variants;
            options.invert = parse_invert_mode(o->invert);
            options.save_images = o->save;
            const robustness::SuiteReport report =
                robustness::run_suite(*engine, digits, o->from, options);
            const std::string text = o->json ? robustness::format_report_json(report)
                                             : robustness::format_report(report);
            std::fputs(text.c_str(), stdout);
            return 0;
          }};
}

const CommandRegistration kRobustness{32, add_robustness_command};

}  // namespace

}  // namespace lenet5::cli
