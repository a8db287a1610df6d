// The pictures module (src/pictures/): PNG and SVG writers checked against known inputs, read back
// with stb_image; colour maps at their ends and middles; tile geometry; text; the filter pictures'
// blank tiles for the C3 table's missing connections.
#include <gtest/gtest.h>
#include <stb_image.h>

#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "core/layout.hpp"
#include "error_assertions.hpp"
#include "pictures/colour.hpp"
#include "pictures/evaluation_pictures.hpp"
#include "pictures/image.hpp"
#include "pictures/network_pictures.hpp"
#include "pictures/svg_chart.hpp"
#include "pictures/text.hpp"
#include "pictures/tiles.hpp"
#include "test_util.hpp"

namespace lenet5::pictures {
namespace {

using testing::mentions;
using testing::TempDir;
using testing_support::throws_error_mentioning;

struct Decoded {
  int width = 0, height = 0, channels = 0;
  std::vector<std::uint8_t> pixels;
};

// Decoded with stb_image, keeping the file's own channel count.
Decoded read_png(const std::filesystem::path& file) {
  Decoded d;
  std::unique_ptr<stbi_uc, void (*)(void*)> data(
      stbi_load(file.c_str(), &d.width, &d.height, &d.channels, 0), &stbi_image_free);
  if (data) d.pixels.assign(data.get(), data.get() + std::size_t(d.width) * d.height * d.channels);
  return d;
}

std::size_t count_pixels(const RgbImage& image, Rgb colour) {
  std::size_t n = 0;
  for (int y = 0; y < image.height(); ++y)
    for (int x = 0; x < image.width(); ++x) n += image.at(x, y) == colour;
  return n;
}

TEST(Png, RgbPixelsReadBackExactly) {
  TempDir dir;
  RgbImage image(3, 2, Rgb{1, 2, 3});
  image.set(0, 0, Rgb{255, 0, 0});
  image.set(2, 1, Rgb{10, 200, 30});
  image.set(5, 5, kBlack);  // outside: ignored
  write_png(dir / "rgb.png", image);
  const Decoded d = read_png(dir / "rgb.png");
  ASSERT_EQ(d.width, 3);
  ASSERT_EQ(d.height, 2);
  ASSERT_EQ(d.channels, 3);
  const std::vector<std::uint8_t> expected{255, 0, 0, 1, 2, 3, 1,  2,   3,
                                           1,   2, 3, 1, 2, 3, 10, 200, 30};
  EXPECT_EQ(d.pixels, expected);
  const std::string bytes = png_bytes(image);  // what a server would send
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
}

TEST(Png, GreyPixelsReadBackExactlyAndErrorsNameTheFile) {
  TempDir dir;
  const std::vector<std::uint8_t> pixels{0, 64, 128, 255, 7, 9};
  write_gray_png(dir / "grey.png", 2, 3, pixels);
  const Decoded d = read_png(dir / "grey.png");
  EXPECT_EQ(d.width, 2);
  EXPECT_EQ(d.height, 3);
  EXPECT_EQ(d.channels, 1);
  EXPECT_EQ(d.pixels, pixels);
  EXPECT_TRUE(throws_error_mentioning([&] { write_gray_png(dir / "short.png", 3, 3, pixels); },
                                      {"short.png", "do not make a 3x3 image"}));
  EXPECT_TRUE(throws_error_mentioning([&] { write_png(dir / "missing" / "p.png", RgbImage(1, 1)); },
                                      {"p.png", "writable"}));
}

TEST(ColourMaps, EndsAndMiddles) {
  EXPECT_EQ(greyscale(0), (Rgb{0, 0, 0}));
  EXPECT_EQ(greyscale(1), (Rgb{255, 255, 255}));
  EXPECT_EQ(greyscale(0.5), (Rgb{128, 128, 128}));  // 127.5 rounds up
  EXPECT_EQ(greyscale(-3), greyscale(0));           // clamped
  EXPECT_EQ(diverging(0), (Rgb{5, 48, 97}));
  EXPECT_EQ(diverging(0.25), (Rgb{67, 147, 195}));
  EXPECT_EQ(diverging(0.5), (Rgb{247, 247, 247}));
  EXPECT_EQ(diverging(1), (Rgb{103, 0, 31}));
  EXPECT_EQ(diverging(2), diverging(1));
  // Halfway between the stops at 0.5 and 0.75: (247 + 214) / 2 = 230.5 -> 231, ...
  EXPECT_EQ(diverging(0.625), (Rgb{231, 172, 162}));
  EXPECT_EQ(sequential(0), diverging(0.5));
  EXPECT_EQ(sequential(1), diverging(1));
}

TEST(ColourMaps, RangesPlaceValues) {
  const ValueRange range = symmetric_range({0.5f, -2.0f, 1.0f});
  EXPECT_EQ(range.lo, -2.0);
  EXPECT_EQ(range.hi, 2.0);
  EXPECT_EQ(range.position(0), 0.5);
  EXPECT_EQ(range.position(-2), 0.0);
  EXPECT_EQ(range.position(9), 1.0);
  EXPECT_EQ(symmetric_range({0.0f, 0.0f}).hi, 1.0);  // all zero: still a usable range
  EXPECT_EQ((ValueRange{3, 3}).position(3), 0.5);
}

TEST(Tiles, GridGeometry) {
  const TileGrid grid{7, 3, 5, 4, 4, 2};  // 7 maps of 5x4, 3 to a row, x4, gap 2
  EXPECT_EQ(grid.rows(), 3);
  EXPECT_EQ(grid.tile_width(), 20);
  EXPECT_EQ(grid.tile_height(), 16);
  EXPECT_EQ(grid.width(), 2 + 3 * 22);
  EXPECT_EQ(grid.height(), 2 + 3 * 18);
  EXPECT_EQ(grid.tile_x(4), 2 + 22);
  EXPECT_EQ(grid.tile_y(4), 2 + 18);
  EXPECT_EQ(grid.tile_x(6), 2);
  EXPECT_EQ(grid.tile_y(6), 2 + 2 * 18);
}

TEST(Tiles, MapsAreUpscaledByNearestNeighbourAndBlankTilesAreNeutral) {
  const TileGrid grid{2, 2, 2, 2, 3, 1};
  const Map first{0, 1, 1, 0};  // (row 0: 0 1; row 1: 1 0)
  const RgbImage image = tile_maps({first, Map{}}, grid, {0, 1}, &greyscale);
  ASSERT_EQ(image.width(), 1 + 2 * 7);
  ASSERT_EQ(image.height(), 1 + 7);
  for (int y = 0; y < 6; ++y)
    for (int x = 0; x < 6; ++x)
      EXPECT_EQ(image.at(1 + x, 1 + y), greyscale(first[std::size_t(y / 3 * 2 + x / 3)]))
          << x << "," << y;
  EXPECT_EQ(image.at(0, 0), kWhite);  // the gap
  EXPECT_EQ(image.at(7, 3), kWhite);
  EXPECT_EQ(count_pixels(image, kBlankTile), 36u);  // the second tile, 6x6
  EXPECT_TRUE(throws_error_mentioning(
      [&] {
        tile_maps({first}, grid, {0, 1}, &greyscale);
      },
      {"1 maps for a grid of 2 tiles"}));
}

TEST(Text, DrawsInsideItsMeasuredBox) {
  RgbImage image(200, 40);
  draw_text(image, 10, 5, "7->2 93%", kBlack, 2);
  const int w = text_width("7->2 93%", 2), h = text_height("7->2 93%", 2);
  EXPECT_GT(w, 60);  // eight glyphs about six units wide each, doubled
  std::size_t inside = 0;
  for (int y = 0; y < image.height(); ++y)
    for (int x = 0; x < image.width(); ++x) {
      if (image.at(x, y) != kBlack) continue;
      const bool in_box = x >= 10 && x < 10 + w && y >= 5 && y < 5 + h;
      EXPECT_TRUE(in_box) << x << "," << y;
      inside += in_box;
    }
  EXPECT_GT(inside, 100u);
  draw_text(image, 0, 0, "\xc3\xa9\x01", kBlack);  // not ASCII: drawn as '?', no crash
}

TEST(NiceTicks, StepsOfOneTwoOrFive) {
  // 1.13 / 5 = 0.226 per step at the least: 0.5 is the next of 0.1, 0.2, 0.5, 1.
  EXPECT_EQ(nice_ticks(0, 1.13, 6, false), (std::vector<double>{0, 0.5, 1.0, 1.5}));
  EXPECT_EQ(nice_ticks(0, 0.9, 6, false), (std::vector<double>{0, 0.2, 0.4, 0.6, 0.8, 1.0}));
  EXPECT_EQ(nice_ticks(1, 3, 6, true), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(nice_ticks(62.5, 100, 6, false), (std::vector<double>{60, 70, 80, 90, 100}));
}

TEST(LogTicks, OneTwoFiveFromBelowTheLowestToAboveTheHighest) {
  EXPECT_EQ(log_ticks(0.2, 4), (std::vector<double>{0.2, 0.5, 1, 2, 5}));
  EXPECT_EQ(log_ticks(0.35, 15.4), (std::vector<double>{0.2, 0.5, 1, 2, 5, 10, 20}));
  EXPECT_EQ(log_ticks(1, 1), (std::vector<double>{1}));
  // Over more than three decades, the powers of ten alone.
  EXPECT_EQ(log_ticks(0.05, 200), (std::vector<double>{0.01, 0.1, 1, 10, 100, 1000}));
}

// A log y axis: equal ratios are equal distances, ticks at 1, 2 and 5 times powers of ten, a value
// of 0 on the lower end.
TEST(SvgChart, LogScaledY) {
  LineChart chart{"Error", "pass", "error (%)", {}, 1.0, 3.0, {}, {}, true};
  chart.log_y = true;
  chart.series = {{"test", "#d62728", {1, 2, 3}, {10, 1, 0}, false}};
  const std::string svg = line_charts_svg({chart});
  // y 1..10 spans the plot's 260..40: 10 at the top, 1 at the bottom, and 0 there too.
  EXPECT_TRUE(mentions(svg, "data-name=\"test\" points=\"70.0,40.0 265.0,260.0 460.0,260.0\""))
      << svg;
  const std::regex y_tick("class=\"y-tick\"[^>]*>([^<]*)<");
  std::vector<std::string> y_ticks;
  for (std::sregex_iterator i(svg.begin(), svg.end(), y_tick), end; i != end; ++i)
    y_ticks.push_back((*i)[1]);
  EXPECT_EQ(y_ticks, (std::vector<std::string>{"1", "2", "5", "10"}));
}

// A legend wider than its chart wraps onto a second row, and the document grows by the row.
TEST(SvgChart, AWideLegendWrapsAndTheDocumentGrows) {
  LineChart chart{"Error", "pass", "error (%)", {}, {}, {}, {}, {}, true};
  for (const char* name : {"a series with a long name", "another long one", "and a third"})
    chart.series.push_back({name, "#1f77b4", {1, 2}, {1, 2}, false});
  const std::string svg = line_charts_svg({chart});
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"480\" height=\"338\"", 0),
            0u)
      << svg;
  EXPECT_TRUE(mentions(svg, "<text class=\"legend\" x=\"100\" y=\"328\"")) << svg;
}

LineChart known_chart() {
  LineChart chart{"Loss <per epoch>", "epoch", "loss", {}, 0.0, 4.0, 0.0, 10.0, true};
  chart.series = {{"train", "#1f77b4", {0, 2, 4}, {0, 5, 10}, false},
                  {"test", "#d62728", {1}, {10}, true}};
  return chart;
}

TEST(SvgChart, PolylinesAxesAndLegend) {
  const std::string svg = line_charts_svg({known_chart()});
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"480\" height=\"320\"", 0),
            0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  // x 0..4 spans the plot's 70..460, y 0..10 its 260..40 (y grows downwards in SVG).
  EXPECT_NE(svg.find("data-name=\"train\" points=\"70.0,260.0 265.0,150.0 460.0,40.0\""),
            std::string::npos)
      << svg;
  EXPECT_NE(svg.find("data-name=\"test\" points=\"167.5,40.0\""), std::string::npos);
  EXPECT_NE(svg.find("stroke-dasharray"), std::string::npos);  // the dashed test series
  EXPECT_NE(svg.find(">Loss &lt;per epoch&gt;</text>"), std::string::npos);
  EXPECT_NE(svg.find("class=\"x-label\""), std::string::npos);
  EXPECT_NE(svg.find(">epoch</text>"), std::string::npos);
  EXPECT_NE(svg.find("class=\"y-label\""), std::string::npos);
  const std::regex x_tick("class=\"x-tick\"[^>]*>([^<]*)<"),
      y_tick("class=\"y-tick\"[^>]*>([^<]*)<");
  std::vector<std::string> x_ticks, y_ticks;
  for (std::sregex_iterator i(svg.begin(), svg.end(), x_tick), end; i != end; ++i)
    x_ticks.push_back((*i)[1]);
  for (std::sregex_iterator i(svg.begin(), svg.end(), y_tick), end; i != end; ++i)
    y_ticks.push_back((*i)[1]);
  EXPECT_EQ(x_ticks, (std::vector<std::string>{"0", "1", "2", "3", "4"}));
  EXPECT_EQ(y_ticks, (std::vector<std::string>{"0", "2", "4", "6", "8", "10"}));
  EXPECT_NE(svg.find("class=\"legend\""), std::string::npos);
  EXPECT_NE(svg.find(">train</text>"), std::string::npos);
  EXPECT_NE(svg.find(">test</text>"), std::string::npos);
  LineChart without_test = known_chart();
  without_test.series[1].x.clear();
  without_test.series[1].y.clear();
  EXPECT_EQ(line_charts_svg({without_test}).find(">test</text>"), std::string::npos);
}

