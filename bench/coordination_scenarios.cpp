// The coordination and composition scenarios: the burn-down on areas at migrations 5, 6 (the
// group triggers) and 7 (limits), and with a per-key limit (interleaved rounds, median and range),
// a pipeline of 3 steps over many inputs, and a group of 1,000 members with a callback.
#include "scenarios.hpp"

#include <troupe/client.hpp>
#include <troupe/composition.hpp>
#include <troupe/coordination.hpp>
#include <troupe/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>

namespace troupe::bench {

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(std::int64_t from_ns, clock_type::time_point to) {
  return static_cast<double>(to.time_since_epoch().count() - from_ns) / 1e9;
}

// Runs a node on `where` until no message is queued or running, and checks that `expected`
// messages are done. The steady-clock time of the first task start and of the end.
std::pair<std::int64_t, clock_type::time_point> drain(bench_context& ctx, const area& where,
                                                      storage::connection& conn,
                                                      std::int64_t expected, const char* what) {
  task_probe probe;
  clock_type::time_point done;
  ctx.with_node(where, probe, [&] {
    ctx.wait_all_done(conn, where);
    done = clock_type::now();
  });
  auto finished =
    conn.exec("SELECT count(*) FROM " + queue_table(where) + " WHERE state = 'done'").int64(0, 0);
  if (finished != expected)
    throw error(errc::bug, fmt::format("{}: {} of {} messages done", what, finished, expected));
  return {probe.first_start_ns.load(), done};
}

// One burn-down of `n` no-op messages on a fresh area at `version`; `keys` > 0 gives each
// message one of that many concurrency keys (at most one running per key). Messages per second
// from the first start to the last message recorded done.
double burn_down_once(bench_context& ctx, int version, std::int64_t n, int keys) {
  auto where = ctx.area_at_version("limits", version);
  auto conn = ctx.connect("troupe-bench");
  {
    client producer({ctx.options().dsn, where, "troupe-bench-producer"});
    for (const auto& batch : noop_batches(n, 1000)) {
      if (keys == 0) {
        producer.enqueue_many(batch);
        continue;
      }
      auto keyed = batch;
      for (std::size_t i = 0; i < keyed.size(); ++i)
        keyed[i] =
          keyed[i].with_concurrency_key("customer-" + std::to_string(static_cast<int>(i) % keys));
      producer.enqueue_many(std::move(keyed));
    }
  }
  conn.exec("VACUUM ANALYZE " + queue_table(where));
  conn.exec("CHECKPOINT");
  auto [first, done] = drain(ctx, where, conn, n, "limits");
  return static_cast<double>(n) / seconds_since(first, done);
}

struct spread {
  double median = 0, low = 0, high = 0;
};

spread spread_of(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  auto mid = xs.size() / 2;
  double median = xs.size() % 2 ? xs[mid] : (xs[mid - 1] + xs[mid]) / 2;
  return {median, xs.front(), xs.back()};
}

void set_spread(scenario_result& r, const std::string& name, const spread& s) {
  r.set(name + "_per_second_median", s.median);
  r.set(name + "_per_second_min", s.low);
  r.set(name + "_per_second_max", s.high);
}

} // namespace

