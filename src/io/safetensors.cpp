// The safetensors reader and writer: the JSON header checked field by field against the file, F32
// tensors only.
#include "io/safetensors.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>
#include <tuple>
#include <utility>

#include "core/error.hpp"
#include "io/atomic_file.hpp"

namespace lenet5 {
namespace {

using nlohmann::json;

// The data area is copied to and from float arrays with memcpy, which is only the format's
// little-endian byte order on a little-endian host. Every target of this project (x86-64,
// aarch64 with CUDA) is one; a big-endian port would byte-swap in encode_safetensors and
// load_floats.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors I/O assumes a little-endian host");

constexpr std::size_t kLengthFieldBytes = 8;
constexpr std::uint64_t kFloatBytes = sizeof(float);

// A tensor's header entry after validation; offsets are relative to the data area.
struct Entry {
  std::string name;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

[[noreturn]] void fail(const std::string& file, const std::string& problem) {
  throw Error(file + ": " + problem);
}

// Names come from the file and may hold quotes or newlines; JSON escaping keeps the error on
// one line, and the replace handler keeps invalid UTF-8 from throwing inside an error path.
std::string quoted(const std::string& text) {
  return json(text).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string describe_shape(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::string describe_range(std::uint64_t begin, std::uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

// Number of bytes of an F32 tensor of this shape, or false when it does not fit in 64 bits.
// Dimensions must already be known to be non-negative. The scalar shape [] holds one element.
bool byte_count(const std::vector<std::int64_t>& shape, std::uint64_t* n_bytes) {
  std::uint64_t count = kFloatBytes;
  for (const std::int64_t dim : shape) {
    const auto udim = static_cast<std::uint64_t>(dim);
    if (udim != 0 && count > std::numeric_limits<std::uint64_t>::max() / udim) return false;
    count *= udim;
  }
  *n_bytes = count;
  return true;
}

// ---- writing ------------------------------------------------------------------------------

void append_u64_le(std::uint64_t value, std::string& out) {
  for (std::size_t i = 0; i < kLengthFieldBytes; ++i) {
    out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
  }
}

std::uint64_t checked_byte_count(const TensorView& tensor) {
  const std::string where = "tensor " + quoted(tensor.name);
  for (const std::int64_t dim : tensor.shape) {
    if (dim < 0)
      throw Error(where + " has negative dimension in shape " + describe_shape(tensor.shape));
  }
  std::uint64_t n_bytes = 0;
  if (!byte_count(tensor.shape, &n_bytes)) {
    throw Error(where + ": shape " + describe_shape(tensor.shape) + " overflows 64 bits");
  }
  if (n_bytes > 0 && tensor.data == nullptr) throw Error(where + " has no data");
  return n_bytes;
}

// Returns the tensors in name order (the order of the header, since nlohmann::json sorts keys),
// so that the offsets in the header read in increasing order.
std::vector<const TensorView*> sorted_checked(const std::vector<TensorView>& tensors) {
  std::vector<const TensorView*> sorted;
  for (const TensorView& tensor : tensors) sorted.push_back(&tensor);
  std::sort(sorted.begin(), sorted.end(),
            [](const TensorView* a, const TensorView* b) { return a->name < b->name; });
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i]->name == "__metadata__") throw Error("tensor name \"__metadata__\" is reserved");
    if (i > 0 && sorted[i]->name == sorted[i - 1]->name) {
      throw Error("duplicate tensor name " + quoted(sorted[i]->name));
    }
  }
  return sorted;
}

std::string dump_header(const json& header) {
  try {
    return header.dump();
  } catch (const json::type_error&) {
    throw Error("a tensor name or metadata string is not valid UTF-8");
  }
}

// ---- reading ------------------------------------------------------------------------------

std::uint64_t load_u64_le(const char* bytes) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < kLengthFieldBytes; ++i) {
    value |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  }
  return value;
}

// The limit is checked first so that an absurd length is never used to size anything, and so
// that 8 + length below cannot overflow.
std::uint64_t read_header_length(std::string_view bytes, const std::string& file) {
  if (bytes.size() < kLengthFieldBytes) {
    fail(file, "file is " + std::to_string(bytes.size()) +
                   " bytes, too short for the 8-byte header length (truncated?)");
  }
  const std::uint64_t n_header = load_u64_le(bytes.data());
  if (n_header > kSafetensorsMaxHeaderBytes) {
    fail(file, "header length " + std::to_string(n_header) + " exceeds the limit of " +
                   std::to_string(kSafetensorsMaxHeaderBytes) + " bytes (not a safetensors file?)");
  }
  if (kLengthFieldBytes + n_header > bytes.size()) {
    fail(file, "header length " + std::to_string(n_header) + " runs past the end of the file (" +
                   std::to_string(bytes.size()) + " bytes in all; truncated?)");
  }
  return n_header;
}

json parse_header(std::string_view text, const std::string& file) {
  json header;
  try {
    header = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    // A syntax error (parse_error) or a number too large for a double, such as 1e999
    // (out_of_range.406). Drop nlohmann's "[json.exception.parse_error.101] " prefix; keep its
    // position and reason.
    // The reason quotes the offending input, which may be a newline or broken UTF-8: those
    // bytes become '?' so the message stays one printable line.
    std::string what = e.what();
    const std::size_t bracket = what.find("] ");
    if (bracket != std::string::npos) what.erase(0, bracket + 2);
    for (char& c : what) {
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7F) c = '?';
    }
    fail(file, "header is not valid JSON: " + what);
  }
  if (!header.is_object()) {
    fail(file, "header is not a JSON object (found " + std::string(header.type_name()) + ")");
  }
  return header;
}

