// The Boost.Beast server: reading requests within their limits, the worker pool that runs the
// handler, writing and logging answers.
#include "serve/http_server.hpp"

#include <malloc.h>
#include <spdlog/spdlog.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <map>
#include <mutex>
#include <optional>

namespace lenet5::serve {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using Parser = http::request_parser<http::string_body>;
using Message = http::request<http::string_body>;

namespace {

// Each connection's buffer holds the request's head and at most one read beyond it: Beast's parser
// takes a body's bytes out as they come, but it needs a head, a chunk's size line or a trailer
// whole in the buffer, and this bound is what keeps a chunk line of endless extensions (which the
// head limit does not cover) from growing it.
constexpr std::size_t kReadSize = 64 << 10;
std::size_t buffer_bytes(const HttpLimits& limits) {
  return limits.max_head_bytes + kReadSize;
}

std::string size_text(std::size_t bytes) {
  if (bytes >= (1 << 20) && bytes % (1 << 20) == 0) return std::to_string(bytes >> 20) + " MB";
  if (bytes >= (1 << 10) && bytes % (1 << 10) == 0) return std::to_string(bytes >> 10) + " KB";
  return std::to_string(bytes) + " bytes";
}

void start_parser(std::optional<Parser>& parser, const HttpLimits& limits) {
  parser.emplace();
  parser->header_limit(std::uint32_t(limits.max_head_bytes));
  parser->body_limit(limits.max_body_bytes);
}

bool is_disconnection(const beast::error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::operation_aborted ||
         ec == asio::error::broken_pipe || ec == beast::error::timeout;
}

// The server's answer to a request it could not read whole (`received`: the bytes of it in the
// buffer), or none where the client went away or the head did not come in time: the connection
// is then closed unanswered.
std::optional<HttpResponse> refusal(const beast::error_code& ec, const HttpLimits& limits,
                                    std::string_view received) {
  if (ec == http::error::body_limit)
    return error_response(413, "the body is larger than " + size_text(limits.max_body_bytes));
  if (ec == http::error::header_limit) {
    if (received.find("\r\n") == std::string_view::npos)
      return error_response(414,
                            "the request line is longer than " + size_text(limits.max_head_bytes));
    return error_response(
        431, "the request line and headers are longer than " + size_text(limits.max_head_bytes));
  }
  if (is_disconnection(ec)) return std::nullopt;
  return error_response(400, "not an HTTP/1.x request that can be read: " + ec.message());
}

// A head that was read whole but has too many header fields.
std::optional<HttpResponse> head_refusal(const Message& message, const HttpLimits& limits) {
  if (std::distance(message.begin(), message.end()) <= limits.max_header_fields)
    return std::nullopt;
  return error_response(431, "the request has more than " +
                                 std::to_string(limits.max_header_fields) + " header fields");
}

HttpRequest to_request(Message&& message) {
  HttpRequest request;
  request.method = std::string(message.method_string());
  request.target = std::string(message.target());
  for (const auto& field : message)
    request.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  request.body = std::move(message.body());
  return request;
}

HttpResponse guarded_answer(const HttpHandler& handler, const HttpRequest& request) noexcept {
  try {
    return handler(request);
  } catch (const std::exception& e) {
    spdlog::error("{} {}: internal error: {}", printable(request.method, 20),
                  printable(request.target), e.what());
  } catch (...) {
    spdlog::error("{} {}: internal error", printable(request.method, 20),
                  printable(request.target));
  }
  return error_response(500, "internal error");
}

class Connection;

// The server's state; HttpServer::Impl is this (a private name, which Connection cannot use).
struct Core {
  HttpHandler handler;
  HttpLimits limits;
  // The admitted connections: counted in all and per client address, and told to stop by stop().
  // Declared before the event loop, whose end destroys the connections still in it, which then
  // take themselves out of these.
  std::mutex mutex;
  std::map<Connection*, std::weak_ptr<Connection>> connections;
  std::map<std::string, int> per_address;
  bool stopping = false;

  asio::io_context io{1};  // one thread waits on every connection
  tcp::acceptor acceptor{io};
  asio::steady_timer accept_retry{io};
  asio::thread_pool workers;  // destroyed (joined) first: its tasks hold connections

