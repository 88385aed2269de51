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

using std::chrono::milliseconds;
using namespace std::chrono_literals;

/// A duration as the config file writes it: 30s, 500ms, 2min, 24h.
std::string spelled(milliseconds d) {
  auto ms = d.count();
  if (ms != 0 && ms % 3'600'000 == 0)
    return fmt::format("{}h", ms / 3'600'000);
  if (ms != 0 && ms % 60'000 == 0)
    return fmt::format("{}min", ms / 60'000);
  if (ms != 0 && ms % 1000 == 0)
    return fmt::format("{}s", ms / 1000);
  return fmt::format("{}ms", ms);
}

void require_duration(const std::string& key, milliseconds value, milliseconds least,
                      milliseconds most) {
  require(value >= least && value <= most,
          fmt::format("{} must be between {} and {}, got {}", key, spelled(least), spelled(most),
                      spelled(value)));
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
    require_duration(fmt::format("queues.{}.poll-interval", q.name), q.poll_interval, 10ms, 1h);
  }
  require(o.storage_connections >= 1 && o.storage_connections <= 64,
          fmt::format("node.storage-connections must be between 1 and 64, got {}",
                      o.storage_connections));
  require(
    o.scheduler_threads >= 1 && o.scheduler_threads <= 64,
    fmt::format("node.scheduler-threads must be between 1 and 64, got {}", o.scheduler_threads));
  require_duration("node.shutdown-grace", o.shutdown_grace, 0ms, 24h);
  require_duration("node.janitor-interval", o.janitor_interval, 100ms, 1h);
  require(o.dead_node_grace >= 2 * defaults::listener_reconnect_backoff_max,
          fmt::format("node.dead-node-grace must be at least {}ms (twice the listener's "
                      "reconnect backoff), got {}",
                      2 * defaults::listener_reconnect_backoff_max.count(),
                      spelled(o.dead_node_grace)));
  require_duration("node.dead-node-grace", o.dead_node_grace,
                   2 * defaults::listener_reconnect_backoff_max, 24h);
  require_duration("node.time-limit-grace", o.time_limit_grace, 0ms, 24h);
  require(o.statement_timeout == 0ms || (o.statement_timeout >= 1s && o.statement_timeout <= 25s),
          fmt::format("node.statement-timeout must be 0 (the server's own) or between 1s and 25s "
                      "(under the 30s the node's actors wait for a claim), got {}",
                      spelled(o.statement_timeout)));
  require(o.completion_batch_size >= 1 && o.completion_batch_size <= 10000,
          fmt::format("node.completion-batch-size must be between 1 and 10000, got {}",
                      o.completion_batch_size));
  require_duration("node.completion-flush-interval", o.completion_flush_interval, 0ms, 10s);
  for (auto [name, value] : {std::pair{"node.retention-done", o.retention_done},
                             std::pair{"node.retention-failed", o.retention_failed},
                             std::pair{"node.retention-cancelled", o.retention_cancelled}})
    require(value == 0ms || (value >= 1min && value <= 87600h),
            fmt::format("{} must be 0 (keep the rows) or between 1min and 87600h (ten years), "
                        "got {}",
                        name, spelled(value)));
  require(o.vacuum_dead_rows >= 0,
          fmt::format("node.vacuum-dead-rows must not be negative, got {}", o.vacuum_dead_rows));
  require(
    o.scheduler.poll >= std::chrono::milliseconds(10) && o.scheduler.poll <= std::chrono::hours(1),
    fmt::format("schedules.poll must be from 10ms to 1h, got {} ms", o.scheduler.poll.count()));
  require(o.scheduler.batch >= 1 && o.scheduler.batch <= 1000,
          fmt::format("schedules.batch must be from 1 to 1000, got {}", o.scheduler.batch));
  require(o.metrics.port >= 0 && o.metrics.port <= 65535,
          fmt::format("metrics.port must be from 0 to 65535, got {}", o.metrics.port));
  require(!o.metrics.bind.empty() && o.metrics.bind.size() <= 255 &&
            o.metrics.bind.find_first_of(" \t\r\n/") == std::string::npos,
          "metrics.bind must be an IP address or a host name, got \"" + o.metrics.bind + "\"");
  std::set<std::string> keys;
  for (const auto& l : o.limits) {
    validate_limit(l); // its error names the key
    require(keys.insert(l.key).second, fmt::format("limiter \"{}\" is declared twice", l.key));
  }
}

} // namespace troupe
