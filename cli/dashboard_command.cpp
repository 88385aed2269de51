// `troupe dashboard`: the area's web dashboard (docs/dashboard.md) on an address of its own,
// localhost by default, until SIGTERM or SIGINT. Its actions need a token from a file
// (--token-file) or $TROUPE_DASHBOARD_TOKEN; --read-only refuses them all.
#include "cli/arguments.hpp"
#include "cli/commands.hpp"
#include "dashboard/dashboard.hpp"
#include "http/http_server.hpp"
#include "troupe/json.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace troupe::cli {

void parse_dashboard_options(argument_cursor& cur, command_line& cl) {
  while (!cur.done()) {
    auto arg = cur.next();
    if (!is_option(arg))
      unexpected_argument(arg, "dashboard");
    auto opt = split_option(arg);
    if (is_help(opt.name)) {
      cl.what = verb::help;
      return;
    }
    if (opt.name == "--listen") {
      auto text = std::string(cur.value_of(opt));
      try {
        auto where = http::parse_listen_address(text, "option --listen");
        cl.listen_host = where.host;
        cl.listen_port = where.port;
      } catch (const error& e) {
        throw usage_error(echo(e.what()));
      }
    } else if (opt.name == "--token-file") {
      cl.token_file = std::string(cur.value_of(opt));
      if (cl.token_file.empty())
        throw usage_error("option --token-file needs a file name");
    } else if (opt.name == "--sample") {
      cl.poll = parse_duration(cur.value_of(opt), opt.name);
      if (cl.poll < std::chrono::seconds(1) || cl.poll > std::chrono::minutes(1))
        throw usage_error("option --sample must be from 1s to 1min");
    } else if (opt.name == "--read-only") {
      reject_value(opt);
      cl.read_only = true;
    } else {
      unknown_option(opt, "dashboard");
    }
  }
}

namespace {

/// The token: the first line of --token-file, else $TROUPE_DASHBOARD_TOKEN, else none. A token
/// shorter than 16 characters is refused: it would be guessed.
std::string read_token(const command_line& cl) {
  std::string token;
  std::string from;
  if (!cl.token_file.empty()) {
    std::ifstream in(cl.token_file);
    if (!in)
      throw error(errc::invalid_argument,
                  "option --token-file: cannot read \"" + echo(cl.token_file) + "\"");
    std::getline(in, token);
    from = "the token file \"" + echo(cl.token_file) + "\"";
  } else if (const char* env = std::getenv("TROUPE_DASHBOARD_TOKEN")) {
    token = env;
    from = "$TROUPE_DASHBOARD_TOKEN";
  } else {
    return {};
  }
  while (!token.empty() && (token.back() == '\r' || token.back() == ' '))
    token.pop_back();
  if (token.size() < 16)
    throw error(errc::invalid_argument,
                from + " holds " + std::to_string(token.size()) +
                  " characters: a dashboard token needs at least 16 (try: openssl rand -hex 16)");
  for (unsigned char c : token)
    if (c < 0x21 || c > 0x7e)
      throw error(errc::invalid_argument,
                  from + " holds a space or a control character: a token is printable ASCII");
  return token;
}

bool loopback_address(const sockaddr* a) {
  if (a->sa_family == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr) >> 24) == 127;
  return a->sa_family == AF_INET6 &&
         IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr);
}

// Whether every address `host` names is a loopback one: an address, or a name resolved as the
// server resolves it (a machine's own name often maps to 127.0.1.1).
bool is_loopback(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr)
    return false;
  bool all = true;
  for (auto* a = found; a != nullptr; a = a->ai_next)
    all = all && loopback_address(a->ai_addr);
  ::freeaddrinfo(found);
  return all;
}

} // namespace

int run_dashboard(const command_line& cl, std::ostream& out) {
  // SIGTERM and SIGINT are taken by this thread alone (sigwait): blocked before the server's
  // and the sampler's threads exist, so that they inherit the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  dashboard::settings s;
  s.dsn = cl.dsn;
  s.where = cl.where;
  s.token = read_token(cl);
  s.read_only = cl.read_only;
  s.loopback = is_loopback(cl.listen_host);
  s.sample_every = cl.poll;
  dashboard::service service(s);
  http::server server(4);
  service.mount(server);
  auto port = server.start(http::listen_address{cl.listen_host, cl.listen_port});
  service.start();
  auto host =
    cl.listen_host.find(':') != std::string::npos ? "[" + cl.listen_host + "]" : cl.listen_host;
  std::string actions = s.read_only ? "read-only" : s.token.empty() ? "off" : "token";
  out << R"({"listening":)" << json_quote(host + ":" + std::to_string(port)) << R"(,"url":)"
      << json_quote("http://" + host + ":" + std::to_string(port) + "/") << R"(,"actions":)"
      << json_quote(actions) << "}\n";
  out.flush();
  int received = 0;
  sigwait(&stop_signals, &received);
  server.stop();
  service.stop();
  out << R"({"stopped":true})"
      << "\n";
  return 0;
}

} // namespace troupe::cli
