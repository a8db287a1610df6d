// Line charts as SVG: the axes' ranges and ticks, the series' polylines and dots, the legend.
#include "pictures/svg_chart.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/error.hpp"

namespace lenet5::pictures {
namespace {

constexpr int kWantedTicks = 6;

std::string number(double value, int decimals) {
  char text[48];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

// Decimals that tell the ticks apart: a step of 0.05 needs 2.
int tick_decimals(const std::vector<double>& ticks) {
  if (ticks.size() < 2) return 0;
  const double step = ticks[1] - ticks[0];
  return std::max(0, int(std::ceil(-std::log10(step) - 1e-9)));
}

struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void include(double v) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
};

// The axes' extent: the chart's own where set, else the data's rounded out to whole ticks.
struct Axes {
  double x_lo, x_hi, y_lo, y_hi;
  std::vector<double> x_ticks, y_ticks;
  bool log_y = false;

  double px(double x) const {
    return kPlotLeft + (x - x_lo) / (x_hi - x_lo) * (kPlotRight - kPlotLeft);
  }
  double py(double y) const {
    if (log_y) {  // a value at or below 0 has no logarithm: it sits on the lower end
      const double t = y <= y_lo ? 0 : std::log10(y / y_lo) / std::log10(y_hi / y_lo);
      return kPlotBottom - t * (kPlotBottom - kPlotTop);
    }
    return kPlotBottom - (y - y_lo) / (y_hi - y_lo) * (kPlotBottom - kPlotTop);
  }
};

// A log axis' range from the positive values (1 to 10 when there are none), its ends the outer
// ticks unless the chart sets them.
void log_axis(const LineChart& chart, Axes& axes) {
  Range y;
  for (const Series& s : chart.series)
    for (double v : s.y)
      if (v > 0) y.include(v);
  if (chart.y_min && *chart.y_min > 0) y.lo = *chart.y_min;
  if (chart.y_max && *chart.y_max > 0) y.hi = *chart.y_max;
  if (!(y.lo <= y.hi)) y = {1, 10};
  axes.y_ticks = log_ticks(y.lo, y.hi);
  axes.y_lo = chart.y_min && *chart.y_min > 0 ? *chart.y_min : axes.y_ticks.front();
  axes.y_hi = chart.y_max && *chart.y_max > 0 ? *chart.y_max : axes.y_ticks.back();
  if (axes.y_hi <= axes.y_lo) axes.y_hi = axes.y_lo * 10;
  axes.log_y = true;
}

void widen_if_flat(Range& r) {
  if (!(r.lo <= r.hi)) r = {0, 1};  // no data
  if (r.hi - r.lo < 1e-12) {
    r.lo -= 0.5;
    r.hi += 0.5;
  }
}

Axes axes_for(const LineChart& chart) {
  Range x, y;
  for (const Series& s : chart.series) {
    for (double v : s.x) x.include(v);
    for (double v : s.y) y.include(v);
  }
  if (chart.x_min) x.lo = *chart.x_min;
  if (chart.x_max) x.hi = *chart.x_max;
  if (chart.y_min) y.lo = *chart.y_min;
  if (chart.y_max) y.hi = *chart.y_max;
  widen_if_flat(x);
  widen_if_flat(y);
  Axes axes{x.lo,
            x.hi,
            y.lo,
            y.hi,
            nice_ticks(x.lo, x.hi, kWantedTicks, chart.integer_x),
            nice_ticks(y.lo, y.hi, kWantedTicks, false)};
  // Unset ends grow to the outermost ticks, so the axis starts and ends on a labelled value.
  if (!chart.x_min) axes.x_lo = std::min(axes.x_lo, axes.x_ticks.front());
  if (!chart.x_max) axes.x_hi = std::max(axes.x_hi, axes.x_ticks.back());
  if (!chart.y_min) axes.y_lo = std::min(axes.y_lo, axes.y_ticks.front());
  if (!chart.y_max) axes.y_hi = std::max(axes.y_hi, axes.y_ticks.back());
  if (chart.log_y) log_axis(chart, axes);
  const auto inside = [](std::vector<double>& ticks, double lo, double hi) {
    ticks.erase(std::remove_if(ticks.begin(), ticks.end(),
                               [&](double t) { return t < lo - 1e-9 || t > hi + 1e-9; }),
                ticks.end());
  };
  inside(axes.x_ticks, axes.x_lo, axes.x_hi);
  inside(axes.y_ticks, axes.y_lo, axes.y_hi);
  return axes;
}

std::string axes_svg(const LineChart& chart, const Axes& axes) {
  std::string out;
  out += "<rect x=\"" + std::to_string(kPlotLeft) + "\" y=\"" + std::to_string(kPlotTop) +
         "\" width=\"" + std::to_string(kPlotRight - kPlotLeft) + "\" height=\"" +
         std::to_string(kPlotBottom - kPlotTop) + "\" fill=\"none\" stroke=\"#444\"/>\n";
  const int x_decimals = tick_decimals(axes.x_ticks), y_decimals = tick_decimals(axes.y_ticks);
  for (double t : axes.x_ticks) {
    const std::string x = number(axes.px(t), 1);
    out += "<line class=\"grid\" x1=\"" + x + "\" y1=\"" + std::to_string(kPlotTop) + "\" x2=\"" +
           x + "\" y2=\"" + std::to_string(kPlotBottom + 5) + "\" stroke=\"#ddd\"/>\n";
    out += "<text class=\"x-tick\" x=\"" + x + "\" y=\"" + std::to_string(kPlotBottom + 20) +
           "\" text-anchor=\"middle\">" + number(t, x_decimals) + "</text>\n";
  }
  for (double t : axes.y_ticks) {
    const std::string y = number(axes.py(t), 1);
    // On a log axis each tick has the decimals it needs (0.05, 0.1, 2), not those of a step.
    const int decimals =
        axes.log_y ? std::max(0, -int(std::floor(std::log10(t) + 1e-9))) : y_decimals;
    out += "<line class=\"grid\" x1=\"" + std::to_string(kPlotLeft - 5) + "\" y1=\"" + y +
           "\" x2=\"" + std::to_string(kPlotRight) + "\" y2=\"" + y + "\" stroke=\"#ddd\"/>\n";
    out += "<text class=\"y-tick\" x=\"" + std::to_string(kPlotLeft - 8) + "\" y=\"" + y +
           "\" text-anchor=\"end\" dominant-baseline=\"middle\">" + number(t, decimals) +
           "</text>\n";
  }
  out += "<text class=\"title\" x=\"" + std::to_string((kPlotLeft + kPlotRight) / 2) +
         "\" y=\"24\" text-anchor=\"middle\" font-size=\"16\" font-weight=\"bold\">" +
         markup_escaped(chart.title) + "</text>\n";
  out += "<text class=\"x-label\" x=\"" + std::to_string((kPlotLeft + kPlotRight) / 2) + "\" y=\"" +
         std::to_string(kPlotBottom + 42) + "\" text-anchor=\"middle\">" +
         markup_escaped(chart.x_label) + "</text>\n";
  const int y_mid = (kPlotTop + kPlotBottom) / 2;
  out += "<text class=\"y-label\" x=\"18\" y=\"" + std::to_string(y_mid) +
         "\" text-anchor=\"middle\" transform=\"rotate(-90 18 " + std::to_string(y_mid) + ")\">" +
         markup_escaped(chart.y_label) + "</text>\n";
  return out;
}

std::string series_svg(const Series& s, const Axes& axes) {
  if (s.x.size() != s.y.size())
    throw Error("internal: series '" + s.name + "' has " + std::to_string(s.x.size()) +
                " x values and " + std::to_string(s.y.size()) + " y values");
  std::string points, dots;
  for (std::size_t i = 0; i < s.x.size(); ++i) {
    const std::string x = number(axes.px(s.x[i]), 1), y = number(axes.py(s.y[i]), 1);
    points += (i ? " " : "") + x + "," + y;
    dots += "<circle cx=\"" + x + "\" cy=\"" + y + "\" r=\"3\" fill=\"" + s.colour + "\"/>\n";
  }
  return "<polyline class=\"series\" data-name=\"" + markup_escaped(s.name) + "\" points=\"" +
         points + "\" fill=\"none\" stroke=\"" + s.colour + "\" stroke-width=\"2\"" +
         (s.dashed ? " stroke-dasharray=\"6 4\"" : "") + "/>\n" + dots;
}

constexpr int kLegendRowHeight = 18;

// Below the plot, one entry per series: a short line in its style, then its name. An entry that
// would run past the chart's right edge starts a new row below; *rows counts the rows.
std::string legend_svg(const std::vector<Series>& series, int* rows) {
  std::string out;
  int x = kPlotLeft, y = kPlotBottom + 50;
  *rows = 1;
  for (const Series& s : series) {
    if (s.x.empty()) continue;  // a series without points (no test evaluation) is left out
    const int width = 30 + 8 * int(s.name.size());  // about 8 pixels per character at 13 px
    if (x > kPlotLeft && x + width > kChartWidth) {
      x = kPlotLeft;
      y += kLegendRowHeight;
      ++*rows;
    }
    out += "<line x1=\"" + std::to_string(x) + "\" y1=\"" + std::to_string(y) + "\" x2=\"" +
           std::to_string(x + 24) + "\" y2=\"" + std::to_string(y) + "\" stroke=\"" + s.colour +
           "\" stroke-width=\"2\"" + (s.dashed ? " stroke-dasharray=\"6 4\"" : "") + "/>\n";
    out += "<text class=\"legend\" x=\"" + std::to_string(x + 30) + "\" y=\"" + std::to_string(y) +
           "\" dominant-baseline=\"middle\">" + markup_escaped(s.name) + "</text>\n";
    x += width + 10;
  }
  return out;
}

}  // namespace

std::string markup_escaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

std::vector<double> nice_ticks(double lo, double hi, int wanted, bool integers) {
  if (!(hi > lo)) return {lo};
  const double rough = (hi - lo) / std::max(wanted - 1, 1);
  // step = mantissa * 10^exponent with mantissa 1, 2, 5 or 10.
  int exponent = int(std::floor(std::log10(rough)));
  double mantissa = 10;
  for (double m : {1.0, 2.0, 5.0})
    if (m * std::pow(10.0, exponent) >= rough * (1 - 1e-9)) {
      mantissa = m;
      break;
    }
  if (integers && exponent < 0) {
    mantissa = 1;
    exponent = 0;
  }
  // Tick k is k * mantissa scaled by the power of ten in one rounding (a division for negative
  // exponents), so 3 * 0.2 is the double nearest 0.6, not 0.6000000000000001.
  const auto tick = [&](long long k) {
    const double whole = double(k) * mantissa;
    return exponent >= 0 ? whole * std::pow(10.0, exponent) : whole / std::pow(10.0, -exponent);
  };
  const double step = tick(1);
  std::vector<double> ticks;
  for (long long k = (long long)std::floor(lo / step + 1e-9);; ++k) {
    ticks.push_back(tick(k));
    if (ticks.back() >= hi - 1e-9 * step) break;
  }
  return ticks;
}

// The document is kChartHeight high, plus a row's height for each legend row past the first of
// the chart whose legend has the most.
std::vector<double> log_ticks(double lo, double hi) {
  const int first = int(std::floor(std::log10(lo) + 1e-9)),
            last = int(std::ceil(std::log10(hi) - 1e-9));
  const bool decades_only = last - first > 3;
  std::vector<double> candidates;
  for (int exponent = first; exponent <= last; ++exponent)
    for (double m : {1.0, 2.0, 5.0})
      if (m == 1.0 || !decades_only)  // one rounding, as nice_ticks: 2e-1 is the double nearest 0.2
        candidates.push_back(exponent >= 0 ? m * std::pow(10.0, exponent)
                                           : m / std::pow(10.0, -exponent));
  // From the largest candidate at or below lo to the smallest at or above hi.
  std::size_t begin = 0, end = candidates.size();
  while (begin + 1 < candidates.size() && candidates[begin + 1] <= lo * (1 + 1e-9)) ++begin;
  while (end > begin + 1 && candidates[end - 2] >= hi * (1 - 1e-9)) --end;
  return {candidates.begin() + std::ptrdiff_t(begin), candidates.begin() + std::ptrdiff_t(end)};
}

std::string line_charts_svg(const std::vector<LineChart>& charts) {
  const int width = kChartWidth * std::max<int>(1, int(charts.size()));
  std::string body;
  int legend_rows = 1;
  for (std::size_t i = 0; i < charts.size(); ++i) {
    const Axes axes = axes_for(charts[i]);
    body += "<g class=\"chart\" transform=\"translate(" + std::to_string(int(i) * kChartWidth) +
            ",0)\">\n" + axes_svg(charts[i], axes);
    for (const Series& s : charts[i].series)
      if (!s.x.empty() || !s.y.empty()) body += series_svg(s, axes);
    int rows = 1;
    body += legend_svg(charts[i].series, &rows) + "</g>\n";
    legend_rows = std::max(legend_rows, rows);
  }
  const int height = kChartHeight + (legend_rows - 1) * kLegendRowHeight;
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) +
         "\" height=\"" + std::to_string(height) + "\" viewBox=\"0 0 " + std::to_string(width) +
         " " + std::to_string(height) +
         "\" font-family=\"sans-serif\" font-size=\"13\">\n"
         "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n" +
         body + "</svg>\n";
}

}  // namespace lenet5::pictures
