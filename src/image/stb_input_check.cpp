// The checks run on an image file's bytes before stb_image reads them (PNG chunks, JPEG tables,
// BMP and GIF headers): stb_input_check.hpp lists what each refuses.
#include "image/stb_input_check.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.hpp"

namespace lenet5 {
namespace {

std::uint32_t big_endian(const std::string& bytes, std::size_t at, int width) {
  std::uint32_t value = 0;
  for (int i = 0; i < width; ++i) value = (value << 8) | std::uint8_t(bytes[at + i]);
  return value;
}

[[noreturn]] void corrupt(const std::string& name, const std::string& format,
                          const std::string& what) {
  throw Error("cannot decode image '" + name + "': corrupt " + format + ": " + what);
}

// Refuses what stb_image 2.27 mishandles in a PNG's chunks: a length past the end of the file
// (stb reserved it before reading), and an empty image-data chunk (IDAT) before any image data,
// which the format allows but which makes stb copy zero bytes to a null buffer (undefined
// behaviour; found by fuzzing `serve`).
void check_png(const std::string& bytes, const std::string& name) {
  std::size_t at = 8;  // after the signature
  bool image_data = false;
  while (at + 8 <= bytes.size()) {
    const std::uint64_t length = big_endian(bytes, at, 4);
    const std::uint64_t left = bytes.size() - at - 8;
    if (length + 4 > left)  // data and CRC
      corrupt(name, "PNG",
              "a chunk claims " + std::to_string(length) + " bytes, the file holds " +
                  std::to_string(left) + " more");
    if (bytes.compare(at + 4, 4, "IEND") == 0) return;
    if (bytes.compare(at + 4, 4, "IDAT") == 0) {
      if (length == 0 && !image_data)
        throw Error("cannot decode image '" + name +
                    "': its PNG has an empty image-data chunk (IDAT) before its image data, which "
                    "the decoder cannot read: save the image again with another program");
      image_data = true;
    }
    at += 12 + length;
  }
}

// Which Huffman tables the file has defined so far: [class][id], class 0 DC and 1 AC, id 0-3.
using DefinedTables = bool[2][4];

// The Huffman tables of one DHT segment [begin, end): each a class/id byte, 16 counts of codes
// per length, then that many symbols.
void check_huffman_tables(const std::string& bytes, std::size_t begin, std::size_t end,
                          DefinedTables& defined, const std::string& name) {
  for (std::size_t at = begin; at < end;) {
    if (at + 17 > end) corrupt(name, "JPEG", "a Huffman table is cut short");
    const std::uint8_t table = std::uint8_t(bytes[at]);
    if (table >> 4 <= 1 && (table & 15) <= 3) defined[table >> 4][table & 15] = true;
    std::size_t codes = 0;
    for (int i = 1; i <= 16; ++i) codes += std::uint8_t(bytes[at + i]);
    if (codes > 256)
      corrupt(name, "JPEG",
              "a Huffman table of " + std::to_string(codes) + " codes (the format allows 256)");
    at += 17 + codes;
    if (at > end) corrupt(name, "JPEG", "a Huffman table runs past its segment");
  }
}

// A scan header (SOS segment [begin, end)) may name only Huffman tables defined before it: stb
// decodes with whatever its uninitialised table of that id holds (found by fuzzing: a symbol
// index of 770 read from a 256-entry table). A baseline scan decodes with each component's DC
// and AC table; a progressive scan with the DC tables (a first DC scan), none (a DC refinement)
// or the AC table (Ss > 0).
void check_scan_tables(const std::string& bytes, std::size_t begin, std::size_t end,
                       bool progressive, const DefinedTables& defined, const std::string& name) {
  if (begin >= end) return;
  const std::size_t n = std::uint8_t(bytes[begin]);
  if (begin + 1 + 2 * n + 3 > end) return;  // malformed: stb refuses it
  const std::size_t spectral = begin + 1 + 2 * n;
  const bool dc_scan = std::uint8_t(bytes[spectral]) == 0;
  const bool refinement = (std::uint8_t(bytes[spectral + 2]) >> 4) != 0;
  const bool uses_dc = !progressive || (dc_scan && !refinement);
  const bool uses_ac = !progressive || !dc_scan;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint8_t tables = std::uint8_t(bytes[begin + 2 + 2 * i]);
    for (const auto& [used, table_class, id, label] :
         {std::tuple{uses_dc, 0, tables >> 4, "DC"}, std::tuple{uses_ac, 1, tables & 15, "AC"}}) {
      if (used && id <= 3 && !defined[table_class][id])
        corrupt(name, "JPEG",
                std::string("a scan uses ") + label + " Huffman table " + std::to_string(id) +
                    ", which the file has not defined");
    }
  }
}

// Every marker segment, the ones between scans of a progressive JPEG included: after a scan
// header the entropy-coded data runs to the next marker (0xFF not followed by 0x00 or a restart).
void check_jpeg(const std::string& bytes, std::size_t after_soi, const std::string& name) {
  DefinedTables defined = {};
  bool progressive = false;
  std::size_t at = after_soi;
  while (at + 4 <= bytes.size()) {
    if (std::uint8_t(bytes[at]) != 0xFF) {  // entropy-coded data: find the next marker
      ++at;
      continue;
    }
    const std::uint8_t marker = std::uint8_t(bytes[at + 1]);
    if (marker == 0xFF || marker == 0x00 || marker == 0x01 || marker == 0xD8 ||
        (marker >= 0xD0 && marker <= 0xD7)) {  // fill, stuffed byte, markers without a segment
      at += marker == 0xFF ? 1 : 2;
      continue;
    }
    if (marker == 0xD9) return;  // end of image
    const std::size_t length = big_endian(bytes, at + 2, 2);
    if (length < 2 || at + 2 + length > bytes.size())
      corrupt(name, "JPEG",
              "a segment claims " + std::to_string(length) + " bytes past the end of the file");
    if (marker == 0xC2) progressive = true;  // the one progressive frame stb decodes
    if (marker == 0xC4) check_huffman_tables(bytes, at + 4, at + 2 + length, defined, name);
    if (marker == 0xDA)
      check_scan_tables(bytes, at + 4, at + 2 + length, progressive, defined, name);
    at += 2 + length;
  }
}

// stb's sanity limit on sides (STBI_MAX_DIMENSIONS): it refuses anything larger itself.
constexpr std::int64_t kStbMaxSide = 1 << 24;

// A little-endian field as stb reads it: zeros past the end of the file.
std::uint32_t little_endian(const std::string& bytes, std::size_t at, int width) {
  std::uint32_t value = 0;
  for (int i = width - 1; i >= 0; --i)
    value = value << 8 | (at + i < bytes.size() ? std::uint8_t(bytes[at + i]) : 0);
  return value;
}

[[noreturn]] void pixels_cut_short(const std::string& name, const std::string& format,
                                   const std::string& where) {
  corrupt(name, format,
          "its pixel data is cut short: " + where + " (a download or copy that stopped early?)");
}

// A BMP that stb 2.27 decodes wrongly without a word. The header is read as stb reads it
// (stbi__bmp_parse_header, stbi__bmp_load), and anything stb refuses itself is left to it.
//   - Pixel rows that end early: stb reads zeros for the missing bytes, so a file cut short read as
//     a picture black below the cut. The rows start at the offset the header gives, each padded
//     to 4 bytes; the last row's padding may be left out.
//   - A pixel of 1, 4 or 8 bits naming a colour past the end of the colour table, or a table of a
//     negative number of entries (pixel data starting inside the header): stb reads the colour
//     from its table's uninitialised entries.
void check_bmp(const std::string& bytes, const std::string& name) {
  const auto field = [&bytes](std::size_t at, int width) {
    return little_endian(bytes, at, width);
  };
  const std::int32_t offset = std::int32_t(field(10, 4)), header = std::int32_t(field(14, 4));
  const bool core = header == 12;  // OS/2's header: 16-bit sides, no compression field
  if (offset < 0 || (!core && header != 40 && header != 56 && header != 108 && header != 124))
    return;
  const std::int64_t width = core ? std::int64_t(field(18, 2)) : std::int32_t(field(18, 4));
  std::int64_t height = core ? std::int64_t(field(20, 2)) : std::int32_t(field(22, 4));
  const int bits = int(field(core ? 24 : 28, 2));
  // A signed int to stb: from 2^31 on it passes stb's test for compressed data, as 0 does.
  const std::int32_t compression = core ? 0 : std::int32_t(field(30, 4));
  if (compression == 1 || compression == 2 || compression >= 4) return;  // RLE, JPEG, PNG
  height = height < 0 ? -height : height;  // negative: rows from the top
  if (width <= 0 || height <= 0 || width > kStbMaxSide || height > kStbMaxSide) return;
  if (bits != 1 && bits != 4 && bits != 8 && bits != 16 && bits != 24 && bits != 32) return;
  const std::uint64_t row = (std::uint64_t(width) * std::uint64_t(bits) + 7) / 8;
  const std::uint64_t stride = (row + 3) / 4 * 4;
  const std::uint64_t need = std::uint64_t(offset) + stride * std::uint64_t(height - 1) + row;
  if (bytes.size() < need)
    pixels_cut_short(name, "BMP",
                     "its " + std::to_string(width) + "x" + std::to_string(height) + " pixels of " +
                         std::to_string(bits) + " bits need " + std::to_string(need) +
                         " bytes, the file holds " + std::to_string(bytes.size()));
  if (bits > 8) return;
  // The colour table's entries, as stb counts them from the offset (OS/2's formula is stb's).
  const int colours = core ? (offset - 14 - 24) / 3 : (offset - 14 - header) >> 2;
  if (colours < 0)  // stb then reads no table at all (for OS/2 headers it counts 24 bytes, not 12)
    corrupt(name, "BMP",
            "its pixel data starts at byte " + std::to_string(offset) +
                ", too early for the colour table its pixels of " + std::to_string(bits) +
                " bits need");
  if (colours == 0 || colours > 256 || colours >= 1 << bits)
    return;  // refused, or every index fits
  for (std::int64_t y = 0; y < height; ++y) {
    const std::size_t start = std::size_t(offset) + std::size_t(y) * stride;
    for (std::int64_t x = 0; x < width; ++x) {
      const std::uint8_t b = std::uint8_t(bytes[start + std::size_t(x * bits / 8)]);
      const int shift = 8 - bits - int(x * bits % 8);  // the first pixel in a byte's top bits
      const int colour = (b >> shift) & ((1 << bits) - 1);
      if (colour < colours) continue;
      const std::string pixel = std::to_string(x) + ", " + std::to_string(y);
      corrupt(name, "BMP",
              "a pixel (" + pixel + " of the rows as stored) uses colour " +
                  std::to_string(colour) + " of a colour table of " + std::to_string(colours));
    }
  }
}

// The LZW codes of a GIF image from `at` on, walked as stbi__process_gif_raster reads them,
// counting the pixels each code draws (a table entry draws one more than the entry it extends).
// Refuses the file if it ends before `pixels` are drawn, the end-of-information code has come or
// a block of length 0 has closed the data: stb would take the end of the file for the end of the
// data (and a missing byte for a zero) and return the picture part drawn, without a word.
void check_gif_codes(const std::string& bytes, std::size_t at, int code_size, std::int64_t pixels,
                     const std::string& name) {
  const int clear = 1 << code_size;
  int size = code_size + 1, avail = clear + 2, old = -1;
  bool cleared = false;
  std::vector<std::int64_t> length(8193, 1);
  std::int64_t drawn = 0;
  std::int32_t bits = 0;
  int valid = 0, block_left = 0;
  const auto next_byte = [&] {
    if (at >= bytes.size())
      pixels_cut_short(name, "GIF",
                       "the file ends inside its image's data, after " + std::to_string(drawn) +
                           " of its " + std::to_string(pixels) + " pixels");
    return std::uint8_t(bytes[at++]);
  };
  while (drawn < pixels) {
    if (valid < size) {
      if (block_left == 0 && (block_left = next_byte()) == 0) return;  // closed by the file
      --block_left;
      bits |= std::int32_t(next_byte()) << valid;
      valid += 8;
      continue;
    }
    const int code = bits & ((1 << size) - 1);
    bits >>= size;
    valid -= size;
    if (code == clear) {
      size = code_size + 1;
      avail = clear + 2;
      old = -1;
      cleared = true;
    } else if (code == clear + 1 || code > avail || !cleared) {
      return;  // the end of information, or a code stb refuses
    } else {
      if (old >= 0) {
        if (avail + 1 > 8192) return;  // stb refuses
        length[std::size_t(avail++)] = length[std::size_t(old)] + 1;
      } else if (code == avail) {
        return;  // stb refuses
      }
      drawn += length[std::size_t(code)];
      if ((avail & ((1 << size) - 1)) == 0 && avail <= 0x0FFF) ++size;
      old = code;
    }
  }
}

// A GIF whose first image ends early (see check_gif_codes). The blocks up to the first image are
// walked as stb walks them (stbi__gif_load_next): the screen descriptor and its colour table,
// extensions, then the image descriptor, its colour table, its code size and its codes. Anything
// stb refuses on its own (an unknown block, a file without an image) is left to it.
void check_gif(const std::string& bytes, const std::string& name) {
  const auto colour_table = [](std::uint8_t flags) {
    return flags & 0x80 ? std::size_t(3) << ((flags & 7) + 1) : std::size_t(0);
  };
  if (bytes.size() < 13) return;
  std::size_t at = 13 + colour_table(std::uint8_t(bytes[10]));
  // Sub-blocks from `at` up to their terminator; false if the file ends first.
  const auto skip_sub_blocks = [&] {
    while (at < bytes.size()) {
      const std::size_t length = std::uint8_t(bytes[at++]);
      if (length == 0) return true;
      at += length;
    }
    return false;
  };
  while (at < bytes.size()) {
    const std::uint8_t block = std::uint8_t(bytes[at++]);
    if (block == 0x21) {  // an extension: its label, then sub-blocks
      const bool graphic_control = at < bytes.size() && std::uint8_t(bytes[at]) == 0xF9;
      ++at;
      // stb reads a graphic control block of any length but 4 as that block alone, its next
      // byte as the next block's tag.
      if (graphic_control && at < bytes.size() && bytes[at] != 4) {
        at += 1 + std::uint8_t(bytes[at]);
        continue;
      }
      if (!skip_sub_blocks()) return;
    } else if (block == 0x2C) {  // the image: descriptor, colour table, code size, codes
      const std::size_t codes =
          at + 9 + (at + 9 <= bytes.size() ? colour_table(std::uint8_t(bytes[at + 8])) + 1 : 0);
      if (at + 9 > bytes.size() || codes > bytes.size())
        pixels_cut_short(name, "GIF", "the file ends before its image's data starts");
      const std::int64_t pixels =
          std::int64_t(little_endian(bytes, at + 4, 2)) * little_endian(bytes, at + 6, 2);
      const int code_size = std::uint8_t(bytes[codes - 1]);
      if (code_size <= 12) check_gif_codes(bytes, codes, code_size, pixels, name);
      return;
    } else {
      return;
    }
  }
}

// The bytes as stb_image reads them from memory: a zero for every byte read past the end; a skip
// may pass the end, and one of a negative count (a 32-bit length above 2^31) goes to the end.
class StbBytes {
 public:
  explicit StbBytes(const std::string& bytes) : bytes_(bytes) {}

