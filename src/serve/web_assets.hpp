// The page's own files (web/), compiled into the binary at build time (cmake/embed_web.cmake), so
// the server serves exactly these and never reads a path from a request on the disk.
#pragma once

#include <cstddef>
#include <vector>

namespace lenet5::serve {

struct WebAsset {
  const char* path;          // "/index.html", "/app.js", "/style.css"
  const char* content_type;  // "text/javascript; charset=utf-8"
  const unsigned char* bytes;
  std::size_t size;
};

const std::vector<WebAsset>& web_assets();

}  // namespace lenet5::serve
