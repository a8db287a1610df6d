// The one translation unit that compiles stb_image_write (used by pictures/image.cpp, and by
// tests that write other formats); stb_impl.cpp compiles the reader. A file of its own, so that
// the one sanitizer check its JPEG writer trips (CMakeLists.txt says which, and why) is left out
// here only, never from the reader of untrusted files.
//
// PNG writing is set up for speed: stb_image_write's own deflate and its per-row choice among
// five filters took 36 ms for the 830x452 C3 filter picture, which the end of every `train`
// waits for. zlib (linked already, for MNIST's gz files) deflates instead, and every row uses
// the "up" filter, which suits pictures of flat colour: 5.6 ms and a smaller file (24 KB
// against 26 KB), measured on the build machine.
#include <zlib.h>

#include <cstdlib>

namespace {

// stb_image_write's hook for another deflate: a malloc'ed zlib stream, or null on failure.
unsigned char* zlib_compress(unsigned char* data, int size, int* out_size, int level) {
  uLongf capacity = compressBound(uLong(size));
  auto* out = static_cast<unsigned char*>(std::malloc(capacity));
  if (out && compress2(out, &capacity, data, uLong(size), level) == Z_OK) {
    *out_size = int(capacity);
    return out;
  }
  std::free(out);
  return nullptr;
}

}  // namespace
#define STBIW_ZLIB_COMPRESS zlib_compress

#include "image/stb_warnings_off.hpp"

#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image_write.h>

#pragma GCC diagnostic pop

namespace {

// Set before main, before any thread can encode (the two are globals of stb_image_write).
const bool kPngSettings = [] {
  stbi_write_force_png_filter = 2;       // "up"
  stbi_write_png_compression_level = 3;  // zlib's level
  return true;
}();

}  // namespace
