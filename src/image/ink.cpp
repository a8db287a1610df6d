// Ink against paper: the paper's surface fitted under uneven light, Otsu's threshold, connected
// pieces and stroke width.
#include "image/ink.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>

namespace lenet5 {
namespace {

// 16 x 16 cells resolve a shadow's gradient and a vignette while each cell of a photograph
// stays several stroke widths wide, so that most cells are mostly paper.
constexpr int kCellsPerSide = 16;
// A cell is ink, not paper, when its median lies further from the fit than 2.5 robust standard
// deviations (1% of normal paper noise) or, on noiseless paper, than 0.02 (5 grey levels).
constexpr double kOutlierSigmas = 2.5;
constexpr double kMinOutlierDistance = 0.02;
constexpr int kFitRounds = 4;
constexpr int kTerms = 6;

std::array<double, kTerms> quadratic_terms(double u, double v) {
  return {1.0, u, v, u * u, u * v, v * v};
}

// Least squares for the first n_terms coefficients (the rest 0) by the normal equations, over the
// values marked in `use`. A small ridge on the non-constant terms keeps the system solvable when
// the cells cannot determine them (an image one cell high has no y terms); it leaves the
// constant, the paper's mean, unbiased.
std::array<double, kTerms> fit_quadratic(const std::vector<std::array<double, kTerms>>& terms,
                                         const std::vector<double>& values,
                                         const std::vector<bool>& use, int n_terms) {
  double a[kTerms][kTerms + 1] = {};
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!use[i]) continue;
    for (int r = 0; r < n_terms; ++r) {
      for (int c = 0; c < n_terms; ++c) a[r][c] += terms[i][r] * terms[i][c];
      a[r][kTerms] += terms[i][r] * values[i];
    }
  }
  for (int r = 1; r < kTerms; ++r) a[r][r] += 1e-6 * (a[0][0] + 1.0);
  for (int col = 0; col < kTerms; ++col) {  // Gaussian elimination with partial pivoting
    int pivot = col;
    for (int r = col + 1; r < kTerms; ++r) {
      if (std::abs(a[r][col]) > std::abs(a[pivot][col])) pivot = r;
    }
    std::swap(a[col], a[pivot]);
    if (std::abs(a[col][col]) < 1e-300) continue;
    for (int r = 0; r < kTerms; ++r) {
      if (r == col) continue;
      const double f = a[r][col] / a[col][col];
      for (int c = col; c <= kTerms; ++c) a[r][c] -= f * a[col][c];
    }
  }
  std::array<double, kTerms> x{};
  for (int r = 0; r < kTerms; ++r) x[r] = std::abs(a[r][r]) < 1e-300 ? 0.0 : a[r][kTerms] / a[r][r];
  return x;
}

double evaluate(const double* coefficients, double u, double v) {
  const auto t = quadratic_terms(u, v);
  double sum = 0.0;
  for (int i = 0; i < kTerms; ++i) sum += coefficients[i] * t[static_cast<std::size_t>(i)];
  return sum;
}

double median_of(std::vector<double> values) {
  const auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), middle, values.end());
  return *middle;
}

// Sliding maximum over [i - r, i + r] of n values read with a stride, zero outside.
void max_filter_1d(const float* in, float* out, int n, int stride, int r,
                   std::vector<float>& forward, std::vector<float>& backward) {
  const int k = 2 * r + 1;
  const int m = ((n + 2 * r + k - 1) / k) * k;  // padded length, whole blocks of k
  forward.assign(static_cast<std::size_t>(m), 0.0f);
  backward.assign(static_cast<std::size_t>(m), 0.0f);
  const auto padded = [&](int j) {
    const int i = j - r;
    return i >= 0 && i < n ? in[static_cast<std::ptrdiff_t>(i) * stride] : 0.0f;
  };
  for (int j = 0; j < m; ++j) {  // running maximum from each block's start
    forward[static_cast<std::size_t>(j)] =
        j % k == 0 ? padded(j) : std::max(forward[static_cast<std::size_t>(j - 1)], padded(j));
  }
  for (int j = m - 1; j >= 0; --j) {  // and from each block's end
    backward[static_cast<std::size_t>(j)] =
        j % k == k - 1 || j == m - 1
            ? padded(j)
            : std::max(backward[static_cast<std::size_t>(j + 1)], padded(j));
  }
  // The window [i, i + 2r] of the padded array spans at most two blocks.
  for (int i = 0; i < n; ++i) {
    out[static_cast<std::ptrdiff_t>(i) * stride] = std::max(
        backward[static_cast<std::size_t>(i)], forward[static_cast<std::size_t>(i + 2 * r)]);
  }
}

}  // namespace

