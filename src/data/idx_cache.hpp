// A cache of decoded gzipped IDX files, so that a run reads MNIST's 55 MB of pixels in a few
// milliseconds instead of inflating its 11 MB of gzip (about half a second).
//
// The cache of <folder>/NAME.gz is <folder>/.cache/NAME.bin: a header, then the decoded elements.
// The header names the source by its size and XXH64 (core/xxh64.hpp), which are checked against
// the gzip file on every load (hashing 11 MB costs a few milliseconds), and carries the data's
// dimensions, the CRC-32 of the uncompressed file (for checkpoints), the XXH64 of the elements
// and of the header itself. A cache that is missing, of another format version, truncated,
// corrupt or made from other source bytes is never used: the file is decoded again and the
// cache rewritten, atomically. A folder where the cache cannot be written (read-only, say) costs
// only the decoding. Plain IDX files are read directly: they are their own cache.
#pragma once

#include <filesystem>
#include <string>

#include "data/idx.hpp"

namespace lenet5 {

// Where read_idx_cached found a file's data.
struct IdxSource {
  bool from_cache = false;
  std::string cache_miss;  // why a gzipped file's cache was not used; empty otherwise
};

// read_idx(file, kind), through the cache when the file is gzipped (by its 1f 8b magic). Throws
// what read_idx throws; problems with the cache itself are never errors.
IdxArray read_idx_cached(const std::filesystem::path& file, IdxKind kind,
                         IdxSource* source = nullptr);

// The cache file of a gzipped IDX file: <its folder>/.cache/<its name without ".gz">.bin
std::filesystem::path idx_cache_file(const std::filesystem::path& file);

}  // namespace lenet5
