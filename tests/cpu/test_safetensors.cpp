// The safetensors reader/writer and the atomic file writer. Corrupt files are built in memory
// from hand-written headers, so each test states exactly which rule of the format it breaks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "io/atomic_file.hpp"
#include "io/safetensors.hpp"

namespace lenet5 {
namespace {

namespace fs = std::filesystem;

// Runs `action`, expecting a lenet5::Error whose message contains every one of `parts`.
template <typename Action>
void expect_error(Action&& action, const std::vector<std::string>& parts) {
  try {
    action();
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const std::string& part : parts) {
      EXPECT_NE(message.find(part), std::string::npos)
          << "message \"" << message << "\" lacks \"" << part << "\"";
    }
    EXPECT_EQ(message.find('\n'), std::string::npos) << "message spans lines: " << message;
    return;
  }
  ADD_FAILURE() << "no lenet5::Error thrown";
}

void expect_decode_error(const std::string& bytes, const std::vector<std::string>& parts) {
  std::vector<std::string> with_name = parts;
  with_name.push_back("corrupt.safetensors: ");
  expect_error([&] { decode_safetensors(bytes, "corrupt.safetensors"); }, with_name);
}

std::string u64_le(std::uint64_t value) {
  std::string bytes;
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
  return bytes;
}

// A file image with this header text (padded like a real writer would) and `n_data` data bytes.
std::string image(std::string header, std::size_t n_data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  return u64_le(header.size()) + header + std::string(n_data, '\x01');
}

// The JSON header of two F32 tensors of `elements` values each, at the given data offsets, written
// as text so that the names may repeat (a JSON object built in code would keep only one).
std::string two_tensors(const std::string& a, int a_begin, int a_end, const std::string& b,
                        int b_begin, int b_end, int elements) {
  const auto entry = [&](const std::string& name, int begin, int end) {
    return "\"" + name + "\": {\"dtype\": \"F32\", \"shape\": [" + std::to_string(elements) +
           "], \"data_offsets\": [" + std::to_string(begin) + ", " + std::to_string(end) + "]}";
  };
  return "{" + entry(a, a_begin, a_end) + ", " + entry(b, b_begin, b_end) + "}";
}

std::string valid_image() {
  static const std::vector<float> a = {1, 2, 3, 4, 5, 6};
  static const std::vector<float> b = {7, 8};
  return encode_safetensors({{"a", {2, 3}, a.data()}, {"b", {2}, b.data()}}, {{"epoch", "3"}});
}

std::uint32_t bits_of(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

std::string slurp(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// ---- round trips and the exact bytes ------------------------------------------------------

TEST(Safetensors, RoundTripIsBitIdentical) {
  const float nan_payload = [] {
    const std::uint32_t bits = 0x7FC12345u;
    float value = 0;
    std::memcpy(&value, &bits, sizeof value);
    return value;
  }();
  const std::vector<float> scalar = {3.25f};
  const std::vector<float> one = {-0.0f};
  const std::vector<float> special = {std::numeric_limits<float>::infinity(),
                                      std::numeric_limits<float>::denorm_min(), nan_payload,
                                      -1e-38f};
  std::vector<float> conv(6 * 1 * 5 * 5);
  for (std::size_t i = 0; i < conv.size(); ++i) conv[i] = std::sin(static_cast<float>(i)) / 7.0f;
  const Metadata metadata = {{"format_version", "1"},
                             {"config", "[train]\nepochs = 10\nlr = \"0.1\"\n"},
                             {"note", "caf\xC3\xA9 \xE2\x9C\x93"}};

  const std::string bytes = encode_safetensors({{"z.scalar", {}, scalar.data()},
                                                {"c1.weight", {6, 1, 5, 5}, conv.data()},
                                                {"b.one", {1}, one.data()},
                                                {"special", {2, 2}, special.data()},
                                                {"empty", {0, 3}, nullptr}},
                                               metadata);
  const SafetensorsFile file = decode_safetensors(bytes, "mem");

  EXPECT_EQ(file.metadata, metadata);
  ASSERT_EQ(file.tensors.size(), 5u);
  const auto expect_same = [&](const std::string& name, const std::vector<std::int64_t>& shape,
                               const std::vector<float>& values) {
    const Tensor32& tensor = file.tensors.at(name);
    EXPECT_EQ(tensor.shape, shape) << name;
    ASSERT_EQ(tensor.values.size(), values.size()) << name;
    for (std::size_t i = 0; i < values.size(); ++i) {
      EXPECT_EQ(bits_of(tensor.values[i]), bits_of(values[i])) << name << "[" << i << "]";
    }
  };
  expect_same("z.scalar", {}, scalar);
  expect_same("c1.weight", {6, 1, 5, 5}, conv);
  expect_same("b.one", {1}, one);
  expect_same("special", {2, 2}, special);
  expect_same("empty", {0, 3}, {});
}

TEST(Safetensors, HeaderIsPaddedJsonWithContiguousOffsets) {
  const std::string bytes = valid_image();
  std::uint64_t n_header = 0;
  for (int i = 0; i < 8; ++i) {
    n_header |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  }
  EXPECT_EQ(n_header % 8, 0u);
  ASSERT_EQ(bytes.size(), 8 + n_header + 8 * sizeof(float));
  const std::string header = bytes.substr(8, n_header);
  EXPECT_EQ(header.front(), '{');
  const std::size_t last_brace = header.rfind('}');
  EXPECT_EQ(header.find_first_not_of(' ', last_brace + 1), std::string::npos)
      << "padding not spaces";

  const nlohmann::json json = nlohmann::json::parse(header);
  EXPECT_EQ(json["a"]["data_offsets"], nlohmann::json({0, 24}));
  EXPECT_EQ(json["b"]["data_offsets"], nlohmann::json({24, 32}));
  EXPECT_EQ(json["a"]["dtype"], "F32");
  EXPECT_EQ(json["__metadata__"]["epoch"], "3");
}

TEST(Safetensors, KnownSmallFileHasExactBytes) {
  const std::vector<float> x = {1.0f, -2.0f};
  const std::string header = R"({"x":{"data_offsets":[0,8],"dtype":"F32","shape":[2]}})";
  ASSERT_EQ(header.size(), 54u);  // padded with 2 spaces to 56
  const std::string expected = std::string("\x38\0\0\0\0\0\0\0", 8) + header + "  " +
                               std::string("\x00\x00\x80\x3F\x00\x00\x00\xC0", 8);

  EXPECT_EQ(encode_safetensors({{"x", {2}, x.data()}}, {}), expected);

  const fs::path dir = fs::path(::testing::TempDir()) / ("st_known_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  write_safetensors(dir / "x.safetensors", {{"x", {2}, x.data()}}, {});
  EXPECT_EQ(slurp(dir / "x.safetensors"), expected);
  const SafetensorsFile file = read_safetensors(dir / "x.safetensors");
  EXPECT_EQ(file.tensors.at("x").values, x);
  fs::remove_all(dir);
}

TEST(Safetensors, EmptyFileWithNoTensorsIsValid) {
  const SafetensorsFile file = decode_safetensors(encode_safetensors({}, {}), "mem");
  EXPECT_TRUE(file.tensors.empty());
  EXPECT_TRUE(file.metadata.empty());
}

// ---- the writer refuses what it cannot encode ---------------------------------------------

TEST(Safetensors, WriterRefusesBadTensors) {
  const std::vector<float> v = {1, 2};
  expect_error(
      [&] {
        encode_safetensors({{"a", {2}, v.data()}, {"a", {2}, v.data()}}, {});
      },
      {"duplicate tensor name", "\"a\""});
  expect_error([&] { encode_safetensors({{"__metadata__", {2}, v.data()}}, {}); }, {"reserved"});
  expect_error([&] { encode_safetensors({{"a", {-2}, v.data()}}, {}); }, {"negative dimension"});
  expect_error([&] { encode_safetensors({{"a", {2}, nullptr}}, {}); }, {"\"a\" has no data"});
  expect_error([&] { encode_safetensors({{"a\xFF", {2}, v.data()}}, {}); }, {"not valid UTF-8"});
}

// ---- every corruption is refused with a precise message -----------------------------------

TEST(SafetensorsCorrupt, TruncatedFile) {
  const std::string bytes = valid_image();
  const std::size_t n_header = bytes.size() - 8 - 32;
  for (const std::size_t cut : {std::size_t{0}, std::size_t{3}, std::size_t{7}}) {
    expect_decode_error(bytes.substr(0, cut), {"file is " + std::to_string(cut) + " bytes",
                                               "too short for the 8-byte header length"});
  }
  for (const std::size_t cut : {std::size_t{8}, 8 + n_header / 2, 8 + n_header - 1}) {
    expect_decode_error(bytes.substr(0, cut), {"header length " + std::to_string(n_header),
                                               "runs past the end of the file"});
  }
  for (const std::size_t cut : {8 + n_header, 8 + n_header + 20, bytes.size() - 1}) {
    expect_decode_error(bytes.substr(0, cut), {"past the end of the data area"});
  }
}

TEST(SafetensorsCorrupt, HeaderLengthPastEndOfFile) {
  std::string bytes = valid_image();
  bytes.replace(0, 8, u64_le(bytes.size()));
  expect_decode_error(
      bytes, {"header length " + std::to_string(bytes.size()), "runs past the end of the file"});
}

TEST(SafetensorsCorrupt, HugeHeaderLengthRefusedBeforeAllocating) {
  for (const std::uint64_t n_header : {std::uint64_t{100'000'001}, std::uint64_t{1} << 40,
                                       std::numeric_limits<std::uint64_t>::max()}) {
    expect_decode_error(u64_le(n_header) + "{}      ",
                        {"header length " + std::to_string(n_header), "exceeds the limit"});
  }
}

TEST(SafetensorsCorrupt, HeaderNotJsonObject) {
  expect_decode_error(image(R"({"x": )", 0), {"header is not valid JSON"});
  expect_decode_error(image("{\"x\xFF\": 1}", 0), {"header is not valid JSON", "UTF-8", "'\"x?'"});
  expect_decode_error(image("[1, 2]", 0), {"header is not a JSON object", "array"});
  // Found by fuzzing (tests/fuzz/fuzz_checkpoint): a number beyond a double's range is not a
  // syntax error to nlohmann but an out_of_range exception, which once escaped the loader.
  expect_decode_error(image(R"({"x": 64e91930})", 0),
                      {"header is not valid JSON", "number overflow", "64e91930"});
}

TEST(SafetensorsCorrupt, MissingOrMistypedFields) {
  expect_decode_error(image(R"({"x": 5})", 0), {"tensor \"x\" must be a JSON object", "number"});
  expect_decode_error(image(R"({"x": {"shape": [1], "data_offsets": [0, 4]}})", 4),
                      {"tensor \"x\" is missing \"dtype\""});
  expect_decode_error(image(R"({"x": {"dtype": "F32", "data_offsets": [0, 4]}})", 4),
                      {"tensor \"x\" is missing \"shape\""});
  expect_decode_error(image(R"({"x": {"dtype": "F32", "shape": [1]}})", 4),
                      {"tensor \"x\" is missing \"data_offsets\""});
  expect_decode_error(image(R"({"x": {"dtype": 32, "shape": [1], "data_offsets": [0, 4]}})", 4),
                      {"\"dtype\" must be a string"});
  expect_decode_error(image(R"({"x": {"dtype": "F32", "shape": "1", "data_offsets": [0, 4]}})", 4),
                      {"\"shape\" must be an array of integers"});
  expect_decode_error(
      image(R"({"x": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", 4),
      {"\"shape\" must be an array of integers"});
  expect_decode_error(image(R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [4]}})", 4),
                      {"\"data_offsets\" must be two non-negative integers"});
  expect_decode_error(image(R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})", 4),
                      {"\"data_offsets\" must be two non-negative integers"});
  expect_decode_error(
      image(R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "crc": 7}})", 4),
      {"tensor \"x\" has unexpected field \"crc\""});
}

