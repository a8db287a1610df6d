#include "serve/server.hpp"

#include <httplib.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "core/stop_signals.hpp"
#include "serve/api.hpp"
#include "serve/run_evaluation.hpp"
#include "serve/web_assets.hpp"
#include "train/evaluate.hpp"

namespace lenet5::serve {
namespace {

using nlohmann::json;

// With a charset, which is also what httplib leaves uncompressed: it compresses a body whose type
// is exactly "application/json" when the client accepts it, with brotli where the browser asks for
// it, and brotli's default effort took 250-450 ms for a 67 KB classify answer on the 2-core build
// machine (the page's round trip 300 ms instead of 15 ms; scripts/page_fps.mjs), against 56 KB
// saved, well under a millisecond on any local network.
constexpr const char* kJsonType = "application/json; charset=utf-8";

void answer_json(httplib::Response& response, const json& body, int status = 200) {
  response.status = status;
  response.set_content(body.dump(), kJsonType);
}

void answer_error(httplib::Response& response, int status, const std::string& message) {
  answer_json(response, {{"error", message}}, status);
}

// A handler's errors as answers: the client's mistakes with their status, anything else 500.
template <class Handler>
httplib::Server::Handler guarded(Handler handler) {
  return [handler](const httplib::Request& request, httplib::Response& response) {
    try {
      handler(request, response);
    } catch (const BadRequest& e) {
      answer_error(response, e.status(), e.what());
    } catch (const std::exception& e) {
      spdlog::error("{} {}: {}", request.method, request.path, e.what());
      answer_error(response, 500, std::string("internal error: ") + e.what());
    }
  };
}

std::string escaped_for_regex(const std::string& path) {
  std::string pattern;
  for (const char c : path) {
    if (c == '.') pattern += '\\';
    pattern += c;
  }
  return pattern;
}

}  // namespace

bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

struct Server::Impl {
  Checkpoint checkpoint;
  std::string checkpoint_name;
  ServeSettings settings;
  std::unique_ptr<Engine> engine;  // on settings.device; the activations are read back to the host
  std::mutex engine_mutex;         // one forward pass at a time through its buffers
  json model;                      // /api/model never changes: built once
  RunEvaluations evaluations;      // /api/runs/NAME/evaluation, cached per checkpoint
  httplib::Server http;
  int port = -1;
  int listen_socket = -1;

  Impl(Checkpoint c, std::string name, ServeSettings s)
      : checkpoint(std::move(c)),
        checkpoint_name(std::move(name)),
        settings(std::move(s)),
        engine(engine_for(checkpoint, settings.device)),
        model(model_json(checkpoint, checkpoint_name)),
        evaluations(settings.data) {
    configure();
    add_routes();
  }

  void configure() {
    const int threads = settings.threads;
    http.new_task_queue = [threads] { return new httplib::ThreadPool(std::size_t(threads)); };
    http.set_payload_max_length(kMaxBodyBytes);
    // httplib writes an answer's headers and its body apart: with Nagle's algorithm on, the body
    // waits for the browser's delayed acknowledgement of the headers, and small answers took
    // 45-55 ms in Chromium instead of 3-5 (scripts/page_fps.mjs).
    http.set_tcp_nodelay(true);
    http.set_read_timeout(settings.read_timeout_s, 0);
    http.set_write_timeout(settings.read_timeout_s, 0);
    http.set_keep_alive_timeout(settings.read_timeout_s);
    // httplib listens with a backlog of 5: 64 clients connecting at once overflow it and some are
    // dropped. The socket is remembered here (httplib's own options kept) so that bind() can
    // listen again with the system's largest backlog.
    http.set_socket_options([this](int socket) {
      httplib::default_socket_options(socket);
      listen_socket = socket;
    });
    // httplib calls this for any answer >= 400 without a body (413, 404 of an unknown route...).
    http.set_error_handler([](const httplib::Request& request, httplib::Response& response) {
      if (!response.body.empty()) return;
      const std::string message =
          response.status == 404 ? "no such route: " + request.path
          : response.status == 413
              ? "the body is larger than " + std::to_string(kMaxBodyBytes >> 20) + " MB"
              : "request refused (HTTP " + std::to_string(response.status) + ")";
      answer_error(response, response.status, message);
    });
    http.set_exception_handler(
        [](const httplib::Request&, httplib::Response& response, std::exception_ptr) {
          answer_error(response, 500, "internal error");
        });
  }

  void add_routes() {
    for (const WebAsset& asset : web_assets()) {
      const auto serve_asset = [&asset](const httplib::Request&, httplib::Response& response) {
        response.set_content(reinterpret_cast<const char*>(asset.bytes), asset.size,
                             asset.content_type);
      };
      http.Get(escaped_for_regex(asset.path), serve_asset);  // routes are regular expressions
      if (std::string(asset.path) == "/index.html") http.Get("/", serve_asset);
    }
    http.Post("/api/classify", guarded([this](const auto& rq, auto& rs) { classify(rq, rs); }));
    http.Get("/api/model", guarded([this](const auto&, auto& rs) { answer_json(rs, model); }));
    http.Get("/api/runs",
             guarded([this](const auto&, auto& rs) { answer_json(rs, runs_json(settings.runs)); }));
    http.Get(R"(/api/runs/([^/]+))", guarded([this](const auto& rq, auto& rs) {
               answer_json(rs, run_json(settings.runs, rq.matches[1]));
             }));
    http.Get(R"(/api/runs/([^/]+)/evaluation)", guarded([this](const auto& rq, auto& rs) {
               const auto body = evaluations.answer(run_folder(settings.runs, rq.matches[1]));
               rs.set_content(*body, kJsonType);
             }));
  }

  void classify(const httplib::Request& request, httplib::Response& response) {
    answer_json(response, classify_request(request.get_header_value("Content-Type"),
                                           request.get_param_value("invert"), request.body, *engine,
                                           engine_mutex));
  }
};

Server::Server(Checkpoint checkpoint, std::string checkpoint_name, ServeSettings settings)
    : m(std::make_unique<Impl>(std::move(checkpoint), std::move(checkpoint_name),
                               std::move(settings))) {}

Server::~Server() {
  stop();
}

int Server::bind() {
  const ServeSettings& s = m->settings;
  m->port = s.port == 0 ? m->http.bind_to_any_port(s.host)
                        : (m->http.bind_to_port(s.host, s.port) ? s.port : -1);
  if (m->port < 0)
    throw Error("cannot listen on " + s.host + ":" + std::to_string(s.port) +
                ": the port is taken or the address is not this machine's (try another --port "
                "or --host)");
  if (m->listen_socket >= 0) ::listen(m->listen_socket, SOMAXCONN);  // see Impl::configure
  return m->port;
}

void Server::listen() {
  if (m->port < 0) throw Error("internal: Server::listen before bind");
  m->http.listen_after_bind();
}

void Server::stop() {
  if (m->http.is_running()) m->http.stop();
}

void serve_until_signal(Server& server) {
  StopSignals signals;
  std::atomic<bool> done{false};
  // Until listen() returns: a signal that came before the server ran is acted on once it runs.
  std::thread waiter([&] {
    bool logged = false;
    while (!done) {
      if (signals.requested()) {
        if (!logged) spdlog::info("stopping");
        logged = true;
        server.stop();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  server.listen();
  done = true;
  waiter.join();
}

}  // namespace lenet5::serve
