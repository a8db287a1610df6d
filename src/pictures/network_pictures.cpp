// The C1 filters side by side and the C3 filters laid out as the C3 table, in the diverging map.
#include "pictures/network_pictures.hpp"

#include <algorithm>
#include <string>

#include "core/error.hpp"
#include "pictures/colour.hpp"
#include "pictures/text.hpp"
#include "pictures/tiles.hpp"

namespace lenet5::pictures {
namespace {

constexpr int kTitleScale = 2, kLabelScale = 2;
constexpr int kMargin = 16;
constexpr int kLegendWidth = 240, kLegendBar = 14;

// Filter `filter` over input map `input` of a (filters, inputs, k, k) weight tensor.
Map filter_map(const ParamSpec& tensor, const std::vector<float>& parameters, int filter,
               int input) {
  const int inputs = int(tensor.shape.at(1)), k = int(tensor.shape.at(2));
  const std::size_t first =
      tensor.offset + (std::size_t(filter) * std::size_t(inputs) + std::size_t(input)) * k * k;
  return Map(parameters.begin() + std::ptrdiff_t(first),
             parameters.begin() + std::ptrdiff_t(first + std::size_t(k) * k));
}

std::vector<float> weights_of(const ParamSpec& tensor, const std::vector<float>& parameters) {
  if (parameters.size() < tensor.offset + tensor.count)
    throw Error("internal: the parameters end before " + tensor.name);
  return {parameters.begin() + std::ptrdiff_t(tensor.offset),
          parameters.begin() + std::ptrdiff_t(tensor.offset + tensor.count)};
}

// The legend and its caption below everything at height `y` of `image`.
void draw_weight_legend(RgbImage& image, int y, const ValueRange& range,
                        const std::string& caption) {
  draw_legend(image, kMargin, y, kLegendWidth, kLegendBar, range, &diverging, 3, true);
  draw_text(image, kMargin + kLegendWidth + 16, y, caption, kBlack, kLabelScale);
}

}  // namespace

RgbImage c1_filters_picture(const ParamLayout& layout, const std::vector<float>& parameters) {
  const ParamSpec& c1 = layout.find("c1.weight");  // (6, 1, 5, 5)
  const int filters = int(c1.shape.at(0)), k = int(c1.shape.at(2));
  const TileGrid grid{filters, filters, k, k, 16, 12};
  std::vector<Map> maps;
  for (int f = 0; f < filters; ++f) maps.push_back(filter_map(c1, parameters, f, 0));
  const ValueRange range = symmetric_range(weights_of(c1, parameters));

  const int title_h = 40, grid_y = kMargin + title_h, labels_h = 24;
  const int legend_y = grid_y + grid.height() + labels_h + 8;
  RgbImage image(std::max(kMargin * 2 + grid.width(), 2 * kMargin + kLegendWidth + 200),
                 legend_y + legend_height(kLegendBar) + kMargin);
  draw_text(image, kMargin, kMargin, "C1 filters: 6 x 5x5 over the input", kBlack, kTitleScale);
  for (int f = 0; f < filters; ++f) {
    const int x = kMargin + grid.tile_x(f), y = grid_y + grid.tile_y(f);
    draw_tile(image, x, y, maps[std::size_t(f)], k, k, grid.scale, range, &diverging);
    draw_text_centred(image, x + grid.tile_width() / 2, y + grid.tile_height() + 6,
                      std::to_string(f), kBlack, kLabelScale);
  }
  draw_weight_legend(image, legend_y, range, "weight");
  return image;
}

RgbImage c3_filters_picture(const ParamLayout& layout, const NetConfig& net,
                            const std::vector<float>& parameters) {
  const ParamSpec& c3 = layout.find("c3.weight");  // (16, 6, 5, 5)
  const int outputs = int(c3.shape.at(0)), inputs = int(c3.shape.at(1)), k = int(c3.shape.at(2));
  const std::vector<float> mask = c3_weight_mask(net);  // (16, 6, 5, 5), 1 where connected
  // Row i (S2 map i), column j (C3 map j): tile i * outputs + j, as in Table I.
  const TileGrid grid{outputs * inputs, outputs, k, k, 8, 6};
  std::vector<Map> maps;
  for (int i = 0; i < inputs; ++i)
    for (int j = 0; j < outputs; ++j) {
      const bool connected = mask.at((std::size_t(j) * inputs + i) * k * k) != 0.0f;
      maps.push_back(connected ? filter_map(c3, parameters, j, i) : Map{});
    }
  const ValueRange range = symmetric_range(weights_of(c3, parameters));

  const int left = kMargin + 56, top = kMargin + 40 + 40;  // room for the row and column labels
  const int legend_y = top + grid.height() + 16;
  RgbImage image(left + grid.width() + kMargin, legend_y + legend_height(kLegendBar) + kMargin);
  draw_text(image, kMargin, kMargin,
            std::string("C3 filters (") + to_string(net.c3_table) + " table): 16 maps x 6 inputs",
            kBlack, kTitleScale);
  draw_text(image, left, top - 40, "C3 map ->", kBlack, kLabelScale);
  draw_text(image, kMargin, top - 18, "S2", kBlack, kLabelScale);
  for (int t = 0; t < grid.count; ++t)
    draw_tile(image, left + grid.tile_x(t), top + grid.tile_y(t), maps[std::size_t(t)], k, k,
              grid.scale, range, &diverging);
  for (int j = 0; j < outputs; ++j)
    draw_text_centred(image, left + grid.tile_x(j) + grid.tile_width() / 2, top - 16,
                      std::to_string(j), kBlack, kLabelScale);
  for (int i = 0; i < inputs; ++i)
    draw_text(image, left - 24, top + grid.tile_y(i * outputs) + grid.tile_height() / 2 - 7,
              std::to_string(i), kBlack, kLabelScale);
  draw_weight_legend(image, legend_y, range,
                     net.c3_table == C3Table::full ? "weight" : "weight; grey: not connected");
  return image;
}

}  // namespace lenet5::pictures
