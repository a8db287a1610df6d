// The router: a request's target split and decoded, matched against the route table, behind the
// one guard every request passes.
#include "serve/router.hpp"

#include <spdlog/spdlog.h>

namespace lenet5::serve {

namespace {

struct Target {
  std::vector<std::string> segments;  // decoded
  std::map<std::string, std::string> query;
};

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    const std::size_t end = text.find(separator, start);
    parts.push_back(text.substr(start, end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

// The path of a target in absolute form ("http://host:8080/a?b", which HTTP/1.1 servers must
// accept), or the target itself.
std::string_view origin_form(std::string_view target) {
  for (const std::string_view scheme : {"http://", "https://"}) {
    if (target.substr(0, scheme.size()) != scheme) continue;
    const std::size_t path = target.find('/', scheme.size());
    return path == std::string_view::npos ? "/" : target.substr(path);
  }
  return target;
}

Target parse_target(const std::string& raw) {
  const std::string_view target = origin_form(raw);
  if (target.empty() || target[0] != '/')
    throw BadRequest(400, "the request target must be a path that starts with '/'");
  const std::size_t question = target.find('?');
  Target parsed;
  for (const std::string_view segment : split(target.substr(1, question - 1), '/'))
    parsed.segments.push_back(percent_decoded(segment));
  if (question == std::string_view::npos) return parsed;
  for (const std::string_view pair : split(target.substr(question + 1), '&')) {
    if (pair.empty()) continue;
    const std::size_t equals = pair.find('=');
    parsed.query.emplace(percent_decoded(pair.substr(0, equals), true),
                         equals == std::string_view::npos
                             ? std::string()
                             : percent_decoded(pair.substr(equals + 1), true));
  }
  return parsed;
}

bool matches(const std::vector<std::string>& pattern, const std::vector<std::string>& segments,
             std::vector<std::string>& captures) {
  if (pattern.size() != segments.size()) return false;
  captures.clear();
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == "*" && !segments[i].empty())
      captures.push_back(segments[i]);
    else if (pattern[i] != segments[i])
      return false;
  }
  return true;
}

bool answers(const std::string& route_method, const std::string& method) {
  return route_method == method || (method == "HEAD" && route_method == "GET");
}

void log_internal_error(const HttpRequest& request, const char* what) noexcept {
  try {
    spdlog::error("{} {}: internal error: {}", printable(request.method, 20),
                  printable(request.target), what);
  } catch (...) {  // logging is not worth a second failure
  }
}

}  // namespace

std::string RouteRequest::parameter(const std::string& name) const {
  const auto it = query.find(name);
  return it == query.end() ? std::string() : it->second;
}

void Router::add(const std::string& method, const std::string& pattern, RouteHandler handler) {
  std::vector<std::string> segments;
  for (const std::string_view segment : split(std::string_view(pattern).substr(1), '/'))
    segments.emplace_back(segment);
  m_routes.push_back({method, std::move(segments), std::move(handler)});
}

HttpResponse Router::route(const HttpRequest& request) const {
  Target target = parse_target(request.target);
  std::vector<std::string> captures;
  std::string allowed;
  for (const Route& route : m_routes) {
    if (!matches(route.pattern, target.segments, captures)) continue;
    if (answers(route.method, request.method))
      return route.handler(RouteRequest{request, std::move(captures), std::move(target.query)});
    allowed += (allowed.empty() ? "" : ", ") + route.method;
    if (route.method == "GET") allowed += ", HEAD";
  }
  if (allowed.empty()) return error_response(404, "no such route: " + request.target);
  HttpResponse refusal =
      error_response(405, "this route answers " + allowed + ", not " + request.method);
  refusal.headers.emplace_back("Allow", allowed);
  return refusal;
}

HttpResponse Router::answer(const HttpRequest& request) const noexcept {
  try {
    return route(request);
  } catch (const BadRequest& e) {
    return error_response(e.status(), e.what());
  } catch (const std::exception& e) {
    log_internal_error(request, e.what());
    return error_response(500, std::string("internal error: ") + e.what());
  } catch (...) {
    log_internal_error(request, "an exception that is not a std::exception");
    return error_response(500, "internal error");
  }
}

}  // namespace lenet5::serve
