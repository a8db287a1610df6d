// Tiling maps into one picture with integer upscaling, gaps and a colour legend.
#include "pictures/tiles.hpp"

#include <cstdio>
#include <string>

#include "core/error.hpp"
#include "pictures/text.hpp"

namespace lenet5::pictures {
namespace {

constexpr int kLegendTextScale = 2;
constexpr int kLegendLabelGap = 4;

std::string with_decimals(double value, int decimals) {
  char text[48];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

}  // namespace

void draw_tile(RgbImage& image, int x, int y, const Map& map, int map_width, int map_height,
               int scale, const ValueRange& range, ColourMap colours) {
  if (map.empty()) {
    image.fill_rect(x, y, map_width * scale, map_height * scale, kBlankTile);
    return;
  }
  if (map.size() != std::size_t(map_width) * std::size_t(map_height))
    throw Error("internal: a tile of " + std::to_string(map.size()) + " values is not " +
                std::to_string(map_width) + "x" + std::to_string(map_height));
  for (int row = 0; row < map_height; ++row)
    for (int col = 0; col < map_width; ++col)
      image.fill_rect(x + col * scale, y + row * scale, scale, scale,
                      colours(range.position(map[std::size_t(row) * map_width + col])));
}

RgbImage tile_maps(const std::vector<Map>& maps, const TileGrid& grid, const ValueRange& range,
                   ColourMap colours) {
  if (int(maps.size()) != grid.count || grid.columns < 1 || grid.scale < 1 || grid.gap < 0)
    throw Error("internal: " + std::to_string(maps.size()) + " maps for a grid of " +
                std::to_string(grid.count) + " tiles");
  RgbImage image(grid.width(), grid.height());
  for (int i = 0; i < grid.count; ++i)
    draw_tile(image, grid.tile_x(i), grid.tile_y(i), maps[std::size_t(i)], grid.map_width,
              grid.map_height, grid.scale, range, colours);
  return image;
}

void draw_legend(RgbImage& image, int x, int y, int width, int height, const ValueRange& range,
                 ColourMap colours, int decimals, bool label_middle) {
  for (int col = 0; col < width; ++col) {
    const double t = width > 1 ? double(col) / double(width - 1) : 0.5;
    image.fill_rect(x + col, y, 1, height, colours(t));
  }
  image.outline_rect(x - 1, y - 1, width + 2, height + 2, kBlack);
  const int label_y = y + height + kLegendLabelGap;
  draw_text(image, x, label_y, with_decimals(range.lo, decimals), kBlack, kLegendTextScale);
  const std::string hi = with_decimals(range.hi, decimals);
  draw_text(image, x + width - text_width(hi, kLegendTextScale), label_y, hi, kBlack,
            kLegendTextScale);
  if (label_middle)
    draw_text_centred(image, x + width / 2, label_y,
                      with_decimals((range.lo + range.hi) / 2, decimals), kBlack, kLegendTextScale);
}

int legend_height(int bar_height) {
  return bar_height + kLegendLabelGap + text_height("0", kLegendTextScale);
}

}  // namespace lenet5::pictures
