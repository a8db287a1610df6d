// `lenet5 serve` as a network sees it: the real server on a free loopback port, real sockets. The
// requests that once ended the process, one test each; the router's 404, 405 and HEAD; every limit
// of http_server.hpp in every framing of a request; slow and idle clients; the access log and -q;
// the load script's short version. Each timed bound is generous (a loaded 2-core machine, and
// the sanitizers' build): the figures themselves come from scripts/serve_load.py.
#include <signal.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "child_process.hpp"
#include "serve_test_util.hpp"
#include "test_util.hpp"
#include "train/checkpoint.hpp"

namespace lenet5 {
namespace {

using namespace serve_test;
using namespace std::chrono_literals;
using nlohmann::json;
using testing::RawConnection;
using testing::TempDir;
namespace fs = std::filesystem;

// The head of a request for RawConnection, "Host" included.
std::string head(const std::string& request_line, const std::string& fields = "") {
  return request_line + "\r\nHost: test\r\n" + fields + "\r\n";
}

// What RawConnection read: the status code of the first answer, 0 when there is none.
int status_of(const std::string& answer) {
  return answer.rfind("HTTP/1.1 ", 0) == 0 ? std::atoi(answer.c_str() + 9) : 0;
}

// The JSON body of the first answer RawConnection read (its Content-Length's worth).
json body_of(const std::string& answer) {
  const std::size_t start = answer.find("\r\n\r\n");
  return start == std::string::npos
             ? json()
             : json::parse(answer.substr(start + 4), nullptr, /*allow_exceptions=*/false);
}

class ServeHttp : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    s_runs = std::make_unique<TempDir>();
    s_server = std::make_unique<RunningServer>(seeded_checkpoint(), settings());
  }
  static void TearDownTestSuite() {
    s_server.reset();
    s_runs.reset();
  }
  // Timeouts of a second, so that the tests of slow clients take seconds.
  static serve::ServeSettings settings() {
    serve::ServeSettings s;
    s.port = 0;
    s.runs = s_runs->path();
    s.limits.head_timeout = s.limits.body_timeout = 1s;
    return s;
  }
  static int port() { return s_server->port; }
  static void expect_still_serving() { serve_test::expect_still_serving(*s_server); }

  static std::unique_ptr<TempDir> s_runs;
  static std::unique_ptr<RunningServer> s_server;
};

std::unique_ptr<TempDir> ServeHttp::s_runs;
std::unique_ptr<RunningServer> ServeHttp::s_server;

// ---- the requests that ended the process: each answered with JSON, the server still there ----

struct HostileRequest {
  const char* name;
  const char* method;
  const char* target;
  int status;
};

// How ctest and gtest name each case's parameter: the request itself.
void PrintTo(const HostileRequest& request, std::ostream* out) {
  *out << request.method << " " << request.target;
}

class RequestThatEndedTheServer : public ServeHttp,
                                  public ::testing::WithParamInterface<HostileRequest> {};

TEST_P(RequestThatEndedTheServer, IsAnsweredWithJsonAndTheServerGoesOn) {
  const HostileRequest& request = GetParam();
  const std::string body = std::string(request.method) == "POST" ? bar_drawing().dump() : "";
  const auto result = testing::http_request(port(), request.method, request.target, body,
                                            {{"Content-Type", "application/json"}});
  const json answer = json_of(result, request.status);
  ASSERT_TRUE(answer.is_object()) << result.body;
  EXPECT_TRUE(answer["error"].is_string()) << answer;
  expect_still_serving();
}

INSTANTIATE_TEST_SUITE_P(
    Serve, RequestThatEndedTheServer,
    ::testing::Values(HostileRequest{"GetPercentFF", "GET", "/%ff", 404},
                      HostileRequest{"GetOverlongDots", "GET", "/%c0%ae%c0%ae/etc/passwd", 404},
                      HostileRequest{"GetRunNameNotUtf8", "GET", "/api/runs/a%ffb/x/y", 404},
                      HostileRequest{"PostClassifyPercentFF", "POST", "/api/classify%ff", 404},
                      HostileRequest{"DeleteBadUtf8", "DELETE", "/%c3%28", 404},
                      HostileRequest{"PostInvertPercentFF", "POST", "/api/classify?invert=%ff",
                                     400}),
    [](const ::testing::TestParamInfo<HostileRequest>& info) { return info.param.name; });

