// lenet5 serve --checkpoint F [--runs DIR] [--data DIR] [--host H] [--port P] [--device ...]
#include <spdlog/spdlog.h>

#include <cstdio>

#include "backend/backend.hpp"
#include "cli/commands.hpp"
#include "core/error.hpp"
#include "data/mnist.hpp"
#include "serve/server.hpp"
#include "train/checkpoint.hpp"
#include "train/run_folder.hpp"

namespace lenet5::cli {
namespace {

Command add_serve_command(CLI::App& parent) {
  auto* cmd = add_subcommand(
      parent, "serve",
      "a page to draw a digit and watch every layer answer, and the runs' curves (HTTP)");
  struct Options {
    std::string checkpoint, runs = kRunsFolder, host = "127.0.0.1", device = "cpu", data;
    int port = 8080;
  };
  auto o = std::make_shared<Options>();
  add_checkpoint_option(*cmd, o->checkpoint);
  cmd->add_option("--runs", o->runs, "folder of run folders that the runs view shows")
      ->capture_default_str();
  cmd->add_option("--data", o->data,
                  "the runs view's test-set folder, read when a run is first shown: MNIST's "
                  "(default: $LENET5_DATA or data/mnist), or the data set its files' checksums "
                  "name. A data set not held there is read from $LENET5_DATA or its own folder "
                  "(data/fashion-mnist)");
  cmd->add_option("--host", o->host,
                  "address to listen on; anything but loopback lets anyone on that network use it")
      ->capture_default_str();
  cmd->add_option("--port", o->port, "TCP port (0: any free one, printed at start)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--device", o->device,
                  "auto|gpu|cpu: where each drawing is classified and its layers computed. The "
                  "CPU by default: one image per request is a host-sized job (its forward pass "
                  "takes about a millisecond); gpu runs the checkpoint's kernels and reads each "
                  "layer back")
      ->check(CLI::IsMember({"auto", "cpu", "gpu"}))
      ->capture_default_str();
  return {cmd, [o]() {
            serve::ServeSettings settings;
            settings.device = resolve_device(o->device, /*warn_on_cpu_fallback=*/false);
            settings.host = o->host;
            settings.port = o->port;
            settings.runs = o->runs;
            settings.data = resolve_data_dir(o->data);
            serve::Server server(load_checkpoint(o->checkpoint), o->checkpoint, settings);
            const int port = server.bind();
            if (!serve::is_loopback(o->host))
              spdlog::warn("listening on {}: anyone on that network can use this server", o->host);
            const bool ipv6 = o->host.find(':') != std::string::npos;
            std::printf("serving %s on http://%s%s%s:%d/ (Ctrl-C stops)\n", o->checkpoint.c_str(),
                        ipv6 ? "[" : "", o->host.c_str(), ipv6 ? "]" : "", port);
            std::fflush(stdout);
            serve::serve_until_signal(server);
            return 0;
          }};
}

const CommandRegistration kServe{35, add_serve_command};

}  // namespace

}  // namespace lenet5::cli
