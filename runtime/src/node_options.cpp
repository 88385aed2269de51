#include "troupe/node_options.hpp"

#include "troupe/dsn.hpp"
#include "troupe/error.hpp"

#include <fmt/format.h>

#include <set>

namespace troupe {

namespace {

void require(bool ok, const std::string& what) {
  if (!ok)
    throw error(errc::invalid_argument, what);
}

} // namespace

void validate(const node_options& o) {
  try {
    validate_dsn(o.dsn);
  } catch (const error& e) {
    throw error(errc::invalid_argument, std::string("database.dsn: ") + e.what());
  }
  validate_area(o.area);
  require(!o.queues.empty(), "node: at least one queue must be configured");
  std::set<std::string> seen;
  for (const auto& q : o.queues) {
    validate_queue_name(q.name);
    require(seen.insert(q.name).second, fmt::format("queue \"{}\" is configured twice", q.name));
    require(q.concurrency >= 1 && q.concurrency <= 1024,
            fmt::format("queues.{}.concurrency must be between 1 and 1024, got {}", q.name,
                        q.concurrency));
    require(
      q.prefetch >= 0 && q.prefetch <= 65535,
      fmt::format("queues.{}.prefetch must be between 0 and 65535, got {}", q.name, q.prefetch));
    require(q.poll_interval.count() >= 10,
            fmt::format("queues.{}.poll-interval must be at least 10ms, got {}ms", q.name,
                        q.poll_interval.count()));
  }
  require(o.storage_connections >= 1 && o.storage_connections <= 64,
          fmt::format("node.storage-connections must be between 1 and 64, got {}",
                      o.storage_connections));
  require(
    o.scheduler_threads >= 1 && o.scheduler_threads <= 64,
    fmt::format("node.scheduler-threads must be between 1 and 64, got {}", o.scheduler_threads));
  require(o.shutdown_grace.count() >= 0, "node.shutdown-grace must not be negative");
  require(o.janitor_interval.count() >= 100,
          fmt::format("node.janitor-interval must be at least 100ms, got {}ms",
                      o.janitor_interval.count()));
  require(o.dead_node_grace >= 2 * defaults::listener_reconnect_backoff_max,
          fmt::format("node.dead-node-grace must be at least {}ms (twice the listener's "
                      "reconnect backoff), got {}ms",
                      2 * defaults::listener_reconnect_backoff_max.count(),
                      o.dead_node_grace.count()));
  require(o.time_limit_grace.count() >= 0, "node.time-limit-grace must not be negative");
  require(o.completion_batch_size >= 1 && o.completion_batch_size <= 10000,
          fmt::format("node.completion-batch-size must be between 1 and 10000, got {}",
                      o.completion_batch_size));
  require(o.completion_flush_interval.count() >= 0,
          "node.completion-flush-interval must not be negative");
  require(o.vacuum_dead_rows >= 0,
          fmt::format("node.vacuum-dead-rows must not be negative, got {}", o.vacuum_dead_rows));
}

} // namespace troupe
