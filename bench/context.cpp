// The shared parts of every scenario: fresh areas, the no-op task, a node run in process.
#include "scenarios.hpp"

#include "storage/embedded_sql.hpp"
#include "storage/migrations.hpp"
#include "storage/operations.hpp"
#include "storage/statements.hpp"

#include <troupe/error.hpp>
#include <troupe/log.hpp>
#include <troupe/worker_node.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <thread>

namespace troupe::bench {

std::vector<std::vector<message>> noop_batches(std::int64_t n, std::int64_t batch_size) {
  std::vector<std::vector<message>> batches;
  for (std::int64_t i = 0; i < n; i += batch_size) {
    std::vector<message> b;
    for (std::int64_t j = i; j < std::min(n, i + batch_size); ++j)
      b.push_back(noop(j));
    batches.push_back(std::move(b));
  }
  return batches;
}

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
           std::chrono::steady_clock::now().time_since_epoch())
    .count();
}

std::string queue_table(const area& where) {
  return storage::quote_identifier(where.schema) + "." +
         storage::quote_identifier(where.prefix + "queue");
}

db_cost_sample sample_db_costs(storage::connection& conn, const area& where) {
  // Counters other sessions flushed since this session's last read, not a cached snapshot.
  conn.exec("SELECT pg_stat_clear_snapshot()");
  auto res = conn.exec_params(
    "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint, "
    "coalesce(sum(n_tup_ins), 0)::bigint, coalesce(sum(n_tup_upd), 0)::bigint, "
    "coalesce(sum(n_tup_hot_upd), 0)::bigint, coalesce(sum(n_tup_del), 0)::bigint, "
    "(SELECT xact_commit FROM pg_stat_database WHERE datname = current_database())::bigint "
    "FROM pg_stat_user_tables WHERE schemaname = $1",
    {where.schema}, "bench.costs");
  return {res.int64(0, 0), res.int64(0, 1), res.int64(0, 2),
          res.int64(0, 3), res.int64(0, 4), res.int64(0, 5)};
}

void db_costs_into(scenario_result& r, const db_cost_sample& a, const db_cost_sample& b,
                   std::int64_t n) {
  auto per = [n](std::int64_t x) { return static_cast<double>(x) / static_cast<double>(n); };
  r.set("wal_bytes_per_message", per(b.wal_bytes - a.wal_bytes));
  r.set("row_inserts_per_message", per(b.inserts - a.inserts));
  r.set("row_updates_per_message", per(b.updates - a.updates));
  r.set("row_hot_updates_per_message", per(b.hot_updates - a.hot_updates));
  r.set("row_deletes_per_message", per(b.deletes - a.deletes));
  r.set("commits_per_1000", per(b.commits - a.commits) * 1000.0);
}

bench_context::bench_context(bench_options options, std::string exe_path)
    : opts_(std::move(options)), exe_(std::move(exe_path)) {}

std::int64_t bench_context::tasks_or(std::int64_t full, std::int64_t quick) const {
  if (opts_.tasks)
    return *opts_.tasks;
  return opts_.quick ? quick : full;
}

storage::connection bench_context::connect(std::string_view application_name) const {
  return storage::connection::open(opts_.dsn, application_name);
}

namespace {

// The area of `scenario` (schema troupe_bench_<scenario>), its schema dropped.
area dropped_area(storage::connection& conn, const std::string& scenario) {
  std::string schema = "troupe_bench_" + scenario;
  for (auto& c : schema)
    if (c == '-')
      c = '_';
  area where{schema, ""};
  validate_area(where);
  conn.exec("SET client_min_messages = warning");
  conn.exec("DROP SCHEMA IF EXISTS " + storage::quote_identifier(schema) + " CASCADE");
  return where;
}

} // namespace

area bench_context::fresh_area(const std::string& scenario) {
  auto conn = connect("troupe-bench");
  auto where = dropped_area(conn, scenario);
  auto stmts = storage::make_statement_set(where);
  storage::migrate(conn, *stmts);
  if (opts_.attempt_history)
    storage::set_attempt_history(conn, *stmts, true);
  return where;
}

