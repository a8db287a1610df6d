// What the tests of `lenet5 serve` share: a checkpoint from a seed (the routes' shapes and the
// server's robustness do not depend on training), a drawing to classify, a server listening on a
// free loopback port on a thread of its own, and the checks every answer gets.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "core/layout.hpp"
#include "http_client.hpp"
#include "serve/server.hpp"
#include "train/checkpoint.hpp"

namespace lenet5::serve_test {

inline Checkpoint seeded_checkpoint(std::uint64_t seed = 5) {
  Checkpoint c;
  c.net.c3_table = C3Table::lecun;
  const ParamLayout layout = lenet5_layout(c.net);
  c.parameters.resize(layout.buffer_floats);
  initialise_parameters(layout, c.net, seed, c.parameters.data());
  c.config_toml = "[train]\nepochs = 1\n";
  c.position.epoch = 1;
  return c;
}

// A 28x28 drawing of a vertical bar, light ink on black, as JSON grey values.
inline nlohmann::json bar_drawing() {
  nlohmann::json pixels = nlohmann::json::array();
  for (int y = 0; y < 28; ++y)
    for (int x = 0; x < 28; ++x) pixels.push_back(y >= 4 && y < 24 && x >= 12 && x < 16 ? 255 : 0);
  return {{"pixels", pixels}};
}

// The answer's JSON, after checking its status and that it is JSON.
inline nlohmann::json json_of(const testing::HttpResult& result, int status) {
  EXPECT_TRUE(result) << "no answer: " << result.error;
  if (!result) return nullptr;
  EXPECT_EQ(result.status, status) << result.body.substr(0, 300);
  EXPECT_EQ(result.header("Content-Type"), "application/json; charset=utf-8");
  EXPECT_EQ(result.header("Content-Encoding"), "");  // see AnswersAreNotCompressed
  return nlohmann::json::parse(result.body, nullptr, /*allow_exceptions=*/false);
}

// A server on a free loopback port, listening on a thread of its own until destroyed.
struct RunningServer {
  serve::Server server;
  int port;
  std::thread thread;

  RunningServer(Checkpoint checkpoint, const serve::ServeSettings& settings)
      : server(std::move(checkpoint), "seeded.safetensors", settings),
        port(server.bind()),
        thread([this] { server.listen(); }) {}
  ~RunningServer() {
    server.stop();
    thread.join();
  }
  testing::HttpResult get(const std::string& target,
                          const testing::RequestHeaders& headers = {}) const {
    return testing::http_get(port, target, headers);
  }
  testing::HttpResult post(const std::string& target, const std::string& body,
                           const std::string& content_type,
                           const testing::RequestHeaders& headers = {}) const {
    return testing::http_post(port, target, body, content_type, headers);
  }
};

// Every hostile request is followed by this: the server is still there and still classifies.
inline void expect_still_serving(const RunningServer& server) {
  const nlohmann::json answer =
      json_of(server.post("/api/classify", bar_drawing().dump(), "application/json"), 200);
  EXPECT_TRUE(answer.contains("prediction")) << answer;
}

}  // namespace lenet5::serve_test
