// The state queries as history grows (`states-vs-history`): a filtered page of 50, its next
// page, and filtered counts, with 10,000 and then 1,000,000 finished rows retained, each timed
// through the admin API (what a user waits for) and explained on the server (what the
// statement reads). The filters select what an operator asks about: one task's latest
// messages, and what happened in the last hour; the last hour holds the same rows at both
// sizes, so a cost that follows the history kept shows as a ratio above 1. admin::stats is
// timed at both sizes too, and the recount of its finished counts at the larger one.
#include "scenarios.hpp"

#include "storage/states.hpp"

#include <troupe/admin.hpp>
#include <troupe/error.hpp>

#include <fmt/format.h>

#include <cstdio>
#include <functional>

namespace troupe::bench {

/// Adds `n` finished rows published over the week before the last hour (older history), or in
/// the last hour (`recent`): four tasks, 90 % done, 8 % failed, 2 % cancelled.
void fill_history(storage::connection& conn, const area& where, std::int64_t n, bool recent) {
  conn.exec(fmt::format(
    "INSERT INTO {} (message_id, queue_name, task_name, args, state, attempts, enqueued_at, "
    "started_at, finished_at, error) "
    "SELECT gen_random_uuid(), 'bench', (ARRAY['report.build', 'mail.send', 'image.resize', "
    "'sync.pull'])[1 + g % 4], jsonb_build_array(g), "
    "CASE WHEN g % 50 = 0 THEN 'cancelled' WHEN g % 50 < 5 THEN 'failed' ELSE 'done' END::{}, "
    "1, t, t + interval '1 second', t + interval '2 seconds', "
    "CASE WHEN g % 50 BETWEEN 1 AND 4 THEN '{{\"type\":\"boom\",\"text\":\"it broke\"}}'::jsonb "
    "END "
    "FROM (SELECT g, {} AS t FROM generate_series(1, {}) g) s",
    queue_table(where),
    storage::quote_identifier(where.schema) + "." +
      storage::quote_identifier(where.prefix + "state"),
    recent ? "now() - random() * interval '55 minutes'"
           : "now() - interval '1 hour' - random() * interval '7 days'",
    n));
}

void fill_live(storage::connection& conn, const area& where, std::int64_t n) {
  conn.exec(fmt::format(
    "INSERT INTO {} (message_id, queue_name, task_name, args, state, eta) "
    "SELECT gen_random_uuid(), 'bench', (ARRAY['report.build', 'mail.send'])[1 + g % 2], "
    "jsonb_build_array(g), 'queued', now() + interval '1 day' FROM generate_series(1, {}) g",
    queue_table(where), n));
}

namespace {

using clock_type = std::chrono::steady_clock;

constexpr std::int64_t recent_rows = 2'000; // finished in the last hour, at both sizes
constexpr std::int64_t live_rows = 1'000;   // queued

struct measured {
  double p50_ms = 0;
  double server_ms = 0;
  std::int64_t buffers = -1;
  std::vector<std::string> plan;
};

/// Runs `call` `reps` times (the median of the admin API's time), then explains `built`.
measured measure(storage::connection& conn, int reps, const std::function<void()>& call,
                 const std::optional<storage::built_query>& built) {
  measured m;
  std::vector<double> times;
  call(); // warm: the connection, the catalog caches
  for (int i = 0; i < reps; ++i) {
    auto t0 = clock_type::now();
    call();
    times.push_back(ms_between(t0, clock_type::now()));
  }
  m.p50_ms = percentile(times, 50).value_or(0);
  if (!built)
    return m;
  auto plan =
    conn.exec_params("EXPLAIN (ANALYZE, BUFFERS) " + built->sql, built->values, "explain");
  for (int i = 0; i < plan.rows(); ++i) {
    std::string line(plan.text(i, 0));
    m.plan.push_back(line);
    auto at = line.find("Buffers: shared hit=");
    if (at != std::string::npos && m.buffers < 0)
      m.buffers = std::atoll(line.c_str() + at + 20);
    at = line.find("Execution Time: ");
    if (at != std::string::npos)
      m.server_ms = std::atof(line.c_str() + at + 16);
  }
  return m;
}

struct probe {
  std::string name;
  std::string what;
  std::function<void()> call;
  storage::built_query built;
};

} // namespace

scenario_result run_states_vs_history(bench_context& ctx) {
  scenario_result r{"states-vs-history"};
  auto where = ctx.fresh_area(r.scenario);
  const std::int64_t small = 10'000;
  const std::int64_t large = ctx.options().quick ? 300'000 : 1'000'000;
  const int reps = ctx.options().quick ? 20 : 50;
  auto conn = ctx.connect("troupe-bench");
  admin ops{admin_options{ctx.options().dsn, where, "troupe-bench"}};
  // An hour ago, with its zone, from the server's clock.
  auto since = std::string(conn.exec("SELECT (now() - interval '1 hour')::text").text(0, 0));

  state_query latest; // one task's latest successes and failures
  latest.filter.tasks = {"report.build"};
  latest.filter.statuses = {"success", "failure"};
  state_filter failed_hour; // failures of one task in the last hour
  failed_hour.tasks = {"mail.send"};
  failed_hour.statuses = {"failure"};
  failed_hour.enqueued_from = since;
  state_filter hour; // everything published in the last hour
  hour.enqueued_from = since;
  state_query hour_page;
  hour_page.filter = hour;
  hour_page.sort = {"finished_at", true};

  auto probes = [&]() {
    std::vector<probe> out;
    out.push_back({"page", "task report.build, success or failure, newest first, 50",
                   [&] { ops.get_states(latest); }, storage::states_page_query(where, latest)});
    auto next = latest;
    next.after = ops.get_states(latest).next_after;
    out.push_back({"next_page", "the same, the page after the first one's cursor",
                   [&, next] { ops.get_states(next); }, storage::states_page_query(where, next)});
    out.push_back({"hour_page", "published in the last hour, by finish time, newest first, 50",
                   [&] { ops.get_states(hour_page); },
                   storage::states_page_query(where, hour_page)});
    out.push_back({"count_failed_hour", "count: failures of task mail.send in the last hour",
                   [&] { ops.get_states_count(failed_hour); },
                   storage::states_count_query(where, failed_hour)});
    out.push_back({"count_hour", "count: everything published in the last hour",
                   [&] { ops.get_states_count(hour); }, storage::states_count_query(where, hour)});
    return out;
  };

  std::fprintf(stderr, "  states-vs-history: %lld finished rows\n", static_cast<long long>(small));
  fill_history(conn, where, recent_rows, true);
  fill_history(conn, where, small - recent_rows, false);
  fill_live(conn, where, live_rows);
  conn.exec("VACUUM ANALYZE " + queue_table(where));
  ops.recount_stats(); // the rows came by plain SQL: stats() counts them once recounted
  std::vector<measured> at_small;
  for (auto& p : probes())
    at_small.push_back(measure(conn, reps, p.call, p.built));
  auto stats_a = measure(
    conn, reps, [&] { ops.stats(); }, std::nullopt);

  std::fprintf(stderr, "  states-vs-history: %lld finished rows\n", static_cast<long long>(large));
  fill_history(conn, where, large - small, false);
  conn.exec("VACUUM ANALYZE " + queue_table(where));
  auto recount_start = clock_type::now();
  ops.recount_stats(std::chrono::seconds(30));
  auto recount_ms = ms_between(recount_start, clock_type::now());
  auto ps = probes();
  std::vector<measured> at_large;
  for (auto& p : ps)
    at_large.push_back(measure(conn, reps, p.call, p.built));
  auto stats_b = measure(
    conn, reps, [&] { ops.stats(); }, std::nullopt);

  double worst = 0;
  for (std::size_t i = 0; i < ps.size(); ++i) {
    const auto& a = at_small[i];
    const auto& b = at_large[i];
    double ratio = b.p50_ms / a.p50_ms;
    worst = std::max(worst, ratio);
    r.set(ps[i].name + "_query", ps[i].what);
    r.set(ps[i].name + "_p50_ms_small", a.p50_ms);
    r.set(ps[i].name + "_p50_ms_large", b.p50_ms);
    r.set(ps[i].name + "_ratio", ratio);
    r.set(ps[i].name + "_server_ms_small", a.server_ms);
    r.set(ps[i].name + "_server_ms_large", b.server_ms);
    r.set(ps[i].name + "_buffers_small", a.buffers);
    r.set(ps[i].name + "_buffers_large", b.buffers);
    if (ctx.options().explain) {
      r.notes.push_back(
        fmt::format("{} ({}), plan with {} finished rows:", ps[i].name, ps[i].what, small));
      for (auto& l : a.plan)
        r.notes.push_back("  " + l);
      r.notes.push_back(fmt::format("{}, plan with {} finished rows:", ps[i].name, large));
      for (auto& l : b.plan)
        r.notes.push_back("  " + l);
    }
  }
  r.tasks = large;
  r.p50_ms = at_large.front().p50_ms;
  r.set("history_small", small);
  r.set("history_large", large);
  r.set("recent_rows", recent_rows);
  r.set("worst_ratio_large_vs_small", worst);
  r.set("stats_p50_ms_small", stats_a.p50_ms);
  r.set("stats_p50_ms_large", stats_b.p50_ms);
  r.set("stats_ratio", stats_b.p50_ms / stats_a.p50_ms);
  r.set("recount_ms_large", recount_ms);
  r.set("timing", fmt::format("medians of {} calls through troupe::admin (one connection); "
                              "server_ms from EXPLAIN ANALYZE of the same statement",
                              reps));
  if (ctx.options().quick)
    r.set("history_note", "--quick: 300,000 finished rows instead of 1,000,000");
  return r;
}

} // namespace troupe::bench
