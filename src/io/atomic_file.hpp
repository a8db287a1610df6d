// Atomic file replacement: a reader (or a crash) sees either the old file or the complete new one,
// never a half-written mix. Checkpoints, metrics and the run's config.toml are written this way.
#pragma once

#include <filesystem>
#include <functional>
#include <ostream>
#include <string_view>

namespace lenet5 {

// Writes `bytes` to a unique temporary file next to `target`, fsyncs it, renames it over `target`
// and fsyncs the directory so the rename itself survives a power loss. On failure the temporary
// file is removed, `target` is left as it was, and lenet5::Error names the target and the cause.
void write_file_atomically(const std::filesystem::path& target, std::string_view bytes);

// Same, for content produced by a stream writer. The content is built in memory first, so an
// exception thrown by `writer` leaves the file system untouched.
void write_file_atomically(const std::filesystem::path& target,
                           const std::function<void(std::ostream&)>& writer);

}  // namespace lenet5