// A value that is not UTF-8 goes into the error as U+FFFD, and the rest of the answer is intact.
TEST_F(ServeHttp, BytesThatAreNotUtf8AreReplacedInTheJson) {
  const auto result = testing::http_post(port(), "/api/classify?invert=%ff", bar_drawing().dump(),
                                         "application/json");
  const json answer = json_of(result, 400);
  EXPECT_EQ(answer["error"], "the invert parameter must be auto, yes or no, not '\xef\xbf\xbd'");
  // A target holding a raw byte >= 0x80, as no browser sends it.
  RawConnection raw(port());
  ASSERT_TRUE(raw.send(head("GET /caf\xe9 HTTP/1.1")));
  const std::string refused = raw.read_head(10s);
  EXPECT_TRUE(status_of(refused) == 400 || status_of(refused) == 404) << refused;
  expect_still_serving();
}

TEST_F(ServeHttp, UnknownRoutesAndTraversalAreRefusedWithJson) {
  for (const char* path :
       {"/nothing", "/api/nothing", "/../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd",
        "/api/runs/..%2f..%2fetc", "/api/runs/%2e%2e", "/api/runs/.", "/web/index.html",
        "/index.html/../../etc/passwd", "/api//runs", "/api/runs/", "/%zz", "*"}) {
    const auto result = testing::http_get(port(), path);
    ASSERT_TRUE(result) << path;
    EXPECT_GE(result.status, 400) << path;
    EXPECT_LT(result.status, 500) << path;
    EXPECT_FALSE(testing::mentions(result.body, "root:")) << path;
    EXPECT_TRUE(json::parse(result.body, nullptr, false).contains("error")) << path;
  }
  expect_still_serving();
}

// ---- HTTP as clients expect it ----

TEST_F(ServeHttp, AKnownPathWithAnotherMethodIs405WithAllow) {
  const std::vector<std::tuple<const char*, const char*, const char*>> cases{
      {"GET", "/api/classify", "POST"},
      {"DELETE", "/api/runs", "GET, HEAD"},
      {"OPTIONS", "/", "GET, HEAD"},
      {"PUT", "/api/model", "GET, HEAD"},
      {"BREW", "/api/runs/anything/evaluation", "GET, HEAD"}};
  for (const auto& [method, target, allowed] : cases) {
    const auto result = testing::http_request(port(), method, target);
    const json answer = json_of(result, 405);
    EXPECT_EQ(result.header("Allow"), allowed) << method << " " << target;
    EXPECT_TRUE(testing::mentions(answer["error"], allowed)) << answer;
  }
  json_of(testing::http_request(port(), "DELETE", "/nothing"), 404);
}

TEST_F(ServeHttp, HeadIsAnsweredAsGetWithoutTheBody) {
  const auto get = testing::http_get(port(), "/api/model");
  const auto head_answer = testing::http_request(port(), "HEAD", "/api/model");
  ASSERT_TRUE(get && head_answer) << get.error << head_answer.error;
  EXPECT_EQ(head_answer.status, 200);
  EXPECT_EQ(head_answer.header("Content-Length"), std::to_string(get.body.size()));
  EXPECT_TRUE(head_answer.body.empty());
}

TEST_F(ServeHttp, AChunkedBodyWithinTheLimitIsRead) {
  const std::string drawing = bar_drawing().dump();
  std::ostringstream chunked;
  for (std::size_t at = 0; at < drawing.size(); at += 500) {
    const std::string piece = drawing.substr(at, 500);
    chunked << std::hex << piece.size() << "\r\n" << piece << "\r\n";
  }
  chunked << "0\r\n\r\n";
  RawConnection raw(port());
  ASSERT_TRUE(raw.send(head("POST /api/classify HTTP/1.1",
                            "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n") +
                       chunked.str()));
  const std::string answer = raw.read_head(30s);  // a classify: well under a second
  EXPECT_EQ(status_of(answer), 200) << answer.substr(0, 300);
}

