#include "troupe/dsn.hpp"

#include "troupe/error.hpp"

// The rule of <troupe/dsn.hpp>, in storage because it calls libpq: only its connection string
// parser, which needs no server.
#include <libpq-fe.h>

#include <algorithm>
#include <cctype>

namespace troupe {

namespace {

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
    s.pop_back();
  return s;
}

// Whether libpq reads `dsn` as a connection string (key=value or URI) rather than as a bare
// database name: the rule of PQconnectdbParams' expand_dbname.
bool is_connection_string(std::string_view dsn) {
  return dsn.starts_with("postgresql://") || dsn.starts_with("postgres://") ||
         dsn.find('=') != std::string_view::npos;
}

} // namespace

void validate_dsn(std::string_view dsn) {
  if (!is_connection_string(dsn))
    return; // empty, or a database name
  std::string text(dsn);
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(text.c_str(), &err);
  if (opts != nullptr) {
    PQconninfoFree(opts);
    return;
  }
  std::string detail = err ? trim(err) : std::string("out of memory");
  PQfreemem(err);
  // libpq quotes the token it could not read, and a mistyped setting ("password:s3cret",
  // "passwordX") is such a token: withhold its words whenever the text could hold a password.
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower.find("password") != std::string::npos || text.find('@') != std::string::npos)
    throw error(errc::invalid_argument,
                "invalid PostgreSQL connection string (libpq's explanation is withheld because "
                "it can quote part of the password)");
  throw error(errc::invalid_argument, "invalid PostgreSQL connection string: " + detail);
}

bool is_valid_dsn(std::string_view dsn) noexcept {
  try {
    validate_dsn(dsn);
    return true;
  } catch (...) {
    return false;
  }
}

std::optional<std::string> dsn_option(std::string_view dsn, std::string_view key) {
  std::string text(dsn);
  if (text.empty())
    return std::nullopt;
  if (!is_connection_string(text))
    return key == "dbname" ? std::optional<std::string>(text) : std::nullopt;
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(text.c_str(), &err);
  if (opts == nullptr) {
    PQfreemem(err);
    return std::nullopt;
  }
  std::optional<std::string> out;
  for (auto* o = opts; o->keyword != nullptr; ++o)
    if (o->val != nullptr && key == o->keyword)
      out = o->val;
  PQconninfoFree(opts);
  return out;
}

std::string redact_dsn(std::string_view dsn) {
  // Rebuilt from libpq's own parse, so every spelling libpq accepts (quoted values, escapes,
  // URIs, percent-encoding) loses its password; a DSN libpq cannot parse is not echoed at all.
  std::string text(dsn);
  if (text.empty())
    return text;
  if (!is_connection_string(text))
    return "dbname=" + text; // a database name holds no password
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(text.c_str(), &err);
  if (opts == nullptr) {
    PQfreemem(err);
    return "<unparsable connection string>";
  }
  std::string out;
  for (auto* o = opts; o->keyword != nullptr; ++o) {
    if (o->val == nullptr)
      continue;
    if (!out.empty())
      out.push_back(' ');
    out += o->keyword;
    out.push_back('=');
    // libpq marks its secrets (password, sslpassword, ...) with a '*' in dispchar.
    bool secret =
      o->dispchar != nullptr && std::string_view(o->dispchar).find('*') != std::string_view::npos;
    out += secret ? std::string("***") : std::string(o->val);
  }
  PQconninfoFree(opts);
  return out.empty() ? "<libpq defaults>" : out;
}

std::string redact_secrets(std::string_view text) {
  std::string s(text);
  // URI form: scheme://user:password@host
  if (auto scheme = s.find("://"); scheme != std::string::npos) {
    auto at = s.find('@', scheme + 3);
    auto colon = s.find(':', scheme + 3);
    if (at != std::string::npos && colon != std::string::npos && colon < at)
      s.replace(colon + 1, at - colon - 1, "***");
    if (auto q = s.find("password=", scheme); q != std::string::npos) {
      auto end = s.find('&', q);
      s.replace(q + 9, (end == std::string::npos ? s.size() : end) - q - 9, "***");
    }
    return s;
  }
  // key=value form: password=secret or password='sec ret'
  for (std::size_t pos = s.find("password"); pos != std::string::npos;
       pos = s.find("password", pos + 1)) {
    auto eq = s.find_first_not_of(' ', pos + 8);
    if (eq == std::string::npos || s[eq] != '=')
      continue;
    auto start = s.find_first_not_of(' ', eq + 1);
    if (start == std::string::npos)
      break;
    std::size_t end = start;
    if (s[start] == '\'') {
      end = start + 1;
      while (end < s.size() && s[end] != '\'') {
        if (s[end] == '\\')
          ++end;
        ++end;
      }
      end = std::min(end + 1, s.size());
    } else {
      end = s.find(' ', start);
      if (end == std::string::npos)
        end = s.size();
    }
    s.replace(start, end - start, "***");
  }
  return s;
}

} // namespace troupe
