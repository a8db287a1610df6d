// HTTP requests and answers as `lenet5 serve`'s routes see them, apart from the library that reads
// them off the network (http_server.hpp): plain strings, so that the routes, the router and the
// fuzz target compile without it. Every error answer is JSON, {"error": "..."}, and every string
// that came from a request (a path, a query value, a header) goes into JSON through json_text,
// which replaces bytes that are not UTF-8 instead of throwing.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.hpp"

namespace lenet5::serve {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // as sent: "GET", "POST", "BREW"
  std::string target;  // as sent, not decoded: "/api/runs/a%ffb?x=1"
  HttpHeaders headers;
  std::string body;
  // The value of header `name` (any case), "" when absent.
  std::string header(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type;
  std::string body;
  HttpHeaders headers;  // besides Content-Type and Content-Length: Allow, Retry-After
};

// A request the client got wrong (or an answer the server can explain, such as 503 for a missing
// test set), answered with `status` and {"error": message}.
class BadRequest : public Error {
 public:
  BadRequest(int status, const std::string& message) : Error(message), m_status(status) {}
  int status() const { return m_status; }

 private:
  int m_status;
};

// With a charset, which is also what keeps a browser from guessing another encoding.
inline constexpr const char* kJsonType = "application/json; charset=utf-8";

// `value` as JSON text; bytes that are not UTF-8 (a path's %ff, a file name) become U+FFFD.
std::string json_text(const nlohmann::json& value);
HttpResponse json_response(const nlohmann::json& body, int status = 200);
// {"error": message}; never throws (an answer to an error must not become another error).
HttpResponse error_response(int status, const std::string& message) noexcept;

// `text` with %XX escapes decoded (and '+' as a space where `plus_is_space`: a query's form
// encoding). Throws BadRequest 400 for a '%' not followed by two hex digits.
std::string percent_decoded(std::string_view text, bool plus_is_space = false);

// `text` for a log line: printable ASCII as it is, every other byte (controls, a line break that
// would forge a log line, bytes >= 0x80) as \xHH, cut to `max_chars` bytes of input with "...".
std::string printable(std::string_view text, std::size_t max_chars = 200);

}  // namespace lenet5::serve