TEST(SvgChart, SeveralChartsSideBySideAndInconsistentSeriesRefused) {
  const std::string svg = line_charts_svg({known_chart(), known_chart()});
  EXPECT_NE(svg.find("width=\"960\""), std::string::npos);
  EXPECT_NE(svg.find("translate(480,0)"), std::string::npos);
  LineChart bad = known_chart();
  bad.series[0].y.pop_back();
  EXPECT_TRUE(throws_error_mentioning([&] { line_charts_svg({bad}); },
                                      {"series 'train' has 3 x values and 2 y values"}));
}

TEST(FilterPictures, C3TableGapsAreBlankTiles) {
  NetConfig net;
  const ParamLayout layout = lenet5_layout(net);
  std::vector<float> parameters(layout.buffer_floats);
  initialise_parameters(layout, net, 1, parameters.data());
  // Full table: every one of the 96 filters drawn; LeCun's: 36 of them absent (Table I has 60).
  EXPECT_EQ(count_pixels(c3_filters_picture(layout, net, parameters), kBlankTile), 0u);
  net.c3_table = C3Table::lecun;
  const std::size_t tile_pixels = 5 * 8 * 5 * 8;  // a 5x5 filter drawn at 8 pixels per weight
  EXPECT_EQ(count_pixels(c3_filters_picture(lenet5_layout(net), net, parameters), kBlankTile),
            36 * tile_pixels);
  const RgbImage c1 = c1_filters_picture(layout, parameters);
  EXPECT_GT(c1.width(), 6 * 5 * 16);  // six filters at 16 pixels per weight
}