TEST(SafetensorsCorrupt, WrongDtype) {
  expect_decode_error(image(R"({"w": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]}})", 4),
                      {"tensor \"w\" has dtype \"F16\"", "only F32 is supported"});
}

TEST(SafetensorsCorrupt, ShapeDisagreesWithByteRange) {
  expect_decode_error(image(R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8),
                      {"tensor \"w\" of shape [3] needs 12 bytes", "[0, 8] span 8"});
}

TEST(SafetensorsCorrupt, NegativeOrOverflowingShape) {
  expect_decode_error(
      image(R"({"w": {"dtype": "F32", "shape": [2, -2], "data_offsets": [0, 8]}})", 8),
      {"tensor \"w\" has negative dimension -2"});
  expect_decode_error(
      image(R"({"w": {"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 8]}})",
            8),
      {"tensor \"w\"", "overflows 64 bits"});
  expect_decode_error(
      image(R"({"w": {"dtype": "F32", "shape": [9223372036854775808], "data_offsets": [0, 8]}})",
            8),
      {"dimension 9223372036854775808", "overflows 64 bits"});
}

TEST(SafetensorsCorrupt, EndBeforeBegin) {
  expect_decode_error(image(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})", 8),
                      {"data_offsets [8, 4] whose end is before its begin"});
}

