// Many small maps in one picture: a grid of tiles, each a map upscaled by an integer factor with
// nearest-neighbour sampling (so a 5x5 filter shows as 25 clear squares), a gap between tiles, and
// a colour legend for pictures that show values.
#pragma once

#include <vector>

#include "pictures/colour.hpp"
#include "pictures/image.hpp"

namespace lenet5::pictures {

// A grid of `count` tiles, `columns` to a row, each map_width x map_height values shown at
// `scale` pixels per value, `gap` pixels between tiles and around the grid.
struct TileGrid {
  int count = 0, columns = 1;
  int map_width = 0, map_height = 0;
  int scale = 1, gap = 0;

  int rows() const { return columns > 0 ? (count + columns - 1) / columns : 0; }
  int tile_width() const { return map_width * scale; }
  int tile_height() const { return map_height * scale; }
  int width() const { return gap + columns * (tile_width() + gap); }
  int height() const { return gap + rows() * (tile_height() + gap); }
  // Top-left pixel of tile i (row-major: tile i is in row i / columns, column i % columns).
  int tile_x(int i) const { return gap + (i % columns) * (tile_width() + gap); }
  int tile_y(int i) const { return gap + (i / columns) * (tile_height() + gap); }
};

// One map of map_width x map_height values, row-major; an empty map is drawn as a blank tile.
using Map = std::vector<float>;

// The neutral colour of a blank tile: a mid grey that no colour map here produces for a value
// (the diverging map's middle is near-white), so "absent" never reads as "zero".
inline constexpr Rgb kBlankTile{190, 190, 190};

// Draws map `map` as a tile with its top-left corner at (x, y).
void draw_tile(RgbImage& image, int x, int y, const Map& map, int map_width, int map_height,
               int scale, const ValueRange& range, ColourMap colours);

// The whole grid as a picture of its own (grid.width() x grid.height()), on white.
RgbImage tile_maps(const std::vector<Map>& maps, const TileGrid& grid, const ValueRange& range,
                   ColourMap colours);

// A horizontal colour bar, `width` x `height` pixels at (x, y), with the range's ends (and the
// middle, when `label_middle`) written below it with `decimals` digits.
void draw_legend(RgbImage& image, int x, int y, int width, int height, const ValueRange& range,
                 ColourMap colours, int decimals, bool label_middle);
// The legend's height with its labels, for laying out the picture around it.
int legend_height(int bar_height);

}  // namespace lenet5::pictures
