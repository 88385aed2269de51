// The cost of being observed. `exporter`: a scrape of `troupe exporter` (a `troupe` process of
// its own, as an operator runs it) with 10,000 and then 1,000,000 finished rows retained, timed
// over HTTP as Prometheus waits for it; the goal is a ratio of at most 2 between the sizes.
// `metrics`: burn-downs of the same backlog with a node's metrics endpoint off and on (scraped
// every 500 ms while it drains), interleaved, so the difference shows against the spread of
// the runs themselves; the goal is within 3 %.
#include "scenarios.hpp"

#include "http/http_server.hpp"
#include "scratch_area.hpp"

#include <troupe/admin.hpp>
#include <troupe/client.hpp>
#include <troupe/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <thread>

namespace troupe::bench {

namespace {

using clock_type = std::chrono::steady_clock;

/// A port no one listens on now (the kernel's pick for a listener opened and closed here).
std::int32_t free_port() {
  http::server probe(1);
  probe.get("/", [](const http::request&) { return http::response{}; });
  auto port = probe.start(http::listen_address{"127.0.0.1", 0});
  probe.stop();
  return port;
}

/// Waits until GET `path` on 127.0.0.1:`port` answers 200, for at most 30 s.
void wait_serving(std::int32_t port, const std::string& path) {
  auto deadline = clock_type::now() + std::chrono::seconds(30);
  for (;;) {
    try {
      if (http::fetch("127.0.0.1", port, "GET", path, {}, {}, 2'000).status == 200)
        return;
    } catch (const error&) {
      // not listening yet
    }
    if (clock_type::now() > deadline)
      throw error(errc::timeout,
                  fmt::format("nothing served {} on port {} within 30 s", path, port));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

struct timed_scrapes {
  double p50_ms = 0;
  double max_ms = 0;
  std::size_t bytes = 0;
};

timed_scrapes scrape(std::int32_t port, int reps) {
  std::vector<double> ms;
  timed_scrapes out;
  for (int i = 0; i < reps; ++i) {
    auto t0 = clock_type::now();
    auto res = http::fetch("127.0.0.1", port, "GET", "/metrics");
    ms.push_back(ms_between(t0, clock_type::now()));
    if (res.status != 200)
      throw error(errc::bug, fmt::format("the exporter answered {}: {}", res.status, res.body));
    out.bytes = res.body.size();
  }
  out.p50_ms = *percentile(ms, 50);
  out.max_ms = ms.back(); // percentile sorted them
  return out;
}

/// Median and range of a set of runs.
struct spread {
  double median = 0;
  double low = 0;
  double high = 0;
};

spread spread_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  spread s;
  s.low = v.front();
  s.high = v.back();
  auto mid = v.size() / 2;
  s.median = v.size() % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
  return s;
}

} // namespace

scenario_result run_exporter_scrape(bench_context& ctx) {
  scenario_result r{"exporter"};
  auto where = ctx.fresh_area(r.scenario);
  const std::int64_t small = 10'000;
  const std::int64_t recent = 2'000;
  const std::int64_t large = ctx.options().quick ? 300'000 : 1'000'000;
  const int reps = ctx.options().quick ? 20 : 50;
  auto conn = ctx.connect("troupe-bench");
  admin ops{admin_options{ctx.options().dsn, where, "troupe-bench"}};

  fill_history(conn, where, recent, true);
  fill_history(conn, where, small - recent, false);
  fill_live(conn, where, 1'000);
  conn.exec("VACUUM ANALYZE " + queue_table(where));
  ops.recount_stats();

  auto port = free_port();
  // Through sh, only to send its two JSON lines to /dev/null (they are not results); exec keeps
  // the exporter the process that SIGTERM reaches.
  testkit::child_process exporter(
    "/bin/sh", {"-c", "exec \"$0\" \"$@\" >/dev/null", testkit::sibling_binary("troupe"), "--dsn",
                ctx.options().dsn, "--schema", where.schema, "exporter", "--listen",
                fmt::format("127.0.0.1:{}", port)});
  wait_serving(port, "/metrics");
  std::fprintf(stderr, "  exporter: %lld finished rows\n", static_cast<long long>(small));
  auto a = scrape(port, reps);

  std::fprintf(stderr, "  exporter: %lld finished rows\n", static_cast<long long>(large));
  fill_history(conn, where, large - small, false);
  conn.exec("VACUUM ANALYZE " + queue_table(where));
  ops.recount_stats(std::chrono::seconds(30));
  auto b = scrape(port, reps);
  exporter.signal(SIGTERM);
  if (exporter.wait(std::chrono::seconds(10)) != 0)
    throw error(errc::bug, "troupe exporter did not stop cleanly on SIGTERM");

  r.tasks = large;
  r.p50_ms = b.p50_ms;
  r.set("history_small", small);
  r.set("history_large", large);
  r.set("recent_rows", recent);
  r.set("scrape_p50_ms_small", a.p50_ms);
  r.set("scrape_p50_ms_large", b.p50_ms);
  r.set("scrape_max_ms_large", b.max_ms);
  r.set("scrape_ratio", b.p50_ms / a.p50_ms);
  r.set("scrape_bytes", static_cast<std::int64_t>(b.bytes));
  r.set("timing", fmt::format("medians of {} GET /metrics of a troupe exporter process, one "
                              "at a time, over HTTP on 127.0.0.1",
                              reps));
  r.set("goal", "scrape_ratio at most 2");
  if (ctx.options().quick)
    r.set("history_note", "--quick: 300,000 finished rows instead of 1,000,000");
  return r;
}

scenario_result run_metrics_overhead(bench_context& ctx) {
  scenario_result r{"metrics"};
  auto n = ctx.tasks_or(50'000, 20'000);
  const int rounds = ctx.options().quick ? 3 : 5;
  std::vector<double> off_rates, on_rates;
  std::int64_t scrapes = 0;

  auto one_run = [&](bool metrics_on) {
    auto where = ctx.fresh_area(r.scenario);
    auto conn = ctx.connect("troupe-bench");
    {
      client producer({ctx.options().dsn, where, "troupe-bench-producer"});
      auto batches = noop_batches(n, 1000);
      for (auto& b : batches)
        producer.enqueue_many(std::move(b));
    }
    conn.exec("VACUUM ANALYZE " + queue_table(where));
    conn.exec("CHECKPOINT");
    auto port = metrics_on ? free_port() : 0;
    task_probe probe;
    clock_type::time_point t_done;
    ctx.with_node(
      where, probe,
      [&] {
        std::atomic<bool> draining{true};
        std::thread scraper;
        if (metrics_on) {
          wait_serving(port, "/metrics");
          scraper = std::thread([&] {
            while (draining.load()) {
              if (http::fetch("127.0.0.1", port, "GET", "/metrics").status == 200)
                ++scrapes;
              for (int i = 0; i < 50 && draining.load(); ++i)
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
          });
        }
        auto deadline = clock_type::now() + std::chrono::minutes(5);
        while (probe.executed.load() < n && clock_type::now() < deadline)
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        ctx.wait_all_done(conn, where, 5);
        t_done = clock_type::now();
        draining = false;
        if (scraper.joinable())
          scraper.join();
      },
      [&](node_options& o) {
        o.metrics.enabled = metrics_on;
        o.metrics.port = port;
      });
    auto first = clock_type::time_point(std::chrono::nanoseconds(probe.first_start_ns.load()));
    auto done =
      conn.exec("SELECT count(*) FROM " + queue_table(where) + " WHERE state = 'done'").int64(0, 0);
    if (done != n)
      throw error(errc::bug, fmt::format("metrics: {} of {} messages done", done, n));
    auto rate = static_cast<double>(n) * 1000.0 / ms_between(first, t_done);
    (metrics_on ? on_rates : off_rates).push_back(rate);
    std::fprintf(stderr, "  metrics %s: %.0f messages/s\n", metrics_on ? "on " : "off", rate);
  };

  for (int i = 0; i < rounds; ++i) {
    // Alternate which goes first, so neither always meets a warmer database.
    one_run(i % 2 == 1);
    one_run(i % 2 == 0);
  }
  auto off = spread_of(off_rates);
  auto on = spread_of(on_rates);
  r.tasks = n;
  r.per_second = on.median;
  r.set("rounds", rounds);
  r.set("off_per_second_median", off.median);
  r.set("off_per_second_low", off.low);
  r.set("off_per_second_high", off.high);
  r.set("on_per_second_median", on.median);
  r.set("on_per_second_low", on.low);
  r.set("on_per_second_high", on.high);
  r.set("on_vs_off_ratio", on.median / off.median);
  r.set("off_spread_pct", (off.high - off.low) * 100.0 / off.median);
  r.set("scrapes_while_on", scrapes);
  r.set("timed", "first task start to the last message recorded done, burn-down of the backlog");
  r.set("goal", "on_vs_off_ratio within 3 % of 1 (or inside the spread of the off runs)");
  return r;
}

} // namespace troupe::bench
