#include "http/http_server.hpp"

#include "troupe/error.hpp"
#include "troupe/log.hpp"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <thread>
#include <vector>

namespace troupe::http {

namespace {

// Header values by lower-case name (the last one when a header repeats).
std::map<std::string, std::string> by_lower_case_name(const httplib::Headers& headers) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : headers) {
    std::string lower = k;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    out[lower] = v;
  }
  return out;
}

} // namespace

std::optional<std::string> request::param(const std::string& name) const {
  auto i = query.find(name);
  if (i == query.end())
    return std::nullopt;
  return i->second;
}

std::optional<std::string> request::header(const std::string& lower_case_name) const {
  auto i = headers.find(lower_case_name);
  if (i == headers.end())
    return std::nullopt;
  return i->second;
}

listen_address parse_listen_address(const std::string& text, const std::string& what) {
  auto bad = [&](const std::string& why) {
    return error(errc::invalid_argument,
                 what + ": \"" + text + "\" is not HOST:PORT, [IPV6]:PORT or :PORT (" + why + ")");
  };
  auto colon = text.rfind(':');
  if (colon == std::string::npos)
    throw bad("no port");
  listen_address out;
  auto host = text.substr(0, colon);
  auto port = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  else if (host.find(':') != std::string::npos)
    throw bad("an IPv6 address goes in brackets");
  if (!host.empty())
    out.host = host;
  int value = -1;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc{} || end != port.data() + port.size() || value < 0 ||
      value > 65535)
    throw bad("the port must be 0 to 65535");
  out.port = value;
  return out;
}

response fetch(const std::string& host, std::int32_t port, const std::string& method,
               const std::string& path, const std::map<std::string, std::string>& headers,
               const std::string& body, std::int64_t timeout_ms) {
  httplib::Client client(host, port);
  auto secs = static_cast<time_t>(timeout_ms / 1000);
  auto usecs = static_cast<time_t>((timeout_ms % 1000) * 1000);
  client.set_connection_timeout(secs, usecs);
  client.set_read_timeout(secs, usecs);
  client.set_write_timeout(secs, usecs);
  httplib::Headers h;
  for (const auto& [k, v] : headers)
    h.emplace(k, v);
  httplib::Result r = method == "POST" ? client.Post(path.c_str(), h, body, "application/json")
                                       : client.Get(path.c_str(), h);
  if (!r)
    throw error(errc::connection_lost, method + " http://" + host + ":" + std::to_string(port) +
                                         path + " got no answer: " + httplib::to_string(r.error()));
  response out;
  out.status = r->status;
  out.body = r->body;
  out.headers = by_lower_case_name(r->headers);
  if (auto i = out.headers.find("content-type"); i != out.headers.end())
    out.content_type = i->second;
  return out;
}

struct server::impl {
  httplib::Server svr;
  std::vector<std::pair<std::string, handler>> gets;
  std::vector<std::pair<std::string, handler>> posts;
  std::thread thread;
  std::int32_t port = 0;
  bool running = false;

  static const handler* route(const std::vector<std::pair<std::string, handler>>& table,
                              const std::string& path) {
    const handler* found = nullptr;
    std::size_t longest = 0;
    for (const auto& [p, h] : table) {
      bool matches = p == path || (!p.empty() && p.back() == '/' && path.rfind(p, 0) == 0);
      if (matches && p.size() >= longest) {
        found = &h;
        longest = p.size();
      }
    }
    return found;
  }

  void serve(const std::vector<std::pair<std::string, handler>>& table, const httplib::Request& in,
             httplib::Response& out) {
    const handler* h = route(table, in.path);
    if (!h) {
      out.status = 404;
      out.set_content("not found: " + in.path + "\n", "text/plain; charset=utf-8");
      return;
    }
    request r;
    r.method = in.method;
    r.path = in.path;
    for (const auto& [k, v] : in.params) {
      r.query[k] = v;
      r.parameters.emplace_back(k, v);
    }
    r.headers = by_lower_case_name(in.headers);
    r.body = in.body;
    r.remote = in.remote_addr;
    response answer;
    try {
      answer = (*h)(r);
    } catch (const std::exception& e) {
      answer = response{500, "text/plain; charset=utf-8", std::string(e.what()) + "\n", {}};
    }
    out.status = answer.status;
    for (const auto& [k, v] : answer.headers)
      out.set_header(k.c_str(), v);
    out.set_content(answer.body, answer.content_type.c_str());
  }
};

server::server(int threads) : impl_(std::make_unique<impl>()) {
  auto count = static_cast<std::size_t>(std::max(1, threads));
  impl_->svr.new_task_queue = [count] { return new httplib::ThreadPool(count); };
  // A kept-alive connection holds a thread until it times out: short, so that stop() is quick.
  impl_->svr.set_keep_alive_timeout(1);
  impl_->svr.set_read_timeout(5, 0);
  impl_->svr.set_write_timeout(5, 0);
  impl_->svr.set_payload_max_length(1 << 20);
  // Address reuse for a quick restart, but not SO_REUSEPORT (httplib's default): a second
  // process must not share the port and take half of the scrapes.
  impl_->svr.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  auto* self = impl_.get();
  impl_->svr.Get(".*", [self](const httplib::Request& in, httplib::Response& out) {
    self->serve(self->gets, in, out);
  });
  impl_->svr.Post(".*", [self](const httplib::Request& in, httplib::Response& out) {
    self->serve(self->posts, in, out);
  });
}

server::~server() {
  stop();
}

void server::get(const std::string& path, handler h) {
  impl_->gets.emplace_back(path, std::move(h));
}

void server::post(const std::string& path, handler h) {
  impl_->posts.emplace_back(path, std::move(h));
}

std::int32_t server::start(const listen_address& where) {
  if (impl_->running)
    throw error(errc::bug, "the HTTP server is already started");
  auto shown = (where.host.find(':') != std::string::npos ? "[" + where.host + "]" : where.host) +
               ":" + std::to_string(where.port);
  int port = where.port;
  if (port == 0)
    port = impl_->svr.bind_to_any_port(where.host);
  else if (!impl_->svr.bind_to_port(where.host, port))
    port = -1;
  if (port <= 0)
    throw error(errc::invalid_argument,
                "cannot listen on " + shown + ": the address is in use or not this machine's");
  impl_->port = port;
  impl_->running = true;
  impl_->thread = std::thread([this] { impl_->svr.listen_after_bind(); });
  // stop() only ends a server that is running: wait until it is (a bounded wait).
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!impl_->svr.is_running() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return port;
}

void server::stop() {
  if (!impl_ || !impl_->running)
    return;
  impl_->running = false;
  impl_->svr.stop();
  if (impl_->thread.joinable())
    impl_->thread.join();
}

std::int32_t server::port() const noexcept {
  return impl_->port;
}

} // namespace troupe::http