Metadata parse_metadata(const json& value, const std::string& file) {
  if (!value.is_object()) {
    fail(file, "__metadata__ must be an object mapping strings to strings, found " +
                   std::string(value.type_name()));
  }
  Metadata metadata;
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string()) {
      fail(file, "__metadata__ must map strings to strings, but " + quoted(key) + " holds a " +
                     item.type_name());
    }
    metadata[key] = item.get<std::string>();
  }
  return metadata;
}

const json& required_field(const json& entry, const char* field, const std::string& where,
                           const std::string& file) {
  const auto it = entry.find(field);
  if (it == entry.end()) fail(file, where + " is missing \"" + field + "\"");
  return *it;
}

void check_fields(const json& entry, const std::string& where, const std::string& file) {
  if (!entry.is_object()) {
    fail(file, where + " must be a JSON object, found " + entry.type_name());
  }
  static const std::set<std::string> kKnownFields = {"dtype", "shape", "data_offsets"};
  for (const auto& [field, unused] : entry.items()) {
    if (!kKnownFields.count(field)) fail(file, where + " has unexpected field " + quoted(field));
  }
}

void check_dtype(const json& entry, const std::string& where, const std::string& file) {
  const json& dtype = required_field(entry, "dtype", where, file);
  if (!dtype.is_string()) fail(file, where + ": \"dtype\" must be a string");
  if (dtype != "F32") {
    fail(file,
         where + " has dtype " + quoted(dtype.get<std::string>()) + "; only F32 is supported");
  }
}

std::vector<std::int64_t> parse_shape(const json& entry, const std::string& where,
                                      const std::string& file) {
  const json& shape_json = required_field(entry, "shape", where, file);
  if (!shape_json.is_array()) fail(file, where + ": \"shape\" must be an array of integers");
  std::vector<std::int64_t> shape;
  for (const json& dim : shape_json) {
    if (!dim.is_number_integer()) fail(file, where + ": \"shape\" must be an array of integers");
    if (dim.is_number_unsigned() &&
        dim.get<std::uint64_t>() >
            static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      fail(file, where + " has dimension " + dim.dump() + " in its shape, which overflows 64 bits");
    }
    shape.push_back(dim.get<std::int64_t>());
    if (shape.back() < 0) {
      fail(file,
           where + " has negative dimension " + dim.dump() + " in shape " + shape_json.dump());
    }
  }
  return shape;
}

