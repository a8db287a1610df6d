// The server of `lenet5 serve`: its routes (the page and the API) bound to the HTTP server.
#include "serve/server.hpp"

#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "core/stop_signals.hpp"
#include "serve/api.hpp"
#include "serve/router.hpp"
#include "serve/run_evaluation.hpp"
#include "serve/web_assets.hpp"
#include "train/evaluate.hpp"

namespace lenet5::serve {

bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

struct Server::Impl {
  Checkpoint checkpoint;
  std::string checkpoint_name;
  ServeSettings settings;
  std::unique_ptr<Engine> engine;  // on settings.device; the activations are read back to the host
  std::mutex engine_mutex;         // one forward pass at a time through its buffers
  const std::string model;         // /api/model never changes: written once
  RunEvaluations evaluations;      // /api/runs/NAME/evaluation, cached per checkpoint
  Router router;
  HttpServer http;

  Impl(Checkpoint c, std::string name, ServeSettings s)
      : checkpoint(std::move(c)),
        checkpoint_name(std::move(name)),
        settings(std::move(s)),
        engine(engine_for(checkpoint, settings.device)),
        model(json_text(model_json(checkpoint, checkpoint_name))),
        evaluations(settings.data),
        http([this](const HttpRequest& request) { return router.answer(request); }, settings.limits,
             settings.workers) {
    add_routes();
  }

  void add_routes() {
    for (const WebAsset& asset : web_assets()) {
      const auto serve_asset = [&asset](const RouteRequest&) {
        return HttpResponse{200,
                            asset.content_type,
                            std::string(reinterpret_cast<const char*>(asset.bytes), asset.size),
                            {}};
      };
      router.add("GET", asset.path, serve_asset);
      // The page names favicon.svg in its head; a client that asks for the icon at the usual
      // address gets the same picture, not a 404.
      if (std::string(asset.path) == "/index.html") router.add("GET", "/", serve_asset);
      if (std::string(asset.path) == "/favicon.svg") router.add("GET", "/favicon.ico", serve_asset);
    }
    router.add("POST", "/api/classify", [this](const RouteRequest& request) {
      return json_response(classify_request(request.http.header("Content-Type"),
                                            request.parameter("invert"), request.http.body, *engine,
                                            engine_mutex));
    });
    router.add("GET", "/api/model", [this](const RouteRequest&) {
      return HttpResponse{200, kJsonType, model, {}};
    });
    router.add("GET", "/api/runs",
               [this](const RouteRequest&) { return json_response(runs_json(settings.runs)); });
    router.add("GET", "/api/runs/*", [this](const RouteRequest& request) {
      return json_response(run_json(settings.runs, request.captures[0]));
    });
    router.add("GET", "/api/runs/*/evaluation", [this](const RouteRequest& request) {
      const auto body = evaluations.answer(run_folder(settings.runs, request.captures[0]));
      return HttpResponse{200, kJsonType, *body, {}};
    });
  }
};

Server::Server(Checkpoint checkpoint, std::string checkpoint_name, ServeSettings settings)
    : m(std::make_unique<Impl>(std::move(checkpoint), std::move(checkpoint_name),
                               std::move(settings))) {}

Server::~Server() {
  stop();
}

int Server::bind() {
  return m->http.bind(m->settings.host, m->settings.port);
}

void Server::listen() {
  m->http.run();
}

void Server::stop() {
  m->http.stop();
}

HttpResponse Server::answer(std::string_view request_bytes) const {
  return answer_request_bytes(
      request_bytes, m->settings.limits,
      [this](const HttpRequest& request) { return m->router.answer(request); });
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
