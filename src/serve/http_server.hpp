// The HTTP/1.1 server under `lenet5 serve` (Boost.Beast on Boost.Asio): it reads requests off the
// network within limits that hold for every framing of a request, hands each whole request to a
// handler on a pool of worker threads, writes the answer and logs it.
//
// One thread waits on every connection at once (Asio's event loop), so a connection that is slow,
// idle or half open costs a socket and its buffer, never a worker: workers only run handlers. A
// connection reads one request at a time: its head within head_timeout (counted from when the
// server starts waiting for it, so it also bounds an idle keep-alive connection), then its body
// within body_timeout, and its answer must be taken within write_timeout. What the server answers
// itself, each as JSON {"error": "..."} and then closing the connection:
//   400  a request that is not HTTP/1.x (a malformed line, header or chunk);
//   408  a body that did not arrive within body_timeout (a head that did not: closed unanswered);
//   413  a body over max_body_bytes, by its Content-Length at once (before any of it is read) or
//        by counting as it arrives (chunked);
//   414  a request line over max_head_bytes; 431 a head over max_head_bytes or max_header_fields;
//   503  (then closed) a connection over max_connections in all or max_connections_per_address
//        from one client address, with Retry-After.
// After an answer that closes the connection, the rest of what the client is still sending is
// read and dropped for up to linger_timeout, so that the client reads the answer instead of a
// reset. A connection is closed after max_requests_per_connection answers, and when the client
// asks (Connection: close, HTTP/1.0).
//
// The access log: one line per answer at info level (so -q quiets it): client address, method,
// target (escaped: printable ASCII as sent, other bytes as \xHH), status, body bytes and the
// milliseconds from the request's head to its answer written.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "serve/http.hpp"

namespace lenet5::serve {

struct HttpLimits {
  std::size_t max_body_bytes = std::size_t(4) << 20;
  std::size_t max_head_bytes = std::size_t(16) << 10;  // the request line and every header
  int max_header_fields = 100;
  int max_connections = 256;
  int max_connections_per_address = 64;
  int max_requests_per_connection = 100;
  std::chrono::milliseconds head_timeout{5000};
  std::chrono::milliseconds body_timeout{20000};
  std::chrono::milliseconds write_timeout{20000};
  std::chrono::milliseconds linger_timeout{1000};
};

// Answers one request; it must not throw (Router::answer does not), though the server turns an
// escaping exception into a 500 all the same.
using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

class HttpServer {
 public:
  // `workers`: threads that run `handler`, so that many requests are answered at once.
  HttpServer(HttpHandler handler, HttpLimits limits, int workers);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Listens on host:port (0: any free port); returns the port. Throws lenet5::Error naming the
  // address when it cannot.
  int bind(const std::string& host, int port);
  // Serves until stop() (from another thread); needs bind() first. Requests being answered when
  // stop() comes are answered first.
  void run();
  void stop();

 private:
  struct Impl;
  std::shared_ptr<Impl> m;
};

// The answer the server gives to `bytes` arriving on a connection as one request (the same parser,
// limits and refusals, then `handler`): for the fuzz target, which cannot open sockets. Bytes
// after the request are ignored; a request cut short is a 400.
HttpResponse answer_request_bytes(std::string_view bytes, const HttpLimits& limits,
                                  const HttpHandler& handler);

}  // namespace lenet5::serve