  Core(HttpHandler h, HttpLimits l, int n_workers)
      : handler(std::move(h)), limits(l), workers(std::size_t(std::max(1, n_workers))) {
    // A body is read into one string of up to max_body_bytes. glibc serves a block that large
    // from mmap and returns it on free, but raises that threshold to the largest block freed, so
    // the next bodies come from the heap, which keeps their pages: a fixed threshold keeps every
    // refused or answered body's memory going back to the system.
    mallopt(M_MMAP_THRESHOLD, 256 << 10);
  }

  void accept();
  void admit(tcp::socket socket);
  // "" when a connection from `address` may be admitted (and is counted), else why not.
  std::string reserve(const std::string& address);
  void release(Connection* connection, const std::string& address);
  void shut_down();
};

// One client connection: reads a request, has a worker answer it, writes the answer, and again.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, Core& server, std::string address, bool admitted)
      : m_stream(std::move(socket)),
        m_body_deadline(m_stream.get_executor()),
        m_buffer(buffer_bytes(server.limits)),
        m_server(server),
        m_address(std::move(address)),
        m_admitted(admitted) {}
  ~Connection() {
    if (m_admitted) m_server.release(this, m_address);
  }

  void start() { read_head(); }

  // Answers `refusal` and closes: for a connection that is not admitted.
  void refuse(HttpResponse refusal) {
    m_head_received = Clock::now();
    write(std::move(refusal), /*keep_alive=*/false);
  }

  // The server stops: closed now if it waits for a request, else once its answer is written.
  // From any thread.
  void stop() {
    asio::post(m_stream.get_executor(), [self = shared_from_this()] {
      self->m_stopping = true;
      if (!self->m_answering) self->close();
    });
  }

 private:
  void read_head() {
    start_parser(m_parser, m_server.limits);
    m_method = m_target = "-";
    m_stream.expires_after(m_server.limits.head_timeout);
    http::async_read_header(
        m_stream, m_buffer, *m_parser,
        [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_head(ec); });
  }

  void on_head(const beast::error_code& ec) {
    m_head_received = Clock::now();
    if (ec) return refuse_or_close(ec);
    const Message& message = m_parser->get();
    m_method = std::string(message.method_string());
    m_target = std::string(message.target());
    if (auto refused = head_refusal(message, m_server.limits)) return finish(std::move(*refused));
    if (m_parser->is_done()) return answer();  // no body
    if (beast::iequals(message[http::field::expect], "100-continue")) {
      static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
      m_stream.expires_after(m_server.limits.write_timeout);
      return asio::async_write(m_stream, asio::buffer(kContinue, sizeof kContinue - 1),
                               [self = shared_from_this()](beast::error_code error, std::size_t) {
                                 if (error) return self->close();
                                 self->read_body();
                               });
    }
    read_body();
  }

