// Host versions of the chapter's printed listings (errata included) and the arithmetic behind its
// CPU figure targets.
#include "figures/chapter_math.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace lenet5::figures {

std::vector<float> conv_forward_e01(const ConvShape& s, const float* x, const float* weight) {
  const int H_out = s.h_out(), W_out = s.w_out(), K = s.k;
  std::vector<float> y(std::size_t(s.m) * H_out * W_out);
  for (int m = 0; m < s.m; ++m)
    for (int h = 0; h < H_out; ++h)
      for (int w = 0; w < W_out; ++w) {
        float& out = y[(std::size_t(m) * H_out + h) * W_out + w];
        out = 0;
        for (int c = 0; c < s.c; ++c)
          for (int p = 0; p < K; ++p)
            for (int q = 0; q < K; ++q)  // the printed statement, doubling and all
              out += out + x[(std::size_t(c) * s.h + h + p) * s.w + w + q] *
                               weight[((std::size_t(m) * s.c + c) * K + p) * K + q];
      }
  return y;
}

std::vector<float> pool_forward_e04(const PoolShape& s, const float* y) {
  const int K = s.k, H_out = s.h_out(), W_out = s.w_out();
  std::vector<float> out(std::size_t(s.c) * H_out * W_out);
  for (int m = 0; m < s.c; ++m)
    for (int h = 0; h < H_out; ++h)
      for (int w = 0; w < W_out; ++w) {
        float& sum = out[(std::size_t(m) * H_out + h) * W_out + w];
        sum = 0;
        for (int p = 0; p < K; ++p)
          for (int q = 0; q < K; ++q)  // S += S + Y/(K*K) with hh, ww = h, w
            sum += sum + y[(std::size_t(m) * s.h + K * h + p) * s.w + K * w + q] / float(K * K);
      }
  return out;
}

PoolE06Result pool_forward_e06(const PoolShape& s, const float* y) {
  const int K = s.k, H_out = s.h_out(), W_out = s.w_out();
  PoolE06Result result;
  result.size = std::size_t(s.c) * H_out * W_out;
  result.s.assign(result.size, 0.0f);
  int m = 0, h = 0, w = 0;  // declared outside the loops, as in the listing
  for (m = 0; m < s.c; ++m)
    for (h = 0; h < H_out; ++h)
      for (w = 0; w < W_out; ++w) {
        float& sum = result.s[(std::size_t(m) * H_out + h) * W_out + w];
        sum = 0;
        for (int p = 0; p < K; ++p)
          for (int q = 0; q < K; ++q)
            sum = sum + y[(std::size_t(m) * s.h + K * h + p) * s.w + K * w + q] / float(K * K);
      }
  // The bias + sigmoid statement: it would write S[m, h, w] with the loop-exit values.
  result.stray_index = (std::size_t(m) * H_out + std::size_t(h)) * W_out + std::size_t(w);
  return result;
}

LiteralIndexReads e08_literal_dy_reads(const ConvShape& s) {
  const long long M = s.m, C = s.c, H_out = s.h_out(), W_out = s.w_out(), K = s.k;
  LiteralIndexReads r;
  r.size = M * H_out * W_out;
  for (long long m = 0; m < M; ++m)
    for (long long h = 0; h < H_out; ++h)
      for (long long w = 0; w < W_out; ++w)
        for (long long c = 0; c < C; ++c) {
          const long long literal = ((m * C + c) * H_out + h) * W_out + w;
          const long long correct = (m * H_out + h) * W_out + w;
          const long long taps = K * K;  // the p, q loops read the same element K*K times
          r.reads += taps;
          if (literal >= r.size) r.out_of_range += taps;
          if (literal != correct) r.differ += taps;
          r.max_index = std::max(r.max_index, literal);
        }
  return r;
}

