// lenet5 figures [ID...] [--out DIR] [--device auto|gpu|cpu] [--list]
//                [--cudnn-table2 paper|convnet-benchmarks] [--lecun98-runs DIR]
#include <iostream>

#include "cli/commands.hpp"
#include "figures/figures.hpp"
#include "figures/paper_math.hpp"

namespace lenet5::cli {
namespace {

Command add_figures_command(CLI::App& parent) {
  auto* cmd = add_subcommand(
      parent, "figures",
      "reproduce and check the book chapter's figures, listings, errata and tables");
  struct Options {
    figures::FiguresOptions figures;
    std::string out = figures::FiguresOptions().out.string();  // as a string: CLI11 shows it as is
    bool list = false;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("ids", o->figures.ids,
                  "targets to run, e.g. fig16.14 cudnn.tab3 (default: all; --list shows them)");
  cmd->add_option("--out", o->out, "folder for the tables (Markdown, CSV) and pictures (PNG)")
      ->capture_default_str();
  cmd->add_option("--device", o->figures.device,
                  "auto|gpu|cpu: GPU targets run on a GPU, and are skipped with cpu or without one")
      ->capture_default_str();
  cmd->add_option("--cudnn-table2", o->figures.settings.cudnn_table2,
                  "paper|convnet-benchmarks: the Table 2 rows cudnn.tab3 times, as printed in the "
                  "cuDNN paper or with the C of the benchmark it cites (64 for layer 2, 384 for "
                  "layer 5; D04)")
      ->check(CLI::IsMember(figures::cudnn_row_set_names()))
      ->capture_default_str();
  cmd->add_option("--lecun98-runs", o->figures.settings.lecun98_runs,
                  "runs of configs/lecun1998.toml that lecun98.fig5 draws: a run folder, or a "
                  "folder of run folders such as `lenet5 sweep`'s (without it lecun98.fig5 is "
                  "skipped)");
  cmd->add_flag("--list", o->list, "list the targets and exit");
  return {cmd, [o]() {
            if (o->list) {
              figures::list_targets(std::cout);
              return 0;
            }
            o->figures.out = o->out;
            return figures::run_figures(o->figures, std::cout);
          }};
}

const CommandRegistration kFigures{50, add_figures_command};

}  // namespace

}  // namespace lenet5::cli