double quantile_of(std::vector<double>& values, double q) {
  const auto at = values.begin() + static_cast<std::ptrdiff_t>(q * (values.size() - 1) + 0.5);
  std::nth_element(values.begin(), at, values.end());
  return *at;
}

// The percentile a cell's paper is read at for each estimate.
constexpr double kLightestPaper = 0.9, kDarkestPaper = 0.1;

PaperSurface::PaperSurface(const GrayImage& image, PaperEstimate estimate)
    : half_width_(image.width / 2.0), half_height_(image.height / 2.0) {
  const int nx = std::min(kCellsPerSide, image.width), ny = std::min(kCellsPerSide, image.height);
  std::vector<std::array<double, kTerms>> terms;
  std::vector<double> medians, gaps;  // gaps: the estimate's percentile less the median, per cell
  std::vector<double> cell;
  for (int cy = 0; cy < ny; ++cy) {
    const int y0 = cy * image.height / ny, y1 = (cy + 1) * image.height / ny;
    for (int cx = 0; cx < nx; ++cx) {
      const int x0 = cx * image.width / nx, x1 = (cx + 1) * image.width / nx;
      cell.clear();
      for (int y = y0; y < y1; ++y) {
        const float* row = &image.pixels[static_cast<std::size_t>(y) * image.width];
        cell.insert(cell.end(), row + x0, row + x1);
      }
      const double median = median_of(cell);
      const double at = estimate == PaperEstimate::lightest  ? quantile_of(cell, kLightestPaper)
                        : estimate == PaperEstimate::darkest ? quantile_of(cell, kDarkestPaper)
                                                             : median;
      medians.push_back(at);
      gaps.push_back(at - median);
      terms.push_back(quadratic_terms(((x0 + x1) / 2.0 - half_width_) / half_width_,
                                      ((y0 + y1) / 2.0 - half_height_) / half_height_));
    }
  }
  // Trimmed fitting from the median of all cells, a start the ink cannot pull far: measure every
  // cell against the current surface, take as paper those within the outlier distance, fit them,
  // and repeat until the choice settles; first a constant, then a plane, then the quadratic, so
  // that the ink is set aside before the surface has the freedom to bend towards it.
  coefficients_[0] = median_of(medians);
  std::vector<bool> paper(medians.size(), true);
  std::vector<double> distance(medians.size());
  const auto choose_paper = [&] {
    for (std::size_t i = 0; i < medians.size(); ++i) {
      distance[i] = std::abs(medians[i] - evaluate(coefficients_, terms[i][1], terms[i][2]));
    }
    const double sigma = 1.4826 * median_of(distance);  // the MAD of normal noise is 0.674 sigma
    const double limit = std::max(kOutlierSigmas * sigma, kMinOutlierDistance);
    std::vector<bool> chosen(medians.size());
    for (std::size_t i = 0; i < medians.size(); ++i) chosen[i] = distance[i] <= limit;
    return chosen;
  };
  for (const int n_terms : {1, 3, kTerms}) {
    for (int round = 0; round < kFitRounds; ++round) {
      std::vector<bool> chosen = choose_paper();
      if (round > 0 && chosen == paper) break;
      paper = std::move(chosen);
      const auto fit = fit_quadratic(terms, medians, paper, n_terms);
      std::copy(fit.begin(), fit.end(), coefficients_);
    }
  }
  paper = choose_paper();
  low_ = 1.0f, high_ = 0.0f;
  long long n_paper = 0;
  for (std::size_t i = 0; i < medians.size(); ++i) {
    if (!paper[i]) continue;
    ++n_paper;
    low_ = std::min(low_, static_cast<float>(medians[i]));
    high_ = std::max(high_, static_cast<float>(medians[i]));
  }
  if (n_paper == 0) low_ = high_ = static_cast<float>(median_of(medians));
  // An envelope of the paper sits above (below) its middle by the paper's noise at that
  // percentile: taken off, so that the surface is the paper's middle grey whatever the estimate.
  std::vector<double> paper_gaps;
  for (std::size_t i = 0; i < gaps.size(); ++i)
    if (paper[i]) paper_gaps.push_back(gaps[i]);
  const double gap = paper_gaps.empty() ? 0.0 : median_of(paper_gaps);
  coefficients_[0] -= gap;
  low_ -= static_cast<float>(gap), high_ -= static_cast<float>(gap);
  brightest_ = high_;
  // The cells' centres lie half a cell inside the image, so the paper at the image's edge may go
  // a little beyond their range; a tenth of the range either way allows for that and still keeps
  // the quadratic from running away where it extrapolates.
  const float margin = 0.1f * (high_ - low_);
  low_ -= margin, high_ += margin;
  paper_fraction_ = static_cast<double>(n_paper) / static_cast<double>(medians.size());
}

