#include "image/stb_input_check.hpp"

#include <cstddef>
#include <cstdint>

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

void check_png(const std::string& bytes, const std::string& name) {
  std::size_t at = 8;  // after the signature
  while (at + 8 <= bytes.size()) {
    const std::uint64_t length = big_endian(bytes, at, 4);
    const std::uint64_t left = bytes.size() - at - 8;
    if (length + 4 > left)  // data and CRC
      corrupt(name, "PNG",
              "a chunk claims " + std::to_string(length) + " bytes, the file holds " +
                  std::to_string(left) + " more");
    if (bytes.compare(at + 4, 4, "IEND") == 0) return;
    at += 12 + length;
  }
}

// The Huffman tables of one DHT segment [begin, end): each a class/id byte, 16 counts of codes
// per length, then that many symbols.
void check_huffman_tables(const std::string& bytes, std::size_t begin, std::size_t end,
                          const std::string& name) {
  for (std::size_t at = begin; at < end;) {
    if (at + 17 > end) corrupt(name, "JPEG", "a Huffman table is cut short");
    std::size_t codes = 0;
    for (int i = 1; i <= 16; ++i) codes += std::uint8_t(bytes[at + i]);
    if (codes > 256)
      corrupt(name, "JPEG",
              "a Huffman table of " + std::to_string(codes) + " codes (the format allows 256)");
    at += 17 + codes;
    if (at > end) corrupt(name, "JPEG", "a Huffman table runs past its segment");
  }
}

// Every marker segment, the ones between scans of a progressive JPEG included: after a scan
// header the entropy-coded data runs to the next marker (0xFF not followed by 0x00 or a restart).
void check_jpeg(const std::string& bytes, const std::string& name) {
  std::size_t at = 2;  // after SOI
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
    if (marker == 0xC4) check_huffman_tables(bytes, at + 4, at + 2 + length, name);
    at += 2 + length;
  }
}

}  // namespace

void check_stb_input(const std::string& bytes, const std::string& name) {
  if (bytes.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0) check_png(bytes, name);
  if (bytes.size() >= 2 && std::uint8_t(bytes[0]) == 0xFF && std::uint8_t(bytes[1]) == 0xD8)
    check_jpeg(bytes, name);
}

}  // namespace lenet5
