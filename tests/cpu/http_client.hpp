// Clients for the tests of `lenet5 serve`, over real sockets to 127.0.0.1: one HTTP request on a
// new connection (Boost.Beast's client side), and a raw connection that sends bytes as they are
// (a request cut short, a slow client, a chunked body, bytes no HTTP library would write).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace lenet5::testing {

struct HttpResult {
  bool answered = false;
  std::string error;  // why there is no answer
  int status = 0;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;

  explicit operator bool() const { return answered; }
  // The value of header `name` (as the server spells it), "" when absent.
  std::string header(const std::string& name) const {
    for (const auto& [field, value] : headers)
      if (field == name) return value;
    return "";
  }
};

using RequestHeaders = std::vector<std::pair<std::string, std::string>>;

// `method target` with `body` (a Content-Length) and `headers`, on a new connection to
// 127.0.0.1:port; the answer is read whole. The target is sent as given, bytes and all.
inline HttpResult http_request(int port, const std::string& method, const std::string& target,
                               const std::string& body = "", const RequestHeaders& headers = {}) {
  namespace asio = boost::asio;
  namespace beast = boost::beast;
  namespace http = beast::http;
  HttpResult result;
  try {
    asio::io_context io;
    beast::tcp_stream stream(io);
    stream.expires_after(std::chrono::seconds(60));  // far past any answer in these tests
    stream.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"),
                                           static_cast<unsigned short>(port)));
    http::request<http::string_body> request;
    request.method_string(method);
    request.target(target);
    request.version(11);
    request.set(http::field::host, "127.0.0.1");
    for (const auto& [name, value] : headers) request.set(name, value);
    request.body() = body;
    if (!body.empty() || method == "POST") request.prepare_payload();
    http::write(stream, request);
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(boost::none);
    parser.skip(method == "HEAD");  // an answer to HEAD has a Content-Length but no body
    http::read(stream, buffer, parser);
    const auto& response = parser.get();
    result.answered = true;
    result.status = int(response.result_int());
    result.body = response.body();
    for (const auto& field : response)
      result.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  } catch (const std::exception& e) {
    result.error = e.what();
  }
  return result;
}

inline HttpResult http_get(int port, const std::string& target,
                           const RequestHeaders& headers = {}) {
  return http_request(port, "GET", target, "", headers);
}

inline HttpResult http_post(int port, const std::string& target, const std::string& body,
                            const std::string& content_type, RequestHeaders headers = {}) {
  headers.emplace_back("Content-Type", content_type);
  return http_request(port, "POST", target, body, headers);
}

// A TCP connection to 127.0.0.1:port from loopback address `source` (127.0.0.2, ...: another
// client as the server counts them), for bytes sent exactly as written.
class RawConnection {
 public:
  explicit RawConnection(int port, const std::string& source = "127.0.0.1")
      : m_fd(socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in local{};
    local.sin_family = AF_INET;
    inet_pton(AF_INET, source.c_str(), &local.sin_addr);
    sockaddr_in server{};
    server.sin_family = AF_INET;
    server.sin_port = htons(static_cast<std::uint16_t>(port));
    server.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    m_connected = m_fd >= 0 &&
                  ::bind(m_fd, reinterpret_cast<sockaddr*>(&local), sizeof local) == 0 &&
                  connect(m_fd, reinterpret_cast<sockaddr*>(&server), sizeof server) == 0;
  }
  ~RawConnection() {
    if (m_fd >= 0) close(m_fd);
  }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return m_connected; }

  // Whether all of `bytes` were sent (false once the server has closed the connection).
  bool send(const std::string& bytes) {
    std::size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(m_fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += std::size_t(n);
    }
    return true;
  }

  // Everything the server sends until it closes the connection, or until `timeout` passes.
  std::string read_until_closed(std::chrono::milliseconds timeout) {
    return read([](const std::string&) { return false; }, timeout);
  }

  // What the server sends until the first answer's head is in (or the connection closes, or
  // `timeout` passes).
  std::string read_head(std::chrono::milliseconds timeout) {
    return read([](const std::string& text) { return text.find("\r\n\r\n") != std::string::npos; },
                timeout);
  }

  // Whether the server closed the connection within `timeout` (reading and dropping what it
  // sends meanwhile).
  bool closed_within(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    read_until_closed(timeout);
    return std::chrono::steady_clock::now() < deadline && m_closed;
  }

 private:
  template <class Done>
  std::string read(Done done, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string text;
    char buffer[65536];
    while (!done(text)) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd readable{m_fd, POLLIN, 0};
      if (left.count() <= 0 || poll(&readable, 1, int(left.count())) <= 0) break;
      const ssize_t n = recv(m_fd, buffer, sizeof buffer, 0);
      if (n <= 0) {
        m_closed = true;
        break;
      }
      text.append(buffer, std::size_t(n));
    }
    return text;
  }

  int m_fd;
  bool m_connected = false;
  bool m_closed = false;
};

}  // namespace lenet5::testing