float PaperSurface::at(int x, int y) const {
  const double u = (x + 0.5 - half_width_) / half_width_;
  const double v = (y + 0.5 - half_height_) / half_height_;
  return std::clamp(static_cast<float>(evaluate(coefficients_, u, v)), low_, high_);
}

std::vector<float> PaperSurface::levels() const {
  const int width = static_cast<int>(std::lround(2 * half_width_));
  const int height = static_cast<int>(std::lround(2 * half_height_));
  std::vector<float> out(static_cast<std::size_t>(width) * static_cast<std::size_t>(height));
  const double* c = coefficients_;
  for (int y = 0; y < height; ++y) {
    // Along a row the quadratic is a + b u + c3 u^2 with a and b fixed by v.
    const double v = (y + 0.5 - half_height_) / half_height_;
    const double a = c[0] + c[2] * v + c[5] * v * v, b = c[1] + c[4] * v;
    float* row = &out[static_cast<std::size_t>(y) * static_cast<std::size_t>(width)];
    for (int x = 0; x < width; ++x) {
      const double u = (x + 0.5 - half_width_) / half_width_;
      row[x] = std::clamp(static_cast<float>(a + (b + c[3] * u) * u), low_, high_);
    }
  }
  return out;
}

int otsu_threshold(const std::vector<double>& histogram) {
  const int n = static_cast<int>(histogram.size());
  const double total = std::accumulate(histogram.begin(), histogram.end(), 0.0);
  double total_moment = 0.0;
  for (int i = 0; i < n; ++i) total_moment += i * histogram[static_cast<std::size_t>(i)];
  double below = 0.0, below_moment = 0.0;
  double best = 0.0;
  int first = 0, last = 0;
  for (int t = 1; t < n; ++t) {
    below += histogram[static_cast<std::size_t>(t - 1)];
    below_moment += (t - 1) * histogram[static_cast<std::size_t>(t - 1)];
    const double above = total - below;
    if (below <= 0.0 || above <= 0.0) continue;
    const double difference = below_moment / below - (total_moment - below_moment) / above;
    const double between = below * above * difference * difference;
    // Relative tolerance: the empty bins of a gap give bit-identical sums, but summing in another
    // order would differ in the last bits, and a tie must not depend on that.
    if (between > best * (1.0 + 1e-12)) {
      best = between, first = last = t;
    } else if (best > 0.0 && between >= best * (1.0 - 1e-12) && t == last + 1) {
      last = t;
    }
  }
  return best > 0.0 ? (first + last + 1) / 2 : 0;
}

