// The settings of one worker node, as the config loader produces them and as an application
// embedding a node passes them. Defaults are the named constants below, in one place.
#pragma once

#include "troupe/area.hpp"
#include "troupe/coordination.hpp"

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace troupe {

namespace defaults {
inline constexpr std::int32_t concurrency = 8;
inline constexpr std::int32_t prefetch = 16;
inline constexpr std::chrono::milliseconds poll_interval{1000};
inline constexpr std::int32_t storage_connections = 2;
inline constexpr std::int32_t scheduler_threads = 1;
inline constexpr std::chrono::milliseconds shutdown_grace{30000};
inline constexpr std::chrono::milliseconds janitor_interval{2000};
inline constexpr std::chrono::milliseconds retention_done{std::chrono::hours{24}};
inline constexpr std::chrono::milliseconds retention_failed{std::chrono::hours{24 * 7}};
inline constexpr std::chrono::milliseconds retention_cancelled{std::chrono::hours{24}};
inline constexpr std::chrono::milliseconds dead_node_grace{3000};
inline constexpr std::chrono::milliseconds time_limit_grace{5000};
/// The listener reconnects at least this often, well within dead_node_grace.
inline constexpr std::chrono::milliseconds listener_reconnect_backoff_max{1000};
inline constexpr std::chrono::milliseconds completion_flush_interval{2};
inline constexpr std::int32_t completion_batch_size = 500;
inline constexpr std::int32_t vacuum_dead_rows = 50'000;
inline constexpr std::chrono::milliseconds reconnect_backoff_max{5000};
inline constexpr std::chrono::milliseconds statement_timeout{20000};
inline constexpr std::chrono::milliseconds schedule_poll{1000};
inline constexpr std::int32_t schedule_batch = 100;
inline constexpr std::int32_t metrics_port = 9479;
} // namespace defaults

/// How one queue is consumed on this node.
struct queue_options {
  std::string name = "default";
  /// Tasks of this queue running at once (one executor thread each).
  std::int32_t concurrency = defaults::concurrency;
  /// Claimed messages held ready beyond the running ones.
  std::int32_t prefetch = defaults::prefetch;
  /// The claim poll that backs up notifications (jittered by up to 10 %).
  std::chrono::milliseconds poll_interval = defaults::poll_interval;
};

/// The node's scheduler ([schedules] in troupe.ini; docs/scheduler.md): off by default. Any
/// number of nodes (and `troupe scheduler` processes) may run one on an area: each occurrence is
/// published once.
struct schedule_runner_options {
  bool enabled = false;
  /// How often it looks for due schedules (10 ms to 1 h).
  std::chrono::milliseconds poll = defaults::schedule_poll;
  /// Schedules one tick takes at most (1 to 1,000).
  std::int32_t batch = defaults::schedule_batch;
};

/// The node's Prometheus endpoint ([metrics] in troupe.ini; docs/metrics.md): off by default.
/// When enabled, the node serves GET /metrics on `bind`:`port` from a thread of its own.
struct metrics_endpoint_options {
  bool enabled = false;
  /// The address to listen on: an IPv4 or IPv6 address or a host name (localhost by default).
  std::string bind = "127.0.0.1";
  /// 0: any free port (the node logs it, and node_report::metrics_port tells it).
  std::int32_t port = defaults::metrics_port;
};

/// Everything a worker node needs besides its tasks.
struct node_options {
  /// libpq connection string or URI; empty means libpq's PG* environment variables.
  std::string dsn;
  troupe::area area;
  /// The node's name in the nodes registry and the logs (default: host:pid).
  std::string name;
  std::vector<queue_options> queues;
  /// Storage actors (one connection each) behind the router, besides the listener's. The first
  /// half of them (at least one) takes claims, the rest writes outcomes and publishes.
  std::int32_t storage_connections = defaults::storage_connections;
  /// Threads of the CAF scheduler of a standalone node (troupe::worker_node). Its scheduled
  /// actors only coordinate: tasks, database calls and the listener each have threads of their
  /// own (detached actors). More scheduler threads spend more CPU polling for work than they
  /// save. A node spawned in an application's actor system uses that system's scheduler.
  std::int32_t scheduler_threads = defaults::scheduler_threads;
  /// How long running tasks may finish after a stop is asked for.
  std::chrono::milliseconds shutdown_grace = defaults::shutdown_grace;
  /// How often the janitor looks for dead nodes (jittered by up to 10 %).
  std::chrono::milliseconds janitor_interval = defaults::janitor_interval;
  /// How long a node's liveness lock must stay free before its messages are recovered: long
  /// enough for a live node's listener to reconnect after a database restart.
  std::chrono::milliseconds dead_node_grace = defaults::dead_node_grace;
  /// How long past its time limit an attempt may run before it is abandoned: the task gets this
  /// long to notice check() and stop by itself.
  std::chrono::milliseconds time_limit_grace = defaults::time_limit_grace;
  /// The completion batcher writes when this much time passed since the first unwritten outcome,
  /// or when it holds `completion_batch_size` outcomes.
  std::chrono::milliseconds completion_flush_interval = defaults::completion_flush_interval;
  std::int32_t completion_batch_size = defaults::completion_batch_size;
  /// The janitor vacuums the queue table (on a connection of its own) when it holds at least
  /// this many dead row versions plus 2 % of its live rows. Each claim leaves a dead entry in
  /// the fetch index that later claims walk over until a vacuum removes it; autovacuum comes
  /// once a minute at most. 0 leaves the table to autovacuum.
  std::int32_t vacuum_dead_rows = defaults::vacuum_dead_rows;
  /// The statement_timeout of every connection the node opens: no database call of the node
  /// waits longer than this for one statement (its vacuums have 30 s of their own).
  std::chrono::milliseconds statement_timeout = defaults::statement_timeout;
  /// How long finished rows are kept, per state, after they finished: the janitor of one node
  /// at a time deletes older ones, up to 1,000 of each state per pass. 0 keeps them (areas
  /// from migration 5 on).
  std::chrono::milliseconds retention_done = defaults::retention_done;
  std::chrono::milliseconds retention_failed = defaults::retention_failed;
  std::chrono::milliseconds retention_cancelled = defaults::retention_cancelled;
  /// Limiters declared by key ([limits] in troupe.ini): the node's tasks take one by its key
  /// (limit_guard(ctx, "payments"), declared_limit), so that an operator sets its kind,
  /// capacity and window without a new build. Keys are unique.
  std::vector<limit> limits;
  /// The scheduler this node runs, when enabled.
  schedule_runner_options scheduler;
  /// Its metrics endpoint, when enabled.
  metrics_endpoint_options metrics;
};

/// Throws troupe::error(invalid_argument) naming the first setting that breaks a rule: every
/// count and every duration has a range (docs/configuration.md lists them), so that no timer,
/// deadline or SQL interval computed from a setting can overflow.
void validate(const node_options& options);

} // namespace troupe