TEST(SafetensorsCorrupt, OffsetsPastEndOfData) {
  expect_decode_error(
      image(R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 8),
      {"tensor \"w\" has data_offsets [0, 16] past the end of the data area (8 bytes"});
}

TEST(SafetensorsCorrupt, OverlappingTensors) {
  expect_decode_error(image(two_tensors("a", 0, 8, "b", 4, 12, 2), 12),
                      {"tensors \"a\" [0, 8] and \"b\" [4, 12] overlap"});
}

TEST(SafetensorsCorrupt, GapsInDataArea) {
  expect_decode_error(image(two_tensors("a", 0, 4, "b", 8, 12, 1), 12),
                      {"bytes [4, 8) of the data area are not covered by any tensor"});
  expect_decode_error(image(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", 8),
                      {"bytes [0, 4) of the data area are not covered"});
  expect_decode_error(image(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 12),
                      {"bytes [4, 12) at the end of the data area are not covered"});
}

TEST(SafetensorsCorrupt, MetadataNotStringMap) {
  expect_decode_error(image(R"({"__metadata__": {"epoch": 3}})", 0),
                      {"__metadata__ must map strings to strings", "\"epoch\" holds a number"});
  expect_decode_error(image(R"({"__metadata__": ["epoch"]})", 0),
                      {"__metadata__ must be an object", "array"});
}

// nlohmann::json keeps the last of duplicate keys; the first entry's bytes are then orphaned.
TEST(SafetensorsCorrupt, DuplicateKeyLeavesOrphanedBytes) {
  expect_decode_error(image(two_tensors("a", 0, 4, "a", 4, 8, 1), 8),
                      {"bytes [0, 4) of the data area are not covered"});
}

TEST(SafetensorsCorrupt, OddNamesStayOnOneLine) {
  expect_decode_error(
      image(R"({"a\nb": {"dtype": "F\n16", "shape": [1], "data_offsets": [0, 4]}})", 4),
      {R"(tensor "a\nb" has dtype "F\n16")"});
}

TEST(SafetensorsCorrupt, MissingFileNamesPath) {
  const fs::path missing = fs::path(::testing::TempDir()) / "no_such_dir_xyz" / "m.safetensors";
  expect_error([&] { read_safetensors(missing); },
               {"cannot read", missing.string(), "No such file"});
}

// ---- atomic writes ------------------------------------------------------------------------

class AtomicFile : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    m_dir = fs::path(::testing::TempDir()) / ("atomic_" + test + "_" + std::to_string(::getpid()));
    fs::remove_all(m_dir);
    fs::create_directories(m_dir);
  }
  void TearDown() override { fs::remove_all(m_dir); }

  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(m_dir))
      names.push_back(entry.path().filename());
    return names;
  }

  fs::path m_dir;
};

