// Scenarios about resources and the database: the memory of a node process (idle, and working
// through a large backlog), and the claim statement's latency as finished history grows.
#include "scenarios.hpp"

#include "storage/queries.hpp"
#include "storage/statements.hpp"

#include <troupe/error.hpp>

#include <fmt/format.h>

#include <csignal>
#include <cstdio>
#include <spawn.h>
#include <sys/wait.h>
#include <thread>

extern char** environ;

namespace troupe::bench {

namespace {

using clock_type = std::chrono::steady_clock;

/// Inserts `n` no-op rows in one SQL statement, in state `state` (finished rows get their
/// timestamps), numbered from `first`.
void fill_sql(storage::connection& conn, const area& where, std::int64_t first, std::int64_t n,
              const char* state) {
  bool finished = std::string_view(state) == "done";
  conn.exec(fmt::format(
    "INSERT INTO {} (message_id, queue_name, task_name, args, state, attempts, started_at,"
    " finished_at) SELECT gen_random_uuid(), '{}', '{}', jsonb_build_array(g), '{}', {}, {}, {}"
    " FROM generate_series({}, {}) g",
    queue_table(where), noop.queue(), noop.name(), state, finished ? 1 : 0,
    finished ? "now()" : "NULL", finished ? "now()" : "NULL", first, first + n - 1));
}

void settle(storage::connection& conn, const area& where) {
  conn.exec("VACUUM ANALYZE " + queue_table(where));
  conn.exec("CHECKPOINT");
}

/// A `troupe-bench node` child process, stopped with SIGTERM when it goes out of scope.
class node_process {
public:
  node_process(const bench_context& ctx, const area& where) {
    const auto& o = ctx.options();
    std::vector<std::string> args = {ctx.exe_path(),
                                     "node",
                                     "--dsn",
                                     o.dsn,
                                     "--schema",
                                     where.schema,
                                     "--concurrency",
                                     std::to_string(o.concurrency),
                                     "--prefetch",
                                     std::to_string(o.prefetch),
                                     "--scheduler-threads",
                                     std::to_string(o.scheduler_threads)};
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, ctx.exe_path().c_str(), nullptr, nullptr, argv.data(), environ) != 0)
      throw error(errc::bug, "cannot start " + ctx.exe_path() + " node");
  }
  ~node_process() { stop(); }
  node_process(const node_process&) = delete;
  node_process& operator=(const node_process&) = delete;

  int pid() const noexcept { return pid_; }

