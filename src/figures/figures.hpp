// `lenet5 figures`: the book chapter's figures, listings and tables, and the cuDNN paper's, the
// CUTLASS blog's and the ZF-Net report's checkable items, reproduced and checked
// (../shared/docs/textbook-figures.md is the specification; each target names its section).
//
// A target prints one labelled block: what it computes, tables, and checks, and ends with PASS,
// FAIL or SKIPPED (a GPU target on a machine without a GPU, with the reason). Tables are also
// written as Markdown and CSV (and pictures as PNG) under the output folder, one folder per
// target. The command's exit code is 1 if any target failed.
#pragma once

#include <filesystem>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "train/run_folder.hpp"

namespace lenet5::figures {

// A small table: printed as Markdown, written as .md and .csv.
struct Table {
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;

  void add(std::vector<std::string> row) { rows.push_back(std::move(row)); }
  std::string markdown() const;
  std::string csv() const;
};

// Fixed-point text of a number ("%.<decimals>f"); integers print without decimals when 0.
std::string fixed(double value, int decimals);
// "1,234,567".
std::string grouped(long long value);

// Settings of a run that targets may read (Block::settings()), from the command line. Only the
// targets that name a field here read it; every other target runs the same whatever they are.
struct TargetSettings {
  // The Table 2 rows that cudnn.tab3 times (--cudnn-table2): "paper" (as printed) or
  // "convnet-benchmarks" (the cited benchmark's C; §3.4 caveat, D04). paper_math.hpp's
  // cudnn_row_set() resolves the name and lists the accepted ones.
  std::string cudnn_table2 = "paper";
  // The runs lecun98.fig5 reads (--lecun98-runs): a run folder, or a folder of run folders such
  // as a sweep's. Empty: the target is skipped, saying how to make them.
  std::filesystem::path lecun98_runs;
};

// What a target writes to: the terminal block, its files, and its checks' outcomes; and the run's
// settings it may read.
class Block {
 public:
  Block(std::ostream& out, std::filesystem::path folder, TargetSettings settings = {});

  // A line of the block (indented under its header).
  void line(const std::string& text);
  // Prints the table and writes <folder>/<name>.md and <name>.csv.
  void table(const std::string& name, const Table& table);
  // Writes a grey-scale PNG of a rows x cols matrix (row-major), each cell `scale` pixels wide,
  // values mapped linearly from [lo, hi] to black..white; prints the file's path.
  void png(const std::string& name, const std::vector<double>& matrix, int rows, int cols,
           double lo, double hi, int scale = 16);
  // Writes <folder>/<name>.svg (a pictures/svg_chart.hpp document); prints the file's path.
  void svg(const std::string& name, const std::string& document);
  // Records one check: prints "check <what>: ok" or "check <what>: FAILED (<detail>)".
  // Returns ok, so that a target can stop after a failure it cannot go on from.
  bool check(const std::string& what, bool ok, const std::string& detail = "");
  // The target cannot run here (a GPU target without a GPU): the block ends SKIPPED.
  void skip(const std::string& reason);

  int failures() const { return m_failures; }
  int checks() const { return m_checks; }
  bool skipped() const { return !m_skip_reason.empty(); }
  const std::string& skip_reason() const { return m_skip_reason; }
  const std::filesystem::path& folder() const { return m_folder; }
  const TargetSettings& settings() const { return m_settings; }

 private:
  std::ostream& m_out;
  std::filesystem::path m_folder;
  TargetSettings m_settings;
  int m_failures = 0;
  int m_checks = 0;
  std::string m_skip_reason;
};

struct Target {
  std::string id;       // "fig16.14", "cudnn.tab3", ...
  std::string title;    // one line
  // Where textbook-figures.md specifies it, "§1.13"; or, not starting with "§", the source
  // itself ("LeCun et al. 1998 §III.C").
  std::string section;
  bool needs_gpu;       // run() is not called without a usable GPU; the block says SKIPPED
  std::function<void(Block&)> run;
};

// The targets of each source file, in the order of the specification; all_targets() joins them.
std::vector<Target> chapter_cpu_targets();  // src/figures/chapter_targets.cpp
std::vector<Target> paper_cpu_targets();    // src/figures/paper_targets.cpp
std::vector<Target> lecun98_cpu_targets();  // src/figures/lecun98_targets.cpp (from run folders)
std::vector<Target> gpu_targets();          // src/figures/gpu_targets.cpp
// The same targets' ids, titles and sections, each of whose run() throws the UsageError of a build
// without GPU support: gpu_targets() in such a build (src/figures/gpu_target_list.cpp).
std::vector<Target> gpu_target_list();
std::vector<Target> all_targets();

struct FiguresOptions {
  std::vector<std::string> ids;  // empty: every target
  // Inside runs/, which git ignores, beside the training runs.
  std::filesystem::path out = std::filesystem::path(kRunsFolder) / "figures";
  // auto|gpu|cpu: cpu (or auto without a GPU, or a build without GPU support) skips GPU targets
  std::string device = "auto";
  TargetSettings settings;      // handed to every target's Block
};

// Runs the chosen targets and prints a summary; returns the exit code (0 when nothing failed).
// Unknown ids and unknown settings' values are UsageErrors naming them (and --list, or the
// accepted values).
int run_figures(const FiguresOptions& options, std::ostream& out);
// The same over the given targets instead of all_targets() (tests run stand-in targets).
int run_figures(const FiguresOptions& options, const std::vector<Target>& targets,
                std::ostream& out);
// One line per target: id, GPU or CPU, title (and, for a GPU target in a build without GPU
// support, that it needs a build with it).
void list_targets(std::ostream& out);

}  // namespace lenet5::figures