TEST_F(ServeHttp, ExpectContinueIsAnsweredBeforeTheBody) {
  const std::string drawing = bar_drawing().dump();
  RawConnection raw(port());
  ASSERT_TRUE(raw.send(head("POST /api/classify HTTP/1.1",
                            "Content-Type: application/json\r\nExpect: 100-continue\r\n"
                            "Content-Length: " +
                                std::to_string(drawing.size()) + "\r\n")));
  EXPECT_EQ(status_of(raw.read_head(10s)), 100);
  ASSERT_TRUE(raw.send(drawing));
  EXPECT_EQ(status_of(raw.read_head(30s)), 200);
}

// ---- limits, in every framing ----

// 8 MB in 64 KB chunks, sent while the answer is awaited: refused once 4 MB have come, without
// waiting for the rest (the sender may still be sending when it comes).
TEST_F(ServeHttp, AChunkedBodyOverTheLimitIs413WhileItIsStillComing) {
  RawConnection raw(port());
  ASSERT_TRUE(raw.send(head("POST /api/classify HTTP/1.1",
                            "Content-Type: image/png\r\nTransfer-Encoding: chunked\r\n")));
  std::atomic<bool> answered{false};
  std::thread sender([&] {
    const std::string chunk = "10000\r\n" + std::string(65536, 'x') + "\r\n";
    for (int i = 0; i < 128 && !answered; ++i)
      if (!raw.send(chunk)) break;
  });
  const auto started = std::chrono::steady_clock::now();
  const std::string answer = raw.read_head(30s);
  answered = true;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  sender.join();
  EXPECT_EQ(status_of(answer), 413) << answer.substr(0, 300);
  EXPECT_TRUE(testing::mentions(answer, "Connection: close")) << answer;
  // 4 MB over loopback takes milliseconds; 10 s only fails a server that reads all 8 MB slowly
  // or waits for the body's end.
  EXPECT_LT(seconds, 10);
  expect_still_serving();
}

// A Content-Length over the limit is refused from the head: no byte of the body is ever sent.
TEST_F(ServeHttp, AContentLengthOverTheLimitIs413BeforeAnyOfTheBody) {
  RawConnection raw(port());
  ASSERT_TRUE(raw.send(head("POST /api/classify HTTP/1.1",
                            "Content-Type: image/png\r\nContent-Length: 209715200\r\n")));
  const std::string answer = raw.read_head(10s);
  EXPECT_EQ(status_of(answer), 413) << answer;
  EXPECT_TRUE(testing::mentions(body_of(answer)["error"], "4 MB")) << answer;
  // A chunk that claims more than the limit is refused from its size line.
  RawConnection chunk(port());
  ASSERT_TRUE(chunk.send(head("POST /api/classify HTTP/1.1", "Transfer-Encoding: chunked\r\n") +
                         "c800000\r\n"));
  EXPECT_EQ(status_of(chunk.read_head(10s)), 413);
  expect_still_serving();
}

// Whole, with a Content-Length, as an ordinary client sends it: the client reads the 413 rather
// than a reset, because the server reads the rest of the body before it closes.
TEST_F(ServeHttp, AnOversizedBodyIsRefused) {
  const std::string body(serve::HttpLimits{}.max_body_bytes + 1, 'x');
  const json answer =
      json_of(testing::http_post(port(), "/api/classify", body, "application/json"), 413);
  EXPECT_TRUE(testing::mentions(answer["error"], "4 MB")) << answer;
  expect_still_serving();
}

