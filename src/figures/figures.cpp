// The figure targets' frame: tables as Markdown and CSV, labelled blocks with their checks, and
// the run of the chosen targets with its summary.
#include "figures/figures.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <ostream>
#include <set>

#include "core/device.hpp"
#include "core/error.hpp"
#include "cuda/runtime/runtime.hpp"
#include "figures/paper_math.hpp"
#include "pictures/image.hpp"

namespace lenet5::figures {
namespace {

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream file(path);
  file << text;
  if (!file) throw Error("cannot write " + path.string() + ": check the --out folder");
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char ch : text) quoted += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return quoted + "\"";
}

}  // namespace

std::string Table::markdown() const {
  std::string out = "|";
  for (const auto& c : columns) out += " " + c + " |";
  out += "\n|";
  for (std::size_t i = 0; i < columns.size(); ++i) out += "---|";
  out += "\n";
  for (const auto& row : rows) {
    out += "|";
    for (const auto& cell : row) out += " " + cell + " |";
    out += "\n";
  }
  return out;
}

std::string Table::csv() const {
  std::string out;
  for (std::size_t i = 0; i < columns.size(); ++i) out += (i ? "," : "") + csv_field(columns[i]);
  out += "\n";
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < row.size(); ++i) out += (i ? "," : "") + csv_field(row[i]);
    out += "\n";
  }
  return out;
}

std::string fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

std::string grouped(long long value) {
  std::string digits = std::to_string(value < 0 ? -value : value), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

Block::Block(std::ostream& out, std::filesystem::path folder, TargetSettings settings)
    : m_out(out), m_folder(std::move(folder)), m_settings(std::move(settings)) {}

void Block::line(const std::string& text) { m_out << "  " << text << "\n"; }

void Block::table(const std::string& name, const Table& table) {
  std::filesystem::create_directories(m_folder);
  const std::string md = table.markdown();
  std::string indented;
  for (std::size_t start = 0; start < md.size();) {
    const std::size_t end = md.find('\n', start);
    indented += "  " + md.substr(start, end - start) + "\n";
    start = end + 1;
  }
  m_out << indented;
  write_text(m_folder / (name + ".md"), md);
  write_text(m_folder / (name + ".csv"), table.csv());
}

void Block::png(const std::string& name, const std::vector<double>& matrix, int rows, int cols,
                double lo, double hi, int scale) {
  if (rows < 1 || cols < 1 || scale < 1 || matrix.size() != std::size_t(rows) * cols)
    throw Error("internal: png '" + name + "' has inconsistent sizes");
  std::filesystem::create_directories(m_folder);
  const int width = cols * scale, height = rows * scale;
  std::vector<std::uint8_t> pixels(std::size_t(width) * height);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      const double v = matrix[std::size_t(y / scale) * cols + x / scale];
      const double t = hi > lo ? (v - lo) / (hi - lo) : 0.5;
      pixels[std::size_t(y) * width + x] =
          static_cast<unsigned char>(255.0 * (t < 0 ? 0 : t > 1 ? 1 : t) + 0.5);
    }
  const std::filesystem::path path = m_folder / (name + ".png");
  pictures::write_gray_png(path, width, height, pixels);
  line("picture: " + path.string());
}

void Block::svg(const std::string& name, const std::string& document) {
  std::filesystem::create_directories(m_folder);
  const std::filesystem::path path = m_folder / (name + ".svg");
  write_text(path, document);
  line("picture: " + path.string());
}

bool Block::check(const std::string& what, bool ok, const std::string& detail) {
  ++m_checks;
  if (!ok) ++m_failures;
  m_out << "  check " << what << ": " << (ok ? "ok" : "FAILED") << (ok || detail.empty() ? "" : " (" + detail + ")")
        << "\n";
  return ok;
}

void Block::skip(const std::string& reason) { m_skip_reason = reason; }