std::pair<std::uint64_t, std::uint64_t> parse_offsets(const json& entry, const std::string& where,
                                                      const std::string& file) {
  const json& offsets = required_field(entry, "data_offsets", where, file);
  const bool well_formed = offsets.is_array() && offsets.size() == 2 &&
                           offsets[0].is_number_unsigned() && offsets[1].is_number_unsigned();
  if (!well_formed) {
    fail(file, where + ": \"data_offsets\" must be two non-negative integers [begin, end], found " +
                   offsets.dump());
  }
  return {offsets[0].get<std::uint64_t>(), offsets[1].get<std::uint64_t>()};
}

Entry parse_entry(const std::string& name, const json& value, std::uint64_t n_data,
                  const std::string& file) {
  const std::string where = "tensor " + quoted(name);
  check_fields(value, where, file);
  check_dtype(value, where, file);
  Entry entry{name, parse_shape(value, where, file), 0, 0};
  std::tie(entry.begin, entry.end) = parse_offsets(value, where, file);
  const std::string range = describe_range(entry.begin, entry.end);
  std::uint64_t n_bytes = 0;
  if (!byte_count(entry.shape, &n_bytes)) {
    fail(file, where + ": shape " + describe_shape(entry.shape) + " overflows 64 bits");
  }
  if (entry.end < entry.begin) {
    fail(file, where + " has data_offsets " + range + " whose end is before its begin");
  }
  if (entry.end > n_data) {
    fail(file, where + " has data_offsets " + range + " past the end of the data area (" +
                   std::to_string(n_data) + " bytes; truncated?)");
  }
  if (entry.end - entry.begin != n_bytes) {
    fail(file, where + " of shape " + describe_shape(entry.shape) + " needs " +
                   std::to_string(n_bytes) + " bytes of F32, but data_offsets " + range + " span " +
                   std::to_string(entry.end - entry.begin));
  }
  return entry;
}

// The format requires the tensors to tile the data area exactly. Sorting by (begin, end) puts
// an empty tensor sitting at a boundary before the tensor that starts there, so it is no overlap.
void check_tiling(std::vector<Entry> entries, std::uint64_t n_data, const std::string& file) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
  });
  std::uint64_t covered = 0;  // the data area [0, covered) is tiled so far
  const Entry* previous = nullptr;
  for (const Entry& entry : entries) {
    if (entry.begin < covered) {
      fail(file, "tensors " + quoted(previous->name) + " " +
                     describe_range(previous->begin, previous->end) + " and " + quoted(entry.name) +
                     " " + describe_range(entry.begin, entry.end) + " overlap in the data area");
    }
    if (entry.begin > covered) {
      fail(file, "bytes [" + std::to_string(covered) + ", " + std::to_string(entry.begin) + ")" +
                     " of the data area are not covered by any tensor (the format forbids gaps)");
    }
    covered = entry.end;
    previous = &entry;
  }
  if (covered != n_data) {
    fail(file, "bytes [" + std::to_string(covered) + ", " + std::to_string(n_data) + ")" +
                   " at the end of the data area are not covered by any tensor");
  }
}

std::vector<float> load_floats(std::string_view data, const Entry& entry) {
  std::vector<float> values((entry.end - entry.begin) / kFloatBytes);
  if (!values.empty())
    std::memcpy(values.data(), data.data() + entry.begin, entry.end - entry.begin);
  return values;
}

// Closes a POSIX file descriptor on every path out of read_whole_file, the throwing ones included.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : m_fd(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (m_fd >= 0) ::close(m_fd);
  }
  int get() const { return m_fd; }

 private:
  int m_fd;
};

[[noreturn]] void fail_too_large(const std::filesystem::path& file, const std::string& size) {
  throw Error("cannot read " + file.string() + ": it holds " + size + " bytes, more than the " +
              std::to_string(kSafetensorsMaxFileBytes) +
              " (16 MiB) lenet5 reads from a checkpoint, whose own hold under 1 MB: not a lenet5 "
              "checkpoint?");
}

