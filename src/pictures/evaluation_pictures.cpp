// The confusion matrix heat map and the gallery of misread test images.
#include "pictures/evaluation_pictures.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "core/error.hpp"
#include "pictures/colour.hpp"
#include "pictures/text.hpp"
#include "pictures/tiles.hpp"

namespace lenet5::pictures {
namespace {

constexpr int kMargin = 16, kTitleScale = 2, kLabelScale = 2;
constexpr int kCell = 56;       // confusion cell: four digits at scale 2 fit
constexpr int kDigitScale = 3;  // a 28x28 image drawn 84x84
constexpr int kMistakeCell = 116, kMistakeColumns = 10;  // "7->2 93%" at scale 2 is 100 wide

std::string percent(float probability) {
  char text[16];
  std::snprintf(text, sizeof text, "%.0f%%", 100.0 * double(probability));
  return text;
}

// A 28x28 MNIST image as ink on paper: 255 (ink) black, 0 (background) white.
Map paper_map(const std::vector<std::uint8_t>& image) {
  Map map(image.size());
  for (std::size_t i = 0; i < image.size(); ++i) map[i] = 1.0f - float(image[i]) / 255.0f;
  return map;
}

// Row k's heading: "3", or "3 Dress" where class 3 is not named "3".
std::string row_label(const std::vector<std::string>& class_names, int k) {
  const std::string number = std::to_string(k);
  return class_names.at(std::size_t(k)) == number ? number
                                                  : number + " " + class_names[std::size_t(k)];
}

void check_class_count(const std::vector<std::string>& class_names) {
  if (class_names.size() != 10)
    throw Error("internal: " + std::to_string(class_names.size()) + " class names, expected 10");
}

}  // namespace

std::string class_key(const std::vector<std::string>& class_names) {
  check_class_count(class_names);
  std::string key;
  bool numbered = true;
  for (int k = 0; k < 10; ++k) {
    numbered = numbered && row_label(class_names, k) == std::to_string(k);
    key += (k ? ", " : "") + row_label(class_names, k);
  }
  return numbered ? "" : key;
}

RgbImage confusion_picture(const ConfusionCounts& confusion,
                           const std::vector<std::string>& class_names) {
  check_class_count(class_names);
  std::int64_t largest = 0;
  for (const auto& row : confusion)
    for (std::int64_t count : row) largest = std::max(largest, count);
  const double log_largest = std::log1p(double(std::max<std::int64_t>(largest, 1)));

  int widest_label = text_width("true", kLabelScale);
  for (int t = 0; t < 10; ++t)
    widest_label = std::max(widest_label, text_width(row_label(class_names, t), kLabelScale));
  const int left = kMargin + widest_label + 12, top = kMargin + 30 + 50;
  const int legend_y = top + 10 * kCell + 20;
  RgbImage image(left + 10 * kCell + kMargin, legend_y + legend_height(14) + kMargin);
  draw_text(image, kMargin, kMargin, "Confusion matrix", kBlack, kTitleScale);
  draw_text_centred(image, left + 5 * kCell, top - 46, "predicted", kBlack, kLabelScale);
  draw_text(image, kMargin, top - 22, "true", kBlack, kLabelScale);
  for (int t = 0; t < 10; ++t) {
    draw_text_centred(image, left + t * kCell + kCell / 2, top - 22, std::to_string(t), kBlack,
                      kLabelScale);
    const std::string label = row_label(class_names, t);
    draw_text(image, left - 8 - text_width(label, kLabelScale), top + t * kCell + kCell / 2 - 7,
              label, kBlack, kLabelScale);
    for (int p = 0; p < 10; ++p) {
      const std::int64_t count = confusion[std::size_t(t)][std::size_t(p)];
      const double shade = std::log1p(double(count)) / log_largest;
      const int x = left + p * kCell, y = top + t * kCell;
      image.fill_rect(x, y, kCell, kCell, sequential(shade));
      image.outline_rect(x, y, kCell + 1, kCell + 1, Rgb{200, 200, 200});
      if (count > 0)
        draw_text_centred(image, x + kCell / 2, y + kCell / 2 - 7, std::to_string(count),
                          shade > 0.6 ? kWhite : kBlack, kLabelScale);
    }
  }
  draw_legend(image, left, legend_y, 200, 14, {0, double(largest)}, &sequential, 0, false);
  draw_text(image, left + 220, legend_y, "count (log scale)", kBlack, kLabelScale);
  return image;
}

RgbImage mistakes_picture(const std::vector<Mistake>& mistakes, int total_mistakes, int images,
                          const std::vector<std::string>& class_names) {
  const std::string key = class_key(class_names);
  const std::string key_line = key.empty() ? "" : "classes: " + key;
  const int shown = std::min<int>(int(mistakes.size()), kMaxMistakesShown);
  const int columns = std::max(1, std::min(kMistakeColumns, shown));
  const int rows = (shown + columns - 1) / columns;
  const int digit = 28 * kDigitScale, cell_h = digit + 30;
  const int top = kMargin + 50 + (key.empty() ? 0 : 24);
  std::string title = std::to_string(total_mistakes) + " of " + std::to_string(images) +
                      " test images misclassified";
  if (shown < total_mistakes) title += ", the " + std::to_string(shown) + " most confident shown";
  const std::string subtitle =
      "most confident first; label: true->predicted, probability of the prediction";
  const int text_wide = std::max({text_width(title, kTitleScale), text_width(subtitle, kLabelScale),
                                  text_width(key_line, kLabelScale)});
  RgbImage image(std::max(2 * kMargin + std::max(columns * kMistakeCell, text_wide), 640),
                 top + std::max(rows, 1) * cell_h + kMargin);
  draw_text(image, kMargin, kMargin, title, kBlack, kTitleScale);
  draw_text(image, kMargin, kMargin + 24, subtitle, Rgb{80, 80, 80}, kLabelScale);
  if (!key.empty()) draw_text(image, kMargin, kMargin + 48, key_line, kBlack, kLabelScale);
  for (int i = 0; i < shown; ++i) {
    const Mistake& m = mistakes[std::size_t(i)];
    if (m.image.size() != 28 * 28) throw Error("internal: a mistake's image is not 28x28");
    const int x = kMargin + (i % columns) * kMistakeCell + (kMistakeCell - digit) / 2;
    const int y = top + (i / columns) * cell_h;
    draw_tile(image, x, y, paper_map(m.image), 28, 28, kDigitScale, {0, 1}, &greyscale);
    image.outline_rect(x - 1, y - 1, digit + 2, digit + 2, Rgb{160, 160, 160});
    draw_text_centred(
        image, x + digit / 2, y + digit + 6,
        std::to_string(m.truth) + "->" + std::to_string(m.predicted) + " " + percent(m.probability),
        kBlack, kLabelScale);
  }
  return image;
}

}  // namespace lenet5::pictures