TEST_F(ServeHttp, HeadersOverTheirLimitsAre431AndALongRequestLine414) {
  std::string many;
  for (int i = 0; i <= serve::HttpLimits{}.max_header_fields; ++i)
    many += "X-Field-" + std::to_string(i) + ": 1\r\n";
  RawConnection too_many(port());
  ASSERT_TRUE(too_many.send(head("GET /api/model HTTP/1.1", many)));
  const std::string counted = too_many.read_head(10s);
  EXPECT_EQ(status_of(counted), 431) << counted;
  EXPECT_TRUE(testing::mentions(body_of(counted)["error"], "more than 100 header fields"));

  RawConnection too_long(port());
  ASSERT_TRUE(too_long.send(
      head("GET /api/model HTTP/1.1", "X-Long: " + std::string(20000, 'a') + "\r\n")));
  EXPECT_EQ(status_of(too_long.read_head(10s)), 431);

  RawConnection long_line(port());
  ASSERT_TRUE(long_line.send("GET /" + std::string(20000, 'a')));
  const std::string line = long_line.read_head(10s);
  EXPECT_EQ(status_of(line), 414) << line.substr(0, 200);
  expect_still_serving();
}

// Server::answer, the fuzz target's way in, reads the bytes as a connection's are read: a request
// whose bytes end before it does is a 400, however it is cut.
TEST_F(ServeHttp, BytesThatEndBeforeTheRequestAre400) {
  const std::string drawing = bar_drawing().dump();
  const std::string whole =
      head("POST /api/classify HTTP/1.1", "Content-Type: application/json\r\nContent-Length: " +
                                              std::to_string(drawing.size()) + "\r\n") +
      drawing;
  EXPECT_EQ(s_server->server.answer(whole).status, 200);
  for (const std::size_t cut : {std::size_t(0), std::size_t(10), whole.size() - drawing.size() - 2,
                                whole.size() - drawing.size() + 7, whole.size() - 1})
    EXPECT_EQ(s_server->server.answer(whole.substr(0, cut)).status, 400) << cut;
  const std::string chunked = head("POST /api/classify HTTP/1.1",
                                   "Content-Type: application/json\r\n"
                                   "Transfer-Encoding: chunked\r\n") +
                              "10\r\n0123456789abcdef\r\n";  // no last chunk
  EXPECT_EQ(s_server->server.answer(chunked).status, 400);
}

// ---- slow and idle clients ----