std::vector<float> conv_backward_weights_e08(const ConvShape& s, const float* x, const float* dy) {
  const LiteralIndexReads reads = e08_literal_dy_reads(s);
  std::vector<float> padded(std::size_t(std::max(reads.size, reads.max_index + 1)),
                            std::numeric_limits<float>::quiet_NaN());
  std::copy(dy, dy + reads.size, padded.begin());
  const int C = s.c, K = s.k, H_out = s.h_out(), W_out = s.w_out();
  std::vector<float> dw(std::size_t(s.m) * C * K * K, 0.0f);
  for (int m = 0; m < s.m; ++m)
    for (int h = 0; h < H_out; ++h)
      for (int w = 0; w < W_out; ++w)
        for (int c = 0; c < C; ++c)
          for (int p = 0; p < K; ++p)
            for (int q = 0; q < K; ++q)
              dw[((std::size_t(m) * C + c) * K + p) * K + q] +=
                  x[(std::size_t(c) * s.h + h + p) * s.w + w + q] *
                  padded[((std::size_t(m) * C + c) * H_out + h) * W_out + w];
  return dw;
}

template <class T>
void conv_backward_input_gather(const ConvShape& s, const T* dy, const T* weight, T* dx) {
  const int H_out = s.h_out(), W_out = s.w_out(), K = s.k;
  for (int n = 0; n < s.n; ++n)
    for (int c = 0; c < s.c; ++c)
      for (int h = 0; h < s.h; ++h)
        for (int w = 0; w < s.w; ++w) {
          T acc = T(0);
          for (int m = 0; m < s.m; ++m)
            for (int p = std::max(0, h - H_out + 1); p <= std::min(K - 1, h); ++p)
              for (int q = std::max(0, w - W_out + 1); q <= std::min(K - 1, w); ++q)
                acc += dy[((std::size_t(n) * s.m + m) * H_out + h - p) * W_out + w - q] *
                       weight[((std::size_t(m) * s.c + c) * K + p) * K + q];
          dx[((std::size_t(n) * s.c + c) * s.h + h) * s.w + w] = acc;
        }
}
template void conv_backward_input_gather<float>(const ConvShape&, const float*, const float*,
                                                float*);
template void conv_backward_input_gather<double>(const ConvShape&, const double*, const double*,
                                                 double*);

double finite_difference_max_rel_error(const std::function<double()>& loss,
                                       std::vector<double>& values,
                                       const std::vector<double>& analytic, double h) {
  double worst = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double saved = values[i];
    values[i] = saved + h;
    const double up = loss();
    values[i] = saved - h;
    const double down = loss();
    values[i] = saved;
    const double numeric = (up - down) / (2 * h);
    const double scale = std::max({std::fabs(numeric), std::fabs(analytic[i]), 1e-2});
    worst = std::max(worst, std::fabs(numeric - analytic[i]) / scale);
  }
  return worst;
}

std::vector<int> unroll_duplication(const ConvShape& s) {
  const std::size_t n_x = std::size_t(s.c) * s.h * s.w;
  const std::size_t n_unrolled = std::size_t(s.c) * s.k * s.k * s.h_out() * s.w_out();
  std::vector<double> tagged(n_x), unrolled(n_unrolled);
  for (std::size_t i = 0; i < n_x; ++i) tagged[i] = double(i);  // exact: indices < 2^53
  conv_unroll_cpu<double>(s, tagged.data(), unrolled.data());
  std::vector<int> count(n_x, 0);
  for (double v : unrolled) ++count[std::size_t(v)];
  return count;
}

std::size_t unroll_written_count(const ConvShape& s) {
  const std::size_t expected = std::size_t(s.c) * s.k * s.k * s.h_out() * s.w_out();
  std::vector<float> x(std::size_t(s.c) * s.h * s.w, 1.0f);
  std::vector<float> buffer(2 * expected, std::numeric_limits<float>::quiet_NaN());
  conv_unroll_cpu<float>(s, x.data(), buffer.data());
  return std::size_t(
      std::count_if(buffer.begin(), buffer.end(), [](float v) { return !std::isnan(v); }));
}