  void stop() {
    if (pid_ <= 0)
      return;
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

private:
  pid_t pid_ = -1;
};

void wait_registered(storage::connection& conn, const area& where) {
  auto nodes = storage::quote_identifier(where.schema) + "." +
               storage::quote_identifier(where.prefix + "nodes");
  auto deadline = clock_type::now() + std::chrono::seconds(30);
  while (conn.exec("SELECT count(*) FROM " + nodes).int64(0, 0) == 0) {
    if (clock_type::now() > deadline)
      throw error(errc::timeout, "the node process did not register within 30 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::int64_t remaining(storage::connection& conn, const area& where) {
  return conn
    .exec("SELECT count(*) FROM " + queue_table(where) + " WHERE state IN ('queued', 'running')")
    .int64(0, 0);
}

} // namespace

scenario_result run_memory(bench_context& ctx) {
  scenario_result r{"memory"};
  auto where = ctx.fresh_area(r.scenario);
  auto backlog = ctx.tasks_or(1'000'000, 100'000);
  auto conn = ctx.connect("troupe-bench");

  // An idle node: registered, its consumer polling an empty queue.
  rss_reading idle;
  {
    node_process node(ctx, where);
    wait_registered(conn, where);
    std::this_thread::sleep_for(std::chrono::seconds(2));
    auto rss = read_rss(node.pid());
    if (!rss)
      throw error(errc::bug, "the idle node process ended early");
    idle = *rss;
  }
  conn.exec("DELETE FROM " + storage::quote_identifier(where.schema) + "." +
            storage::quote_identifier(where.prefix + "nodes"));

  std::fprintf(stderr, "  memory: inserting a backlog of %lld messages in SQL\n",
               static_cast<long long>(backlog));
  fill_sql(conn, where, 0, backlog, "queued");
  settle(conn, where);

  // A node working through the backlog: RSS sampled while it drains, VmHWM read at the end.
  double sampled_max = 0;
  rss_reading busy;
  auto t0 = clock_type::now();
  clock_type::time_point t_done;
  {
    node_process node(ctx, where);
    progress bar("memory", backlog);
    auto next_count = clock_type::now();
    for (;;) {
      if (auto rss = read_rss(node.pid()))
        sampled_max = std::max(sampled_max, rss->current_mb);
      else
        throw error(errc::bug, "the node process ended while draining the backlog");
      if (clock_type::now() >= next_count) {
        auto left = remaining(conn, where);
        bar.update(backlog - left);
        if (left == 0)
          break;
        next_count = clock_type::now() + std::chrono::milliseconds(500);
        if (clock_type::now() - t0 > std::chrono::minutes(20))
          throw error(errc::timeout, "memory: the backlog was not drained within 20 minutes");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    t_done = clock_type::now();
    bar.finish();
    busy = read_rss(node.pid()).value_or(rss_reading{});
  }
  r.tasks = backlog;
  r.seconds = ms_between(t0, t_done) / 1000.0;
  r.per_second = static_cast<double>(backlog) / *r.seconds;
  r.peak_rss_mb = busy.peak_mb;
  r.set("node", "a `troupe-bench node` child process; RSS from /proc/PID/status");
  r.set("idle_rss_mb", idle.current_mb);
  r.set("idle_peak_rss_mb", idle.peak_mb);
  r.set("backlog", backlog);
  if (ctx.options().quick && !ctx.options().tasks)
    r.set("backlog_note", "--quick: 100,000 messages instead of 1,000,000");
  r.set("backlog_rss_sampled_max_mb", sampled_max);
  r.set("backlog_peak_rss_mb", busy.peak_mb);
  r.set("backlog_minus_idle_mb", busy.peak_mb - idle.current_mb);
  r.set("seconds_timed", "node start to an empty backlog (includes start-up)");
  r.set("concurrency", ctx.options().concurrency);
  r.set("prefetch", ctx.options().prefetch);
  return r;
}

scenario_result run_memory_large(bench_context& ctx) {
  scenario_result r{"memory-large"};
  auto where = ctx.fresh_area(r.scenario);
  auto count = ctx.tasks_or(40, 20);
  constexpr std::int64_t bytes = 10 << 20;
  auto conn = ctx.connect("troupe-bench");
  node_process node(ctx, where);
  wait_registered(conn, where);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  auto idle = read_rss(node.pid());
  if (!idle)
    throw error(errc::bug, "the idle node process ended early");
  // Messages of 10 MB each (one string argument), written in SQL a few at a time.
  auto t0 = clock_type::now();
  for (std::int64_t i = 0; i < count; i += 4)
    conn.exec(fmt::format("INSERT INTO {} (message_id, queue_name, task_name, args) SELECT "
                          "gen_random_uuid(), '{}', '{}', jsonb_build_array(repeat('x', {})) "
                          "FROM generate_series(1, {})",
                          queue_table(where), big.queue(), big.name(), bytes,
                          std::min<std::int64_t>(4, count - i)));
  double sampled_max = 0;
  for (;;) {
    auto rss = read_rss(node.pid());
    if (!rss)
      throw error(errc::bug, "the node process ended while draining the large messages");
    sampled_max = std::max(sampled_max, rss->current_mb);
    if (remaining(conn, where) == 0)
      break;
    if (clock_type::now() - t0 > std::chrono::minutes(5))
      throw error(errc::timeout, "memory-large: the messages were not drained within 5 minutes");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  auto t_done = clock_type::now();
  // What the node keeps once it is idle again.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  auto after = read_rss(node.pid()).value_or(rss_reading{});
  r.tasks = count;
  r.seconds = ms_between(t0, t_done) / 1000.0;
  r.per_second = static_cast<double>(count) / *r.seconds;
  r.peak_rss_mb = after.peak_mb;
  r.set("node", "a `troupe-bench node` child process; RSS from /proc/PID/status");
  r.set("message_bytes", bytes);
  r.set("idle_rss_mb", idle->current_mb);
  r.set("drain_rss_sampled_max_mb", sampled_max);
  r.set("after_drain_rss_mb", after.current_mb);
  r.set("after_minus_idle_mb", after.current_mb - idle->current_mb);
  r.set("concurrency", ctx.options().concurrency);
  r.set("prefetch", ctx.options().prefetch);
  return r;
}

namespace {

struct claim_phase {
  std::vector<double> latencies_ms;
  double seconds = 0;
  std::int64_t buffers = -1;
  double explain_ms = -1;
  std::vector<std::string> plan;
};

/// Times `claims` claims of one message each (the node's claim in two steps, to its commit),
/// then explains the step that walks the queue.
claim_phase time_claims(storage::connection& conn, const storage::statement_set& stmts,
                        std::int64_t claims) {
  claim_phase p;
  auto start = clock_type::now();
  for (std::int64_t i = 0; i < claims; ++i) {
    auto t0 = clock_type::now();
    std::size_t got = 0;
    storage::claim_batch_early(conn, stmts, noop.queue(), 1, 1, 1, 1,
                               [&](std::vector<storage::claimed_message> m) { got = m.size(); });
    p.latencies_ms.push_back(ms_between(t0, clock_type::now()));
    if (got != 1)
      throw error(errc::bug, "claim-vs-history: a claim found no ready message");
  }
  p.seconds = ms_between(start, clock_type::now()) / 1000.0;
  auto plan =
    conn.exec(fmt::format("EXPLAIN (ANALYZE, BUFFERS) EXECUTE claim_lock('{}', 1)", noop.queue()));
  for (int i = 0; i < plan.rows(); ++i) {
    std::string line(plan.text(i, 0));
    p.plan.push_back(line);
    auto at = line.find("Buffers: shared hit=");
    if (at != std::string::npos && p.buffers < 0)
      p.buffers = std::atoll(line.c_str() + at + 20);
    at = line.find("Execution Time: ");
    if (at != std::string::npos)
      p.explain_ms = std::atof(line.c_str() + at + 16);
  }
  return p;
}

} // namespace

scenario_result run_claim_vs_history(bench_context& ctx) {
  scenario_result r{"claim-vs-history"};
  auto where = ctx.fresh_area(r.scenario);
  auto stmts = storage::make_statement_set(where);
  const std::int64_t small = 10'000;
  const std::int64_t large = ctx.options().quick ? 300'000 : 1'000'000;
  auto claims = ctx.tasks_or(2'000, 500);
  const std::int64_t ready = claims + 100;
  // One connection for both phases, as a long-lived node's: its prepared claim sees the table
  // grow.
  auto conn = ctx.connect("troupe-bench");

  std::fprintf(stderr, "  claim-vs-history: %lld finished rows\n", static_cast<long long>(small));
  fill_sql(conn, where, 0, small, "done");
  fill_sql(conn, where, large, ready, "queued");
  settle(conn, where);
  auto a = time_claims(conn, *stmts, claims);

  std::fprintf(stderr, "  claim-vs-history: %lld finished rows\n", static_cast<long long>(large));
  fill_sql(conn, where, small, large - small, "done");
  fill_sql(conn, where, large + ready, ready, "queued");
  settle(conn, where);
  auto b = time_claims(conn, *stmts, claims);

  r.tasks = claims;
  r.seconds = b.seconds;
  r.per_second = static_cast<double>(claims) / b.seconds;
  r.p50_ms = percentile(b.latencies_ms, 50);
  r.p99_ms = percentile(b.latencies_ms, 99);
  auto a50 = *percentile(a.latencies_ms, 50);
  r.set("statement", "claim_lock + claim_mark (storage::claim_batch_early, the node's claim), "
                     "limit 1, one prepared connection");
  r.set("history_small", small);
  r.set("p50_ms_small", a50);
  r.set("p99_ms_small", *percentile(a.latencies_ms, 99));
  r.set("history_large", large);
  r.set("ratio_p50_large_vs_small", *r.p50_ms / a50);
  r.set("buffers_small", a.buffers);
  r.set("buffers_large", b.buffers);
  r.set("explain_ms_small", a.explain_ms);
  r.set("explain_ms_large", b.explain_ms);
  if (ctx.options().quick)
    r.set("history_note", "--quick: 300,000 finished rows instead of 1,000,000");
  if (ctx.options().explain) {
    r.notes.push_back(fmt::format("plan with {} finished rows:", small));
    for (auto& l : a.plan)
      r.notes.push_back("  " + l);
    r.notes.push_back(fmt::format("plan with {} finished rows:", large));
    for (auto& l : b.plan)
      r.notes.push_back("  " + l);
  }
  return r;
}

} // namespace troupe::bench
