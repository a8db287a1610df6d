// Line charts as plain-text SVG: axes with ticks and labels, several series with a legend, each
// series a <polyline> with a dot at every point (so a one-epoch run still shows its value).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace lenet5::pictures {

struct Series {
  std::string name;          // in the legend
  std::string colour;        // an SVG colour: "#1f77b4"
  std::vector<double> x, y;  // same length; points in the order given
  bool dashed = false;
};

struct LineChart {
  std::string title, x_label, y_label;
  std::vector<Series> series;
  // The axes' ranges; unset: from the data, widened to whole tick steps.
  std::optional<double> x_min, x_max, y_min, y_max;
  bool integer_x = false;  // x ticks on whole numbers only (epochs)
  // y on a log10 scale, ticked at 1, 2 and 5 times powers of ten (1 alone over more than three
  // decades); values at or below 0 are drawn on the axis' lower end, and left out of its range.
  bool log_y = false;
};

// Every chart is kChartWidth x kChartHeight; the plot area inside it is this rectangle.
inline constexpr int kChartWidth = 480, kChartHeight = 320;
inline constexpr int kPlotLeft = 70, kPlotRight = 460, kPlotTop = 40, kPlotBottom = 260;

// `text` with <, >, & and " written as entities, for SVG and HTML text and attributes.
std::string markup_escaped(const std::string& text);

// Several charts side by side in one SVG document (kChartWidth * n wide, kChartHeight high plus
// 18 px for each legend row that wraps); a series without points is left out, legend included.
// Throws an internal lenet5::Error when a series' x and y differ in length.
std::string line_charts_svg(const std::vector<LineChart>& charts);

// Tick values covering [lo, hi] with steps of 1, 2 or 5 times a power of ten (about `wanted` of
// them); whole steps of at least 1 when `integers`. Exposed for the tests.
std::vector<double> nice_ticks(double lo, double hi, int wanted, bool integers);
// A log axis' ticks: the values 1, 2 and 5 times a power of ten from the largest at or below lo
// to the smallest at or above hi (lo > 0), or the powers of ten alone when that spans more than
// three decades. Exposed for the tests.
std::vector<double> log_ticks(double lo, double hi);

}  // namespace lenet5::pictures