std::vector<Cell> differing_cells(const std::vector<float>& a, const std::vector<float>& b,
                                  int cols) {
  std::vector<Cell> cells;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    if (a[i] != b[i]) cells.push_back({int(i / std::size_t(cols)), int(i % std::size_t(cols))});
  return cells;
}

namespace {

// Fig 16.4 for one sample, without conv_forward_cpu's OpenMP region: the search below calls it
// hundreds of thousands of times on a 3x3 input, where starting a parallel region would dominate.
void direct_convolution(const ConvShape& s, const float* x, const float* weight, float* y) {
  const int H_out = s.h_out(), W_out = s.w_out(), K = s.k;
  for (int m = 0; m < s.m; ++m)
    for (int h = 0; h < H_out; ++h)
      for (int w = 0; w < W_out; ++w) {
        float acc = 0;
        for (int c = 0; c < s.c; ++c)
          for (int p = 0; p < K; ++p)
            for (int q = 0; q < K; ++q)
              acc += x[(std::size_t(c) * s.h + h + p) * s.w + w + q] *
                     weight[((std::size_t(m) * s.c + c) * K + p) * K + q];
        y[(std::size_t(m) * H_out + h) * W_out + w] = acc;
      }
}

}  // namespace

bool InputCopies::agree() const {
  return std::all_of(values.begin(), values.end(), [&](float v) { return v == values.front(); });
}

std::vector<InputCopies> unrolled_copies(const ConvShape& s, const std::vector<float>& unrolled) {
  const int K = s.k, H_out = s.h_out(), W_out = s.w_out(), HW = H_out * W_out;
  std::vector<InputCopies> out;
  for (int c = 0; c < s.c; ++c)
    for (int h = 0; h < s.h; ++h)
      for (int w = 0; w < s.w; ++w) {
        InputCopies copies{c, h, w, {}, {}};
        for (int p = 0; p < K; ++p)
          for (int q = 0; q < K; ++q) {
            const int ho = h - p, wo = w - q;  // the output position that reads (h, w) via (p, q)
            if (ho < 0 || ho >= H_out || wo < 0 || wo >= W_out) continue;
            const Cell cell{(c * K + p) * K + q, ho * W_out + wo};
            copies.cells.push_back(cell);
            copies.values.push_back(unrolled[std::size_t(cell.row) * HW + cell.col]);
          }
        out.push_back(std::move(copies));
      }
  return out;
}

ChannelSearch search_last_channel(const ConvShape& s, const std::vector<float>& x,
                                  const std::vector<float>& weight, const std::vector<float>& y,
                                  const std::vector<float>& printed_unrolled, int max_value) {
  const std::size_t plane = std::size_t(s.h) * s.w, last = (std::size_t(s.c) - 1) * plane;
  const std::size_t n_unrolled = std::size_t(s.c) * s.k * s.k * s.h_out() * s.w_out();
  std::vector<float> candidate(x), out(y.size()), unrolled(n_unrolled);
  ChannelSearch search;
  const long long base = max_value + 1;
  long long count = 1;
  for (std::size_t i = 0; i < plane; ++i) count *= base;
  for (long long code = 0; code < count; ++code) {
    long long rest = code;  // the last channel's entries are code's base-(max+1) digits
    for (std::size_t i = 0; i < plane; ++i, rest /= base) candidate[last + i] = float(rest % base);
    ++search.tried;
    direct_convolution(s, candidate.data(), weight.data(), out.data());
    if (out != y) continue;
    ++search.consistent;
    conv_unroll_cpu<float>(s, candidate.data(), unrolled.data());
    const int distance = int(differing_cells(unrolled, printed_unrolled, 1).size());
    if (search.distance < 0 || distance < search.distance)
      search.distance = distance, search.best.clear();
    if (distance == search.distance)
      search.best.emplace_back(candidate.begin() + std::ptrdiff_t(last), candidate.end());
  }
  return search;
}