TEST_F(AtomicFile, ReplacesExistingFileCompletelyAndLeavesNoTemporary) {
  const fs::path target = m_dir / "metrics.csv";
  write_file_atomically(target, std::string(10000, 'x'));
  write_file_atomically(target, std::string_view("short\n"));
  EXPECT_EQ(slurp(target), "short\n");
  EXPECT_EQ(entries(), std::vector<std::string>{"metrics.csv"});
}

TEST_F(AtomicFile, StreamWriterProducesContent) {
  const fs::path target = m_dir / "config.toml";
  write_file_atomically(target,
                        [](std::ostream& out) { out << "[train]\nepochs = " << 10 << "\n"; });
  EXPECT_EQ(slurp(target), "[train]\nepochs = 10\n");
  EXPECT_EQ(entries(), std::vector<std::string>{"config.toml"});
}

// read_text_file gives back what was written, bytes as they are, and names a file it cannot read.
TEST_F(AtomicFile, ReadTextFileReadsWhatWasWrittenAndNamesAMissingFile) {
  const fs::path target = m_dir / "config.toml";
  const std::string bytes("[train]\nepochs=2\n\0binary\r\n", 26);
  write_file_atomically(target, bytes);
  EXPECT_EQ(read_text_file(target), bytes);
  try {
    read_text_file(m_dir / "absent.toml");
    ADD_FAILURE() << "a missing file was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("absent.toml"), std::string::npos) << e.what();
  }
}