// A client that keeps sending a header line every 200 ms never finishes its head: it is dropped
// at the head timeout (1 s here) however busy it looks.
TEST_F(ServeHttp, ASlowClientIsDroppedEvenWhileItKeepsSending) {
  RawConnection slow(port());
  ASSERT_TRUE(slow.send("POST /api/classify HTTP/1.1\r\nHost: slow\r\n"));
  const auto started = std::chrono::steady_clock::now();
  bool closed = false;
  while (!closed && std::chrono::steady_clock::now() - started < 20s) {
    closed = !slow.send("X-Slow: 1\r\n") || slow.closed_within(200ms);
    expect_still_serving();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_TRUE(closed) << "a client that never finishes its head was kept for 20 s";
  EXPECT_LT(seconds, 10);  // 1 s is the limit; 10 s leaves room for a loaded machine
}

TEST_F(ServeHttp, ABodyThatStopsComingIs408) {
  RawConnection raw(port());
  ASSERT_TRUE(raw.send(
      head("POST /api/classify HTTP/1.1", "Content-Type: image/png\r\nContent-Length: 100\r\n") +
      "0123456789"));
  const std::string answer = raw.read_head(10s);  // the body timeout is 1 s here
  EXPECT_EQ(status_of(answer), 408) << answer;
  expect_still_serving();
}

// 100 connections that each sent half a head, from 100 addresses, with a head timeout of 30 s:
// a server that gives each connection a worker (16 here) would make a classify wait for them;
// here it is answered at once.
TEST_F(ServeHttp, HundredSlowConnectionsDoNotHoldUpAClassify) {
  serve::ServeSettings patient = settings();
  patient.limits.head_timeout = 30s;
  const RunningServer server(seeded_checkpoint(), patient);
  std::vector<std::unique_ptr<RawConnection>> slow;
  for (int i = 0; i < 100; ++i) {
    slow.push_back(
        std::make_unique<RawConnection>(server.port, "127.0.0." + std::to_string(2 + i)));
    ASSERT_TRUE(slow.back()->send("POST /api/classify HTTP/1.1\r\nHost: slow\r\n")) << i;
  }
  const auto started = std::chrono::steady_clock::now();
  serve_test::expect_still_serving(server);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_LT(seconds, 10);  // milliseconds here; 10 s is a third of the slow clients' 30
}

// Per client address and in all: the connection over either limit is answered 503 with
// Retry-After and closed; the others are served, and a closed connection frees its place.
TEST_F(ServeHttp, ConnectionsOverTheirLimitsAre503) {
  serve::ServeSettings limited = settings();
  limited.limits.max_connections_per_address = 3;
  limited.limits.max_connections = 5;
  limited.limits.head_timeout = 30s;  // the idle connections stay for the whole test
  const RunningServer server(seeded_checkpoint(), limited);
  std::vector<std::unique_ptr<RawConnection>> held;
  for (int i = 0; i < 3; ++i)
    held.push_back(std::make_unique<RawConnection>(server.port, "127.0.0.2"));
  RawConnection fourth(server.port, "127.0.0.2");
  const std::string per_address = fourth.read_head(10s);
  EXPECT_EQ(status_of(per_address), 503) << per_address;
  EXPECT_TRUE(testing::mentions(per_address, "Retry-After: 1")) << per_address;
  EXPECT_TRUE(testing::mentions(body_of(per_address)["error"], "127.0.0.2")) << per_address;

  held.push_back(std::make_unique<RawConnection>(server.port, "127.0.0.3"));
  held.push_back(std::make_unique<RawConnection>(server.port, "127.0.0.3"));
  RawConnection sixth(server.port, "127.0.0.4");
  EXPECT_EQ(status_of(sixth.read_head(10s)), 503);

  held.clear();  // every place free again, as soon as the server sees them closed
  bool served = false;
  for (int attempt = 0; attempt < 100 && !served; ++attempt) {
    served = server.get("/api/model").status == 200;
    if (!served) std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(served) << "closed connections still counted after 5 s";
}

TEST_F(ServeHttp, AConnectionIsClosedAfterItsMostRequests) {
  serve::ServeSettings limited = settings();
  limited.limits.max_requests_per_connection = 3;
  const RunningServer server(seeded_checkpoint(), limited);
  RawConnection raw(server.port);
  std::string four;
  for (int i = 0; i < 4; ++i) four += head("GET /api/runs HTTP/1.1");
  ASSERT_TRUE(raw.send(four));
  const std::string answers = raw.read_until_closed(30s);
  std::size_t count = 0;
  for (std::size_t at = 0; (at = answers.find("HTTP/1.1 200", at)) != std::string::npos; ++at)
    ++count;
  EXPECT_EQ(count, 3u) << answers;
  EXPECT_TRUE(testing::mentions(answers, "Connection: close")) << answers;
}

TEST_F(ServeHttp, SixtyFourClientsAtOnceAreAllAnswered) {
  const std::string body = bar_drawing().dump();
  std::atomic<int> answered{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 64; ++i)
    clients.emplace_back([&] {
      if (testing::http_post(port(), "/api/classify", body, "application/json").status == 200)
        ++answered;
    });
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(answered, 64);
}

// ---- the access log ----

TEST_F(ServeHttp, TheAccessLogHasALinePerRequestWithItsTargetEscaped) {
  std::ostringstream log;
  const auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log);
  spdlog::default_logger()->sinks().push_back(sink);
  {
    const RunningServer server(seeded_checkpoint(), settings());  // logs only while the sink is in
    server.get("/nothing%0a?x=1");
    RawConnection raw(server.port);
    ASSERT_TRUE(raw.send(head("GET /caf\xc3\xa9 HTTP/1.1")));
    raw.read_head(10s);
    serve_test::expect_still_serving(server);
  }
  spdlog::default_logger()->sinks().pop_back();
  const std::string lines = log.str();
  EXPECT_TRUE(testing::mentions(lines, "127.0.0.1 GET /nothing%0a?x=1 404 ")) << lines;
  EXPECT_TRUE(testing::mentions(lines, "127.0.0.1 GET /caf\\xc3\\xa9 404 ")) << lines;
  EXPECT_TRUE(testing::mentions(lines, "127.0.0.1 POST /api/classify 200 ")) << lines;
  for (const char* field : {" B ", " ms"}) EXPECT_TRUE(testing::mentions(lines, field)) << lines;
}

// `lenet5 serve` itself, as a child process: the requests that ended it are answered, it logs each
// request on stderr (none with -q), and SIGTERM stops it with exit code 0.
struct ServeChild {
  pid_t pid;
  std::string url;
  fs::path out, err;
};

ServeChild start_serve(const TempDir& dir, const std::string& name, bool quiet) {
  ServeChild serve{0, "", dir / (name + ".out"), dir / (name + ".err")};
  save_checkpoint(dir / "seeded.safetensors", seeded_checkpoint());
  std::vector<std::string> arguments{
      "serve",  "--checkpoint",      (dir / "seeded.safetensors").string(),
      "--runs", dir.path().string(), "--port",
      "0"};
  if (quiet) arguments.insert(arguments.begin(), "-q");
  serve.pid = testing::start_lenet5(arguments, {{}, {}, {}, serve.out, serve.err});
  for (int i = 0; i < 300 && serve.url.empty(); ++i) {  // loading the checkpoint: milliseconds
    const std::string printed = testing::read_text(serve.out);
    const std::size_t at = printed.find("http://127.0.0.1:");
    if (at != std::string::npos) serve.url = printed.substr(at, printed.find('/', at + 7) - at);
    std::this_thread::sleep_for(50ms);
  }
  return serve;
}

TEST(ServeProcess, SurvivesTheRequestsThatEndedItLogsThemAndQuietsWithQ) {
  TempDir dir;
  for (const bool quiet : {false, true}) {
    const ServeChild serve = start_serve(dir, quiet ? "quiet" : "loud", quiet);
    ASSERT_FALSE(serve.url.empty()) << testing::read_text(serve.err);
    const int port = std::atoi(serve.url.c_str() + serve.url.rfind(':') + 1);
    for (const auto& [method, target] :
         std::vector<std::pair<std::string, std::string>>{{"GET", "/%ff"},
                                                          {"GET", "/%c0%ae%c0%ae/etc/passwd"},
                                                          {"GET", "/api/runs/a%ffb/x/y"},
                                                          {"POST", "/api/classify%ff"},
                                                          {"DELETE", "/%c3%28"},
                                                          {"POST", "/api/classify?invert=%ff"}})
      EXPECT_TRUE(testing::http_request(port, method, target)) << method << " " << target;
    EXPECT_EQ(testing::http_get(port, "/api/model").status, 200);
    kill(serve.pid, SIGTERM);
    const testing::ChildEnd end = testing::wait_for(serve.pid);
    EXPECT_EQ(end.exit_code(), 0) << testing::read_text(serve.err);
    const std::string err = testing::read_text(serve.err);
    EXPECT_EQ(testing::mentions(err, "127.0.0.1 GET /%ff 404 "), !quiet) << err;
    EXPECT_EQ(testing::mentions(err, "GET /api/model 200 "), !quiet) << err;
  }
}

// ---- the load script's short version (scripts/serve_load.py --quick: 20 slow connections for
// 2 s, 100 requests from 16 clients, 8 MB bodies), against this process's server ----

TEST_F(ServeHttp, TheLoadScriptsShortVersionPasses) {
  TempDir scratch;
  const std::string command =
      "python3 '" + (testing::source_dir() / "scripts/serve_load.py").string() +
      "' --quick http://127.0.0.1:" + std::to_string(port()) + "/ --pid " +
      std::to_string(getpid()) + " >'" + (scratch / "out.txt").string() + "' 2>&1";
  const int status = std::system(command.c_str());
  const std::string output = testing::read_text(scratch / "out.txt");
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  for (const char* phase : {"slow:", "clients:", "bodies:", "afterwards: classify answered 200"})
    EXPECT_TRUE(testing::mentions(output, phase)) << output;
}

}  // namespace
}  // namespace lenet5
