// Atomic file replacement: a reader (or a crash) sees either the old file or the complete new one,
// never a half-written mix. Checkpoints, metrics and the run's config.toml are written this way.
#pragma once

#include <filesystem>
#include <functional>
#include <initializer_list>
#include <ostream>
#include <string>
#include <string_view>

namespace lenet5 {

// Writes `bytes` to a unique temporary file next to `target` (<target>.tmp.<pid>.<n>), fsyncs it,
// renames it over `target` and fsyncs the directory so the rename itself survives a power loss. On
// failure the temporary file is removed, `target` is left as it was, and lenet5::Error names the
// target and the cause.
void write_file_atomically(const std::filesystem::path& target, std::string_view bytes);

// Same, for content in several pieces written one after the other (a header and a large payload,
// say), so that they need not be copied into one buffer first.
void write_file_atomically(const std::filesystem::path& target,
                           std::initializer_list<std::string_view> pieces);

// Same, for content produced by a stream writer. The content is built in memory first, so an
// exception thrown by `writer` leaves the file system untouched.
void write_file_atomically(const std::filesystem::path& target,
                           const std::function<void(std::ostream&)>& writer);

// A process killed inside a write leaves its temporary file behind (nothing else: the target is
// untouched). Removes, from `folder`, every such file whose writing process no longer exists, and
// returns how many; files it cannot remove are left, silently. The targets are never touched.
int remove_stale_temporary_files(const std::filesystem::path& folder);

// The whole of a file these functions wrote (a run's config.toml, say): what a reader sees is one
// complete version. lenet5::Error naming the file when it cannot be read.
std::string read_text_file(const std::filesystem::path& file);

}  // namespace lenet5
