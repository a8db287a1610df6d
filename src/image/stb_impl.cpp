// The one translation unit that compiles stb_image (read by image/image_io.cpp); its writer,
// stb_image_write, is compiled by stb_write_impl.cpp. Every other file includes the headers for
// declarations only; defining the implementation twice breaks the link.
// stb is header-only (Debian's libstb-dev headers), so nothing here links against libstb.
#include <cstdlib>

#include "image/stb_warnings_off.hpp"

// Every buffer stb allocates starts as zeros. Where a file ends before its pixels do, stb 2.27
// left an uncompressed TGA's missing rows as the allocation found them (found under
// AddressSanitizer, which fills new memory with 0xbe). stb_input_check.cpp refuses such files now;
// this keeps any buffer stb leaves partly unwritten the same on every run.
#define STBI_MALLOC(size) std::calloc(1, size)
#define STBI_REALLOC(pointer, size) std::realloc(pointer, size)
#define STBI_FREE(pointer) std::free(pointer)
#define STB_IMAGE_IMPLEMENTATION
#include <stb_image.h>

#pragma GCC diagnostic pop