std::vector<Target> all_targets() {
  std::vector<Target> all;
  for (auto part :
       {chapter_cpu_targets(), paper_cpu_targets(), lecun98_cpu_targets(), gpu_targets()})
    for (auto& target : part) all.push_back(std::move(target));
  return all;
}

void list_targets(std::ostream& out) {
  for (const Target& t : all_targets())
    out << t.id << "  " << (t.needs_gpu ? "GPU" : "CPU") << "  " << t.title << " (" << t.section
        << ")"
        << (t.needs_gpu && !cuda::gpu_available_in_build() ? " [needs a build with GPU support]"
                                                           : "")
        << "\n";
}

int run_figures(const FiguresOptions& options, std::ostream& out) {
  return run_figures(options, all_targets(), out);
}

int run_figures(const FiguresOptions& options, const std::vector<Target>& targets,
                std::ostream& out) {
  std::set<std::string> known;
  for (const Target& t : targets) known.insert(t.id);
  std::string unknown;
  for (const std::string& id : options.ids)
    if (!known.count(id)) unknown += (unknown.empty() ? "" : ", ") + id;
  if (!unknown.empty())
    throw UsageError("unknown figure target(s) " + unknown + "; `lenet5 figures --list` lists them");
  if (options.device != "auto" && options.device != "gpu" && options.device != "cpu")
    throw UsageError("--device must be auto, gpu or cpu");
  (void)cudnn_row_set(options.settings.cudnn_table2);  // a UsageError listing the accepted names

  std::string no_gpu;  // why GPU targets are skipped ("" when they run)
  if (options.device == "cpu")
    no_gpu = "--device cpu";
  else if (!cuda::gpu_available_in_build())
    no_gpu = cuda::kBuiltWithoutGpu;
  else if (cuda::device_count() == 0)
    no_gpu = "no usable CUDA device";
  if (options.device == "gpu" && !cuda::gpu_available_in_build())
    throw UsageError(std::string("--device gpu: ") + cuda::kBuiltWithoutGpu);
  if (options.device == "gpu" && !no_gpu.empty())
    throw Error("--device gpu: " + no_gpu + "; use --device cpu to run the CPU targets only");

  std::filesystem::create_directories(options.out);
  int passed = 0, failed = 0, skipped = 0;
  Table summary{{"target", "outcome", "checks", "title"}, {}};
  for (const Target& t : targets) {
    if (!options.ids.empty() &&
        std::find(options.ids.begin(), options.ids.end(), t.id) == options.ids.end())
      continue;
    const bool in_spec = t.section.rfind("§", 0) == 0;  // a section of textbook-figures.md
    out << "== " << t.id << ": " << t.title << " (" << (in_spec ? "textbook-figures.md " : "")
        << t.section << ")\n";
    Block block(out, options.out / t.id, options.settings);
    if (t.needs_gpu && !no_gpu.empty()) {
      block.skip(no_gpu);
    } else {
      try {
        t.run(block);
      } catch (const std::exception& e) {
        block.check("runs to completion", false, e.what());
      }
    }
    std::string outcome;
    if (block.skipped()) {
      outcome = "SKIPPED";
      ++skipped;
      out << "SKIPPED " << t.id << ": " << block.skip_reason() << "\n\n";
    } else if (block.failures() > 0 || block.checks() == 0) {
      outcome = "FAIL";  // a target that checked nothing has shown nothing
      ++failed;
      out << "FAIL " << t.id << " (" << block.failures() << " of " << block.checks()
          << " checks failed)\n\n";
    } else {
      outcome = "PASS";
      ++passed;
      out << "PASS " << t.id << " (" << block.checks() << " checks)\n\n";
    }
    summary.add({t.id, outcome, std::to_string(block.checks()), t.title});
  }
  write_text(options.out / "summary.md", summary.markdown());
  write_text(options.out / "summary.csv", summary.csv());
  out << "figures: " << passed << " passed, " << failed << " failed, " << skipped << " skipped; "
      << "tables under " << options.out.string() << "\n";
  return failed > 0 ? 1 : 0;
}

}  // namespace lenet5::figures