  int byte() { return at_ < bytes_.size() ? std::uint8_t(bytes_[at_++]) : 0; }
  int little16() { return byte() | byte() << 8; }
  int big16() { return byte() << 8 | byte(); }
  std::uint32_t big32() { return std::uint32_t(big16()) << 16 | std::uint32_t(big16()); }
  void skip(std::int64_t n) { at_ = n < 0 ? bytes_.size() : at_ + std::size_t(n); }
  bool at_end() const { return at_ >= bytes_.size(); }
  std::uint64_t left() const { return at_ < bytes_.size() ? bytes_.size() - at_ : 0; }

  // stbi__hdr_gettoken: a line without its newline, cut at 1023 characters, as the C string stb
  // reads it: up to its first NUL (a line starting with one ends the header).
  std::string token() {
    std::string token;
    char c = char(byte());
    while (!at_end() && c != '\n') {
      token += c;
      if (token.size() == 1023) {
        while (!at_end() && byte() != '\n') {
        }
        break;
      }
      c = char(byte());
    }
    return token.c_str();
  }

 private:
  const std::string& bytes_;
  std::size_t at_ = 0;
};

// Refuses unless `n` more bytes follow: the pixel data `what` describes is cut short. The text is
// formed only for the refusal (the run-length walks check every packet).
void need_bytes(const StbBytes& bytes, std::uint64_t n, const std::string& name, const char* format,
                const std::string& what) {
  if (bytes.left() >= n) return;
  pixels_cut_short(name, format,
                   what + " need " + std::to_string(n) + (n == 1 ? " byte" : " bytes") +
                       " more, the file holds " + std::to_string(bytes.left()));
}

// A PSD whose pixel data ends early: stb 2.27 reads zeros for what is missing and says nothing.
// Walked as stbi__psd_load reads it: the header, three sections skipped by their lengths, then
// the first four channels, raw or run-length coded (PackBits) per channel.
void check_psd(const std::string& file, const std::string& name) {
  StbBytes bytes(file);
  bytes.skip(4);  // "8BPS": check_stb_input saw it
  if (bytes.big16() != 1) return;
  bytes.skip(6);
  const int channels = bytes.big16();
  const std::int64_t height = std::int32_t(bytes.big32()), width = std::int32_t(bytes.big32());
  const int depth = bytes.big16();
  if (channels > 16 || height <= 0 || width <= 0 || height > kStbMaxSide || width > kStbMaxSide ||
      (depth != 8 && depth != 16) || bytes.big16() != 3)
    return;
  for (int section = 0; section < 3; ++section) bytes.skip(std::int32_t(bytes.big32()));
  const int compression = bytes.big16();
  const std::int64_t pixels = width * height;
  if (compression > 1 || 4 * pixels > std::numeric_limits<int>::max()) return;
  const int read = std::min(channels, 4);  // stb reads no channel past the fourth
  const std::string what = std::to_string(width) + "x" + std::to_string(height) + " pixels";
  if (compression == 0)
    return need_bytes(bytes, std::uint64_t(read) * std::uint64_t(pixels) * (depth / 8), name, "PSD",
                      "its " + what);
  bytes.skip(height * channels * 2);  // the rows' byte counts, which stb does not use
  const std::string codes = "the run-length codes of its " + what;
  for (int channel = 0; channel < read; ++channel)
    for (std::int64_t done = 0; done < pixels;) {
      need_bytes(bytes, 1, name, "PSD", codes);
      const int code = bytes.byte();
      if (code == 128) continue;                           // no operation
      const int run = code < 128 ? code + 1 : 257 - code;  // literal bytes or one repeated
      if (run > pixels - done) return;                     // stb refuses it
      need_bytes(bytes, code < 128 ? run : 1, name, "PSD", codes);
      bytes.skip(code < 128 ? run : 1);
      done += run;
    }
}

// A TGA whose pixel data ends early: stb 2.27 reads zeros for what is missing (the missing rows
// of an uncompressed one it left as the heap had them: stb_impl.cpp allocates zeroed) and says
// nothing. stb takes a file for a TGA when every other format's test failed and stbi__tga_test
// passes; no file another test takes passes that one (its second byte is 0 or 1), so the same
// test here is enough. Walked as stbi__tga_load reads it: the header, the image ID, the colour
// map (after as many bytes as its first index says: stb skips those), then the pixels, raw or in
// run-length packets.
void check_tga(const std::string& file, const std::string& name) {
  StbBytes bytes(file);
  const int id_length = bytes.byte(), mapped = bytes.byte(), type = bytes.byte();
  const int map_start = bytes.little16(), map_length = bytes.little16(), map_bits = bytes.byte();
  bytes.skip(4);  // origin
  const int width = bytes.little16(), height = bytes.little16(), bits = bytes.byte();
  bytes.skip(1);  // descriptor
  const auto one_of = [](int value, std::initializer_list<int> values) {
    return std::find(values.begin(), values.end(), value) != values.end();
  };
  if (mapped > 1 || width < 1 || height < 1 || !one_of(bits, {8, 15, 16, 24, 32})) return;
  if (mapped == 1 && (!one_of(type, {1, 9}) || !one_of(map_bits, {8, 15, 16, 24, 32}) ||
                      !one_of(bits, {8, 16}) || map_length == 0))
    return;
  if (mapped == 0 && !one_of(type, {2, 3, 10, 11})) return;
  const bool run_length = type >= 8;
  // The bytes stb reads for one pixel (or colour map entry) of `bits` bits: two for 15 and 16
  // bits (RGB 5-5-5, or grey and alpha), else a byte per 8 bits (stbi__tga_get_comp).
  const auto entry_bytes = [](int entry_bits) {
    return entry_bits == 15 || entry_bits == 16 ? 2 : entry_bits / 8;
  };
  bytes.skip(id_length);
  if (mapped == 1) {
    bytes.skip(map_start);
    need_bytes(bytes, std::uint64_t(map_length) * entry_bytes(map_bits), name, "TGA",
               "its colour map's " + std::to_string(map_length) + " entries");
    bytes.skip(std::int64_t(map_length) * entry_bytes(map_bits));
  }
  const int pixel = mapped == 1 ? bits / 8 : entry_bytes(bits);
  const std::int64_t pixels = std::int64_t(width) * height;
  const std::string what =
      "its " + std::to_string(width) + "x" + std::to_string(height) + " pixels";
  if (!run_length) return need_bytes(bytes, std::uint64_t(pixels) * pixel, name, "TGA", what);
  const std::string packets = "the run-length packets of " + what;
  for (std::int64_t done = 0; done < pixels;) {
    need_bytes(bytes, 1, name, "TGA", packets);
    const int code = bytes.byte();
    const std::int64_t run = std::min<std::int64_t>(1 + (code & 127), pixels - done);
    const std::int64_t read = code >> 7 ? pixel : run * pixel;  // one pixel repeated, or raw
    need_bytes(bytes, std::uint64_t(read), name, "TGA", packets);
    bytes.skip(read);
    done += run;
  }
}

// The size from the resolution line "-Y <height> +X <width>", parsed as stb parses it, long
// numbers cut to int as stb cuts them (4294967312 is 16); false where stb refuses the line.
bool hdr_size(const std::string& line, int& width, int& height) {
  if (line.compare(0, 3, "-Y ") != 0) return false;
  const char* at = line.c_str() + 3;
  char* end = nullptr;
  height = static_cast<int>(std::strtol(at, &end, 10));
  while (*end == ' ') ++end;
  if (std::strncmp(end, "+X ", 3) != 0) return false;
  width = static_cast<int>(std::strtol(end + 3, nullptr, 10));
  return true;
}

// stb_image's HDR reader walked over the bytes without decoding, step for step as 2.27 reads them
// (stbi__hdr_load). Where the pixel data ends early, stb misbehaves: a run-length scanline cut
// short loops forever (each read past the end gives a zero count, which advances nothing; found by
// fuzzing), and flat pixels cut short are converted from an uninitialised local array. So a file
// that ends before its last pixel is refused; anything else stb refuses itself is left to it.
void check_hdr(const std::string& bytes, const std::string& name) {
  StbBytes walk(bytes);
  walk.token();           // "#?RADIANCE" or "#?RGBE": check_stb_input saw it
  bool rle_rgbe = false;  // the one pixel format stb reads; it refuses a file without it
  for (std::string line = walk.token(); !line.empty(); line = walk.token())
    rle_rgbe = rle_rgbe || line == "FORMAT=32-bit_rle_rgbe";
  if (!rle_rgbe) return;
  int width = 0, height = 0;
  if (!hdr_size(walk.token(), width, height) || width <= 0 || height <= 0 || width > kStbMaxSide ||
      height > kStbMaxSide)
    return;
  const std::uint64_t pixels = std::uint64_t(width) * std::uint64_t(height);
  const auto flat_pixels_need = [&](std::uint64_t n) {
    need_bytes(walk, 4 * n, name, "HDR", "its " + std::to_string(n) + " pixels of 4 bytes");
  };
  if (width < 8 || width >= 32768) return flat_pixels_need(pixels);
  for (int row = 0; row < height; ++row) {
    const auto cut_short = [&] {
      pixels_cut_short(name, "HDR",
                       "the file ends inside scanline " + std::to_string(row + 1) + " of " +
                           std::to_string(height));
    };
    if (walk.left() < 4) cut_short();
    const int c1 = walk.byte(), c2 = walk.byte(), high = walk.byte();
    if (c1 != 2 || c2 != 2 || (high & 0x80)) {  // stb reads the rest as flat pixels
      walk.byte();
      return flat_pixels_need(pixels - 1);
    }
    if ((high << 8 | walk.byte()) != width) return;  // stb refuses the scanline
    for (int channel = 0; channel < 4; ++channel) {
      for (int x = 0; x < width;) {
        if (walk.at_end()) cut_short();
        int count = walk.byte();
        const bool run = count > 128;
        if (run) count -= 128;
        if (count > width - x) return;  // stb refuses the run
        if (walk.left() < std::uint64_t(run ? 1 : count)) cut_short();
        for (int i = 0; i < (run ? 1 : count); ++i) walk.byte();
        x += count;
      }
    }
  }
}

}  // namespace