  // The body's deadline is a timer of its own that cancels the read: the stream's own timeout
  // would close the socket, and a client whose body stops coming is owed its 408.
  void read_body() {
    m_stream.expires_never();
    m_reading_body = true;
    m_body_deadline.expires_after(m_server.limits.body_timeout);
    m_body_deadline.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec || !self->m_reading_body) return;
      self->m_body_late = true;
      self->m_stream.socket().cancel(ec);
    });
    http::async_read(
        m_stream, m_buffer, *m_parser,
        [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_body(ec); });
  }

  void on_body(const beast::error_code& ec) {
    m_reading_body = false;
    m_body_deadline.cancel();
    if (m_body_late)
      return finish(error_response(408, "the body did not arrive within " +
                                            std::to_string(m_server.limits.body_timeout.count()) +
                                            " ms"));
    if (ec) return refuse_or_close(ec);
    answer();
  }

  // Has a worker answer the request; the answer is written on this connection's executor.
  void answer() {
    Message message = m_parser->release();
    const bool keep_alive =
        message.keep_alive() && ++m_answered < m_server.limits.max_requests_per_connection;
    m_head_request = message.method() == http::verb::head;
    m_answering = true;
    asio::post(m_server.workers,
               [self = shared_from_this(), keep_alive, request = to_request(std::move(message)),
                work = asio::make_work_guard(m_server.io)]() mutable {
                 HttpResponse response = guarded_answer(self->m_server.handler, request);
                 asio::post(self->m_stream.get_executor(),
                            [self, keep_alive, response = std::move(response)]() mutable {
                              self->write(std::move(response), keep_alive);
                            });
               });
  }

  void refuse_or_close(const beast::error_code& ec) {
    const auto* bytes = static_cast<const char*>(m_buffer.data().data());
    std::optional<HttpResponse> refused =
        refusal(ec, m_server.limits, std::string_view(bytes, m_buffer.size()));
    if (refused) return finish(std::move(*refused));
    close();
  }

  // Writes `refusal`, then closes the connection, reading what the client still sends meanwhile.
  void finish(HttpResponse refusal) { write(std::move(refusal), /*keep_alive=*/false); }

  void write(HttpResponse response, bool keep_alive) {
    m_answering = true;
    m_keep_alive = keep_alive && !m_stopping;
    auto message = std::make_shared<http::response<http::string_body>>();
    message->result(unsigned(response.status));
    message->version(11);
    message->set(http::field::content_type, response.content_type);
    for (const auto& [name, value] : response.headers) message->set(name, value);
    message->body() = std::move(response.body);
    message->keep_alive(m_keep_alive);
    message->prepare_payload();
    m_status = response.status;
    m_bytes = message->body().size();
    if (m_head_request) message->body().clear();  // HEAD: GET's Content-Length, no body
    m_stream.expires_after(m_server.limits.write_timeout);
    http::async_write(m_stream, *message,
                      [self = shared_from_this(), message](beast::error_code ec, std::size_t) {
                        self->on_write(ec);
                      });
  }

  void on_write(const beast::error_code& ec) {
    log_access();
    m_answering = false;
    m_head_request = false;
    if (ec) return close();
    if (m_keep_alive && !m_stopping) return read_head();
    linger();
  }

  void log_access() const {
    const double ms =
        std::chrono::duration<double, std::milli>(Clock::now() - m_head_received).count();
    spdlog::info("{} {} {} {} {} B {:.1f} ms", m_address, printable(m_method, 20),
                 printable(m_target), m_status, m_bytes, ms);
  }

  // No more answers on this connection: sends FIN, then reads and drops what the client still
  // sends (the rest of a refused body) for up to linger_timeout, so that the client reads the
  // answer rather than a reset, which closing with unread bytes would send it.
  void linger() {
    beast::error_code ignored;
    m_stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
    m_stream.expires_after(m_server.limits.linger_timeout);
    drain();
  }

  void drain() {
    m_buffer.clear();
    m_stream.async_read_some(m_buffer.prepare(kReadSize),
                             [self = shared_from_this()](beast::error_code ec, std::size_t) {
                               if (ec) return self->close();
                               self->drain();
                             });
  }

  void close() {
    beast::error_code ignored;
    m_stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    m_stream.close();
  }

  beast::tcp_stream m_stream;
  asio::steady_timer m_body_deadline;
  bool m_reading_body = false, m_body_late = false;
  beast::flat_buffer m_buffer;
  std::optional<Parser> m_parser;
  Core& m_server;
  const std::string m_address;
  const bool m_admitted;
  int m_answered = 0;
  bool m_answering = false;  // a worker answers, or the answer is being written
  bool m_keep_alive = false;
  bool m_head_request = false;
  bool m_stopping = false;
  // For the access log.
  Clock::time_point m_head_received;
  std::string m_method = "-", m_target = "-";
  int m_status = 0;
  std::size_t m_bytes = 0;
};

}  // namespace

struct HttpServer::Impl : Core {
  using Core::Core;
};

void Core::accept() {
  acceptor.async_accept(asio::make_strand(io), [this](beast::error_code ec, tcp::socket socket) {
    if (!acceptor.is_open()) return;
    if (ec) {
      // Out of file descriptors, say: tried again shortly, rather than in a loop that spins.
      spdlog::warn("cannot accept a connection: {}", ec.message());
      accept_retry.expires_after(std::chrono::milliseconds(100));
      accept_retry.async_wait([this](beast::error_code error) {
        if (!error) accept();
      });
      return;
    }
    admit(std::move(socket));
    accept();
  });
}

