// Scenarios with a worker node running in this process: burn-down of a pre-filled backlog, a
// producer publishing while the node runs, and a fixed-rate producer with latency figures.
#include "scenarios.hpp"

#include <troupe/client.hpp>
#include <troupe/error.hpp>

#include <fmt/format.h>

#include <cmath>
#include <thread>

namespace troupe::bench {

namespace {

using clock_type = std::chrono::steady_clock;

/// How long a run may go without a single message executed before it is declared stuck.
constexpr auto stall_limit = std::chrono::seconds(60);

/// Publishes `n` no-op messages (arguments first..first+n-1) in batches of `batch_size`.
void fill_backlog(client& producer, std::int64_t n, std::int64_t batch_size, const char* label) {
  progress bar(label, n);
  std::vector<message> batch;
  for (std::int64_t i = 0; i < n; ++i) {
    batch.push_back(noop(i));
    if (static_cast<std::int64_t>(batch.size()) == batch_size || i + 1 == n) {
      producer.enqueue_many(std::move(batch));
      batch.clear();
      bar.update(i + 1);
    }
  }
}

/// Waits until the node executed `target` messages, showing progress; throws when it stalls.
void wait_executed(const task_probe& probe, std::int64_t target, progress& bar) {
  auto last = probe.executed.load();
  auto last_change = clock_type::now();
  for (;;) {
    auto now_done = probe.executed.load();
    bar.update(std::min(now_done, target));
    if (now_done >= target)
      break;
    if (now_done != last) {
      last = now_done;
      last_change = clock_type::now();
    } else if (clock_type::now() - last_change > stall_limit) {
      throw error(errc::timeout, fmt::format("the node executed nothing for {} s ({} of {} done)",
                                             stall_limit.count(), now_done, target));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  bar.finish();
}

/// VACUUM ANALYZE and a checkpoint after a bulk fill, as autovacuum and the checkpointer would
/// have reached before a real node meets such a backlog.
void settle(storage::connection& conn, const area& where) {
  conn.exec("VACUUM ANALYZE " + queue_table(where));
  conn.exec("CHECKPOINT");
}

void node_settings_into(scenario_result& r, const bench_context& ctx) {
  const auto& o = ctx.options();
  r.set("concurrency", o.concurrency);
  r.set("prefetch", o.prefetch);
  r.set("storage_connections", o.storage_connections);
  r.set("scheduler_threads", o.scheduler_threads);
  r.set("completion_batch_size", std::int64_t{defaults::completion_batch_size});
  r.set("completion_flush_ms", std::int64_t{defaults::completion_flush_interval.count()});
}

/// CPU used over a timed window: by this process (producer and node) and by the rest of the
/// machine (PostgreSQL, and any other load), per 1,000 messages.
void cpu_into(scenario_result& r, const cpu_sample& a, const cpu_sample& b, std::int64_t n) {
  auto per_k = [n](double s) { return s * 1000.0 / static_cast<double>(n); };
  r.set("cpu_process_s", b.process_s - a.process_s);
  r.set("cpu_rest_of_machine_s",
        (b.machine_busy_s - a.machine_busy_s) - (b.process_s - a.process_s));
  r.set("cpu_process_ms_per_1000", per_k(b.process_s - a.process_s) * 1000.0);
  r.set("cpu_rest_ms_per_1000",
        per_k((b.machine_busy_s - a.machine_busy_s) - (b.process_s - a.process_s)) * 1000.0);
}

// Checks in the database that all `n` messages are done, then fills the timed figures of `r`:
// `n` messages from `from` to `to`, and the peak RSS.
void record_drain(scenario_result& r, storage::connection& conn, const area& where, std::int64_t n,
                  clock_type::time_point from, clock_type::time_point to) {
  auto done =
    conn.exec("SELECT count(*) FROM " + queue_table(where) + " WHERE state = 'done'").int64(0, 0);
  if (done != n)
    throw error(errc::bug, fmt::format("{}: {} of {} messages done", r.scenario, done, n));
  r.tasks = n;
  r.seconds = ms_between(from, to) / 1000.0;
  r.per_second = static_cast<double>(n) / *r.seconds;
  if (auto rss = read_rss())
    r.peak_rss_mb = rss->peak_mb;
}

} // namespace

scenario_result run_burn_down(bench_context& ctx) {
  scenario_result r{"burn-down"};
  auto where = ctx.fresh_area(r.scenario);
  auto n = ctx.tasks_or(100'000, 30'000);
  auto conn = ctx.connect("troupe-bench");
  {
    client producer({ctx.options().dsn, where, "troupe-bench-producer"});
    fill_backlog(producer, n, 1000, "filling");
  }
  settle(conn, where);
  reset_peak_rss();
  task_probe probe;
  auto costs_start = sample_db_costs(conn, where);
  auto t_start = clock_type::now();
  auto cpu_start = sample_cpu();
  cpu_sample cpu_end;
  clock_type::time_point t_done;
  ctx.with_node(where, probe, [&] {
    progress bar("burn-down", n);
    wait_executed(probe, n, bar);
    ctx.wait_all_done(conn, where);
    t_done = clock_type::now();
    cpu_end = sample_cpu();
  });
  // The node has stopped; its sessions' counters are in once they ended.
  wait_sessions_ended(conn);
  auto costs_end = sample_db_costs(conn, where);
  auto first = clock_type::time_point(std::chrono::nanoseconds(probe.first_start_ns.load()));
  record_drain(r, conn, where, n, first, t_done);
  r.set("per_second_in_process", *r.per_second);
  // The drain on the server's clock, from the first claim (the start written by the claim that
  // started the first message: its transaction's time) to the last completion (the time of the
  // statement that wrote it): neither the node's start-up nor this process's polling counts.
  auto span = conn.exec("SELECT extract(epoch FROM max(finished_at) - min(started_at))::float8 "
                        "FROM " +
                        queue_table(where));
  r.seconds = std::stod(std::string(span.text(0, 0))); // the text lives in `span`
  r.per_second = static_cast<double>(n) / *r.seconds;
  ctx.burn_down_rate = r.per_second;
  db_costs_into(r, conn, costs_start, costs_end, n);
  r.set("timed", "first claim to the last completion, on the server's clock");
  r.set("startup_ms", ms_between(t_start, first));
  r.set("seconds_incl_startup", ms_between(t_start, t_done) / 1000.0);
  r.set("finished_rows_retained", true);
  cpu_into(r, cpu_start, cpu_end, n);
  node_settings_into(r, ctx);
  return r;
}

scenario_result run_mixed(bench_context& ctx) {
  scenario_result r{"mixed"};
  auto where = ctx.fresh_area(r.scenario);
  auto n = ctx.tasks_or(100'000, 20'000);
  constexpr std::int64_t batch_size = 100;
  auto conn = ctx.connect("troupe-bench");
  conn.exec("CHECKPOINT");
  reset_peak_rss();
  task_probe probe;
  clock_type::time_point t0, t_published, t_done;
  cpu_sample cpu_start, cpu_end;
  auto costs_start = sample_db_costs(conn, where);
  ctx.with_node(where, probe, [&] {
    client producer({ctx.options().dsn, where, "troupe-bench-producer"});
    auto batches = noop_batches(n, batch_size);
    std::this_thread::sleep_for(std::chrono::milliseconds(300)); // the node settles, idle
    progress bar("mixed", n);
    t0 = clock_type::now();
    cpu_start = sample_cpu();
    for (auto& b : batches) {
      producer.enqueue_many(std::move(b));
      bar.update(probe.executed.load());
    }
    t_published = clock_type::now();
    wait_executed(probe, n, bar);
    ctx.wait_all_done(conn, where);
    t_done = clock_type::now();
    cpu_end = sample_cpu();
  });
  wait_sessions_ended(conn); // the node has stopped: its sessions' counters come as they end
  auto costs_end = sample_db_costs(conn, where);
  record_drain(r, conn, where, n, t0, t_done);
  db_costs_into(r, conn, costs_start, costs_end, n);
  r.set("timed", "first publish to the last message recorded done in the database");
  r.set("batch_size", batch_size);
  r.set("producer_per_second", static_cast<double>(n) * 1000.0 / ms_between(t0, t_published));
  cpu_into(r, cpu_start, cpu_end, n);
  node_settings_into(r, ctx);
  return r;
}

scenario_result run_sustained(bench_context& ctx) {
  scenario_result r{"sustained"};
  auto where = ctx.fresh_area(r.scenario);
  const auto& o = ctx.options();
  double rate = o.rate ? *o.rate : ctx.burn_down_rate ? *ctx.burn_down_rate / 2 : 10'000.0;
  double duration = o.duration ? *o.duration : o.quick ? 5.0 : 20.0;
  constexpr auto tick = std::chrono::milliseconds(5);
  const double tick_s = std::chrono::duration<double>(tick).count();
  auto total = static_cast<std::int64_t>(std::llround(rate * duration));
  if (total < 1)
    throw error(errc::invalid_argument, "sustained: --rate times --duration is under one message");
  std::vector<std::int64_t> enqueue_ns(static_cast<std::size_t>(total), 0);
  std::vector<std::int64_t> start_ns(static_cast<std::size_t>(total), 0);
  std::vector<double> call_ms; // each enqueue_many call, until its commit returned
  std::vector<std::int64_t> committed_ns(static_cast<std::size_t>(total), 0);
  auto conn = ctx.connect("troupe-bench");
  conn.exec("CHECKPOINT");
  reset_peak_rss();
  task_probe probe;
  probe.start_ns = &start_ns;
  clock_type::time_point t0, t_published, t_done;
  std::int64_t steady0_ns = 0, system0_ns = 0;
  ctx.with_node(where, probe, [&] {
    client producer({ctx.options().dsn, where, "troupe-bench-producer"});
    producer.enqueue(noop(-1)); // connection and prepared statement ready; runs as a warm-up
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    progress bar("sustained", total);
    steady0_ns = steady_ns();
    system0_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count();
    t0 = clock_type::now();
    std::int64_t seq = 0;
    for (std::int64_t k = 0; seq < total; ++k) {
      std::this_thread::sleep_until(t0 + k * tick);
      auto due = std::min<std::int64_t>(
        total, static_cast<std::int64_t>(std::floor(rate * tick_s * static_cast<double>(k + 1))));
      while (seq < due) {
        std::vector<message> batch;
        auto end = std::min<std::int64_t>(due, seq + 1000);
        for (auto i = seq; i < end; ++i)
          batch.push_back(noop(i));
        auto now = steady_ns();
        for (auto i = seq; i < end; ++i)
          enqueue_ns[static_cast<std::size_t>(i)] = now;
        producer.enqueue_many(std::move(batch));
        auto committed = steady_ns();
        for (auto i = seq; i < end; ++i)
          committed_ns[static_cast<std::size_t>(i)] = committed;
        call_ms.push_back(static_cast<double>(committed - now) / 1e6);
        seq = end;
      }
      bar.update(probe.executed.load());
    }
    t_published = clock_type::now();
    wait_executed(probe, total + 1, bar);
    ctx.wait_all_done(conn, where);
    t_done = clock_type::now();
  });
  std::vector<double> to_start;
  std::vector<double> commit_to_start;
  to_start.reserve(start_ns.size());
  commit_to_start.reserve(start_ns.size());
  for (std::size_t i = 0; i < start_ns.size(); ++i) {
    to_start.push_back(static_cast<double>(start_ns[i] - enqueue_ns[i]) / 1e6);
    commit_to_start.push_back(static_cast<double>(start_ns[i] - committed_ns[i]) / 1e6);
  }
  // enqueue -> done: finished_at (the completion statement's transaction time, server clock) minus
  // the start of the enqueue call on the system clock of this same machine.
  auto rows = conn.exec("SELECT (args->>0)::bigint, (extract(epoch FROM finished_at) * 1e6)::bigint"
                        " FROM " +
                        queue_table(where) + " WHERE state = 'done' AND (args->>0)::bigint >= 0");
  std::vector<double> to_done;
  to_done.reserve(static_cast<std::size_t>(rows.rows()));
  for (int i = 0; i < rows.rows(); ++i) {
    auto seq = static_cast<std::size_t>(rows.int64(i, 0));
    if (seq >= enqueue_ns.size())
      continue;
    auto enqueued_system_ns = system0_ns + (enqueue_ns[seq] - steady0_ns);
    to_done.push_back(static_cast<double>(rows.int64(i, 1) * 1000 - enqueued_system_ns) / 1e6);
  }
  if (static_cast<std::int64_t>(to_done.size()) != total)
    throw error(errc::bug, fmt::format("sustained: {} of {} messages done", to_done.size(), total));
  r.tasks = total;
  r.seconds = ms_between(t0, t_done) / 1000.0;
  r.per_second = static_cast<double>(total) / *r.seconds;
  r.p50_ms = percentile(to_start, 50);
  r.p99_ms = percentile(to_start, 99);
  if (auto rss = read_rss())
    r.peak_rss_mb = rss->peak_mb;
  r.set("latency", "p50_ms/p99_ms: enqueue call start -> task start, measured in process");
  r.set("rate_target", rate);
  r.set("rate_source", o.rate               ? "--rate"
                       : ctx.burn_down_rate ? "half the burn-down rate of this run"
                                            : "default (no burn-down in this run)");
  r.set("duration_s", duration);
  r.set("producer_per_second", static_cast<double>(total) * 1000.0 / ms_between(t0, t_published));
  r.set("producer_tick_ms", std::int64_t{tick.count()});
  r.set("start_p90_ms", *percentile(to_start, 90));
  r.set("enqueue_call_p50_ms", *percentile(call_ms, 50));
  r.set("enqueue_call_p99_ms", *percentile(call_ms, 99));
  r.set("commit_to_start_p50_ms", *percentile(commit_to_start, 50));
  r.set("commit_to_start_p99_ms", *percentile(commit_to_start, 99));
  r.set("start_max_ms", to_start.back());
  r.set("done_p50_ms", *percentile(to_done, 50));
  r.set("done_p99_ms", *percentile(to_done, 99));
  r.set("done_timing", "enqueue call start -> finished_at column (completion statement time)");
  node_settings_into(r, ctx);
  return r;
}

} // namespace troupe::bench
