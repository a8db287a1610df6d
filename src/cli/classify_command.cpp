// lenet5 classify --checkpoint F IMAGE... [--json] [--top K] [--invert auto|yes|no]
#include <spdlog/spdlog.h>

#include <cstdio>

#include "backend/backend.hpp"
#include "cli/commands.hpp"
#include "core/cpu_threads.hpp"
#include "train/evaluate.hpp"

namespace lenet5::cli {
namespace {

Command add_classify_command(CLI::App& parent) {
  auto* cmd = add_subcommand(parent, "classify",
                             "recognise the digit (or the Fashion-MNIST item, with a checkpoint "
                             "trained on it) in image files (PNG, JPEG, BMP, ...)");
  struct Options {
    std::string checkpoint, device = "auto", invert = "auto", save;
    std::vector<std::string> images;
    bool json = false;
    int top = 1, threads = 1;
  };
  auto o = std::make_shared<Options>();
  add_checkpoint_option(*cmd, o->checkpoint);
  cmd->add_option("images", o->images, "image files")->required();
  cmd->add_flag("--json", o->json, "print a JSON array, one object per image");
  cmd->add_option("--top", o->top, "also list the K most likely classes")
      ->check(CLI::Range(1, 10))
      ->capture_default_str();
  cmd->add_option("--invert", o->invert,
                  "auto: invert dark-on-light images (MNIST digits are light on dark); yes; no")
      ->check(CLI::IsMember({"auto", "yes", "no"}))
      ->capture_default_str();
  cmd->add_option("--save-preprocessed", o->save,
                  "write the 28x28 image the network saw (a file; a folder for several images)");
  cmd->add_option("--device", o->device, "auto|gpu|cpu")->capture_default_str();
  add_threads_option(*cmd, o->threads);
  cmd->parse_complete_callback([o] { g_json_output = o->json; });
  return {cmd, [o]() {
            use_cpu_threads(o->threads);
            ClassifyOptions options;
            options.invert = parse_invert_mode(o->invert);
            options.save_preprocessed = o->save;
            if (!o->save.empty() && o->images.size() > 1)
              std::filesystem::create_directories(o->save);
            // The device first: a request that cannot run anywhere is said before the files.
            const Device device = resolve_device(o->device, false);
            const Checkpoint checkpoint = load_checkpoint(o->checkpoint);
            options.output = checkpoint.net.output;
            const auto engine = engine_for(checkpoint, device);
            const auto results = classify_images(*engine, o->images, options);
            const DatasetDescription& dataset = find_dataset(checkpoint.dataset);
            int failures = 0;
            for (const auto& r : results) {
              if (!r.error.empty()) {
                ++failures;
                spdlog::error("{}", r.error);
              }
              if (!o->json && r.error.empty())
                std::fputs(format_classification(r, o->top, dataset).c_str(), stdout);
            }
            if (o->json)
              std::fputs(format_classifications_json(results, o->top, dataset).c_str(), stdout);
            return failures == 0 ? 0 : 1;
          }};
}

const CommandRegistration kClassify{30, add_classify_command};

}  // namespace

}  // namespace lenet5::cli