void Core::admit(tcp::socket socket) {
  beast::error_code ec;
  const tcp::endpoint peer = socket.remote_endpoint(ec);
  if (ec) return;  // gone already
  std::string address = peer.address().to_string();
  // An answer's last segment must not wait for the client's delayed acknowledgement of the one
  // before (Nagle's algorithm): that cost small answers 40 ms in Chromium.
  socket.set_option(tcp::no_delay(true), ec);
  const std::string refused = reserve(address);
  auto connection =
      std::make_shared<Connection>(std::move(socket), *this, address, refused.empty());
  if (!refused.empty()) {
    HttpResponse busy = error_response(503, refused);
    busy.headers.emplace_back("Retry-After", "1");
    return connection->refuse(std::move(busy));
  }
  {
    const std::lock_guard<std::mutex> lock(mutex);
    connections[connection.get()] = connection;
  }
  connection->start();
}

std::string Core::reserve(const std::string& address) {
  const std::lock_guard<std::mutex> lock(mutex);
  if (stopping) return "the server is stopping";
  const auto from_address = per_address.find(address);
  if (from_address != per_address.end() &&
      from_address->second >= limits.max_connections_per_address)
    return "too many connections from " + address + " (" +
           std::to_string(limits.max_connections_per_address) +
           " open): close one, or wait for one to finish";
  if (int(connections.size()) >= limits.max_connections)
    return "the server has " + std::to_string(limits.max_connections) +
           " connections open, its most: try again in a moment";
  ++per_address[address];  // only admitted addresses are kept
  return "";
}

void Core::release(Connection* connection, const std::string& address) {
  const std::lock_guard<std::mutex> lock(mutex);
  connections.erase(connection);
  if (--per_address[address] <= 0) per_address.erase(address);
}

void Core::shut_down() {
  beast::error_code ignored;
  acceptor.close(ignored);
  accept_retry.cancel();
  std::vector<std::shared_ptr<Connection>> open;
  {
    const std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
    for (const auto& [pointer, weak] : connections)
      if (auto connection = weak.lock()) open.push_back(std::move(connection));
  }
  for (const auto& connection : open) connection->stop();
}

HttpServer::HttpServer(HttpHandler handler, HttpLimits limits, int workers)
    : m(std::make_shared<Impl>(std::move(handler), limits, workers)) {}

HttpServer::~HttpServer() {
  stop();
  m->workers.join();
}

int HttpServer::bind(const std::string& host, int port) {
  try {
    const auto addresses = tcp::resolver(m->io).resolve(host, std::to_string(port));
    const tcp::endpoint endpoint = *addresses.begin();
    m->acceptor.open(endpoint.protocol());
    m->acceptor.set_option(asio::socket_base::reuse_address(true));
    m->acceptor.bind(endpoint);
    // The system's largest backlog: 64 clients connecting at once must not overflow it.
    m->acceptor.listen(asio::socket_base::max_listen_connections);
    return m->acceptor.local_endpoint().port();
  } catch (const boost::system::system_error& e) {
    throw Error("cannot listen on " + host + ":" + std::to_string(port) + ": " + e.what() +
                " (the port is taken or the address is not this machine's: try another --port "
                "or --host)");
  }
}

void HttpServer::run() {
  if (!m->acceptor.is_open()) throw Error("internal: HttpServer::run before bind");
  asio::post(m->io, [impl = m.get()] { impl->accept(); });
  m->io.run();
}

void HttpServer::stop() {
  asio::post(m->io, [impl = m.get()] { impl->shut_down(); });
}

HttpResponse answer_request_bytes(std::string_view bytes, const HttpLimits& limits,
                                  const HttpHandler& handler) {
  std::optional<Parser> parser;
  start_parser(parser, limits);
  parser->eager(true);
  beast::error_code ec;
  std::size_t used = 0;
  while (!parser->is_done()) {
    used += parser->put(asio::buffer(bytes.data() + used, bytes.size() - used), ec);
    // Every byte left is given to each put: the parser wanting more, or having taken them all
    // without a whole request, means the bytes end before the request does.
    if (ec == http::error::need_more || (!ec && used == bytes.size() && !parser->is_done()))
      return error_response(400, "the request is cut short");
    if (ec) break;
  }
  if (ec) {
    std::optional<HttpResponse> refused =
        refusal(ec, limits, bytes.substr(used, limits.max_head_bytes));
    return refused ? std::move(*refused) : error_response(400, "the request is cut short");
  }
  if (auto refused = head_refusal(parser->get(), limits)) return std::move(*refused);
  return guarded_answer(handler, to_request(parser->release()));
}

}  // namespace lenet5::serve