void check_stb_input(const std::string& bytes, const std::string& name) {
  if (bytes.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0) check_png(bytes, name);
  // stb's tests for BMP, GIF and PSD: their signatures (a BMP's header size is checked in
  // check_bmp); a TGA's second byte is 0 or 1 (check_tga has the rest of stb's test).
  if (bytes.compare(0, 2, "BM") == 0) check_bmp(bytes, name);
  if (bytes.compare(0, 6, "GIF87a") == 0 || bytes.compare(0, 6, "GIF89a") == 0)
    check_gif(bytes, name);
  if (bytes.compare(0, 4, "8BPS") == 0) check_psd(bytes, name);
  if (bytes.size() >= 2 && std::uint8_t(bytes[1]) <= 1) check_tga(bytes, name);
  // stb's test for HDR: one of these signature lines.
  if (bytes.compare(0, 11, "#?RADIANCE\n") == 0 || bytes.compare(0, 7, "#?RGBE\n") == 0)
    check_hdr(bytes, name);
  // stb takes a file for a JPEG when its first marker is SOI, and reads a marker as 0xFF, any
  // number of 0xFF fill bytes, then the code: FF FF FF D8 starts a JPEG as FF D8 does (found by
  // fuzzing, with a Huffman table cut off by the end of the file behind it).
  std::size_t at = 0;
  if (at < bytes.size() && std::uint8_t(bytes[at]) == 0xFF) {
    while (at < bytes.size() && std::uint8_t(bytes[at]) == 0xFF) ++at;
    if (at < bytes.size() && std::uint8_t(bytes[at]) == 0xD8) check_jpeg(bytes, at + 1, name);
  }
}

}  // namespace lenet5