std::vector<float> matmul(const std::vector<float>& a, const std::vector<float>& b, int rows,
                          int inner, int cols) {
  std::vector<float> c(std::size_t(rows) * cols, 0.0f);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j)
      for (int k = 0; k < inner; ++k)
        c[std::size_t(i) * cols + j] +=
            a[std::size_t(i) * inner + k] * b[std::size_t(k) * cols + j];
  return c;
}

void sgemm_colmajor_ref(int m, int n, int k, const float* a, int lda, const float* b, int ldb,
                        float* c, int ldc) {
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      float acc = 0;
      for (int l = 0; l < k; ++l) acc += a[i + std::size_t(l) * lda] * b[l + std::size_t(j) * ldb];
      c[i + std::size_t(j) * ldc] = acc;
    }
}

std::vector<float> conv_forward_unroll_gemm(const ConvShape& s, const float* x, const float* weight,
                                            bool per_sample_offset) {
  const int HW = s.h_out() * s.w_out(), CKK = s.c * s.k * s.k;
  std::vector<float> x_unrolled(std::size_t(CKK) * HW);  // one buffer reused for every sample
  std::vector<float> y(std::size_t(s.n) * s.m * HW);
  for (int n = 0; n < s.n; ++n) {
    const float* x_n = per_sample_offset ? x + std::size_t(n) * s.c * s.h * s.w : x;
    conv_unroll_cpu<float>(s, x_n, x_unrolled.data());
    sgemm_colmajor_ref(HW, s.m, CKK, x_unrolled.data(), HW, weight, CKK,
                       y.data() + std::size_t(n) * s.m * HW, HW);
  }
  return y;
}

long long unroll_blocks_printed(long long threads, int threads_per_block) {
  return static_cast<long long>(std::ceil(threads / threads_per_block));  // int division first
}

long long unroll_blocks_correct(long long threads, int threads_per_block) {
  return (threads + threads_per_block - 1) / threads_per_block;
}

namespace {

constexpr int kWarp = 32;
constexpr std::int64_t kSectorBytes = 32;

}  // namespace

int distinct_sectors(std::vector<std::int64_t>& byte_addresses) {
  for (auto& a : byte_addresses) a /= kSectorBytes;
  std::sort(byte_addresses.begin(), byte_addresses.end());
  return int(std::unique(byte_addresses.begin(), byte_addresses.end()) - byte_addresses.begin());
}

SectorCounts unroll_sector_counts(int C, int H, int W, int K) {
  const std::int64_t H_out = H - K + 1, W_out = W - K + 1, HW = H_out * W_out;
  const std::int64_t threads = C * HW, CKK = std::int64_t(C) * K * K;
  const std::int64_t word = sizeof(float);
  double reads = 0, writes = 0, literal = 0, ideal = 0;
  SectorCounts out;
  std::vector<std::int64_t> r, wr, lit, id;
  for (std::int64_t first = 0; first < threads; first += kWarp)
    for (int p = 0; p < K; ++p)
      for (int q = 0; q < K; ++q) {
        r.clear(), wr.clear(), lit.clear(), id.clear();
        for (std::int64_t t = first; t < std::min(first + kWarp, threads); ++t) {
          const std::int64_t c = t / HW, s = t % HW, h = s / W_out, w = s % W_out;
          const std::int64_t tap = (c * K + p) * K + q;  // w_unroll
          r.push_back(word * ((c * H + h + p) * W + w + q));
          wr.push_back(word * (tap * HW + s));
          lit.push_back(word * (s * CKK + tap));
          id.push_back(word * (t - first));
        }
        reads += distinct_sectors(r), writes += distinct_sectors(wr);
        literal += distinct_sectors(lit), ideal += distinct_sectors(id);
        ++out.requests;
      }
  const double n = double(out.requests);
  out.x_reads = reads / n, out.writes_fig16_14 = writes / n;
  out.writes_row_major = literal / n, out.ideal = ideal / n;
  return out;
}

}  // namespace lenet5::figures