const std::vector<std::string> kDigits{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};

TEST(EvaluationPictures, MistakesAreCappedAtTenRowsOfTen) {
  std::vector<Mistake> mistakes(kMaxMistakesShown + 5,
                                Mistake{std::vector<std::uint8_t>(784), 7, 2, 0.5f});
  const RgbImage capped = mistakes_picture(mistakes, int(mistakes.size()), 10000, kDigits);
  mistakes.resize(10);
  const RgbImage one_row = mistakes_picture(mistakes, 10, 10000, kDigits);
  EXPECT_EQ(capped.width(), one_row.width());
  // 100 shown are ten rows, 10 one; a row is a digit drawn 84 pixels high and its label's 30.
  EXPECT_EQ(capped.height() - one_row.height(), 9 * (84 + 30));
  mistakes[0].image.resize(3);
  EXPECT_TRUE(throws_error_mentioning([&] { mistakes_picture(mistakes, 10, 10000, kDigits); },
                                      {"not 28x28"}));
}

// Classes that are not their numbers are named: in a key under the mistakes' title (one line
// more), and beside the confusion matrix's row numbers (a wider margin). Digits need neither.
TEST(EvaluationPictures, ClassesThatAreNotTheirNumbersAreNamed) {
  const std::vector<std::string> clothes{"T-shirt/top", "Trouser",   "Pullover", "Dress",
                                         "Coat",        "Sandal",    "Shirt",    "Sneaker",
                                         "Bag",         "Ankle boot"};
  EXPECT_EQ(class_key(kDigits), "");
  EXPECT_EQ(class_key(clothes).rfind("0 T-shirt/top, 1 Trouser, ", 0), 0u) << class_key(clothes);
  const std::vector<Mistake> mistakes(3, Mistake{std::vector<std::uint8_t>(784), 6, 0, 0.5f});
  EXPECT_EQ(mistakes_picture(mistakes, 3, 10000, clothes).height(),
            mistakes_picture(mistakes, 3, 10000, kDigits).height() + 24);
  ConfusionCounts counts{};
  counts[6][0] = 40;
  EXPECT_GT(confusion_picture(counts, clothes).width(),
            confusion_picture(counts, kDigits).width() + 50);
  EXPECT_TRUE(throws_error_mentioning(
      [&] {
        confusion_picture(counts, {"a", "b"});
      },
      {"2 class names"}));
}

TEST(EvaluationPictures, ConfusionCellsAreShadedByCount) {
  ConfusionCounts counts{};
  counts[3][5] = 12;
  const RgbImage image = confusion_picture(counts, kDigits);
  // The largest count gets the map's darkest colour; the zero cells its lightest.
  EXPECT_GT(count_pixels(image, sequential(1)), 50u * 50u);
  EXPECT_GT(count_pixels(image, sequential(0)), 99u * 50u * 50u);
}

}  // namespace
}  // namespace lenet5::pictures