area bench_context::area_at_version(const std::string& scenario, int version) {
  auto conn = connect("troupe-bench");
  auto where = dropped_area(conn, scenario);
  auto stmts = storage::make_statement_set(where);
  conn.exec("CREATE SCHEMA " + storage::quote_identifier(where.schema));
  conn.run(stmts->get(storage::sql::create_versions_table), {});
  for (const auto& m : storage::embedded::migrations()) {
    if (m.number > version)
      continue;
    conn.exec(storage::render_sql(m.text, where));
    conn.run(stmts->get(storage::sql::record_version),
             {std::to_string(m.number), std::string(m.name)});
  }
  return where;
}

node_options bench_context::node_settings(const area& where) const {
  node_options node;
  node.dsn = opts_.dsn;
  node.area = where;
  node.name = "bench-node";
  node.storage_connections = opts_.storage_connections;
  node.scheduler_threads = opts_.scheduler_threads;
  queue_options q;
  q.name = noop.queue();
  q.concurrency = opts_.concurrency;
  q.prefetch = opts_.prefetch;
  node.queues.push_back(q);
  return node;
}

task_registry bench_context::noop_tasks(task_probe& probe) {
  task_registry tasks;
  tasks.define(noop, [&probe](std::int64_t seq) {
    auto now = steady_ns();
    if (probe.start_ns && seq >= 0 && static_cast<std::size_t>(seq) < probe.start_ns->size())
      (*probe.start_ns)[static_cast<std::size_t>(seq)] = now;
    std::int64_t zero = 0;
    probe.first_start_ns.compare_exchange_strong(zero, now);
    probe.executed.fetch_add(1, std::memory_order_relaxed);
  });
  tasks.define(
    big, [&probe](const std::string&) { probe.executed.fetch_add(1, std::memory_order_relaxed); });
  tasks.define(inc, [&probe](std::int64_t x) {
    std::int64_t zero = 0;
    probe.first_start_ns.compare_exchange_strong(zero, steady_ns());
    probe.executed.fetch_add(1, std::memory_order_relaxed);
    return x + 1;
  });
  return tasks;
}

std::int64_t bench_context::with_node(const area& where, task_probe& probe,
                                      const std::function<void()>& body,
                                      const std::function<void(node_options&)>& adjust) {
  auto settings = node_settings(where);
  if (adjust)
    adjust(settings);
  worker_node node(std::move(settings), noop_tasks(probe));
  run_summary summary;
  std::thread runner([&] { summary = node.run(); });
  std::exception_ptr failure;
  try {
    // Wait for the node's registration: it claims nothing before it.
    auto conn = connect("troupe-bench-watch");
    auto nodes = storage::quote_identifier(where.schema) + "." +
                 storage::quote_identifier(where.prefix + "nodes");
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (conn.exec("SELECT count(*) FROM " + nodes).int64(0, 0) == 0) {
      if (std::chrono::steady_clock::now() > deadline)
        throw error(errc::timeout, "the worker node did not register within 30 s");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    body();
  } catch (...) {
    failure = std::current_exception();
  }
  node.request_stop();
  runner.join();
  if (failure)
    std::rethrow_exception(failure);
  if (summary.exit_code != 0)
    throw error(errc::bug, "the worker node failed (see its log)");
  return summary.executed;
}

void bench_context::wait_all_done(storage::connection& conn, const area& where, int step_ms) {
  auto table = queue_table(where);
  auto sql = fmt::format("SELECT EXISTS (SELECT 1 FROM {0} WHERE state = 'queued') OR "
                         "EXISTS (SELECT 1 FROM {0} WHERE state = 'running')",
                         table);
  auto last_change = std::chrono::steady_clock::now();
  for (;;) {
    if (conn.exec(sql).text(0, 0) == "f")
      return;
    if (std::chrono::steady_clock::now() - last_change > std::chrono::minutes(5))
      throw error(errc::timeout, "messages still queued or running after 5 minutes");
    std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
  }
}

int run_node_command(const bench_options& o, const std::string& schema) {
  bench_context ctx(o, "");
  task_probe probe;
  configure_logging("warn", "text");
  worker_node node(ctx.node_settings(area{schema, ""}), bench_context::noop_tasks(probe));
  return node.run().exit_code;
}

} // namespace troupe::bench
