// Which handler answers a request: a table of (method, path pattern, handler), and the one guard
// that every request passes through. A path is split at '/' before its segments are decoded, so a
// %2F stays inside its segment; a pattern's "*" segment matches any one non-empty segment and is
// handed to the handler decoded (any bytes: a handler checks what it takes, as run_folder does).
//
// The answers the router gives itself, all JSON {"error": "..."}:
//   404  no route has this path;
//   405  a route has this path but not this method, with an Allow header naming those it has
//        (HEAD is answered wherever GET is, with GET's headers and no body);
//   400  a malformed target (a bad %-escape, not a path);
//   the status of a BadRequest a handler throws, and 500 for any other exception, logged with the
//   request's method and target (escaped) — so no request can end the process.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "serve/http.hpp"

namespace lenet5::serve {

struct RouteRequest {
  const HttpRequest& http;
  std::vector<std::string> captures;         // the decoded segments the pattern's "*"s matched
  std::map<std::string, std::string> query;  // decoded; the first value of each name

  // The query parameter `name`, "" when absent.
  std::string parameter(const std::string& name) const;
};

using RouteHandler = std::function<HttpResponse(const RouteRequest&)>;

class Router {
 public:
  // `pattern`: "/api/runs/*/evaluation"; `method`: "GET", "POST", ...
  void add(const std::string& method, const std::string& pattern, RouteHandler handler);

  // The answer to `request`, whatever it holds; never throws.
  HttpResponse answer(const HttpRequest& request) const noexcept;

 private:
  struct Route {
    std::string method;
    std::vector<std::string> pattern;
    RouteHandler handler;
  };
  HttpResponse route(const HttpRequest& request) const;
  std::vector<Route> m_routes;
};

}  // namespace lenet5::serve