InkLabels label_ink(const std::vector<std::uint8_t>& mask, int width, int height) {
  // Two passes with union-find: provisional labels joined with the already-visited neighbours
  // (left, and the three above), then every label replaced by its root.
  InkLabels out;
  out.labels.assign(mask.size(), -1);
  std::vector<int> parent;
  const auto root = [&](int a) {
    while (parent[static_cast<std::size_t>(a)] != a) {
      a = parent[static_cast<std::size_t>(a)] =
          parent[static_cast<std::size_t>(parent[static_cast<std::size_t>(a)])];
    }
    return a;
  };
  const auto index = [&](int x, int y) {
    return static_cast<std::size_t>(y) * static_cast<std::size_t>(width) +
           static_cast<std::size_t>(x);
  };
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      if (!mask[index(x, y)]) continue;
      int label = -1;
      const int neighbours[4][2] = {{x - 1, y}, {x - 1, y - 1}, {x, y - 1}, {x + 1, y - 1}};
      for (const auto& [nx, ny] : neighbours) {
        if (nx < 0 || ny < 0 || nx >= width) continue;
        const int other = out.labels[index(nx, ny)];
        if (other < 0) continue;
        if (label < 0) {
          label = root(other);
        } else {
          const int a = root(label), b = root(other);
          parent[static_cast<std::size_t>(std::max(a, b))] = std::min(a, b);
          label = std::min(a, b);
        }
      }
      if (label < 0) {
        label = static_cast<int>(parent.size());
        parent.push_back(label);
      }
      out.labels[index(x, y)] = label;
    }
  }
  std::vector<int> compact(parent.size(), -1);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      int& label = out.labels[index(x, y)];
      if (label < 0) continue;
      const int r = root(label);
      if (compact[static_cast<std::size_t>(r)] < 0) {
        compact[static_cast<std::size_t>(r)] = static_cast<int>(out.components.size());
        out.components.push_back({0, {x, y, x + 1, y + 1}});
      }
      label = compact[static_cast<std::size_t>(r)];
      InkComponent& c = out.components[static_cast<std::size_t>(label)];
      ++c.pixels;
      c.box = {std::min(c.box.x0, x), std::min(c.box.y0, y), std::max(c.box.x1, x + 1),
               std::max(c.box.y1, y + 1)};
    }
  }
  return out;
}

double mean_stroke_width(const std::vector<std::uint8_t>& mask, int width, int height) {
  const auto ink = [&](int x, int y) {
    return x >= 0 && y >= 0 && x < width && y < height &&
           mask[static_cast<std::size_t>(y) * static_cast<std::size_t>(width) +
                static_cast<std::size_t>(x)] != 0;
  };
  long long area = 0, outline = 0;
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      if (!ink(x, y)) continue;
      ++area;
      outline += !ink(x - 1, y) + !ink(x + 1, y) + !ink(x, y - 1) + !ink(x, y + 1);
    }
  }
  return outline == 0 ? 0.0 : 2.0 * static_cast<double>(area) / static_cast<double>(outline);
}

std::vector<float> dilate_square(const std::vector<float>& image, int width, int height, int r) {
  if (r <= 0) return image;
  std::vector<float> rows(image.size()), out(image.size()), forward, backward;
  for (int y = 0; y < height; ++y) {
    const std::size_t start = static_cast<std::size_t>(y) * static_cast<std::size_t>(width);
    max_filter_1d(&image[start], &rows[start], width, 1, r, forward, backward);
  }
  for (int x = 0; x < width; ++x) {
    max_filter_1d(&rows[static_cast<std::size_t>(x)], &out[static_cast<std::size_t>(x)], height,
                  width, r, forward, backward);
  }
  return out;
}

}  // namespace lenet5