scenario_result run_limits(bench_context& ctx) {
  scenario_result r{"limits"};
  auto n = ctx.tasks_or(30'000, 10'000);
  int rounds = ctx.options().quick ? 3 : 5;
  constexpr int keys = 1000;
  std::map<std::string, std::vector<double>> rates;
  // Interleaved, so that a drift of the machine touches each variant alike.
  for (int round = 0; round < rounds; ++round) {
    rates["version5"].push_back(burn_down_once(ctx, 5, n, 0));
    rates["before"].push_back(burn_down_once(ctx, 6, n, 0));
    rates["unkeyed"].push_back(burn_down_once(ctx, 7, n, 0));
    rates["keyed"].push_back(burn_down_once(ctx, 7, n, keys));
  }
  auto version5 = spread_of(rates["version5"]);
  auto before = spread_of(rates["before"]);
  auto unkeyed = spread_of(rates["unkeyed"]);
  auto keyed = spread_of(rates["keyed"]);
  r.tasks = n;
  r.per_second = unkeyed.median;
  r.set("timed", "first task start to the last message recorded done, per burn-down");
  r.set("rounds", rounds);
  set_spread(r, "version5", version5);
  set_spread(r, "version6", before);
  set_spread(r, "version7_unkeyed", unkeyed);
  set_spread(r, "version7_keyed", keyed);
  r.set("keys", keys);
  r.set("unkeyed_vs_version6", unkeyed.median / before.median);
  r.set("version6_vs_version5", before.median / version5.median);
  r.set("keyed_vs_unkeyed", keyed.median / unkeyed.median);
  r.notes.push_back(fmt::format(
    "burn-down of {} no-op messages, {} interleaved rounds: area at migration 5 {:.0f}/s "
    "({:.0f}-{:.0f}), at migration 6 {:.0f}/s ({:.0f}-{:.0f}), at migration 7 {:.0f}/s "
    "({:.0f}-{:.0f}), with a concurrency key per "
    "message ({} keys, 1 running per key) {:.0f}/s ({:.0f}-{:.0f})",
    n, rounds, version5.median, version5.low, version5.high, before.median, before.low, before.high,
    unkeyed.median, unkeyed.low, unkeyed.high, keys, keyed.median, keyed.low, keyed.high));
  return r;
}

scenario_result run_pipeline(bench_context& ctx) {
  scenario_result r{"pipeline"};
  auto where = ctx.fresh_area(r.scenario);
  auto n = ctx.tasks_or(20'000, 2'000);
  auto conn = ctx.connect("troupe-bench");
  {
    // Each pipeline's first step carries the two after it; 1,000 pipelines per transaction.
    client producer({ctx.options().dsn, where, "troupe-bench-producer"});
    std::vector<message> batch;
    for (std::int64_t i = 0; i < n; ++i) {
      pipeline p(start(inc, i), then(inc), then(inc));
      for (auto& m : p.messages())
        batch.push_back(std::move(m));
      if (batch.size() == 1000 || i + 1 == n) {
        producer.enqueue_many(std::move(batch));
        batch.clear();
      }
    }
  }
  conn.exec("VACUUM ANALYZE " + queue_table(where));
  auto [first, done] = drain(ctx, where, conn, 3 * n, "pipeline");
  r.tasks = 3 * n;
  r.seconds = seconds_since(first, done);
  r.per_second = static_cast<double>(3 * n) / *r.seconds;
  r.set("timed", "first step start to the last step recorded done (jobs: every step)");
  r.set("pipelines", n);
  r.set("steps", 3);
  r.set("pipelines_per_second", static_cast<double>(n) / *r.seconds);
  return r;
}

scenario_result run_group(bench_context& ctx) {
  scenario_result r{"group"};
  auto where = ctx.fresh_area(r.scenario);
  constexpr int members = 1000;
  auto conn = ctx.connect("troupe-bench");
  auto callback = noop(-1);
  {
    client producer({ctx.options().dsn, where, "troupe-bench-producer"});
    std::vector<troupe::member> ms;
    for (int i = 0; i < members; ++i)
      ms.emplace_back(inc(i));
    troupe::group g(std::move(ms));
    g.on_success(callback);
    g.run(producer);
  }
  auto [first, done] = drain(ctx, where, conn, members + 1, "group");
  auto table = queue_table(where);
  auto gap = conn.exec(
    fmt::format("SELECT extract(epoch FROM c.finished_at - (SELECT max(m.finished_at) FROM {0} m "
                "WHERE m.task_name = 'bench.inc')) * 1000, "
                "extract(epoch FROM c.enqueued_at - (SELECT max(m.finished_at) FROM {0} m "
                "WHERE m.task_name = 'bench.inc')) * 1000 "
                "FROM {0} c WHERE c.message_id = '{1}' AND c.state = 'done'",
                table, callback.id));
  if (gap.rows() != 1)
    throw error(errc::bug, "group: the callback did not run");
  r.tasks = members + 1;
  r.seconds = seconds_since(first, done);
  r.per_second = static_cast<double>(members + 1) / *r.seconds;
  r.set("timed", "first member start to the callback recorded done");
  r.set("members", members);
  r.set("last_member_to_callback_done_ms", std::stod(std::string(gap.text(0, 0))));
  r.set("last_member_to_callback_published_ms", std::stod(std::string(gap.text(0, 1))));
  return r;
}

} // namespace troupe::bench