TEST_F(AtomicFile, ThrowingStreamWriterLeavesOldFile) {
  const fs::path target = m_dir / "config.toml";
  write_file_atomically(target, std::string_view("old"));
  EXPECT_THROW(write_file_atomically(target,
                                     [](std::ostream& out) {
                                       out << "half";
                                       throw Error("formatting failed");
                                     }),
               Error);
  EXPECT_EQ(slurp(target), "old");
  EXPECT_EQ(entries(), std::vector<std::string>{"config.toml"});
}

TEST_F(AtomicFile, MissingDirectoryThrowsWithPathAndLeavesNothing) {
  const fs::path target = m_dir / "missing" / "model.safetensors";
  expect_error([&] { write_file_atomically(target, std::string_view("data")); },
               {"cannot write " + target.string(), "No such file or directory"});
  const std::vector<float> v = {1};
  expect_error(
      [&] {
        write_safetensors(target, {{"v", {1}, v.data()}}, {});
      },
      {"cannot write " + target.string()});
  EXPECT_FALSE(fs::exists(m_dir / "missing"));
  EXPECT_TRUE(entries().empty());
}

TEST_F(AtomicFile, FailedRenameRemovesTemporary) {
  const fs::path target = m_dir / "occupied";
  fs::create_directory(target);  // rename(2) cannot replace a directory with a file
  expect_error([&] { write_file_atomically(target, std::string_view("data")); },
               {"cannot write " + target.string(), "rename"});
  EXPECT_EQ(entries(), std::vector<std::string>{"occupied"});
  EXPECT_TRUE(fs::is_directory(target));
}

TEST_F(AtomicFile, CheckpointOverwriteReadsBackNewContent) {
  const fs::path target = m_dir / "model.safetensors";
  const std::vector<float> first = {1, 2, 3, 4};
  const std::vector<float> second = {5};
  write_safetensors(target, {{"w", {4}, first.data()}}, {{"epoch", "1"}});
  write_safetensors(target, {{"w", {1}, second.data()}}, {{"epoch", "2"}});
  const SafetensorsFile file = read_safetensors(target);
  EXPECT_EQ(file.tensors.at("w").values, second);
  EXPECT_EQ(file.metadata.at("epoch"), "2");
  EXPECT_EQ(entries(), std::vector<std::string>{"model.safetensors"});
}

}  // namespace
}  // namespace lenet5
