// The one translation unit that compiles stb_image (read by image/image_io.cpp); its writer,
// stb_image_write, is compiled by stb_write_impl.cpp. Every other file includes the headers for
// declarations only; defining the implementation twice breaks the link.
// stb is header-only (Debian's libstb-dev headers), so nothing here links against libstb.
#include "image/stb_warnings_off.hpp"

#define STB_IMAGE_IMPLEMENTATION
#include <stb_image.h>

#pragma GCC diagnostic pop
