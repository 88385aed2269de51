// `troupe exporter`: the area's queue metrics for Prometheus (docs/metrics.md), read through
// the admin API on a connection of its own at every scrape. A scrape that cannot read the area
// answers 503 with the reason, never zeros.
#include "cli/arguments.hpp"
#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "http/exposition.hpp"
#include "http/http_server.hpp"
#include "troupe/json.hpp"
#include "troupe/log.hpp"

#include <fmt/format.h>

#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <mutex>

namespace troupe::cli {

void parse_exporter_options(argument_cursor& cur, command_line& cl) {
  while (!cur.done()) {
    auto arg = cur.next();
    if (!is_option(arg))
      unexpected_argument(arg, "exporter");
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
    } else if (opt.name == "--queue") {
      cl.queues.push_back(parse_queue(cur.value_of(opt)));
    } else {
      unknown_option(opt, "exporter");
    }
  }
}

namespace {

std::string label(const std::string& queue) {
  // Escaped: the queue table checks only a queue name's length.
  return "queue=\"" + http::label_value(queue) + "\"";
}

void family(std::string& out, const char* name, const char* help) {
  fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} gauge\n", name, help, name);
}

std::string render(const std::vector<queue_overview>& queues, double seconds) {
  std::string out;
  family(out, "troupe_queue_messages",
         "Messages of the queue by state (queued, running, done, failed, cancelled).");
  for (const auto& q : queues) {
    const auto& s = q.stats;
    for (auto [state, n] :
         {std::pair{"queued", s.queued}, std::pair{"running", s.running}, std::pair{"done", s.done},
          std::pair{"failed", s.failed}, std::pair{"cancelled", s.cancelled}})
      fmt::format_to(std::back_inserter(out), "troupe_queue_messages{{{},state=\"{}\"}} {}\n",
                     label(s.queue), state, n);
  }
  family(out, "troupe_queue_ready", "Queued messages whose eta has passed.");
  for (const auto& q : queues)
    fmt::format_to(std::back_inserter(out), "troupe_queue_ready{{{}}} {}\n", label(q.stats.queue),
                   q.stats.ready);
  family(out, "troupe_queue_scheduled", "Queued messages whose eta is still ahead.");
  for (const auto& q : queues)
    fmt::format_to(std::back_inserter(out), "troupe_queue_scheduled{{{}}} {}\n",
                   label(q.stats.queue), q.stats.scheduled);
  family(out, "troupe_queue_oldest_ready_age_seconds",
         "How long the oldest ready message has waited since its eta (0: none is ready).");
  for (const auto& q : queues)
    fmt::format_to(std::back_inserter(out), "troupe_queue_oldest_ready_age_seconds{{{}}} {}\n",
                   label(q.stats.queue), q.stats.oldest_ready_seconds);
  family(out, "troupe_queue_paused", "1 while the queue is paused.");
  for (const auto& q : queues)
    fmt::format_to(std::back_inserter(out), "troupe_queue_paused{{{}}} {}\n", label(q.stats.queue),
                   q.paused ? 1 : 0);
  family(out, "troupe_queue_failed_last_hour",
         "Messages of the queue that failed for good in the last hour.");
  for (const auto& q : queues)
    fmt::format_to(std::back_inserter(out), "troupe_queue_failed_last_hour{{{}}} {}\n",
                   label(q.stats.queue), q.failed_recently);
  family(out, "troupe_exporter_scrape_duration_seconds",
         "How long this scrape took to read the area.");
  fmt::format_to(std::back_inserter(out), "troupe_exporter_scrape_duration_seconds {}\n", seconds);
  return out;
}

} // namespace

int run_exporter(const command_line& cl, std::ostream& out) {
  // SIGTERM and SIGINT are taken by this thread alone (sigwait): blocked before the server's
  // threads exist, so that they inherit the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto a = open_admin(cl);
  std::mutex m; // the admin API's one connection: one scrape at a time
  std::int64_t scrapes = 0;
  http::server server(2);
  server.get("/metrics", [&](const http::request&) {
    std::lock_guard guard{m};
    auto begin = std::chrono::steady_clock::now();
    try {
      auto queues = a.overview(cl.queues);
      auto took = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
      ++scrapes;
      return http::response{
        200, "text/plain; version=0.0.4; charset=utf-8", render(queues, took), {}};
    } catch (const std::exception& e) {
      log().warn("troupe exporter: a scrape failed: {}", e.what());
      return http::response{503,
                            "text/plain; charset=utf-8",
                            std::string("troupe exporter: the scrape failed: ") + e.what() + "\n",
                            {}};
    }
  });
  server.get("/", [](const http::request& r) {
    if (r.path != "/")
      return http::response{404, "text/plain; charset=utf-8", "not found: " + r.path + "\n", {}};
    return http::response{200,
                          "text/plain; charset=utf-8",
                          "troupe exporter: the area's queue metrics are on /metrics\n",
                          {}};
  });
  auto port = server.start(http::listen_address{cl.listen_host, cl.listen_port});
  auto host =
    cl.listen_host.find(':') != std::string::npos ? "[" + cl.listen_host + "]" : cl.listen_host;
  out << R"({"listening":)" << json_quote(host + ":" + std::to_string(port)) << R"(,"metrics":)"
      << json_quote("http://" + host + ":" + std::to_string(port) + "/metrics") << "}\n";
  out.flush();
  int received = 0;
  sigwait(&stop_signals, &received);
  server.stop();
  std::lock_guard guard{m};
  out << R"({"stopped":true,"scrapes":)" << scrapes << "}\n";
  return 0;
}

} // namespace troupe::cli
