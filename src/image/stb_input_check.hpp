// What stb_image 2.27 (the version Debian ships) must not be handed, found by fuzzing and by
// reading its readers: checked on an image file's bytes before they reach it.
//   - A PNG chunk that claims more bytes than the file holds: stb reserves the claimed size for
//     the image data before reading it (up to 2 GiB for a 4 MB upload).
//   - A JPEG Huffman table of more than 256 codes: stb writes the code lengths past the end of
//     its table (fixed in later versions, which refuse it as "bad DHT header").
//   - A JPEG scan that uses a Huffman table the file has not defined before it: stb decodes with
//     the uninitialised memory of that table and reads past the end of its symbols.
//   - An HDR file whose pixel data ends early: stb loops forever on a run-length scanline cut
//     short and converts flat pixels cut short from uninitialised memory.
//   - A BMP, GIF, TGA or PSD whose pixel data ends early: stb decodes what is there and fills the
//     rest with zeros or the background, without a word (a partial download read as a digit).
// Each format is recognised as stb recognises it: a JPEG by SOI after any number of 0xFF fill
// bytes, a TGA by stb's test of its header, the others by their signatures.
// Other formats pass unchecked (binary PNM never reaches stb: image_io.cpp reads it). Throws
// lenet5::Error naming `name` and what is wrong.
#pragma once

#include <string>

namespace lenet5 {

void check_stb_input(const std::string& bytes, const std::string& name);

}  // namespace lenet5
