// The page server's request handling that reads what a client sends: POST /api/classify whole
// (content type, ?invert=, body: an image file or JSON, the preprocessing and a forward pass
// through a real CPU engine) and a run name as /api/runs/NAME takes it. The first input byte picks
// the content type, the second the invert value; the rest is the body, and also the run name.
// Refusals are BadRequest (4xx) or lenet5's errors; anything else that escapes would be a 500,
// and a name accepted outside the runs folder stops the fuzzer.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>

#include "backend/backend.hpp"
#include "fuzz_util.hpp"
#include "serve/api.hpp"

namespace {

const char* const kContentTypes[] = {"image/png",        "image/jpeg",
                                     "application/json", "application/json; charset=utf-8",
                                     "text/plain",       ""};
const char* const kInvertValues[] = {"", "auto", "yes", "no", "maybe"};

lenet5::Engine& engine() {
  static const auto instance = [] {
    auto e =
        lenet5::make_engine(lenet5::Device::cpu, lenet5::NetConfig{}, lenet5::SgdSettings{}, 1);
    e->initialise(1);
    return e;
  }();
  return *instance;
}

// A runs folder holding one run, "short", beside a file outside it that names must never reach.
const std::filesystem::path& runs_folder() {
  static const lenet5::TemporaryFolder folder("lenet5-fuzz-runs");
  static const std::filesystem::path runs = [] {
    std::filesystem::create_directories(folder / "runs" / "short");
    std::ofstream(folder / "runs" / "short" / "metrics.csv") << "epoch,lr\n";
    std::ofstream(folder / "secret.txt") << "outside\n";
    return folder / "runs";
  }();
  return runs;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace lenet5;
  if (size < 2) return 0;
  const std::string content_type = kContentTypes[data[0] % std::size(kContentTypes)];
  const std::string invert = kInvertValues[data[1] % std::size(kInvertValues)];
  const std::string body(reinterpret_cast<const char*>(data) + 2, size - 2);
  static std::mutex engine_mutex;
  // serve::BadRequest, the 4xx answers, is a lenet5::Error.
  fuzz::refusals_allowed(
      [&] { serve::classify_request(content_type, invert, body, engine(), engine_mutex).dump(); });
  fuzz::refusals_allowed([&] {
    const std::filesystem::path run = serve::run_folder(runs_folder(), body);
    if (run.parent_path() != std::filesystem::canonical(runs_folder())) __builtin_trap();
    serve::run_json(runs_folder(), body).dump();
  });
  return 0;
}
