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

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
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

namespace {

// utime + stime (and, with `children`, cutime + cstime) of process `pid` from /proc, in clock
// ticks, and its parent's PID; false when it cannot be read.
bool proc_ticks(long pid, bool children, long& ppid, std::int64_t& ticks) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line))
    return false;
  auto close = line.rfind(')');
  if (close == std::string::npos)
    return false;
  std::istringstream fields(line.substr(close + 2));
  std::vector<std::string> f;
  for (std::string x; fields >> x && f.size() < 15;)
    f.push_back(x);
  if (f.size() < 15)
    return false;
  // After the name: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14).
  ppid = std::stol(f[1]);
  ticks = std::stoll(f[11]) + std::stoll(f[12]);
  if (children)
    ticks += std::stoll(f[13]) + std::stoll(f[14]);
  return true;
}

// CPU seconds the server has used so far: its postmaster (with every child it reaped) and its
// live children. Empty when the server is not on this machine or its files cannot be read.
std::optional<double> server_cpu_seconds(storage::connection& conn) {
  std::string dir;
  try {
    dir = conn.exec("SELECT current_setting('data_directory')").text(0, 0);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  std::ifstream pid_file(dir + "/postmaster.pid");
  long postmaster = 0;
  if (!(pid_file >> postmaster) || postmaster <= 0)
    return std::nullopt;
  long ppid = 0;
  std::int64_t total = 0;
  if (!proc_ticks(postmaster, true, ppid, total))
    return std::nullopt;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const auto name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos)
      continue;
    std::int64_t ticks = 0;
    if (proc_ticks(std::stol(name), false, ppid, ticks) && ppid == postmaster)
      total += ticks;
  }
  return static_cast<double>(total) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

} // namespace

void wait_sessions_ended(storage::connection& conn) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (conn.exec("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                   "AND backend_type = 'client backend' AND pid <> pg_backend_pid()")
             .int64(0, 0) > 0 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

db_cost_sample sample_db_costs(storage::connection& conn, const area& where) {
  // The window's WAL is read once it ended (db_costs_into): a temporary replication slot of
  // this session keeps the server from recycling it meanwhile (a checkpoint would). Without
  // the right to create one, the figures read from the WAL may be missing.
  try {
    conn.exec("SELECT pg_create_physical_replication_slot('troupe_bench_' || pg_backend_pid(), "
              "true, true) WHERE NOT EXISTS (SELECT FROM pg_replication_slots WHERE slot_name "
              "= 'troupe_bench_' || pg_backend_pid())");
  } catch (const std::exception&) {
  }
  // A commit of this session's own flushes the WAL up to here (claims commit without waiting
  // for the flush): the window's WAL can then be read up to the flushed position.
  conn.exec("SELECT txid_current()");
  // Counters other sessions flushed since this session's last read, not a cached snapshot.
  conn.exec("SELECT pg_stat_clear_snapshot()");
  auto res = conn.exec_params(
    "SELECT pg_wal_lsn_diff(w.lsn, '0/0')::bigint, "
    "coalesce(sum(n_tup_ins), 0)::bigint, coalesce(sum(n_tup_upd), 0)::bigint, "
    "coalesce(sum(n_tup_hot_upd), 0)::bigint, coalesce(sum(n_tup_del), 0)::bigint, "
    "(SELECT xact_commit FROM pg_stat_database WHERE datname = current_database())::bigint, "
    "w.lsn::text "
    "FROM (SELECT pg_current_wal_flush_lsn() AS lsn) w "
    "LEFT JOIN pg_stat_user_tables t ON t.schemaname = $1 GROUP BY w.lsn",
    {where.schema}, "bench.costs");
  db_cost_sample s{res.int64(0, 0), std::string(res.text(0, 6)),
                   res.int64(0, 1), res.int64(0, 2),
                   res.int64(0, 3), res.int64(0, 4),
                   res.int64(0, 5), std::nullopt};
  s.server_cpu_s = server_cpu_seconds(conn);
  return s;
}

void db_costs_into(scenario_result& r, storage::connection& conn, const db_cost_sample& a,
                   const db_cost_sample& b, std::int64_t n) {
  auto per = [n](double x) { return x / static_cast<double>(n); };
  auto per_i = [&per](std::int64_t x) { return per(static_cast<double>(x)); };
  r.set("wal_bytes_per_message", per_i(b.wal_bytes - a.wal_bytes));
  r.set("wal_lsn_start", a.wal_lsn);
  r.set("wal_lsn_end", b.wal_lsn);
  r.set("row_inserts_per_message", per_i(b.inserts - a.inserts));
  r.set("row_updates_per_message", per_i(b.updates - a.updates));
  r.set("row_hot_updates_per_message", per_i(b.hot_updates - a.hot_updates));
  r.set("row_deletes_per_message", per_i(b.deletes - a.deletes));
  r.set("row_versions_per_message",
        per_i(b.inserts - a.inserts + b.updates - a.updates + b.deletes - a.deletes));
  r.set("commits_per_1000", per_i(b.commits - a.commits) * 1000.0);
  if (a.server_cpu_s && b.server_cpu_s)
    r.set("server_cpu_ms_per_1000", per(*b.server_cpu_s - *a.server_cpu_s) * 1e6);
  // What the WAL of the window holds, by record kind: B-tree leaf insertions are the index
  // entries written. pg_walinspect reads the server's WAL files; without it (not installed,
  // or no right to create it) these figures are left out.
  try {
    conn.exec("SET client_min_messages = warning");
    conn.exec("CREATE EXTENSION IF NOT EXISTS pg_walinspect");
    auto w = conn.exec_params(
      "SELECT coalesce(sum(count) FILTER (WHERE \"resource_manager/record_type\" IN "
      "('Btree/INSERT_LEAF', 'Btree/INSERT_POST', 'Btree/SPLIT_L', 'Btree/SPLIT_R')), 0)::bigint, "
      "coalesce(sum(fpi_size), 0)::bigint, "
      "coalesce(string_agg(\"resource_manager/record_type\" || ' ' || "
      "round(combined_size::numeric / $3)::text, ', ' ORDER BY combined_size DESC) "
      "FILTER (WHERE combined_size::numeric / $3 >= 5), '') "
      "FROM pg_get_wal_stats($1::pg_lsn, $2::pg_lsn, true)",
      {a.wal_lsn, b.wal_lsn, std::to_string(n)}, "bench.wal_stats");
    r.set("index_entries_per_message", per_i(w.int64(0, 0)));
    r.set("wal_fpi_bytes_per_message", per_i(w.int64(0, 1)));
    r.set("wal_bytes_per_message_by_record", w.text(0, 2));
  } catch (const std::exception& e) {
    r.set("wal_stats_unavailable", std::string(e.what()));
  }
  try {
    conn.exec("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
              "WHERE slot_name = 'troupe_bench_' || pg_backend_pid()");
  } catch (const std::exception&) {
  }
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
