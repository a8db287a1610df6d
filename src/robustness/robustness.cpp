// The robustness suite (robustness.hpp): render, decode, preprocess and classify each variant's
// images, and count.
#include "robustness/robustness.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "image/image_io.hpp"
#include "io/atomic_file.hpp"
#include "robustness/renderings.hpp"

namespace lenet5::robustness {
namespace {

// What one rendered image became on its way to the network: the 28x28 digit, or the refusal.
struct Prepared {
  std::optional<Digit28> digit;
  std::string refusal;
};

// The digits to read: a seeded sample of the source, in the sample's order.
std::vector<int> chosen_digits(int count, int available, std::uint64_t seed) {
  if (count < 1)
    throw UsageError("--digits must be at least 1 (got " + std::to_string(count) + ")");
  const std::vector<std::int32_t> order =
      epoch_permutation(stream_seed(seed, RngStream::robustness, 0), 0, available);
  return {order.begin(), order.begin() + std::min(count, available)};
}

std::vector<const Variant*> chosen_variants(const std::vector<std::string>& names) {
  std::vector<const Variant*> chosen;
  if (names.empty()) {
    for (const Variant& v : variants()) chosen.push_back(&v);
  }
  for (const std::string& name : names) chosen.push_back(&find_variant(name));
  return chosen;
}

// The refusal's reason without the file's name, which lenet5::Error messages begin with, so that
// refusals of many files count together.
std::string reason_of(const std::string& message, const std::string& name) {
  const bool named = message.compare(0, name.size(), name) == 0;
  std::string reason = named ? message.substr(name.size()) : message;
  const std::size_t start = reason.find_first_not_of(" :");
  return start == std::string::npos ? reason : reason.substr(start);
}

std::string file_name(int index, int label, const RenderedImage& image) {
  return fmt::format("{:05d}_{}.{}", index, label, image.extension);
}

// Decoded and preprocessed as `lenet5 classify` does a file of these bytes (image_io.hpp reads
// files and uploads through the same decoding from memory).
Prepared prepare(const RenderedImage& image, const std::string& name, InvertMode invert) {
  Prepared p;
  try {
    p.digit = preprocess_digit(decode_gray_image(image.bytes, kMaxImageSide, name), invert, name);
  } catch (const Error& e) {
    p.refusal = reason_of(e.what(), name);
  }
  return p;
}

VariantResult run_variant(Engine& engine, const Variant& variant, const Dataset& source,
                          const std::vector<int>& digits, const SuiteOptions& options) {
  const int n = static_cast<int>(digits.size());
  std::vector<Prepared> prepared(static_cast<std::size_t>(n));
  const std::filesystem::path folder = options.save_images / variant.name;
  if (!options.save_images.empty()) std::filesystem::create_directories(folder);
  std::vector<std::string> saved(static_cast<std::size_t>(n));
  // Each image depends only on its own seed, so the threads' order changes nothing. Errors other
  // than a refusal (a full disk while saving) are carried out of the loop, which must not throw.
  std::vector<std::string> failures(static_cast<std::size_t>(n));
#pragma omp parallel for schedule(dynamic, 8)
  for (int i = 0; i < n; ++i) {
    const std::size_t k = static_cast<std::size_t>(i);
    try {
      const int index = digits[k];
      const std::uint8_t* pixels = &source.images[static_cast<std::size_t>(index) * kImageBytes];
      const RenderedImage image =
          variant.render(pixels, rendering_seed(options.seed, variant.name, index));
      const std::string name =
          file_name(index, source.labels[static_cast<std::size_t>(index)], image);
      if (!options.save_images.empty()) {
        write_file_atomically(folder / name, image.bytes);
        saved[k] = name;
      }
      prepared[k] = prepare(image, name, options.invert);
    } catch (const std::exception& e) {
      failures[k] = e.what();
    }
  }
  for (const std::string& failure : failures) {
    if (!failure.empty()) throw Error("robustness variant '" + variant.name + "': " + failure);
  }

  VariantResult result{variant.name, variant.description, n, 0, 0, 0, {}};
  std::vector<std::uint8_t> batch;
  std::vector<int> labels;
  for (std::size_t k = 0; k < prepared.size(); ++k) {
    if (!prepared[k].digit) {
      ++result.refused;
      ++result.refusal_reasons[prepared[k].refusal];
      continue;
    }
    result.wrong_polarity += prepared[k].digit->inverted != variant.dark_ink;
    batch.insert(batch.end(), prepared[k].digit->pixels.begin(), prepared[k].digit->pixels.end());
    labels.push_back(source.labels[static_cast<std::size_t>(digits[k])]);
  }
  std::vector<std::int32_t> predicted;
  if (!labels.empty()) engine.classify(batch.data(), static_cast<int>(labels.size()), predicted);
  for (std::size_t k = 0; k < labels.size(); ++k) result.correct += predicted[k] == labels[k];
  if (!options.save_images.empty()) {
    std::string csv = "file,digit\n";
    for (std::size_t k = 0; k < saved.size(); ++k) {
      csv += fmt::format("{},{}\n", saved[k], source.labels[static_cast<std::size_t>(digits[k])]);
    }
    write_file_atomically(folder / "labels.csv", csv);
  }
  return result;
}

int plain_correct(Engine& engine, const Dataset& source, const std::vector<int>& digits) {
  std::vector<std::uint8_t> batch;
  for (const int index : digits) {
    const auto* pixels = &source.images[static_cast<std::size_t>(index) * kImageBytes];
    batch.insert(batch.end(), pixels, pixels + kImageBytes);
  }
  std::vector<std::int32_t> predicted;
  engine.classify(batch.data(), static_cast<int>(digits.size()), predicted);
  int correct = 0;
  for (std::size_t k = 0; k < digits.size(); ++k) {
    correct += predicted[k] == source.labels[static_cast<std::size_t>(digits[k])];
  }
  return correct;
}

std::string percent(int part, int whole) {
  return whole ? fmt::format("{:.2f}", 100.0 * part / whole) : "-";
}

// The reasons, most common first: "12 x is blank: ...; 3 x ...".
std::string reasons_text(const std::map<std::string, int>& reasons) {
  std::vector<std::pair<std::string, int>> sorted(reasons.begin(), reasons.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string text;
  for (const auto& [reason, count] : sorted) {
    text += fmt::format("{}{} x {}", text.empty() ? "" : "; ", count, reason);
  }
  return text;
}

}  // namespace

SuiteReport run_suite(Engine& engine, const Dataset& source, const std::string& source_name,
                      const SuiteOptions& options) {
  const std::vector<const Variant*> chosen = chosen_variants(options.variants);
  const std::vector<int> digits = chosen_digits(options.digits, source.count, options.seed);
  SuiteReport report;
  report.digits = static_cast<int>(digits.size());
  report.seed = options.seed;
  report.source = source_name;
  report.plain_correct = plain_correct(engine, source, digits);
  for (const Variant* variant : chosen) {
    const auto start = std::chrono::steady_clock::now();
    report.variants.push_back(run_variant(engine, *variant, source, digits, options));
    const VariantResult& r = report.variants.back();
    spdlog::info("{:<15} {:>5} images  {:>4} refused  {:>6}% read right  ({:.1f} s)", r.name,
                 r.images, r.refused, percent(r.correct, r.images),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return report;
}

std::string format_report(const SuiteReport& report) {
  std::string out = fmt::format(
      "{} {} digits (seed {}) read as plain 28x28 images: {}% right\n\n"
      "{:<15} {:>6} {:>8} {:>9} {:>9}  {}\n",
      report.digits, report.source, report.seed, percent(report.plain_correct, report.digits),
      "variant", "images", "refused", "accuracy", "polarity", "rendered as");
  for (const VariantResult& r : report.variants) {
    out += fmt::format("{:<15} {:>6} {:>8} {:>8}% {:>9}  {}\n", r.name, r.images, r.refused,
                       percent(r.correct, r.images),
                       r.wrong_polarity ? fmt::format("{} wrong", r.wrong_polarity) : "right",
                       r.description);
  }
  for (const VariantResult& r : report.variants) {
    if (r.refused) out += fmt::format("\n{} refused: {}", r.name, reasons_text(r.refusal_reasons));
  }
  return out + (std::any_of(report.variants.begin(), report.variants.end(),
                            [](const VariantResult& r) { return r.refused > 0; })
                    ? "\n"
                    : "");
}

std::string format_report_json(const SuiteReport& report) {
  nlohmann::json json;
  json["digits"] = report.digits;
  json["seed"] = report.seed;
  json["source"] = report.source;
  json["plain_accuracy"] = report.plain_accuracy();
  json["variants"] = nlohmann::json::array();
  for (const VariantResult& r : report.variants) {
    json["variants"].push_back({{"name", r.name},
                                {"description", r.description},
                                {"images", r.images},
                                {"refused", r.refused},
                                {"correct", r.correct},
                                {"wrong_polarity", r.wrong_polarity},
                                {"accuracy", r.accuracy()},
                                {"refusal_reasons", r.refusal_reasons}});
  }
  return json.dump() + "\n";
}

}  // namespace lenet5::robustness
