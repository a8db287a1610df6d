// The page server's whole request handling: the input is the bytes a client sends on a
// connection (method, raw target with its path and query bytes, headers, a plain or chunked body),
// read by the server's own parser within its limits and answered by the real router and routes
// (serve::Server::answer: http_server.hpp's answer_request_bytes), classify requests through a
// real CPU engine. The seeds (corpus/serve_request/) are requests of every route and framing and
// every request that once ended the server. Besides a sanitizer's report or an escaping exception,
// the fuzzer stops at an answer no client should get: a status under 100, a 5xx (the runs
// folder here holds nothing damaged, so every refusal is the client's), a JSON body that does not
// parse (bytes that are not UTF-8 in it, say), or a file from outside the runs folder, which
// holds a secret the request does not.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/layout.hpp"
#include "io/temporary_folder.hpp"
#include "serve/server.hpp"

namespace {

constexpr const char* kSecret = "outside-the-runs-folder";

// A runs folder holding one run, "short", and runs/latest pointing at it, beside a file outside
// it that no request may read.
std::filesystem::path runs_folder() {
  static const lenet5::TemporaryFolder folder("lenet5-fuzz-runs");
  std::filesystem::create_directories(folder / "runs" / "short");
  std::ofstream(folder / "runs" / "short" / "metrics.csv") << "epoch,lr\n";
  std::filesystem::create_directory_symlink("short", folder / "runs" / "latest");
  std::ofstream(folder / "secret.txt") << kSecret << "\n";
  return folder / "runs";
}

lenet5::Checkpoint seeded_checkpoint() {
  lenet5::Checkpoint checkpoint;
  const lenet5::ParamLayout layout = lenet5::lenet5_layout(checkpoint.net);
  checkpoint.parameters.resize(layout.buffer_floats);
  lenet5::initialise_parameters(layout, checkpoint.net, 1, checkpoint.parameters.data());
  return checkpoint;
}

const lenet5::serve::Server& server() {
  static const lenet5::serve::Server instance = [] {
    lenet5::serve::ServeSettings settings;
    settings.runs = runs_folder();
    settings.data = settings.runs / "no-test-set";
    settings.workers = 1;  // answer() runs on the fuzzer's thread; the pool only waits
    return lenet5::serve::Server(seeded_checkpoint(), "seeded.safetensors", settings);
  }();
  return instance;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view request(reinterpret_cast<const char*>(data), size);
  const lenet5::serve::HttpResponse answer = server().answer(request);
  if (answer.status < 100 || answer.status >= 500) __builtin_trap();
  if (answer.content_type == lenet5::serve::kJsonType &&
      nlohmann::json::parse(answer.body, nullptr, /*allow_exceptions=*/false).is_discarded())
    __builtin_trap();
  // Answers may quote the request (a 404 names its path), so the secret counts only where the
  // request did not hold it.
  if (answer.body.find(kSecret) != std::string::npos &&
      request.find(kSecret) == std::string_view::npos)
    __builtin_trap();
  return 0;
}
