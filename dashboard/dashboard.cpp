// The dashboard's routes: the page's files, the JSON reads, and the actions, each action
// behind the token check and run by the `troupe` command's own verb.
#include "dashboard/dashboard.hpp"

#include "cli/arguments.hpp"
#include "cli/command_line.hpp"
#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "dashboard/assets.hpp"
#include "dashboard/throughput.hpp"
#include "http/http_server.hpp"
#include "troupe/admin.hpp"
#include "troupe/json.hpp"
#include "troupe/log.hpp"
#include "troupe/version.hpp"

#include <fmt/format.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

namespace troupe::dashboard {

namespace {

using http::request;
using http::response;

/// What a page is told when the database could not be read; the reason goes to the log only.
const std::string database_unavailable =
  "the area's database could not be read (the dashboard's log says why)";

response json_response(int status, std::string body) {
  response r;
  r.status = status;
  r.content_type = "application/json; charset=utf-8";
  if (!body.empty() && body.back() == '\n')
    body.pop_back();
  r.body = std::move(body);
  r.headers["Cache-Control"] = "no-store";
  return r;
}

response error_response(int status, const std::string& text) {
  return json_response(status, R"({"error":)" + json_quote(text) + "}");
}

int status_of(const troupe::error& e) {
  switch (e.code()) {
  case errc::invalid_argument:
    return 400;
  case errc::not_found:
    return 404;
  case errc::constraint_violated:
    return 409;
  default:
    return 503; // the database: connection lost, timeout, ...
  }
}

/// The parameters a route takes, by name: each becomes the CLI option of the same name
/// (`--name=value`, or `--name` when the value is empty), except "id" and "name", which become
/// the verb's positional argument.
struct route_syntax {
  std::vector<std::string> verb;
  std::set<std::string, std::less<>> options;
  /// The parameter given as the positional argument ("id", "name"), if any.
  std::string positional;
};

/// The parameters that are flags of the CLI (given without a value); every other one needs a
/// value, so that an empty one is never read as a flag followed by the next parameter.
const std::set<std::string, std::less<>> flag_parameters = {"asc", "desc", "count", "payload"};

/// The command line `syntax` builds from the request's parameters, parsed by the CLI's own
/// parser (so that it refuses what the CLI refuses, with the same words). Throws
/// cli::usage_error.
cli::command_line parse_request(const request& r, const route_syntax& syntax,
                                const settings& where) {
  std::vector<std::string> args = syntax.verb;
  for (const auto& [name, value] : r.parameters) {
    if (!syntax.positional.empty() && name == syntax.positional) {
      if (value.empty() || value.front() == '-')
        throw cli::usage_error("parameter " + name + " is \"" + cli::echo(value) +
                               "\": it needs a value that does not start with '-'");
      args.push_back(value);
    } else if (syntax.options.count(name)) {
      if (value.empty() && !flag_parameters.count(name))
        throw cli::usage_error("parameter " + name + " needs a value");
      args.push_back(value.empty() ? "--" + name : "--" + name + "=" + value);
    } else {
      throw cli::usage_error("unknown parameter \"" + cli::echo(name.substr(0, 64)) + "\"");
    }
  }
  std::vector<std::string_view> views(args.begin(), args.end());
  auto cl = cli::parse_command_line(views, nullptr);
  cl.dsn = where.dsn;
  cl.where = where.where;
  return cl;
}

/// Whether `host` (a Host header: a name or an address, and maybe a port) names this machine's
/// loopback interface: exactly "localhost", an IPv4 address in 127.0.0.0/8, or [::1]. A name
/// that merely starts like an address ("127.attacker.example") is not one.
bool loopback_host(std::string host) {
  if (host.empty())
    return false;
  if (host.front() == '[') {
    auto end = host.find(']');
    if (end == std::string::npos)
      return false;
    auto rest = host.substr(end + 1);
    if (!rest.empty() && (rest.front() != ':' || rest.size() == 1 ||
                          rest.find_first_not_of("0123456789", 1) != std::string::npos))
      return false;
    in6_addr v6{};
    return ::inet_pton(AF_INET6, host.substr(1, end - 1).c_str(), &v6) == 1 &&
           IN6_IS_ADDR_LOOPBACK(&v6);
  }
  if (auto colon = host.find(':'); colon != std::string::npos) {
    auto port = host.substr(colon + 1);
    if (port.empty() || port.find_first_not_of("0123456789") != std::string::npos)
      return false;
    host.resize(colon);
  }
  std::transform(host.begin(), host.end(), host.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (host == "localhost")
    return true;
  in_addr v4{};
  return ::inet_pton(AF_INET, host.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
}

/// Equal in time that does not depend on where they differ.
bool same_token(const std::string& given, const std::string& expected) {
  if (expected.empty())
    return false;
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (std::size_t i = 0; i < given.size(); ++i)
    diff |= static_cast<unsigned char>(given[i] ^ expected[i % expected.size()]);
  return diff == 0;
}

} // namespace

struct service::impl {
  settings config;
  admin area_admin;
  mutable std::mutex m; // the history and the sampler's state
  std::condition_variable wake;
  throughput_history history;
  std::string last_sample_error;
  bool stopping = false;
  std::thread sampler;

  explicit impl(settings s)
      : config(std::move(s)),
        area_admin(admin_options{config.dsn, config.where, "troupe-dashboard", {}}),
        history(config.samples_kept) {}

  // -- the throughput sampler -------------------------------------------------------------

  void sample() {
    try {
      std::map<std::string, std::int64_t> finished;
      for (const auto& q : area_admin.overview())
        finished[q.stats.queue] = q.stats.done + q.stats.failed + q.stats.cancelled;
      auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count();
      std::lock_guard guard{m};
      history.record(now, std::move(finished));
      last_sample_error.clear();
    } catch (const std::exception& e) {
      std::lock_guard guard{m};
      if (last_sample_error != e.what())
        log().warn("troupe dashboard: sampling the queue counts failed: {}", e.what());
      last_sample_error = e.what();
    }
  }

  void run_sampler() {
    std::unique_lock lock{m};
    while (!stopping) {
      lock.unlock();
      sample();
      lock.lock();
      wake.wait_for(lock, config.sample_every, [&] { return stopping; });
    }
  }

  // -- checks -----------------------------------------------------------------------------

  /// A response when the request must be refused before it is served, else none.
  std::optional<response> refuse_host(const request& r) const {
    if (!config.loopback)
      return std::nullopt;
    auto host = r.header("host").value_or("");
    if (loopback_host(host))
      return std::nullopt;
    return error_response(403, "the dashboard listens on a loopback address and serves only "
                               "requests for localhost, 127.0.0.1 or [::1], not \"" +
                                 cli::echo(host.substr(0, 100)) + "\"");
  }

  std::optional<response> refuse_action(const request& r) const {
    if (config.read_only)
      return error_response(403, "the dashboard runs read-only (--read-only): actions are "
                                 "refused");
    if (config.token.empty())
      return error_response(403, "actions are off: start the dashboard with a token "
                                 "($TROUPE_DASHBOARD_TOKEN or --token-file) to allow them");
    auto given = r.header("authorization");
    // The scheme's name is case-insensitive (RFC 9110); one space, then the token.
    auto scheme = given ? given->substr(0, 7) : std::string{};
    std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (scheme != "bearer ")
      return error_response(401, "this action needs the dashboard's token (header "
                                 "Authorization: Bearer TOKEN)");
    if (!same_token(given->substr(7), config.token))
      return error_response(401, "the token is not the dashboard's");
    return std::nullopt;
  }

  /// Runs `body` and turns what it throws into the status the page shows.
  template <class F>
  response guarded(F&& body) {
    try {
      return body();
    } catch (const cli::usage_error& e) {
      return error_response(400, e.what());
    } catch (const troupe::error& e) {
      auto status = status_of(e);
      if (status == 503)
        return unavailable(e.what());
      return error_response(status, e.what());
    } catch (const std::exception& e) {
      log().error("troupe dashboard: {}", e.what());
      return error_response(500, "the dashboard failed to answer (see its log)");
    }
  }

  /// The database could not be read: the page is told so, the log gets the reason (which can
  /// name the server, its user and its database: never shown on a page).
  response unavailable(const std::string& why) {
    log().warn("troupe dashboard: reading the area failed: {}", why);
    return error_response(503, database_unavailable);
  }

  /// A read or an action that the CLI's verb does as it is: its JSON, or its refusal (exit
  /// status 1, the reason on its error stream) as 404 (nothing has that id or name) or 409,
  /// with that reason and the verb's JSON.
  template <class Run>
  response run_verb(const request& r, const route_syntax& syntax, Run&& run) {
    return guarded([&] {
      auto cl = parse_request(r, syntax, config);
      std::ostringstream out, err;
      int status = run(cl, out, err);
      if (status == 0)
        return json_response(200, out.str());
      auto reason = err.str();
      if (reason.rfind("troupe: ", 0) == 0)
        reason = reason.substr(8);
      while (!reason.empty() && reason.back() == '\n')
        reason.pop_back();
      auto result = out.str();
      while (!result.empty() && result.back() == '\n')
        result.pop_back();
      // A message or schedule that does not exist is not found; anything else was refused.
      bool missing = result.find(R"("status":"missing")") != std::string::npos ||
                     result.find(R"("found":false)") != std::string::npos;
      return json_response(missing ? 404 : 409,
                           R"({"error":)" + json_quote(reason) + R"(,"result":)" +
                             (result.empty() ? std::string("null") : result) + "}");
    });
  }

  // -- reads ------------------------------------------------------------------------------

  response session() const {
    std::string actions = config.read_only ? "read-only" : config.token.empty() ? "off" : "token";
    return json_response(200, R"({"area":)" + json_quote(cli::describe_area_short(config.where)) +
                                R"(,"version":)" + json_quote(troupe::version_string) +
                                R"(,"actions":)" + json_quote(actions) + R"(,"sample_ms":)" +
                                std::to_string(config.sample_every.count()) + "}");
  }

  response queues() {
    return guarded([&] {
      auto all = area_admin.overview();
      std::string out = R"({"queues":[)";
      for (std::size_t i = 0; i < all.size(); ++i) {
        const auto& q = all[i];
        const auto& s = q.stats;
        out += fmt::format(
          R"({}{{"queue":{},"counts":{{"queued":{},"running":{},"done":{},"failed":{},)"
          R"("cancelled":{}}},"ready":{},"scheduled":{},"oldest_ready_seconds":{},"paused":{},)"
          R"("failed_last_hour":{}}})",
          i > 0 ? "," : "", json_quote(s.queue), s.queued, s.running, s.done, s.failed, s.cancelled,
          s.ready, s.scheduled, cli::format_seconds(s.oldest_ready_seconds),
          q.paused ? "true" : "false", q.failed_recently);
      }
      std::lock_guard guard{m};
      out +=
        R"(],"throughput":)" + history.json(config.sample_every.count()) + R"(,"sample_error":)" +
        (last_sample_error.empty() ? std::string("null") : json_quote(database_unavailable)) + "}";
      return json_response(200, out);
    });
  }

  response nodes() {
    return guarded([&] {
      std::string out = R"({"nodes":[)";
      bool first = true;
      for (const auto& n : area_admin.nodes()) {
        std::string queues;
        for (std::size_t i = 0; i < n.queues.size(); ++i)
          queues += (i > 0 ? "," : "") + json_quote(n.queues[i]);
        out += fmt::format(
          R"({}{{"node_id":{},"name":{},"host":{},"pid":{},"queues":[{}],"started_at":{},)"
          R"("alive":{},"running":{},"prefetched":{}}})",
          first ? "" : ",", n.node_id, json_quote(n.name), json_quote(n.host), n.pid, queues,
          json_quote(cli::iso_time(n.started_at_ms)), n.alive ? "true" : "false", n.running,
          n.prefetched);
        first = false;
      }
      return json_response(200, out + "]}");
    });
  }

  response message(const request& r) {
    return guarded([&] {
      auto cl = parse_request(r, {{"states"}, {"payload"}, "id"}, config);
      if (cl.target.empty())
        throw cli::usage_error("parameter id (a message id) is missing");
      auto state = area_admin.get_state(cl.target, cl.states.payload);
      if (!state)
        return error_response(404, "no message has id " + cl.target);
      std::string attempts = "null";
      if (area_admin.attempt_history().enabled)
        attempts = cli::format_attempt_page_json(area_admin.history(cl.target, std::nullopt, 100));
      return json_response(200, R"({"state":)" + cli::format_state_json(*state) +
                                  R"(,"attempts":)" + attempts + "}");
    });
  }

  response schedules() {
    return guarded([&] {
      std::string out = R"({"items":[)";
      bool first = true;
      for (const auto& s : area_admin.schedules()) {
        std::vector<std::int64_t> runs;
        if (s.enabled)
          runs = area_admin.upcoming_runs(s.name, 3);
        auto item = cli::format_schedule_json(s);
        item.pop_back(); // its '}': the next runs go in too
        item += R"(,"next_runs":[)";
        for (std::size_t i = 0; i < runs.size(); ++i)
          item += (i > 0 ? "," : "") + json_quote(cli::iso_time(runs[i]));
        out += (first ? "" : ",") + item + "]}";
        first = false;
      }
      return json_response(200, out + "]}");
    });
  }

  // -- routes -----------------------------------------------------------------------------

  void get(http::server& s, const std::string& path, std::function<response(const request&)> h) {
    s.get(path, [this, h = std::move(h)](const request& r) {
      if (auto no = refuse_host(r))
        return *no;
      return h(r);
    });
  }

  void action(http::server& s, const std::string& path, route_syntax syntax) {
    s.post(path, [this, syntax = std::move(syntax)](const request& r) {
      auto answer = [&] {
        if (auto no = refuse_host(r))
          return *no;
        if (auto no = refuse_action(r))
          return *no;
        return run_verb(r, syntax,
                        [&](const cli::command_line& cl, std::ostream& out, std::ostream& err) {
                          bool schedule = cl.what == cli::verb::schedule_enable ||
                                          cl.what == cli::verb::schedule_disable;
                          return schedule ? cli::run_schedule(area_admin, cl, out, err)
                                          : cli::run_operation(area_admin, cl, out, err);
                        });
      }();
      // Every action, refused or not (never its token).
      log().info("troupe dashboard: {} {} from {}: {}", r.method, r.path, r.remote, answer.status);
      return answer;
    });
  }

  void mount(http::server& s) {
    get(s, "/", [](const request& r) {
      if (r.path.rfind("/api/", 0) == 0)
        return error_response(404, "no such API path: " + cli::echo(r.path.substr(0, 100)));
      const auto* a = find_asset(r.path == "/" ? "/index.html" : r.path);
      if (!a)
        return response{404, "text/plain; charset=utf-8", "not found: " + r.path + "\n", {}};
      response out{200, std::string(a->content_type), std::string(a->body), {}};
      out.headers["Content-Security-Policy"] =
        "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'none'";
      out.headers["X-Content-Type-Options"] = "nosniff";
      out.headers["Referrer-Policy"] = "no-referrer";
      return out;
    });
    get(s, "/api/session", [this](const request&) { return session(); });
    get(s, "/api/queues", [this](const request&) { return queues(); });
    get(s, "/api/nodes", [this](const request&) { return nodes(); });
    get(s, "/api/message", [this](const request& r) { return message(r); });
    get(s, "/api/schedules", [this](const request&) { return schedules(); });
    const std::set<std::string, std::less<>> state_options = {
      "status",      "task",          "queue",       "composition", "enqueued-from",
      "enqueued-to", "finished-from", "finished-to", "sort",        "asc",
      "desc",        "limit",         "after",       "offset",      "count"};
    get(s, "/api/messages", [this, state_options](const request& r) {
      return run_verb(r, {{"states"}, state_options, ""},
                      [&](const cli::command_line& cl, std::ostream& out, std::ostream& err) {
                        return cli::run_states(area_admin, cl, out, err);
                      });
    });
    get(s, "/api/failed", [this](const request& r) {
      return run_verb(r, {{"failed", "list"}, {"queue", "task", "limit", "after"}, ""},
                      [&](const cli::command_line& cl, std::ostream& out, std::ostream& err) {
                        return cli::run_operation(area_admin, cl, out, err);
                      });
    });
    s.post("/", [this](const request& r) {
      if (auto no = refuse_host(r))
        return *no;
      return error_response(404, "no such action: " + cli::echo(r.path.substr(0, 100)));
    });
    action(s, "/api/pause", {{"pause"}, {}, "queue"});
    action(s, "/api/resume", {{"resume"}, {}, "queue"});
    action(s, "/api/retry", {{"retry"}, {"queue", "task"}, "id"});
    action(s, "/api/cancel", {{"cancel"}, {"queue", "task", "state"}, "id"});
    action(s, "/api/schedule/enable", {{"schedule", "enable"}, {}, "name"});
    action(s, "/api/schedule/disable", {{"schedule", "disable"}, {}, "name"});
  }
};

service::service(settings s) : impl_(std::make_unique<impl>(std::move(s))) {}

service::~service() {
  stop();
}

void service::mount(http::server& s) {
  impl_->mount(s);
}

void service::start() {
  if (!impl_->sampler.joinable())
    impl_->sampler = std::thread([this] { impl_->run_sampler(); });
}

void service::stop() {
  {
    std::lock_guard guard{impl_->m};
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
  if (impl_->sampler.joinable())
    impl_->sampler.join();
}

} // namespace troupe::dashboard
