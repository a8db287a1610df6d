// `lenet5 serve`: an HTTP server (http_server.hpp) for one checkpoint and a folder of runs.
//   GET  /, /index.html, /app.js, /style.css   the page (web/, compiled in: web_assets.hpp), and
//        /favicon.svg (also at /favicon.ico)   its icon
//   POST /api/classify      a digit -> prediction, probabilities, input, every layer's outputs
//   GET  /api/model         the checkpoint's settings and C1/C3 filters
//   GET  /api/runs          the run and sweep folders under the runs folder
//   GET  /api/runs/NAME     one run's config.toml and metrics; for a sweep, per setting its
//                           summary and the spread of its models' curves (api.hpp's sweep_json)
//   GET  /api/runs/NAME/evaluation   its checkpoint on its data set's test set: accuracy, loss,
//                                    confusion matrix, the misread images, the class names
//                                    (run_evaluation.hpp)
// HEAD wherever GET; another method on one of these paths is 405 with Allow, any other path 404
// (router.hpp); every error answers {"error": "..."}. The checkpoint is loaded once and only read;
// each request classifies on one engine (the CPU's unless settings.device says the GPU), one at a
// time: a forward pass of one image takes well under a millisecond, so a lock costs less than an
// engine per worker.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "core/device.hpp"
#include "serve/http_server.hpp"
#include "train/checkpoint.hpp"
#include "train/run_folder.hpp"

namespace lenet5::serve {

struct ServeSettings {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (bind() says which)
  std::filesystem::path runs = kRunsFolder;
  Device device = Device::cpu;  // where classify requests run (the engine of engine_for)
  // MNIST, or the data set its files are, for the runs' evaluations (run_evaluation.hpp).
  std::filesystem::path data = "data/mnist";
  // Requests answered at once (evaluating a run takes seconds); more wait for a worker. Waiting
  // connections hold no worker (http_server.hpp).
  int workers = 16;
  HttpLimits limits;  // http_server.hpp: each with what it answers
};

// Whether `host` is a loopback address (127.x.x.x, ::1, localhost), which only this machine
// reaches.
bool is_loopback(const std::string& host);

class Server {
 public:
  Server(Checkpoint checkpoint, std::string checkpoint_name, ServeSettings settings);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the socket; returns the port (the one chosen when settings.port is 0). Throws
  // lenet5::Error naming the address when it cannot bind.
  int bind();
  // Serves until stop() (from another thread); needs bind() first.
  void listen();
  void stop();

  // The answer to `request_bytes` as they would arrive on a connection: read by the server's own
  // parser within its limits, then routed (http_server.hpp's answer_request_bytes). No socket.
  HttpResponse answer(std::string_view request_bytes) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> m;
};

// Serves until SIGINT or SIGTERM (core/stop_signals.hpp), then stops cleanly: the socket closes and
// the requests in progress finish. A second signal stops the program at once.
void serve_until_signal(Server& server);

}  // namespace lenet5::serve
