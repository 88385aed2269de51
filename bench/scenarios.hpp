// The benchmark's scenarios and what they share: the options, a fresh area per scenario, the
// no-op task, and a worker node run in this process. Each scenario returns one result.
#pragma once

#include "report.hpp"

#include "storage/connection.hpp"
#include "storage/naming.hpp"

#include <troupe/area.hpp>
#include <troupe/message.hpp>
#include <troupe/node_options.hpp>
#include <troupe/task.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace troupe::bench {

/// The task every scenario runs: does nothing with its argument (a sequence number).
inline const task_ref<void(std::int64_t)> noop{"bench.noop", "bench"};
/// The task of the composition scenarios: returns its argument plus one.
inline const task_ref<std::int64_t(std::int64_t)> inc{"bench.inc", "bench"};
/// The task of the large-message scenario: does nothing with its argument (a long string).
inline const task_ref<void(std::string)> big{"bench.big", "bench"};

/// Settings of one benchmark run (command-line flags).
struct bench_options {
  std::string dsn;
  bool json = false;
  bool quick = false;
  bool explain = false;
  /// Every scenario's area keeps attempt history (off by default, as in a new area).
  bool attempt_history = false;
  /// Overrides each scenario's own task count.
  std::optional<std::int64_t> tasks;
  std::int32_t concurrency = 8;
  std::int32_t prefetch = 1000;
  std::int32_t storage_connections = 2;
  std::int32_t scheduler_threads = defaults::scheduler_threads;
  /// sustained: messages per second (default: half the burn-down rate of this run, else 10,000).
  std::optional<double> rate;
  /// sustained: seconds of publishing.
  std::optional<double> duration;
};

/// The database's own counters of what a window cost: WAL written (the whole cluster), row
/// versions written in the area's tables (pg_stat_user_tables), commits in the database, and
/// the CPU time of the server's processes (when the server runs on this machine and its data
/// directory can be read). Sessions report their table counters about once a second and when
/// they end, so the sample after a window is taken once the node has stopped.
struct db_cost_sample {
  std::int64_t wal_bytes = 0;
  std::string wal_lsn;
  std::int64_t inserts = 0;
  std::int64_t updates = 0;
  std::int64_t hot_updates = 0;
  std::int64_t deletes = 0;
  std::int64_t commits = 0;
  std::optional<double> server_cpu_s;
};
db_cost_sample sample_db_costs(storage::connection& conn, const area& where);
/// Waits (at most 10 s) until `conn`'s session is the only client session of its database: a
/// session reports its last table counters as it ends, after its client closed it.
void wait_sessions_ended(storage::connection& conn);
/// Per message (`n` of them): WAL bytes (with the full-page images among them), row versions by
/// kind, index entries (B-tree leaf insertions in the WAL, through pg_walinspect when it can be
/// created), commits per 1,000, and the server's CPU per 1,000.
void db_costs_into(scenario_result& r, storage::connection& conn, const db_cost_sample& a,
                   const db_cost_sample& b, std::int64_t n);

/// What the no-op task records while a node runs it (shared by the task and the scenario).
struct task_probe {
  std::atomic<std::int64_t> executed{0};
  /// Steady-clock nanoseconds of the first start, 0 before.
  std::atomic<std::int64_t> first_start_ns{0};
  /// When set, the task stores its steady-clock start (ns) at index = its argument.
  std::vector<std::int64_t>* start_ns = nullptr;
};

/// `n` no-op messages (arguments 0..n-1) cut into batches of `batch_size`, built before a
/// timed publish so that the figure is the publishing, not the argument encoding.
std::vector<std::vector<message>> noop_batches(std::int64_t n, std::int64_t batch_size);

/// Steady-clock nanoseconds now.
std::int64_t steady_ns();

/// The shared state of one run.
class bench_context {
public:
  bench_context(bench_options options, std::string exe_path);

  const bench_options& options() const noexcept { return opts_; }
  /// The task count of a scenario: --tasks, else the quick or full default.
  std::int64_t tasks_or(std::int64_t full, std::int64_t quick) const;

  /// A fresh area for `scenario` (its schema dropped and migrated again).
  area fresh_area(const std::string& scenario);
  /// A new connection to the benchmark's database.
  storage::connection connect(std::string_view application_name) const;

  /// The options of a node on queue "bench" of `where`, with this run's settings.
  node_options node_settings(const area& where) const;
  /// A task registry holding the no-op task, reporting to `probe`.
  static task_registry noop_tasks(task_probe& probe);

  /// Runs a node in this process on `where`: `body` runs once the node is registered, and the
  /// node stops when it returns. Returns the messages the node executed.
  std::int64_t with_node(const area& where, task_probe& probe, const std::function<void()>& body,
                         const std::function<void(node_options&)>& adjust = {});

  /// A fresh area for `scenario` at schema version `version` (migrations up to it only).
  area area_at_version(const std::string& scenario, int version);

  /// Waits until `where` holds no queued or running message (polled every `step_ms`).
  void wait_all_done(storage::connection& conn, const area& where, int step_ms = 5);

  /// The burn-down rate of this run, once measured (sustained defaults to half of it).
  std::optional<double> burn_down_rate;
  const std::string& exe_path() const noexcept { return exe_; }

private:
  bench_options opts_;
  std::string exe_;
};

/// Quoted table name of area `where` (its queue table), for the benchmark's own SQL.
std::string queue_table(const area& where);

/// Adds `n` finished rows of queue "bench" by plain SQL, published over the week before the last
/// hour (older history), or in the last hour (`recent`): four tasks, 90 % done, 8 % failed, 2 %
/// cancelled. The area's counts learn of them through admin::recount_stats.
void fill_history(storage::connection& conn, const area& where, std::int64_t n, bool recent);
/// Adds `n` messages of queue "bench" queued for tomorrow, by plain SQL.
void fill_live(storage::connection& conn, const area& where, std::int64_t n);

scenario_result run_enqueue_single(bench_context& ctx);
scenario_result run_enqueue_batch(bench_context& ctx);
scenario_result run_enqueue_tx(bench_context& ctx);
scenario_result run_burn_down(bench_context& ctx);
scenario_result run_mixed(bench_context& ctx);
scenario_result run_sustained(bench_context& ctx);
scenario_result run_memory(bench_context& ctx);
scenario_result run_memory_large(bench_context& ctx);
scenario_result run_claim_vs_history(bench_context& ctx);
scenario_result run_states_vs_history(bench_context& ctx);
scenario_result run_limits(bench_context& ctx);
scenario_result run_pipeline(bench_context& ctx);
scenario_result run_group(bench_context& ctx);
scenario_result run_exporter_scrape(bench_context& ctx);
scenario_result run_metrics_overhead(bench_context& ctx);

/// The `node` subcommand: a worker node with the no-op task until SIGTERM (for `memory`).
int run_node_command(const bench_options& options, const std::string& schema);

} // namespace troupe::bench
