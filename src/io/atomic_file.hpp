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
// untouched). For a folder whose files only the holder of its lock writes (a run folder, under
// io/folder_lock.hpp's lock), called by that holder: removes every such file in `folder` that
// another process wrote, and returns how many. The lock, not the writer's process id, says the
// writer is gone: a process id is reused, and a killed run's id may belong to another process
// by the time its folder is resumed. Files it cannot remove are left, silently; the targets are
// never touched.
int remove_others_temporary_files(const std::filesystem::path& folder);

// The whole of a file these functions wrote (a run's config.toml, say): what a reader sees is one
// complete version. lenet5::Error naming the file when it cannot be read.
std::string read_text_file(const std::filesystem::path& file);

}  // namespace lenet5
