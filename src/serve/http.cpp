// HTTP helpers apart from the network: header look-up, JSON and error answers, percent-decoding.
#include "serve/http.hpp"

#include <cctype>

namespace lenet5::serve {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool same_letters(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

}  // namespace

std::string HttpRequest::header(std::string_view name) const {
  for (const auto& [field, value] : headers)
    if (same_letters(field, name)) return value;
  return "";
}

std::string json_text(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

HttpResponse json_response(const nlohmann::json& body, int status) {
  return HttpResponse{status, kJsonType, json_text(body), {}};
}

HttpResponse error_response(int status, const std::string& message) noexcept {
  try {
    return json_response({{"error", message}}, status);
  } catch (...) {  // out of memory: a fixed answer, which needs next to none
    return HttpResponse{status, kJsonType, R"({"error": "the server is out of memory"})", {}};
  }
}

std::string percent_decoded(std::string_view text, bool plus_is_space) {
  std::string decoded;
  decoded.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+' && plus_is_space) {
      decoded += ' ';
    } else if (text[i] != '%') {
      decoded += text[i];
    } else {
      const int high = i + 2 < text.size() ? hex_value(text[i + 1]) : -1;
      const int low = i + 2 < text.size() ? hex_value(text[i + 2]) : -1;
      if (high < 0 || low < 0)
        throw BadRequest(400,
                         "the request target has a '%' that is not followed by two hex "
                         "digits (write a literal '%' as %25)");
      decoded += static_cast<char>(high * 16 + low);
      i += 2;
    }
  }
  return decoded;
}

std::string printable(std::string_view text, std::size_t max_chars) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string shown;
  const std::size_t n = std::min(text.size(), max_chars);
  shown.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      shown += char(c);
    } else {
      shown += "\\x";
      shown += kHex[c >> 4];
      shown += kHex[c & 15];
    }
  }
  if (text.size() > max_chars) shown += "...";
  return shown;
}

}  // namespace lenet5::serve