// Stops at the limit whatever fstat said: a file can grow, and /dev/zero reports a size of 0.
std::string read_whole_file(const std::filesystem::path& file) {
  const auto fail_errno = [&](const char* step) {
    throw Error("cannot read " + file.string() + ": " + step + ": " +
                std::system_category().message(errno));
  };
  const FileDescriptor fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) fail_errno("open");
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) fail_errno("fstat");
  if (std::uint64_t(std::max<off_t>(info.st_size, 0)) > kSafetensorsMaxFileBytes)
    fail_too_large(file, std::to_string(info.st_size));
  std::string bytes;
  bytes.reserve(static_cast<std::size_t>(std::max<off_t>(info.st_size, 0)));
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n_read = ::read(fd.get(), buffer, sizeof buffer);
    if (n_read < 0 && errno == EINTR) continue;
    if (n_read < 0) fail_errno("read");
    if (n_read == 0) return bytes;
    bytes.append(buffer, static_cast<std::size_t>(n_read));
    if (bytes.size() > kSafetensorsMaxFileBytes)
      fail_too_large(file, "at least " + std::to_string(bytes.size()));
  }
}

}  // namespace

std::string encode_safetensors(const std::vector<TensorView>& tensors, const Metadata& metadata) {
  const std::vector<const TensorView*> sorted = sorted_checked(tensors);
  std::vector<std::uint64_t> n_bytes_of;
  for (const TensorView* tensor : sorted) n_bytes_of.push_back(checked_byte_count(*tensor));

  json header = json::object();
  std::uint64_t n_data = 0;
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    const TensorView* tensor = sorted[i];
    const std::uint64_t n_bytes = n_bytes_of[i];
    header[tensor->name] = {
        {"dtype", "F32"}, {"shape", tensor->shape}, {"data_offsets", {n_data, n_data + n_bytes}}};
    n_data += n_bytes;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;

  std::string header_text = dump_header(header);
  // Padding to a multiple of 8 keeps the data area 8-byte aligned for readers that mmap the file.
  header_text.append((8 - header_text.size() % 8) % 8, ' ');

  std::string bytes;
  bytes.reserve(kLengthFieldBytes + header_text.size() + n_data);
  append_u64_le(header_text.size(), bytes);
  bytes += header_text;
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    bytes.append(reinterpret_cast<const char*>(sorted[i]->data), n_bytes_of[i]);
  }
  return bytes;
}

// nlohmann::json keeps the last of duplicate keys, so a header naming one tensor twice is read
// as if only the last entry were there; unless both entries claimed the same bytes, the tiling
// check then reports the bytes left without an owner.
SafetensorsFile decode_safetensors(std::string_view bytes, const std::string& name_for_errors) {
  const std::uint64_t n_header = read_header_length(bytes, name_for_errors);
  const json header = parse_header(bytes.substr(kLengthFieldBytes, n_header), name_for_errors);
  const std::string_view data = bytes.substr(kLengthFieldBytes + n_header);

  SafetensorsFile result;
  std::vector<Entry> entries;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      result.metadata = parse_metadata(value, name_for_errors);
    } else {
      entries.push_back(parse_entry(key, value, data.size(), name_for_errors));
    }
  }
  check_tiling(entries, data.size(), name_for_errors);
  for (const Entry& entry : entries) {
    result.tensors[entry.name] = Tensor32{entry.shape, load_floats(data, entry)};
  }
  return result;
}

void write_safetensors(const std::filesystem::path& file, const std::vector<TensorView>& tensors,
                       const Metadata& metadata) {
  std::string bytes;
  try {
    bytes = encode_safetensors(tensors, metadata);
  } catch (const Error& e) {
    throw Error("cannot write " + file.string() + ": " + e.what());
  }
  write_file_atomically(file, std::string_view(bytes));
}

SafetensorsFile read_safetensors(const std::filesystem::path& file) {
  return decode_safetensors(read_whole_file(file), file.string());
}

}  // namespace lenet5
