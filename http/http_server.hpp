// A small HTTP server for Troupe's own endpoints (a node's /metrics, `troupe exporter`, `troupe
// dashboard`): routes to plain functions, served on threads of its own, never on CAF's
// scheduler. Backed by Debian's cpp-httplib, which only http_server.cpp includes. Internal (not
// installed).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace troupe::http {

/// What a handler reads of a request.
struct request {
  std::string method; ///< GET, POST, ...
  std::string path;   ///< without the query
  std::map<std::string, std::string> query;
  /// Every query parameter, repeated ones too (by name, then in the order given).
  std::vector<std::pair<std::string, std::string>> parameters;
  /// Header values by lower-case name (the last one when a header repeats).
  std::map<std::string, std::string> headers;
  std::string body;
  /// The peer's address, for logs.
  std::string remote;

  std::optional<std::string> param(const std::string& name) const;
  std::optional<std::string> header(const std::string& lower_case_name) const;
};

/// What a handler answers.
struct response {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::map<std::string, std::string> headers;
};

using handler = std::function<response(const request&)>;

/// Where to listen: a host (an IPv4 or IPv6 address, or a name) and a port (0: any free one).
struct listen_address {
  std::string host = "127.0.0.1";
  std::int32_t port = 0;
};

/// Parses "HOST:PORT", "[IPV6]:PORT" or ":PORT" (localhost) for a flag named `what`; throws
/// troupe::error(invalid_argument) naming `what` and the value when it is not one.
listen_address parse_listen_address(const std::string& text, const std::string& what);

/// One request from a client (tests, the benchmark): `method` GET or POST to `host`:`port`
/// `path` (with its query), with these headers and body. Throws troupe::error
/// (connection_lost) when no answer comes within `timeout_ms`.
response fetch(const std::string& host, std::int32_t port, const std::string& method,
               const std::string& path, const std::map<std::string, std::string>& headers = {},
               const std::string& body = {}, std::int64_t timeout_ms = 10'000);

/// Owned by whoever starts it; its handlers run on its own threads (at most `threads` at once),
/// so they must be thread-safe. A handler's exception becomes a 500 with its text.
class server {
public:
  explicit server(int threads = 2);
  ~server(); ///< stops it
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  /// Exact-path routes; a path that ends with '/' also matches every path below it.
  void get(const std::string& path, handler h);
  void post(const std::string& path, handler h);

  /// Binds (throws troupe::error(invalid_argument) naming the address when it cannot) and
  /// serves on a thread of its own until stop(). Returns the port bound.
  std::int32_t start(const listen_address& where);
  /// Stops serving and joins its threads; idempotent.
  void stop();
  /// The port bound (0 before start()).
  std::int32_t port() const noexcept;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace troupe::http
