// Bounded resources for any input, through the real binary: decompression bombs and headers that
// claim huge sizes are refused before the allocation, naming the limit, and no such input makes
// lenet5 use more than 1 GiB of memory or run more than 20 s before it errors. Each run's peak
// resident memory and wall time are measured (wait4), not estimated.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "child_process.hpp"
#include "core/layout.hpp"
#include "core/sgd.hpp"
#include "data/datasets.hpp"
#include "data/idx.hpp"
#include "image/image_io.hpp"
#include "io/safetensors.hpp"
#include "test_util.hpp"
#include "train/checkpoint.hpp"

namespace lenet5 {
namespace {

namespace fs = std::filesystem;
using testing::big_endian16;
using testing::big_endian32;
using testing::little_endian16;
using testing::little_endian32;
using testing::mentions;
using testing::TempDir;

// Whether this build is instrumented by AddressSanitizer (.ci/run's second stage): GCC defines
// __SANITIZE_ADDRESS__, clang answers __has_feature.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

// The brief's bounds: whatever the input, lenet5 errors within these. The time bound is the
// product's, for the optimised binary; an instrumented one at -O1 (ASan and UBSan check every
// access: 3-5x slower in these decoders, more on a loaded 2-core machine) gets 4x the time, so
// that the test still catches a runaway loop there without failing on the instrumentation.
constexpr long kMaxRssKib = 1L << 20;  // 1 GiB
constexpr double kMaxWallS = kAddressSanitizer ? 80 : 20;

struct Measured {
  int exit_code = -1;
  std::string err;
  double wall_s = 0;
  long max_rss_kib = 0;
};

Measured run_measured(const std::vector<std::string>& arguments, const TempDir& dir) {
  testing::ChildOptions options;
  options.stderr_file = dir / "stderr.txt";
  // A run that spins past the time bound is killed (SIGKILL follows SIGXCPU at the hard limit),
  // so a decoder caught in an endless loop fails its test instead of holding the suite.
  options.cpu_seconds_limit = rlim_t(kMaxWallS);
  const auto started = std::chrono::steady_clock::now();
  const testing::ChildEnd end =
      testing::wait_for(testing::start_lenet5(arguments, options), started);
  return {end.exit_code(), testing::read_text(dir / "stderr.txt"), end.wall_s, end.max_rss_kib};
}

// `lenet5 classify` of one image with `model`, on the CPU, measured.
Measured classify_measured(const fs::path& model, const fs::path& image, const TempDir& dir) {
  return run_measured(
      {"classify", "--device", "cpu", "--checkpoint", model.string(), image.string()}, dir);
}

// Exit code 1, the message names every item of `expected`, within the bounds.
void expect_refused_within_bounds(const Measured& run, const std::vector<std::string>& expected) {
  EXPECT_EQ(run.exit_code, 1) << run.err;
  for (const std::string& text : expected) EXPECT_PRED2(mentions, run.err, text);
  EXPECT_LT(run.max_rss_kib, kMaxRssKib) << run.err;
  EXPECT_LT(run.wall_s, kMaxWallS) << run.err;
  std::printf("[ figures  ] %.2f s, %.0f MB peak: %s", run.wall_s, run.max_rss_kib / 1024.0,
              run.err.substr(run.err.find("error") != std::string::npos ? run.err.find("error") : 0)
                  .c_str());
}

void write_bytes(const fs::path& file, const std::string& bytes) {
  std::ofstream(file, std::ios::binary) << bytes;
}

std::string idx_header(std::uint32_t magic, std::initializer_list<std::uint32_t> dims) {
  std::string header = big_endian32(magic);
  for (std::uint32_t dim : dims) header += big_endian32(dim);
  return header;
}

// raw deflate of `bytes`, ended with `flush`, continuing the stream `z`.
std::string deflate_piece(z_stream& z, const std::string& bytes, int flush) {
  std::string out;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = uInt(bytes.size());
  char buffer[1 << 16];
  do {
    z.next_out = reinterpret_cast<Bytef*>(buffer);
    z.avail_out = sizeof buffer;
    deflate(&z, flush);
    out.append(buffer, sizeof buffer - z.avail_out);
  } while (z.avail_out == 0);
  return out;
}

// A valid gzip file of `head` followed by `n_mib` MiB of zeros, built without compressing the
// zeros more than once: one MiB is deflated after a full flush (so it refers to nothing before
// it) and its compressed bytes, about 1 KB, are repeated. 4 GiB of zeros take about 4 MB.
std::string gzip_bomb(const std::string& head, std::uint32_t n_mib) {
  z_stream z{};
  deflateInit2(&z, 9, Z_DEFLATED, -15, 9, Z_DEFAULT_STRATEGY);
  std::string gz = {'\x1f', '\x8b', 8, 0, 0, 0, 0, 0, 0, 3};
  gz += deflate_piece(z, head, Z_FULL_FLUSH);
  const std::string zeros(1 << 20, '\0');
  const std::string block = deflate_piece(z, zeros, Z_FULL_FLUSH);
  uLong crc = crc32(0, reinterpret_cast<const Bytef*>(head.data()), uInt(head.size()));
  const uLong zeros_crc =
      crc32(0, reinterpret_cast<const Bytef*>(zeros.data()), uInt(zeros.size()));
  for (std::uint32_t i = 0; i < n_mib; ++i) {
    gz += block;
    crc = crc32_combine(crc, zeros_crc, zeros.size());
  }
  gz += deflate_piece(z, "", Z_FINISH);
  deflateEnd(&z);
  const std::uint32_t size = std::uint32_t(head.size() + (std::uint64_t(n_mib) << 20));
  for (std::uint32_t value : {std::uint32_t(crc), size})
    for (int shift = 0; shift < 32; shift += 8) gz += char(value >> shift & 0xFF);
  return gz;
}

// A data folder whose training images are `images_gz`, the other three files being MNIST's own
// shape (only the images are read before the error).
fs::path data_folder_with(const TempDir& dir, const std::string& images_gz) {
  const fs::path data = dir / "data";
  fs::create_directories(data);
  const DatasetDescription& names = mnist_dataset();
  write_bytes(data / (names.train_images.name + ".gz"), images_gz);
  write_bytes(data / names.train_labels.name, idx_header(0x801, {1}) + std::string(1, '\0'));
  write_bytes(data / names.test_images.name,
              idx_header(0x803, {1, 28, 28}) + std::string(784, '\0'));
  write_bytes(data / names.test_labels.name, idx_header(0x801, {1}) + std::string(1, '\0'));
  return data;
}

std::vector<std::string> train_on(const fs::path& data, const TempDir& dir) {
  return {"train",  "--device",    "cpu",   "--threads",           "1",
          "--data", data.string(), "--out", (dir / "run").string()};
}

// MNIST's size in the header, 4 GiB of zeros after it: reading stops at the declared 47 MB and
// the first MiB beyond, instead of inflating (and counting) the rest.
TEST(BoundedInputs, GzipBombBehindAnHonestHeaderStopsAtTheDeclaredSize) {
  TempDir dir;
  const std::string bomb = gzip_bomb(idx_header(0x803, {60000, 28, 28}), 4096);
  ASSERT_LT(bomb.size(), 5u << 20);
  const fs::path data = data_folder_with(dir, bomb);
  expect_refused_within_bounds(
      run_measured(train_on(data, dir), dir),
      {"trailing garbage: at least 1048576 bytes", "60000 images of 28x28"});
}

// A header claiming 2.9 GB of images in a gzip of a few hundred bytes: refused from the header.
TEST(BoundedInputs, IdxHeaderClaimingMoreThanTheLimitIsRefusedBeforeReading) {
  TempDir dir;
  const std::string bomb = gzip_bomb(idx_header(0x803, {3'700'000, 28, 28}), 1);
  ASSERT_LT(bomb.size(), 2048u);
  const fs::path data = data_folder_with(dir, bomb);
  expect_refused_within_bounds(run_measured(train_on(data, dir), dir),
                               {"3700000 x 28 x 28", std::to_string(kMaxIdxDataBytes), "256 MiB"});
}

// The most images a header may declare (342,392 of 28x28, 128 bytes short of the 256 MiB limit)
// in a gzip bomb of 260 KB that inflates to 256 MiB: all the declared data is inflated into memory
// before the 128 bytes after it are found, and still the run stays within the bounds.
TEST(BoundedInputs, IdxDataAtTheLimitIsReadWithinTheBounds) {
  TempDir dir;
  const std::uint32_t n_images = std::uint32_t(kMaxIdxDataBytes / 784);
  const std::string head = idx_header(0x803, {n_images, 28, 28});
  const std::string bomb = gzip_bomb(head, std::uint32_t(kMaxIdxDataBytes >> 20));
  const fs::path data = data_folder_with(dir, bomb);
  expect_refused_within_bounds(
      run_measured(train_on(data, dir), dir),
      {"trailing garbage: 128 bytes", std::to_string(n_images) + " images"});
}

// A checkpoint made here, for classify.
fs::path write_checkpoint(const TempDir& dir) {
  Checkpoint c;
  const ParamLayout layout = lenet5_layout(c.net);
  c.parameters.resize(layout.buffer_floats);
  initialise_parameters(layout, c.net, 1, c.parameters.data());
  c.config_toml = "[train]\n";
  save_checkpoint(dir / "model.safetensors", c);
  return dir / "model.safetensors";
}

void append_png_chunk(std::string& png, const std::string& type, const std::string& data) {
  png += big_endian32(std::uint32_t(data.size()));
  const std::string body = type + data;
  png += body + big_endian32(std::uint32_t(
                    crc32(0, reinterpret_cast<const Bytef*>(body.data()), uInt(body.size()))));
}

std::string png_start(std::uint32_t width, std::uint32_t height, int bit_depth, int colour_type) {
  std::string png = "\x89PNG\r\n\x1a\n";
  append_png_chunk(png, "IHDR",
                   big_endian32(width) + big_endian32(height) + char(bit_depth) +
                       char(colour_type) + std::string(3, '\0'));
  return png;
}

// Baseline JPEG markers up to the frame header: SOI, then SOF0 of one 8-bit component.
std::string jpeg_start(std::uint16_t width, std::uint16_t height) {
  const auto u16 = [](std::uint16_t v) { return std::string{char(v >> 8), char(v & 0xFF)}; };
  return std::string("\xFF\xD8\xFF\xC0", 4) + u16(11) + char(8) + u16(height) + u16(width) +
         char(1) + char(1) + char(0x11) + char(0);
}

TEST(BoundedInputs, ImageHeadersClaimingHugeSizesAreRefusedBeforeDecoding) {
  TempDir dir;
  const fs::path model = write_checkpoint(dir);
  std::string png = png_start(30000, 30000, 8, 0);
  append_png_chunk(png, "IEND", "");
  write_bytes(dir / "huge.png", png);
  write_bytes(dir / "huge.jpg", jpeg_start(30000, 30000));
  for (const char* name : {"huge.png", "huge.jpg"})
    expect_refused_within_bounds(
        classify_measured(model, dir / name, dir),
        {name, "image is 30000x30000", std::to_string(kMaxImagePixels) + " pixels"});
}

// The largest image the limits accept, in its most expensive form (16-bit RGBA PNG, 8192x4096,
// 256 MiB of samples in a 260 KB file), is decoded in full: transparent, it reads as a blank
// sheet, refused after decoding, within the bounds.
TEST(BoundedInputs, TheLargestAcceptedImageDecodesWithinTheBounds) {
  TempDir dir;
  const fs::path model = write_checkpoint(dir);
  const int width = 8192, height = 4096;
  ASSERT_EQ(std::int64_t(width) * height, kMaxImagePixels);
  std::string png = png_start(width, height, 16, 6);
  z_stream z{};
  deflateInit(&z, 1);  // fast: the file only has to exist, its size barely matters
  const std::string row(1 + std::size_t(width) * 8, '\0');  // filter 0, then zero samples
  std::string idat;
  for (int y = 0; y < height; ++y) idat += deflate_piece(z, row, Z_NO_FLUSH);
  idat += deflate_piece(z, "", Z_FINISH);
  deflateEnd(&z);
  append_png_chunk(png, "IDAT", idat);
  append_png_chunk(png, "IEND", "");
  write_bytes(dir / "largest.png", png);
  expect_refused_within_bounds(classify_measured(model, dir / "largest.png", dir),
                               {"largest.png", "blank"});
}

// Files of 8192x4096 images (the most pixels accepted) that cost their decoder most, each holding
// all its pixels (one cut short is refused) in as few bytes as its format allows: the BMP at 1
// bit a pixel (4 MiB; stb expands it to RGB), the TGA in run-length packets of 128 RGBA pixels,
// the PSD in 16 bits (stb's 16-bit reading doubles it) with four channels in run-length packets,
// the GIF in a few bytes of LZW data that cover the screen, the HDR black in run-length scanlines
// of 524 bytes. The HDR is the costliest of all (stb expands it to float RGB before tone-mapping).
std::vector<std::pair<std::string, std::string>> files_of_the_largest_accepted_images() {
  const std::uint16_t width = 8192, height = 4096;
  const std::size_t pixels = std::size_t(width) * height;
  // Two palette entries, black and white, then rows of 1,024 bytes of palette index 0.
  const std::string bmp = "BM" + little_endian32(0) + little_endian32(0) + little_endian32(62) +
                          little_endian32(40) + little_endian32(width) + little_endian32(height) +
                          little_endian16(1) + little_endian16(1) + std::string(24, '\0') +
                          std::string{0, 0, 0, 0, -1, -1, -1, 0} +
                          std::string(std::size_t(width) / 8 * height, '\0');
  // Type 10 (run-length true colour); each packet 128 repeats (code 0xFF) of one black pixel.
  std::string tga = std::string{0, 0, 10} + std::string(9, '\0') + little_endian16(width) +
                    little_endian16(height) + char(32) + char(8);
  for (std::size_t done = 0; done < pixels; done += 128) tga += std::string{-1, 0, 0, 0, -1};
  std::string hdr = "#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y " + std::to_string(height) + " +X " +
                    std::to_string(width) + "\n";
  // Each scanline: its marker and width, then per channel 64 runs of 127 zeros and one of 64.
  std::string runs;
  for (int run = 0; run < 64; ++run) runs += std::string{char(128 + 127), 0};
  runs += std::string{char(128 + 64), 0};
  const std::string scanline =
      std::string{2, 2, char(width >> 8), char(width & 0xFF)} + runs + runs + runs + runs;
  for (int row = 0; row < height; ++row) hdr += scanline;
  // PSD: 4 channels of 16 bits, RGB mode, run-length coded (PackBits): the rows' byte counts,
  // which stb skips, then per channel packets of 128 repeats (code 129) of a zero byte.
  std::string psd = "8BPS" + big_endian16(1) + std::string(6, '\0') + big_endian16(4) +
                    big_endian32(height) + big_endian32(width) + big_endian16(16) +
                    big_endian16(3) + std::string(12, '\0') + big_endian16(1) +
                    std::string(std::size_t(height) * 4 * 2, '\0');
  for (std::size_t done = 0; done < 4 * pixels; done += 128) psd += std::string{char(129), 0};
  // GIF: a two-colour global table, one frame covering the screen, a few bytes of LZW data.
  const std::string gif = "GIF89a" + little_endian16(width) + little_endian16(height) +
                          std::string{char(0x80), 0, 0} + std::string{0, 0, 0, -1, -1, -1} +
                          "\x2c" + std::string(4, '\0') + little_endian16(width) +
                          little_endian16(height) + std::string{0, 2, 2, 0x4c, 1, 0, 0x3b};
  return {{"largest.bmp", bmp},
          {"largest.tga", tga},
          {"largest.hdr", hdr},
          {"largest.psd", psd},
          {"largest.gif", gif}};
}

TEST(BoundedInputs, TheLargestAcceptedImageOfEveryFormatDecodesWithinTheBounds) {
  TempDir dir;
  const fs::path model = write_checkpoint(dir);
  for (const auto& [name, bytes] : files_of_the_largest_accepted_images()) {
    SCOPED_TRACE(name);
    write_bytes(dir / name, bytes);
    expect_refused_within_bounds(classify_measured(model, dir / name, dir), {name, "blank"});
  }
}

// HDR files on which stb_image 2.27 looped forever: a run-length scanline cut short (found by
// fuzzing), and the same behind header lines that stb reads as C strings (a NUL ends a line's
// text, and a line starting with one ends the header) or a height that stb cuts to int (2^32 +
// 16 is 16). Each is refused within the bounds.
TEST(BoundedInputs, HdrFilesStbLoopedForeverOnAreRefusedWithinTheBounds) {
  TempDir dir;
  const fs::path model = write_checkpoint(dir);
  const std::string scanline_cut_short = std::string{2, 2, 0, 8};
  const std::pair<const char*, std::string> files[] = {
      {"nul_in_format.hdr",
       std::string("#?RADIANCE\nFORMAT=32-bit_rle_rgbe\0x\n\n-Y 1 +X 8\n", 47) +
           scanline_cut_short},
      {"nul_line.hdr",
       std::string("#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\0\n-Y 1 +X 8\n", 46) + scanline_cut_short},
      {"height_past_int.hdr",
       "#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y 4294967297 +X 8\n" + scanline_cut_short}};
  for (const auto& [name, bytes] : files) {
    SCOPED_TRACE(name);
    write_bytes(dir / name, bytes);
    expect_refused_within_bounds(classify_measured(model, dir / name, dir),
                                 {name, "corrupt HDR: its pixel data is cut short"});
  }
  const fs::path found =
      testing::source_dir() / "tests/data/fuzz-found/hdr_rle_scanline_cut_short.hdr";
  expect_refused_within_bounds(
      classify_measured(model, found, dir),
      {"hdr_rle_scanline_cut_short.hdr", "corrupt HDR: its pixel data is cut short"});
}

// The costliest picture for the stroke filters, found by fuzzing: the longest side the limits
// accept, 16384 px, filled by one thin line whose ink box is the whole picture (2048x16384, a
// 3 px line from corner to corner). Scaled to 20 px such a stroke would vanish, so it is widened
// by a dilation whose radius grows with the picture: at full size that took 13 s and 1.1 GiB.
// It is read, as a digit, within the bounds.
TEST(BoundedInputs, APictureOfOneThinLineAsLargeAsAcceptedIsReadWithinTheBounds) {
  TempDir dir;
  const fs::path model = write_checkpoint(dir);
  const int width = 2048, height = 16384;
  std::string pgm = "P5\n" + std::to_string(width) + " " + std::to_string(height) + "\n255\n";
  std::string row(std::size_t(width), '\xFF');
  for (int y = 0; y < height; ++y) {
    const int x = int(std::int64_t(y) * (width - 4) / height);
    std::fill(row.begin(), row.end(), '\xFF');
    std::fill_n(row.begin() + x, 3, '\0');
    pgm += row;
  }
  write_bytes(dir / "line.pgm", pgm);
  const Measured run = classify_measured(model, dir / "line.pgm", dir);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_LT(run.max_rss_kib, kMaxRssKib);
  EXPECT_LT(run.wall_s, kMaxWallS);
  std::printf("[ figures  ] %.2f s, %.0f MB peak: a 2048x16384 picture of a thin line\n",
              run.wall_s, run.max_rss_kib / 1024.0);
}

// A checkpoint path that is a device without end, and a file beyond the limit: refused without
// reading it whole.
TEST(BoundedInputs, CheckpointsLargerThanTheLimitAreRefusedUnread) {
  TempDir dir;
  write_bytes(dir / "x.png", "");
  expect_refused_within_bounds(
      run_measured({"evaluate", "--device", "cpu", "--checkpoint", "/dev/zero"}, dir),
      {"/dev/zero", "16 MiB"});
  {
    std::ofstream big(dir / "big.safetensors", std::ios::binary);
    big.seekp(std::streamoff(kSafetensorsMaxFileBytes) + 1);
    big.put('\0');  // a sparse file: its size costs no disk
  }
  expect_refused_within_bounds(
      run_measured(
          {"evaluate", "--device", "cpu", "--checkpoint", (dir / "big.safetensors").string()}, dir),
      {"big.safetensors", std::to_string(kSafetensorsMaxFileBytes + 2)});
}

}  // namespace
}  // namespace lenet5
